"""Engines started from a warm process: the local runner's fork server.

An engine is a Python program (`python -I -m sandbox.run_engine <engine>`), and most of
its start is importing: the model SDKs alone take two to three seconds of CPU (the
anthropic SDK defines some 1,500 pydantic classes) before the first request is sent. So
each worker process keeps one fork server: a process of its own, started the way an
engine is (isolated mode, a scrubbed environment, nothing of the worker's: no token, no
key, no database), which imports the engines' modules once and then forks a child for
each run. The child is what the engine would have been: a process group of its own,
the run's limits, its working directory, its environment (the keys it is allowed) and
the three pipes the runner reads, passed over a Unix socket; it runs the module as
`python -m` would, and exits. The server runs nothing itself, so no run sees another's
memory, and it holds no secret a child could find.

The server dies with its worker: when the worker's end of the socket closes (however
the worker ended), the server kills every child it started and exits; each child is
killed if the server dies. A server that cannot start, or dies, costs nothing but time:
the runner starts the engine as a plain subprocess instead.

    runner (worker)                         fork server
    ForkServer.spawn(module, args, …) ──▶  fork ─▶ child: setsid, limits, fds, env, cwd,
      + stdin/stdout/stderr (SCM_RIGHTS)            runpy.run_module(module) , exit
    ◀── {"pid": n}                          SIGCHLD ─▶ waitpid
    ◀── {"exit": n, "status": code}
"""

from __future__ import annotations

import contextlib
import importlib
import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sandbox.loading import loading

logger = logging.getLogger(__name__)

# What the server imports when it starts: the engines' entry points (light). Each request
# names what its engine imports (sandbox.engines.modules_of): the server imports those
# the first time it is asked, before it forks, so that an engine's first run costs what a
# fresh process would and every later one nothing (a static reviewer's worker never
# imports a model SDK).
PRELOAD = ("sandbox.run_engine", "sandbox.run_reply")
MESSAGE_BYTES = 1 << 20
SPAWN_SECONDS = 30  # a fork takes milliseconds: a server this slow is stuck
READY = b'{"ready": true}'
# The server's folder (its HOME and working directory). Named as an engine's home
# (`tasuku-home-*`): one a server could not remove is pruned with those by the host's tidy.
HOME_PREFIX = "tasuku-home-forkserver-"


class ForkServerError(Exception):
    """The server could not start a child (or is gone): start the engine another way."""


class ForkedProcess:
    """A child of the fork server, as the runner sees it (what it uses of Popen): its
    pid (its process group's), its pipes, `wait` and `returncode`."""

    def __init__(self, pid: int, stdin: Any, stdout: Any, stderr: Any) -> None:
        self.pid = pid
        self.stdin, self.stdout, self.stderr = stdin, stdout, stderr
        self.returncode: int | None = None
        # The server ended before it told how this child ended (it was killed with the
        # server): not the engine's failure, and nothing about its limits.
        self.lost = False
        self._ended = threading.Event()

    def _end(self, status: int, *, lost: bool = False) -> None:
        self.returncode = status
        self.lost = lost
        self._ended.set()

    def poll(self) -> int | None:
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if not self._ended.wait(timeout):
            raise subprocess.TimeoutExpired(f"fork server child {self.pid}", timeout or 0)
        assert self.returncode is not None
        return self.returncode


class ForkServer:
    """The worker's side: starts the server, asks it for children, hears of their ends.
    One per process (`fork_server()`); safe to use from several threads."""

    def __init__(self, env: dict[str, str]) -> None:
        self._lock = threading.Lock()
        # One request at a time: the server answers in order, and a reply must reach the
        # thread whose request it answers.
        self._spawning = threading.Lock()
        self._replies: list[dict[str, Any]] = []
        self._reply_ready = threading.Condition(self._lock)
        self._children: dict[int, ForkedProcess] = {}
        self._ended_early: dict[int, int] = {}
        self._closed = False
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        # Named as an engine's home: what a killed worker leaves is pruned with those.
        home = tempfile.mkdtemp(prefix=HOME_PREFIX)
        self._home = home
        try:
            self._process = subprocess.Popen(  # noqa: S603
                [sys.executable, "-I", "-m", "sandbox.runners.forkserver", str(theirs.fileno())],
                cwd=home,
                env={**env, "HOME": home, "TMPDIR": home},
                pass_fds=(theirs.fileno(),),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                start_new_session=True,
            )
        except OSError:
            ours.close()
            shutil.rmtree(home, ignore_errors=True)
            raise
        finally:
            theirs.close()
        self._sock = ours
        self._sock.settimeout(120)  # the imports: a few seconds, more on a loaded host
        try:
            first = self._sock.recv(MESSAGE_BYTES)
        except OSError as exc:
            self.close()
            raise ForkServerError(f"the fork server did not start: {exc}") from exc
        if first != READY:
            self.close()
            raise ForkServerError(f"the fork server did not start (it said {first[:200]!r})")
        self._sock.settimeout(None)
        self.pid = self._process.pid
        self._owner = os.getpid()
        threading.Thread(target=self._listen, name="tasuku-forkserver", daemon=True).start()

    @property
    def alive(self) -> bool:
        return not self._closed and self._owner == os.getpid()

    def spawn(
        self,
        module: str,
        args: Sequence[str],
        *,
        cwd: Path,
        env: dict[str, str],
        limits: dict[str, int],
        warm: Sequence[str] = (),
    ) -> ForkedProcess:
        """Start `python -I -m <module> <args>` as a child of the server, with its three
        pipes; the child's process group is its pid. `warm`: modules the server imports
        first (once), so that the child finds them imported.

        The environment (the run's keys) goes to the child through a pipe of its own,
        which only the child reads: the server forwards the descriptor and never holds
        the values, so no later engine can find an earlier run's key in memory it
        inherited from the server."""
        pipes = [os.pipe() for _ in range(3)]  # (read, write) each
        env_read, env_write = os.pipe()
        child_ends = [pipes[0][0], pipes[1][1], pipes[2][1], env_read]
        ours = [pipes[0][1], pipes[1][0], pipes[2][0]]
        request = json.dumps(
            {"module": module, "args": list(args), "cwd": str(cwd), "limits": limits,
             "warm": list(warm)}
        ).encode()  # fmt: skip
        try:
            environment = json.dumps(env).encode()
            if len(environment) > 60_000:  # a pipe holds 64 KiB: the child reads it later
                raise ForkServerError("the engine's environment is too large to pass")
            # Its length first: the child reads exactly that much, whoever else may hold
            # a copy of the pipe's writing end.
            os.write(env_write, len(environment).to_bytes(8, "big") + environment)
            os.close(env_write)
            env_write = -1
            with self._spawning, self._lock:
                if not self.alive:
                    raise ForkServerError("the fork server is gone")
                try:
                    socket.send_fds(self._sock, [request], child_ends)
                except OSError as exc:
                    raise ForkServerError(f"the fork server is gone: {exc}") from exc
                answered = self._reply_ready.wait_for(
                    lambda: self._replies or self._closed, timeout=SPAWN_SECONDS
                )
                if not self._replies:
                    if not answered:
                        self._closed = True
                        with contextlib.suppress(OSError):
                            self._process.kill()
                    raise ForkServerError("the fork server did not answer")
                reply = self._replies.pop(0)
                if "pid" not in reply:
                    raise ForkServerError(
                        f"the fork server could not start it: {reply.get('error')}"
                    )
                process = ForkedProcess(
                    reply["pid"],
                    os.fdopen(ours[0], "wb"),
                    os.fdopen(ours[1], "rb"),
                    os.fdopen(ours[2], "rb"),
                )
                ours = []
                if process.pid in self._ended_early:
                    process._end(self._ended_early.pop(process.pid))
                else:
                    self._children[process.pid] = process
                return process
        finally:
            for fd in [*child_ends, *ours, env_write]:
                if fd >= 0:
                    with contextlib.suppress(OSError):
                        os.close(fd)

    def _listen(self) -> None:
        while True:
            try:
                data = self._sock.recv(MESSAGE_BYTES)
                message = json.loads(data) if data else None
            except (OSError, ValueError):
                message = None
            if not isinstance(message, dict):
                break
            with self._lock:
                if "exit" in message:
                    pid, status = message["exit"], message["status"]
                    child = self._children.pop(pid, None)
                    if child is not None:
                        child._end(status)
                    else:
                        self._ended_early[pid] = status
                else:
                    self._replies.append(message)
                    self._reply_ready.notify_all()
        # The server is gone, and its children with it (each dies with the server).
        with self._lock:
            self._closed = True
            for child in self._children.values():
                child._end(-signal.SIGKILL, lost=True)
            self._children.clear()
            self._reply_ready.notify_all()

    def close(self) -> None:
        """End the server (its children die with it)."""
        self._closed = True
        with contextlib.suppress(OSError):
            self._sock.close()
        with contextlib.suppress(OSError):
            self._process.kill()
        with contextlib.suppress(Exception):
            self._process.wait(timeout=5)
        shutil.rmtree(self._home, ignore_errors=True)


_server: ForkServer | None = None
_server_lock = threading.Lock()
_failed_at: float | None = None  # when a server last failed to start (time.monotonic)
RETRY_START_SECONDS = 60.0


def fork_server(env: dict[str, str]) -> ForkServer:
    """This process's fork server, started (with the scrubbed environment `env`) when
    first needed or when the last one is gone; ForkServerError when it cannot start (and
    at once, for a minute after a start failed: engines start as subprocesses meanwhile,
    rather than each wait for a server that does not come)."""
    global _server, _failed_at
    with _server_lock:
        if _server is None or not _server.alive:
            if _server is not None and _server._owner == os.getpid():
                _server.close()
            _server = None
            if _failed_at is not None and time.monotonic() - _failed_at < RETRY_START_SECONDS:
                raise ForkServerError("the fork server failed to start a moment ago")
            try:
                _server = ForkServer(env)
            except (ForkServerError, OSError):
                _failed_at = time.monotonic()
                raise
            _failed_at = None
        return _server


def _forget_in_child() -> None:
    """A process forked from one with a server (a worker process the cluster forks) has a
    copy of its socket: close the copy (the server must see its worker's end close when
    the worker ends) and start a server of its own when it needs one."""
    global _server, _server_lock, _failed_at
    _server_lock = threading.Lock()  # another thread may have held it at the fork
    _failed_at = None
    if _server is not None:
        with contextlib.suppress(OSError):
            _server._sock.close()
        _server._closed = True
    _server = None


os.register_at_fork(after_in_child=_forget_in_child)


def fork_server_stop() -> None:
    global _server, _failed_at
    _failed_at = None
    with _server_lock:
        if _server is not None and _server._owner == os.getpid():
            _server.close()
        _server = None


# --- the server's side -------------------------------------------------------------------

PR_SET_PDEATHSIG = 1  # linux/prctl.h


def _child(
    request: dict[str, Any], fds: list[int], settled: int, server: Any, parent: int, prctl: Any
) -> None:
    """In the forked child: become the engine's process, run its module, exit.

    It ends with os._exit once its output is flushed (the server's exit handlers are not
    the engine's to run; any thread the engine left behind ends with it, as a killed
    engine's would)."""
    code = 1
    try:
        os.setsid()  # a process group of its own: the runner kills it as one
        if prctl is not None:
            prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
            if os.getppid() != parent:
                os._exit(1)
        # Settled: the server tells the runner its pid only now, so that the runner's
        # kill of the group (a cancel, a stop) cannot come before the group exists.
        os.write(settled, b"1")
        size = int.from_bytes(_read_exactly(fds[3], 8), "big")
        environment = _read_exactly(fds[3], size)
        for target, fd in enumerate(fds[:3]):  # its pipes first: any error below reaches them
            os.dup2(fd, target)
        server.close()
        os.closerange(3, 65536)
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        import resource

        for name, value in request["limits"].items():
            soft, hard = (value, value + 5) if name == "RLIMIT_CPU" else (value, value)
            resource.setrlimit(getattr(resource, name), (soft, hard))
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(json.loads(environment))
        tempfile.tempdir = None  # TMPDIR is the run's now
        sys.argv = [request["module"], *request["args"]]
        import runpy

        try:
            runpy.run_module(request["module"], run_name="__main__", alter_sys=True)
            code = 0
        except SystemExit as exc:
            if exc.code is None or isinstance(exc.code, int):
                code = exc.code or 0
            else:
                print(exc.code, file=sys.stderr)
    except BaseException:  # a forked child's last word: its traceback on stderr, its exit status
        import traceback

        traceback.print_exc()
        code = 1
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
        with contextlib.suppress(Exception):
            sys.stderr.flush()
        os._exit(code)


def _read_exactly(fd: int, size: int) -> bytes:
    """`size` bytes from `fd` (a pipe the runner filled before the fork was asked for)."""
    data = b""
    while len(data) < size:
        chunk = os.read(fd, size - len(data))
        if not chunk:
            raise EOFError("the engine's environment was cut short")
        data += chunk
    return data


class _Server:
    """What the server holds that a child must close: its socket and selector."""

    def __init__(self, control: socket.socket, selector: Any) -> None:
        self.control, self.selector = control, selector

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.selector.close()
        with contextlib.suppress(Exception):
            self.control.close()


def _load(names: Sequence[str]) -> None:
    """Import what the engines use, before the server forks them. What it imports lives
    as long as the server, and every child starts with all of it: imported with the
    collector off and frozen out of later collections, the children's included
    (sandbox/loading.py)."""
    if not names:
        return
    with loading():
        for name in names:
            with contextlib.suppress(Exception):  # a missing SDK is the child's error to report
                importlib.import_module(name)


def _home_remove() -> None:
    """The server's own folder (its HOME and working directory), removed as it ends: a
    worker that was killed, or that never closed its server, leaves none behind."""
    home = os.environ.get("HOME", "")
    if os.path.basename(home).startswith(HOME_PREFIX):
        with contextlib.suppress(OSError):
            os.chdir("/")
        shutil.rmtree(home, ignore_errors=True)


def serve(fd: int) -> None:
    """The server: import what the engines use, say so, then fork a child per request
    until the worker's end of the socket closes."""
    import ctypes
    import select
    import selectors

    control = socket.socket(fileno=fd)
    # Its folder says whose it is: the host's tidy keeps a live server's folder, however
    # old (`workspaces_prune`, sandbox/workspace.py).
    home = os.environ.get("HOME", "")
    if os.path.basename(home).startswith(HOME_PREFIX):
        with contextlib.suppress(OSError), open(os.path.join(home, "owner.pid"), "w") as f:
            f.write(str(os.getpid()))
    _load(PRELOAD)
    prctl = ctypes.CDLL(None, use_errno=True).prctl if sys.platform.startswith("linux") else None
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_write, False)
    signal.set_wakeup_fd(wake_write)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    children: set[int] = set()
    control.sendall(READY)
    selector = selectors.DefaultSelector()
    selector.register(control, selectors.EVENT_READ, "control")
    selector.register(wake_read, selectors.EVENT_READ, "child")
    me = os.getpid()
    while True:
        for key, _ in selector.select():
            if key.data == "child":
                with contextlib.suppress(OSError):
                    os.read(wake_read, 4096)
                while children:
                    try:
                        pid, status = os.waitpid(-1, os.WNOHANG)
                    except ChildProcessError:
                        break
                    if pid == 0:
                        break
                    children.discard(pid)
                    message = {"exit": pid, "status": os.waitstatus_to_exitcode(status)}
                    control.sendall(json.dumps(message).encode())
                continue
            try:
                data, fds, _, _ = socket.recv_fds(control, MESSAGE_BYTES, 4)
            except OSError:
                data, fds = b"", []
            if not data:  # the worker is gone: so is everything it started here
                for pid in children:
                    with contextlib.suppress(OSError):
                        os.killpg(pid, signal.SIGKILL)
                _home_remove()
                os._exit(0)
            pid = -1
            try:
                request = json.loads(data)
                if len(fds) != 4:
                    raise ValueError(f"{len(fds)} descriptors instead of 4")
                _load([name for name in request.get("warm", ()) if name not in sys.modules])
                settled_read, settled_write = os.pipe()
                sys.stdout.flush()
                sys.stderr.flush()
                pid = os.fork()
                if pid == 0:
                    os.close(settled_read)
                    _child(request, fds, settled_write, _Server(control, selector), me, prctl)
                children.add(pid)
                os.close(settled_write)
                # The child's first act; a child that died first is answered all the same
                # (its exit follows).
                ready, _, _ = select.select([settled_read], [], [], SPAWN_SECONDS / 2)
                if ready:
                    os.read(settled_read, 1)
                os.close(settled_read)
                answer = {"pid": pid}
            except (
                Exception
            ) as exc:  # the server outlives a spawn that failed: its caller is told why
                if pid > 0:  # forked, but the runner will not know it: it must not run
                    with contextlib.suppress(OSError):
                        os.kill(pid, signal.SIGKILL)
                answer = {"error": f"{type(exc).__name__}: {exc}"}
            finally:
                for descriptor in fds:
                    with contextlib.suppress(OSError):
                        os.close(descriptor)
            control.sendall(json.dumps(answer).encode())


if __name__ == "__main__":
    serve(int(sys.argv[1]))
