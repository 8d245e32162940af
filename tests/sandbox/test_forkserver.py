"""The local runner's fork server (sandbox/runners/forkserver.py): engines forked from a
process that imported them once, and nothing of the worker in it."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sandbox.runners import forkserver
from sandbox.runners.local import Limits, sandboxed_run, scrubbed_environment
from tests.helpers import ENGINE_ENVIRONMENT

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux's prctl")


@pytest.fixture(autouse=True)
def fork_server_on(settings):
    settings.TASUKU_ENGINE_FORK_SERVER = True
    forkserver.fork_server_stop()
    yield
    forkserver.fork_server_stop()


def module(code: str) -> list[str]:
    return [sys.executable, "-I", "-m", "timeit", "-n", "1", "-r", "1", code]


def run(tmp_path, code: str, **limits):
    return sandboxed_run(
        module(code),
        cwd=tmp_path,
        stdin=b"",
        limits=Limits(**{"wall_seconds": 30, **limits}),
        env=scrubbed_environment(str(tmp_path), {"ANTHROPIC_API_KEY": "k"}),
        what="a test engine",
    )


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_an_engine_is_forked_from_the_server_with_its_own_directory_and_environment(tmp_path):
    report = (
        "import os, sys, json, tempfile; sys.stdout.write(json.dumps({'pid': os.getpid(), "
        "'ppid': os.getppid(), 'pgid': os.getpgid(0), 'cwd': os.getcwd(), "
        "'tmp': tempfile.gettempdir(), 'key': os.environ.get('ANTHROPIC_API_KEY')})); "
        "sys.stdout.flush(); os._exit(0)"
    )
    first = json.loads(run(tmp_path, report).stdout)
    second = json.loads(run(tmp_path, report).stdout)
    server = forkserver.fork_server(scrubbed_environment(""))
    assert first["ppid"] == second["ppid"] == server.pid  # one server, forked twice
    assert first["pid"] != second["pid"]
    assert first["pgid"] == first["pid"]  # a process group of its own
    assert first["cwd"] == str(tmp_path) and first["tmp"] == str(tmp_path)
    assert first["key"] == "k"


def test_an_engine_collects_its_garbage_and_leaves_the_servers_imports_out_of_it(tmp_path):
    """The server loads with the collector off and freezes what it loaded; the child it
    forks collects as usual (an engine that never collected would keep every cycle it
    made), and never walks the server's imports."""
    script = tmp_path / "report.py"
    script.write_text(
        "import gc, json, os\n"
        "print(json.dumps({'on': gc.isenabled(), 'frozen': gc.get_freeze_count(), "
        "'ppid': os.getppid()}))\n"
    )
    # Any module the server runs (`python -I -m …`); timeit, which `run` uses, turns the
    # collector off while it times.
    done = sandboxed_run(
        [sys.executable, "-I", "-m", "cProfile", "-o", os.devnull, str(script)],
        cwd=tmp_path,
        stdin=b"",
        limits=Limits(wall_seconds=30),
        env=scrubbed_environment(str(tmp_path), {}),
        what="a test engine",
    )
    seen = json.loads(done.stdout)
    assert seen["ppid"] == forkserver.fork_server(scrubbed_environment("")).pid
    assert seen["on"] is True
    assert seen["frozen"] > 10_000  # the preloaded engine entry points and what they import


def test_the_server_imports_what_an_engine_needs_once_and_no_more(tmp_path):
    """A review by the anthropic engine warms its SDK in the server; a static reviewer's
    worker never imports a model SDK."""
    from sandbox.engines import modules_of

    assert "anthropic" in modules_of("sandbox.run_engine", "anthropic")
    assert "openai" in modules_of("sandbox.run_reply", "openai")
    assert not {"anthropic", "openai"} & set(modules_of("sandbox.run_engine", "static"))
    server = forkserver.fork_server(scrubbed_environment(""))
    report = "import os, sys; sys.stdout.write(str(sorted({'anthropic', 'openai'} & set(sys.modules)))); sys.stdout.flush(); os._exit(0)"

    def imported(warm: tuple[str, ...]) -> tuple[str, float]:
        started = time.monotonic()
        process = server.spawn("timeit", ["-n", "1", "-r", "1", report], cwd=tmp_path,
                               env=scrubbed_environment(str(tmp_path)), limits={}, warm=warm)  # fmt: skip
        process.stdin.close()
        out = process.stdout.read().decode()
        process.wait(timeout=30)
        return out, time.monotonic() - started

    assert imported(modules_of("sandbox.run_engine", "static"))[0] == "[]"
    first, _ = imported(modules_of("sandbox.run_engine", "anthropic"))
    again, seconds = imported(modules_of("sandbox.run_engine", "anthropic"))
    assert first == again == "['anthropic']"
    assert seconds < 1.0  # imported already


def test_a_model_engine_finds_its_sdks_tls_context_made_by_the_server(tmp_path):
    """The TLS context every conversation's SDK client uses (sandbox/agent/warm.py) is
    made by the server, once: a review's or a reply's engine loads no CA bundle of its
    own. A static reviewer's engine never makes one."""
    from sandbox.engines import modules_of

    server = forkserver.fork_server(scrubbed_environment(""))
    report = (
        "import os, sys; m = sys.modules.get('sandbox.agent.conversation'); "
        "sys.stdout.write(str(m._tls_context.cache_info().currsize if m else None)); "
        "sys.stdout.flush(); os._exit(0)"
    )

    def kept(warm: tuple[str, ...]) -> str:
        process = server.spawn("timeit", ["-n", "1", "-r", "1", report], cwd=tmp_path,
                               env=scrubbed_environment(str(tmp_path)), limits={}, warm=warm)  # fmt: skip
        process.stdin.close()
        out = process.stdout.read().decode()
        process.wait(timeout=30)
        return out

    assert kept(modules_of("sandbox.run_engine", "static")) in ("None", "0")
    assert kept(modules_of("sandbox.run_engine", "anthropic")) == "1"
    assert kept(modules_of("sandbox.run_reply", "openai")) == "1"


def test_a_static_review_finds_its_secret_detectors_loaded_by_the_server(tmp_path):
    """What a static review's checkers load the same way each time (detect-secrets, its
    detectors and their patterns) is loaded once by the server; each engine it forks
    starts with it (benchmarks/engine_start.py: the CPU a static run costs). The server
    drops a module that fails to import, so each one an engine names must import."""
    from sandbox.engines import REGISTRY, modules_of

    for facts in REGISTRY.values():
        for module in facts.warm:
            subprocess.run([sys.executable, "-I", "-c", f"import {module}"], check=True,
                           cwd=ROOT)  # fmt: skip
    server = forkserver.fork_server(scrubbed_environment(""))
    report = (
        "import os, sys; sys.stdout.write(repr(sorted(m for m in sys.modules if m in "
        "('detect_secrets.core.scan', 'detect_secrets.plugins.github_token', 'requests')))); "
        "sys.stdout.flush(); os._exit(0)"
    )
    process = server.spawn("timeit", ["-n", "1", "-r", "1", report], cwd=tmp_path,
                           env=scrubbed_environment(str(tmp_path)), limits={},
                           warm=modules_of("sandbox.run_engine", "static"))  # fmt: skip
    process.stdin.close()
    out = process.stdout.read().decode()
    process.wait(timeout=30)
    assert out == "['detect_secrets.core.scan', 'detect_secrets.plugins.github_token', 'requests']"


def test_the_server_holds_nothing_of_the_worker(tmp_path, monkeypatch):
    monkeypatch.setenv("GITHUB_PRIVATE_KEY", "-----BEGIN RSA PRIVATE KEY-----")
    monkeypatch.setenv("DATABASE_URL", "postgres://user:pw@db/tasuku")
    run(tmp_path, "pass")
    server = forkserver.fork_server(scrubbed_environment(""))
    with open(f"/proc/{server.pid}/environ", "rb") as environ:
        names = {item.split(b"=", 1)[0].decode() for item in environ.read().split(b"\0") if item}
    assert names <= ENGINE_ENVIRONMENT
    fds = os.listdir(f"/proc/{server.pid}/fd")
    assert len(fds) < 12, fds  # its socket, its selector, a wake-up pipe; none of the worker's


def test_a_server_that_dies_takes_its_engines_with_it_and_the_next_run_gets_a_new_one(tmp_path):
    pidfile = tmp_path / "engine.pid"
    server = forkserver.fork_server(scrubbed_environment(""))
    process = server.spawn(
        "timeit",
        [
            "-n",
            "1",
            "-r",
            "1",
            f"import os, time; open({str(pidfile)!r}, 'w').write(str(os.getpid())); time.sleep(60)",
        ],
        cwd=tmp_path,
        env=scrubbed_environment(str(tmp_path)),
        limits={},
    )
    deadline = time.monotonic() + 20
    while not (pidfile.exists() and pidfile.read_text()) and time.monotonic() < deadline:
        time.sleep(0.05)
    engine = int(pidfile.read_text())
    os.kill(server.pid, signal.SIGKILL)
    assert process.wait(timeout=10) == -signal.SIGKILL
    deadline = time.monotonic() + 5
    while _alive(engine) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(engine)
    completed = run(
        tmp_path,
        "import os, sys; sys.stdout.write(str(os.getppid())); sys.stdout.flush(); os._exit(0)",
    )
    assert int(completed.stdout) not in (server.pid, os.getpid())  # a new server


def test_a_server_whose_worker_is_gone_ends_and_leaves_no_folder_behind(tmp_path):
    """What the server sees of a worker killed with -9 (or one that never closed it): its
    end of the socket closes. The server ends, and its folder goes with it: every test
    process and every killed worker used to leave one in the temporary folder."""
    server = forkserver.fork_server(scrubbed_environment(""))
    home = Path(server._home)
    assert home.is_dir() and home.name.startswith(forkserver.HOME_PREFIX)
    server._sock.shutdown(socket.SHUT_RDWR)  # the worker's end, as its death closes it
    assert server._process.wait(timeout=10) == 0
    assert not home.exists()


def test_the_hosts_tidy_keeps_a_live_servers_folder_however_old(tmp_path, monkeypatch):
    """A worker lives for days, its fork server with it: the tidy that removes what killed
    workers left (homes older than twice the run deadline) must not take a live server's
    folder (its HOME and working directory), and takes it once the server is gone."""
    import tempfile

    from sandbox.workspace import workspaces_prune

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # the server's folder here
    server = forkserver.fork_server(scrubbed_environment(""))
    home = Path(server._home)
    assert home.parent == tmp_path and (home / "owner.pid").read_text() == str(server.pid)
    old = time.time() - 3 * 3600
    os.utime(home, (old, old))
    assert workspaces_prune(tmp_path, 2 * 3600) == []
    assert home.is_dir()
    os.kill(server.pid, signal.SIGKILL)  # gone without removing it
    server._process.wait(timeout=10)
    assert workspaces_prune(tmp_path, 2 * 3600) == [home.name]
    assert not home.exists()


def test_an_engine_that_fails_says_why_and_the_server_goes_on(tmp_path):
    failed = run(tmp_path, "raise RuntimeError('the engine broke')")
    assert failed.returncode == 1
    assert b"RuntimeError: the engine broke" in failed.stderr
    exited = run(tmp_path, "import os; os._exit(4)")
    assert exited.returncode == 4
    killed = run(tmp_path, "import os, signal; os.kill(os.getpid(), signal.SIGKILL)")
    assert killed.returncode == -signal.SIGKILL
    assert run(tmp_path, "pass").returncode == 0


def test_without_a_server_the_engine_starts_as_a_subprocess(tmp_path, monkeypatch, caplog):
    monkeypatch.setattr(forkserver, "READY", b"something else")  # it never says it is ready
    completed = run(
        tmp_path,
        "import os, sys; sys.stdout.write(str(os.getppid())); sys.stdout.flush(); os._exit(0)",
    )
    assert int(completed.stdout) == os.getpid()
    assert "starting a test engine as a subprocess" in caplog.text


def test_an_engine_ended_with_its_server_is_a_failure_to_try_again(tmp_path):
    from concurrent.futures import ThreadPoolExecutor

    from sandbox.errors import SandboxError

    pidfile = tmp_path / "engine.pid"
    code = f"import os, time; open({str(pidfile)!r}, 'w').write(str(os.getpid())); time.sleep(60)"
    with ThreadPoolExecutor(1) as pool:
        running = pool.submit(run, tmp_path, code)
        deadline = time.monotonic() + 20
        while not (pidfile.exists() and pidfile.read_text()) and time.monotonic() < deadline:
            time.sleep(0.05)
        server = forkserver.fork_server(scrubbed_environment(""))
        os.kill(server.pid, signal.SIGKILL)
        with pytest.raises(SandboxError) as caught:
            running.result(timeout=30)
    assert not caught.value.permanent and caught.value.code == "engine-start"
    assert "fork server" in str(caught.value)


def test_engines_started_at_once_from_several_threads_each_get_their_own(tmp_path):
    """Each thread's engine is the one it was told about: its pid, its output."""
    from concurrent.futures import ThreadPoolExecutor

    def one(index: int) -> tuple[int, bytes, int]:
        server = forkserver.fork_server(scrubbed_environment(""))
        process = server.spawn(
            "timeit",
            [
                "-n",
                "1",
                "-r",
                "1",
                f"import os, sys, time; time.sleep(0.2); sys.stdout.write(f'{index} {{os.getpid()}}'); sys.stdout.flush(); os._exit({index})",
            ],
            cwd=tmp_path,
            env=scrubbed_environment(str(tmp_path)),
            limits={},
        )
        process.stdin.close()
        out = process.stdout.read()
        return process.pid, out, process.wait(timeout=30)

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(one, range(8)))
    for index, (pid, out, status) in enumerate(results):
        assert out == f"{index} {pid}".encode()
        assert status == index
