"""A process loads with the garbage collector off, then freezes what it loaded and
collects as usual (tasuku/loading.py): `manage.py`, gunicorn's workers, the fork server
(tests/sandbox/test_forkserver.py)."""

from __future__ import annotations

import gc
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tasuku import gunicorn_config, loading

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def collector():
    """The test process's collector as it was, given back."""
    was = gc.isenabled()
    yield
    gc.enable() if was else gc.disable()


def test_what_is_loaded_is_frozen_and_the_collector_is_on_again(collector):
    frozen = gc.get_freeze_count()
    with loading.loading():
        assert not gc.isenabled()
        kept = [[index] for index in range(1000)]
    assert gc.isenabled()
    assert gc.get_freeze_count() >= frozen + len(kept)


def test_a_load_that_fails_still_leaves_the_collector_on(collector):
    with pytest.raises(ImportError), loading.loading():
        import tasuku.no_such_module  # noqa: F401
    assert gc.isenabled()


def test_a_gunicorn_worker_loads_with_the_collector_off_and_serves_with_it_on(collector):
    class Worker:
        def handle_exit(self, *args):
            pass

    interrupt = signal.getsignal(signal.SIGINT)
    try:
        gunicorn_config.post_fork(None, Worker())
        assert not gc.isenabled()  # the application is loaded now
        gunicorn_config.post_worker_init(Worker())
        assert gc.isenabled()
    finally:
        signal.signal(signal.SIGINT, interrupt)


def test_a_manage_py_command_runs_with_the_collector_on_and_what_was_loaded_frozen():
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    code = "import gc; print(gc.isenabled(), gc.get_freeze_count())"
    done = subprocess.run(  # noqa: S603
        [sys.executable, "manage.py", "shell", "-c", code],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    enabled, frozen = done.stdout.splitlines()[-1].split()
    assert enabled == "True"
    assert int(frozen) > 100_000  # Django and the apps
