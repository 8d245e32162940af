"""The local runner's sandbox: scrubbed environment, process-group timeout, limits."""

from __future__ import annotations

import json
import sys
import time

import pytest

from sandbox.contract import ReviewJob
from sandbox.errors import SandboxError
from sandbox.runners.local import (
    Limits,
    engine_run,
    result_parse,
    sandboxed_run,
    scrubbed_environment,
)
from tests.helpers import ENGINE_ENVIRONMENT


@pytest.fixture(params=["subprocess", "fork server"])
def via(request, settings) -> str:
    """An engine (a Python module) starts as a subprocess, or from the worker's fork
    server (sandbox/runners/forkserver.py): each test of the sandbox runs through both."""
    settings.TASUKU_ENGINE_FORK_SERVER = request.param == "fork server"
    return request.param


def python_module(code: str) -> list[str]:
    """`code` run as an engine is, `python -I -m <module>` (the standard library's timeit
    runs it once), so that either way of starting one takes it."""
    return [sys.executable, "-I", "-m", "timeit", "-n", "1", "-r", "1", code]


def run(code: str, tmp_path, **limits):
    return sandboxed_run(
        python_module(code),
        cwd=tmp_path,
        stdin=b"",
        limits=Limits(**{"wall_seconds": 20, **limits}),
        env=scrubbed_environment(str(tmp_path)),
        what="the test command",
    )


def test_the_engine_sees_no_token_key_or_secret_of_the_worker(tmp_path, monkeypatch, via):
    monkeypatch.setenv("GITHUB_PRIVATE_KEY", "-----BEGIN RSA PRIVATE KEY-----")
    monkeypatch.setenv("GITHUB_WEBHOOK_SECRET", "s3cret")
    monkeypatch.setenv("SECRET_KEY", "django")
    monkeypatch.setenv("DATABASE_URL", "postgres://user:pw@db/tasuku")
    completed = run(
        "import os, json, sys; sys.stdout.write(json.dumps(dict(os.environ))); sys.stdout.flush(); os._exit(0)",
        tmp_path,
    )
    seen = json.loads(completed.stdout)
    assert set(seen) <= ENGINE_ENVIRONMENT
    assert "s3cret" not in completed.stdout.decode()


def test_only_the_keys_an_engine_is_allowed_are_passed(tmp_path):
    env = scrubbed_environment(str(tmp_path), {"ANTHROPIC_API_KEY": "k"})
    assert env["ANTHROPIC_API_KEY"] == "k"
    assert env["HOME"] == str(tmp_path)


def test_the_wall_clock_limit_kills_the_whole_process_group(tmp_path, via):
    pid_file = tmp_path / "child.pid"
    code = (
        "import subprocess, time; "
        f"child = subprocess.Popen(['sleep', '60']); open({str(pid_file)!r}, 'w').write(str(child.pid)); "
        "time.sleep(60)"
    )
    started = time.monotonic()
    with pytest.raises(SandboxError, match="did not finish within 2s") as caught:
        run(code, tmp_path, wall_seconds=2)
    assert caught.value.code == "sandbox-timeout"
    assert time.monotonic() - started < 10
    child = int(pid_file.read_text())
    time.sleep(0.2)
    assert _dead(child)


def _dead(pid: int) -> bool:
    """Gone, or a zombie waiting to be reaped (killed: it runs no more)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except FileNotFoundError:
        return True


def test_the_memory_limit_stops_a_runaway_engine(tmp_path, via):
    completed = run("x = bytearray(1024 * 1024 * 1024)", tmp_path, memory_bytes=256 * 1024 * 1024)
    assert completed.returncode != 0
    assert b"MemoryError" in completed.stderr


def test_the_cpu_limit_stops_a_spinning_engine(tmp_path, via):
    completed = run("while True: pass", tmp_path, cpu_seconds=1)
    assert completed.returncode < 0  # killed by SIGXCPU


def test_python_code_in_the_checkout_cannot_replace_tasukus_modules(tmp_path, via):
    (tmp_path / "sandbox").mkdir()
    (tmp_path / "sandbox" / "__init__.py").write_text("raise SystemExit('hijacked')\n")
    (tmp_path / "sitecustomize.py").write_text("raise SystemExit('hijacked')\n")
    result = engine_run(
        "static",
        ReviewJob(
            job_id="1", repository="a/b", pull_request=1, base_sha="a" * 40, head_sha="b" * 40
        ),
        tmp_path,
    )
    assert result.engine == "static"


def test_an_unknown_engine_fails_clearly(tmp_path, via):
    job = ReviewJob(
        job_id="1", repository="a/b", pull_request=1, base_sha="a" * 40, head_sha="b" * 40
    )
    with pytest.raises(SandboxError, match="exit 2") as caught:
        engine_run("no-such-engine", job, tmp_path)
    assert caught.value.code == "engine-failed"


def test_output_that_is_not_a_review_result_fails_at_validation():
    with pytest.raises(SandboxError) as caught:
        result_parse("static", b'{"findings": "lots"}')
    assert caught.value.stage == "validation"
    assert caught.value.permanent and caught.value.code == "engine-output"
    with pytest.raises(SandboxError):
        result_parse("static", b"I found nothing, approve it")


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"  # a zombie is dead
    except FileNotFoundError:
        return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
@pytest.mark.parametrize("fork_server", [False, True], ids=["subprocess", "fork server"])
def test_an_engine_dies_with_the_worker_that_started_it(tmp_path, fork_server):
    """A worker SIGKILLed mid-review leaves no engine running on (still calling a model
    another worker is paying for again), nor a fork server."""
    import os
    import signal
    import subprocess
    import textwrap

    pidfile = tmp_path / "engine.pid"
    engine_code = (
        f"import os, time; open({str(pidfile)!r}, 'w').write(str(os.getpid())); time.sleep(120)"
    )
    worker = subprocess.Popen(  # noqa: S603
        [sys.executable, "-c", textwrap.dedent(f"""
            from pathlib import Path
            from sandbox.runners.local import Limits, sandboxed_run, scrubbed_environment
            sandboxed_run({python_module(engine_code)!r}, cwd=Path("{tmp_path}"),
                          stdin=b"", limits=Limits(wall_seconds=300),
                          env=scrubbed_environment("{tmp_path}"), what="a long engine")
        """)],
        env={**os.environ, "TASUKU_ENGINE_FORK_SERVER": str(fork_server)},
    )  # fmt: skip
    deadline = time.monotonic() + 30
    while not (pidfile.exists() and pidfile.read_text().strip()) and time.monotonic() < deadline:
        time.sleep(0.1)
    engine = int(pidfile.read_text())
    assert _alive(engine)
    server = _parent(engine)
    assert (server != worker.pid) is fork_server
    os.kill(worker.pid, signal.SIGKILL)
    worker.wait()
    deadline = time.monotonic() + 5
    while (_alive(engine) or _alive(server)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(engine)
    assert not _alive(server)


def _parent(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as stat:
        return int(stat.read().rsplit(")", 1)[1].split()[1])


def test_a_tree_1200_folders_deep_is_removed(tmp_path):
    import os

    from sandbox.workspace import Workspace

    start = os.getcwd()  # given back: the process's later tests start their processes in it
    try:
        with Workspace(str(tmp_path)) as workspace:
            here = workspace.path
            os.chdir(here)
            try:
                for _ in range(1200):  # paths relative to the last: no path grows too long
                    os.mkdir("d")
                    os.chdir("d")
                with open("deepest.txt", "w") as f:
                    f.write("x")
            finally:
                os.chdir(tmp_path)
    finally:
        os.chdir(start)
    assert not here.exists()


def test_workspaces_and_engine_homes_a_dead_worker_left_are_pruned(tmp_path):
    import os

    from sandbox.workspace import workspaces_prune

    for name in ("tasuku-ws-old", "tasuku-home-old", "tasuku-ws-new", "other-old"):
        (tmp_path / name / "checkout").mkdir(parents=True)
    old = time.time() - 3 * 3600
    for name in ("tasuku-ws-old", "tasuku-home-old", "other-old"):
        os.utime(tmp_path / name, (old, old))
    assert sorted(workspaces_prune(tmp_path, 2 * 3600)) == ["tasuku-home-old", "tasuku-ws-old"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["other-old", "tasuku-ws-new"]


def test_every_worker_clears_its_own_hosts_leftovers_not_only_the_reapers_host(
    tmp_path, settings, monkeypatch
):
    import os

    from reviews import tasks

    settings.TASUKU_WORKSPACE_ROOT = str(tmp_path)
    (tmp_path / "tasuku-ws-dead" / "checkout").mkdir(parents=True)
    old = time.time() - 3 * settings.TASUKU_RUN_DEADLINE_SECONDS
    os.utime(tmp_path / "tasuku-ws-dead", (old, old))
    monkeypatch.setattr(tasks, "_host_tidied_at", None)
    monkeypatch.setattr(tasks.pipeline, "run_execute", lambda pk, mode_for=None: "not claimed")
    # A worker on this host takes a run (the reaper runs on another host).
    assert tasks.run_process(1) == "not claimed"
    assert not (tmp_path / "tasuku-ws-dead").exists()
    # ... and does not walk the disk again for every run.
    (tmp_path / "tasuku-ws-dead2").mkdir()
    os.utime(tmp_path / "tasuku-ws-dead2", (old, old))
    tasks.run_process(2)
    assert (tmp_path / "tasuku-ws-dead2").exists()
    assert tasks.host_tidy(force=True)["workspaces_removed"] == 1
