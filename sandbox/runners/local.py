"""The `local` runner: the engine as a subprocess of the worker.

The child gets a scrubbed environment (no tokens, no keys the engine does not need),
its own process group (a wall-clock timeout kills the engine and everything it
started), resource limits (address space, CPU time, file size, no core dumps), and
Python's isolated mode, so nothing in the checkout (a `sandbox/` package, a
`sitecustomize.py`) can be imported in place of Tasuku's code.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import logging
import os
import resource
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import ValidationError

from sandbox import progress
from sandbox.connectors import ConnectorBridge
from sandbox.contract import ReplyJob, ReplyResult, ReviewJob, ReviewResult
from sandbox.engines import modules_of
from sandbox.errors import ProviderError, SandboxError, StageError
from sandbox.runners.forkserver import ForkedProcess, ForkServerError, fork_server
from sandbox.workspace import remove_tree

logger = logging.getLogger(__name__)

MAX_OUTPUT = 20 * 1024 * 1024
DEFAULT_MEMORY_MB = 6144


def _setting(name: str) -> str:
    """A setting from Django's settings when they are configured (the worker), else from
    the environment (the Actions runner imports no Django)."""
    try:
        from django.conf import settings

        if settings.configured and hasattr(settings, name):
            return str(getattr(settings, name))
    except ImportError:
        pass
    return os.environ.get(name, "")


def _megabytes(name: str, default: int) -> int:
    raw = _setting(name).strip()
    return int(raw) if raw.isdigit() and int(raw) > 0 else default


def default_memory_bytes() -> int:
    """TASUKU_SANDBOX_MEMORY_MB: the address space of the engine and of each process it
    starts (a checker such as shellcheck inherits it as its ceiling)."""
    return _megabytes("TASUKU_SANDBOX_MEMORY_MB", DEFAULT_MEMORY_MB) * 1024 * 1024


# Settings an engine reads from its environment (none is a secret).
ENGINE_SETTINGS = ("TASUKU_STATIC_CHECKER_MEMORY_MB",)


@dataclass(frozen=True)
class Limits:
    wall_seconds: int = 1800
    memory_bytes: int = field(default_factory=default_memory_bytes)
    cpu_seconds: int = 1800
    file_bytes: int = 512 * 1024**2


PR_SET_PDEATHSIG = 1  # linux/prctl.h
# Looked up once, in the parent: the child between fork and exec must not load anything
# (another thread of the worker may have held the loader's lock when it forked).
_PRCTL = ctypes.CDLL(None, use_errno=True).prctl if sys.platform.startswith("linux") else None


def _die_with(parent: int) -> None:
    """In the child, before exec: be killed when the process that started it dies (a
    worker killed mid-review leaves no engine running on, calling a model nobody waits
    for). Linux only; elsewhere the wall-clock limit and the reaper are the bound."""
    if _PRCTL is None:
        return
    _PRCTL(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:  # the parent died before the signal was asked for
        os._exit(1)


def _limit(limits: Limits):
    parent = os.getpid()

    def apply() -> None:
        _die_with(parent)
        resource.setrlimit(resource.RLIMIT_AS, (limits.memory_bytes, limits.memory_bytes))
        resource.setrlimit(resource.RLIMIT_CPU, (limits.cpu_seconds, limits.cpu_seconds + 5))
        resource.setrlimit(resource.RLIMIT_FSIZE, (limits.file_bytes, limits.file_bytes))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))

    return apply


def scrubbed_environment(home: str, allow: dict[str, str] | None = None) -> dict[str, str]:
    """Only what an engine needs: a PATH to its tools, a throwaway HOME, a locale, and
    the keys its engine is allowed (`allow`)."""
    bin_dir = str(Path(sys.executable).parent)
    env = {
        "PATH": f"{bin_dir}:/usr/local/bin:/usr/bin:/bin",
        "HOME": home,
        "TMPDIR": home,
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONHASHSEED": "0",
    }
    env.update(allow or {})
    return env


@dataclass(frozen=True)
class Completed:
    returncode: int
    stdout: bytes
    stderr: bytes


# What runs now under a name (a run's attempt): `engine_stop` stops it from another thread.
_running: dict[str, subprocess.Popen | ForkedProcess] = {}
_running_lock = threading.Lock()


def engine_stop(name: str) -> bool:
    """Kill the engine started under `name` and everything it started. Returns whether
    one was running."""
    with _running_lock:
        process = _running.get(name)
    if process is None:
        return False
    _kill_group(process)
    return True


def fork_server_enabled() -> bool:
    """TASUKU_ENGINE_FORK_SERVER: engines start from the worker's fork server
    (sandbox/runners/forkserver.py). Off where no setting says (an Actions runner: one
    engine a process, nothing to gain)."""
    return _setting("TASUKU_ENGINE_FORK_SERVER").strip().lower() in ("1", "true", "yes", "on")


def _limits_of(limits: Limits) -> dict[str, int]:
    return {
        "RLIMIT_AS": limits.memory_bytes,
        "RLIMIT_CPU": limits.cpu_seconds,
        "RLIMIT_FSIZE": limits.file_bytes,
        "RLIMIT_CORE": 0,
    }


def _start(
    command: list[str], *, cwd: Path, env: dict[str, str], limits: Limits, what: str
) -> subprocess.Popen | ForkedProcess:
    """`command` started in a process group of its own under `limits`: a Python module
    (`python -I -m …`) from the fork server when it is on and answers, anything else (or
    when it does not) as a subprocess."""
    python_module = command[:3] == [sys.executable, "-I", "-m"] and len(command) > 3
    if python_module and fork_server_enabled():
        try:
            server = fork_server(scrubbed_environment(""))
            engine = command[4] if len(command) > 4 else ""
            return server.spawn(
                command[3],
                command[4:],
                cwd=cwd,
                env=env,
                limits=_limits_of(limits),
                warm=modules_of(command[3], engine),
            )
        except (ForkServerError, OSError) as exc:
            logger.warning("starting %s as a subprocess: %s", what, exc)
    try:
        return subprocess.Popen(  # noqa: S603
            command,
            cwd=cwd,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,  # its own process group, killed as one
            preexec_fn=_limit(limits),  # noqa: PLW1509
        )
    except OSError as exc:
        raise SandboxError(
            f"Could not start {what}: {exc}", permanent=False, code="engine-start"
        ) from exc


def sandboxed_run(
    command: list[str],
    *,
    cwd: Path,
    stdin: bytes,
    limits: Limits,
    env: dict[str, str],
    what: str,
    on_progress: Callable[[dict], None] | None = None,
    name: str = "",
) -> Completed:
    """Run `command` in its own process group under `limits`; on the wall-clock limit
    the whole group (the command and everything it started) is killed. `on_progress` is
    given each progress event (sandbox/progress.py) the command writes, as it writes it."""
    process = _start(command, cwd=cwd, env=env, limits=limits, what=what)
    if name:
        with _running_lock:
            _running[name] = process
    try:
        if on_progress is None and isinstance(process, subprocess.Popen):
            stdout, stderr = process.communicate(stdin, timeout=limits.wall_seconds)
        else:
            stdout, stderr = _relayed(
                process, stdin, limits.wall_seconds, on_progress or (lambda event: None)
            )
    except subprocess.TimeoutExpired:
        _kill_group(process)
        if isinstance(process, subprocess.Popen):
            process.communicate()
        else:
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=10)
        raise SandboxError(
            f"{what[:1].upper()}{what[1:]} did not finish within {limits.wall_seconds}s and was stopped.",
            permanent=True,
            code="sandbox-timeout",
        ) from None
    finally:
        _kill_group(process)  # anything it left running in its group goes too
        if name:
            with _running_lock:
                _running.pop(name, None)
    if getattr(process, "lost", False):
        # Its fork server died (and took it along): nothing the engine did or hit.
        raise SandboxError(
            f"{what[:1].upper()}{what[1:]} was ended with the worker's fork server; "
            "it will be tried again.",
            permanent=False,
            code="engine-start",
        )
    return Completed(process.returncode, stdout, stderr)


STDERR_KEPT = 256 * 1024  # the failure line is the last one; progress lines come before


def _relayed(
    process: subprocess.Popen | ForkedProcess,
    stdin: bytes,
    seconds: float,
    on_progress: Callable[[dict], None],
) -> tuple[bytes, bytes]:
    """`communicate`, with each progress line of stderr handed on as it arrives."""
    out: list[bytes] = []
    err: list[bytes] = []

    def feed() -> None:
        with contextlib.suppress(BrokenPipeError, OSError):
            process.stdin.write(stdin)
            process.stdin.close()

    def read_out() -> None:
        out.append(process.stdout.read())

    def read_err() -> None:
        kept = 0
        for line in iter(process.stderr.readline, b""):
            event = progress.parse(line.decode(errors="replace").rstrip("\n"))
            if event is not None:
                with contextlib.suppress(Exception):  # a log that fails stops no review
                    on_progress(event)
            err.append(line)
            kept += len(line)
            while kept > STDERR_KEPT and len(err) > 1:
                kept -= len(err.pop(0))

    pumps = [threading.Thread(target=f, daemon=True) for f in (feed, read_out, read_err)]
    for pump in pumps:
        pump.start()
    process.wait(timeout=seconds)
    for pump in pumps:
        pump.join(timeout=10)
    return b"".join(out), b"".join(err)


def program_run(
    program: str,
    engine: str,
    job: ReviewJob | ReplyJob,
    checkout: Path,
    *,
    limits: Limits,
    allow_env: dict[str, str] | None,
    what: str,
    on_progress: Callable[[dict], None] | None = None,
    name: str = "",
) -> bytes:
    """Run the sandboxed `program` (sandbox/entry.py) for `engine` on `checkout` with
    `job` on its stdin, in a throwaway HOME removed after; its stdout, or the failure its
    exit means."""
    home = tempfile.mkdtemp(prefix="tasuku-home-")
    try:
        completed = sandboxed_run(
            [sys.executable, "-I", "-m", program, engine],
            cwd=checkout,
            stdin=job.model_dump_json().encode(),
            limits=limits,
            env=scrubbed_environment(home, allow_env),
            what=what,
            on_progress=on_progress,
            name=name,
        )
    finally:
        remove_tree(Path(home))  # whatever the engine left there, however deep
    if completed.returncode != 0:
        raise failure_from_exit(
            engine, completed.returncode, completed.stderr.decode(errors="replace")
        )
    return completed.stdout


def engine_run(
    engine: str,
    job: ReviewJob,
    checkout: Path,
    *,
    limits: Limits = Limits(),
    allow_env: dict[str, str] | None = None,
    on_progress: Callable[[dict], None] | None = None,
    name: str = "",
    connectors: ConnectorBridge | None = None,
) -> ReviewResult:
    """Run `engine` on `checkout` and return its validated `ReviewResult`; `on_progress`
    is told what the engine does as it does it (sandbox/progress.py); `name` lets
    `engine_stop` stop it; `connectors`: the run's open connector bridge, whose socket
    and token the engine is given."""
    passed = {name: value for name in ENGINE_SETTINGS if (value := _setting(name).strip())}
    if connectors is not None:
        passed.update(connectors.environment())
    stdout = program_run(
        "sandbox.run_engine",
        engine,
        job,
        checkout,
        limits=limits,
        allow_env={**passed, **(allow_env or {})},
        what=f"the {engine} engine",
        on_progress=on_progress,
        name=name,
    )
    return result_parse(engine, stdout)


def reply_run(
    engine: str,
    job: ReplyJob,
    checkout: Path,
    *,
    limits: Limits,
    allow_env: dict[str, str] | None = None,
) -> ReplyResult:
    """Run a reply job with `engine`'s model on `checkout` (sandbox/agent/reply.py), in
    the same sandbox as a review's engine: its own process group, the limits, a scrubbed
    environment with only the provider's key."""
    stdout = program_run(
        "sandbox.run_reply",
        engine,
        job,
        checkout,
        limits=limits,
        allow_env=allow_env,
        what=f"the {engine} reply job",
    )
    if len(stdout) > MAX_OUTPUT:
        raise SandboxError(f"The {engine} reply job wrote too much.", permanent=True)
    try:
        return ReplyResult.model_validate_json(stdout)
    except ValidationError as exc:
        raise SandboxError(
            f"The {engine} reply job's output is not a ReplyResult: {exc.errors()[0]['msg']}",
            permanent=True,
            code="engine-output",
        ) from exc


def result_parse(engine: str, stdout: bytes) -> ReviewResult:
    """An engine's output as a ReviewResult; anything else fails at validation."""
    if len(stdout) > MAX_OUTPUT:
        raise SandboxError(
            f"The {engine} engine wrote more than {MAX_OUTPUT} bytes.",
            permanent=True,
            code="engine-output",
        )
    try:
        return ReviewResult.model_validate_json(stdout)
    except ValidationError as exc:
        raise SandboxError(
            f"The {engine} engine's output is not a ReviewResult: {exc.errors()[0]['msg']}",
            permanent=True,
            stage="validation",
            code="engine-output",
        ) from exc


def _kill_group(process: subprocess.Popen | ForkedProcess) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)


def failure_from_exit(engine: str, code: int, stderr: str) -> StageError:
    """The error an engine's exit means. An engine that understood its failure wrote a
    last line `{"error": …, "stage": …, "permanent": …, "code": …}` on stderr
    (sandbox.run_engine)."""
    reason, reported = "", {}
    for line in reversed(stderr.strip().splitlines()):
        try:
            reported = json.loads(line)
            reason = reported.get("error", "")
        except (ValueError, AttributeError):
            continue
        if reason:
            break
    said = reported.get("code") if isinstance(reported, dict) else None
    said = said if isinstance(said, str) and said else None
    if reason and reported.get("stage"):
        kind = ProviderError if reported["stage"] == "provider" else SandboxError
        return kind(
            reason[:2000],
            permanent=bool(reported.get("permanent", True)),
            stage=reported["stage"],
            code=said,
        )
    if code < 0:
        name = signal.Signals(-code).name
        hint = (
            " (memory or CPU limit)"
            if -code in (signal.SIGKILL, signal.SIGXCPU, signal.SIGSEGV)
            else ""
        )
        return SandboxError(
            f"The {engine} engine was killed by {name}{hint}.",
            permanent=True,
            code="sandbox-memory" if hint else "engine-failed",
        )
    tail = reason or (stderr.strip().splitlines() or ["no output"])[-1]
    return SandboxError(
        f"The {engine} engine failed (exit {code}): {tail[:500]}",
        permanent=True,
        code=said or "engine-failed",
    )
