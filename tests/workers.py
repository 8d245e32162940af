"""Real worker processes (`manage.py worker`) for tests that need them."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from django.conf import settings
from django.db import connection

ROOT = Path(__file__).resolve().parent.parent


class Worker:
    """A `manage.py worker` subprocess (its own process group) on the test database,
    talking to the fake GitHub (and the fake model APIs, when a test's fixture set
    them in the environment). `pid1`: run as PID 1 of a PID namespace of its own, as in a
    container without an init (needs root and `unshare`). `args`: another command
    (`serve`, which runs gunicorn beside the worker). `database_port`: reach the test's
    PostgreSQL database through this port on 127.0.0.1 (a `tests.dbproxy` to cut)."""

    def __init__(
        self,
        log: Path,
        *,
        lease: int = 3,
        heartbeat: int = 1,
        workers: int = 2,
        stop_seconds: int = 10,
        reap_seconds: int = 1,
        pid1: bool = False,
        args: tuple[str, ...] = ("worker",),
        database_port: int | None = None,
    ) -> None:
        self.log_path = log
        env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "tests.worker_settings",
            "TASUKU_TEST_DB_NAME": str(connection.settings_dict["NAME"]),
            "SECRET_KEY": settings.SECRET_KEY,
            "GITHUB_API_URL": settings.GITHUB_API_URL,
            "GITHUB_APP_ID": settings.GITHUB_APP_ID,
            "GITHUB_APP_SLUG": settings.GITHUB_APP_SLUG,
            "GITHUB_PRIVATE_KEY": settings.GITHUB_PRIVATE_KEY,
            "GITHUB_WEBHOOK_SECRET": settings.GITHUB_WEBHOOK_SECRET,
            "TASUKU_RUN_LEASE_SECONDS": str(lease),
            "TASUKU_RUN_HEARTBEAT_SECONDS": str(heartbeat),
            "TASUKU_WORKERS": str(workers),
            "TASUKU_STOP_SECONDS": str(stop_seconds),
            "TASUKU_REAP_SECONDS": str(reap_seconds),
        }
        if database_port is not None:
            env["TASUKU_TEST_DB_PORT"] = str(database_port)
        self.stop_seconds = stop_seconds
        command = [sys.executable, "manage.py", *args]
        if pid1:
            command = ["unshare", "--pid", "--fork", "--mount-proc", *command]
        self._log = open(log, "w")  # noqa: SIM115
        self.process = subprocess.Popen(  # noqa: S603
            command,
            cwd=ROOT,
            env=env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    @property
    def main_pid(self) -> int:
        """The worker's main process (under `pid1`, the child `unshare` started: PID 1
        inside its namespace)."""
        if self.process.args[0] != "unshare":
            return self.process.pid
        found = wait_for(lambda: _children(self.process.pid), timeout=10, what="PID 1")
        return found[0]

    def ready(self, timeout: float = 30) -> None:
        """Wait until the cluster runs (its workers are ready for work)."""
        wait_for(lambda: "running." in self.log(), timeout=timeout, what="the worker to start",
                 worker=self)  # fmt: skip

    def signal(self, how: str) -> float:
        """Send the stop: "group" (SIGTERM to every process, as systemd and `kill --
        -PGID` do), "main" (SIGTERM to the main process alone, as tini or Docker do),
        "interrupt" (SIGINT to the group: Ctrl-C). Returns when it was sent."""
        sent = time.monotonic()
        if how == "group":
            os.killpg(self.process.pid, signal.SIGTERM)
        elif how == "main":
            os.kill(self.main_pid, signal.SIGTERM)
        elif how == "interrupt":
            os.killpg(self.process.pid, signal.SIGINT)
        else:
            raise ValueError(how)
        return sent

    def exited_within(self, timeout: float) -> float:
        """Seconds until every process of the worker's group had exited (fails past
        `timeout`)."""
        start = time.monotonic()
        self.process.wait(timeout=timeout)
        wait_for(lambda: not _group_alive(self.process.pid), timeout=max(0.5, timeout),
                 what="the worker's processes to exit", worker=self)  # fmt: skip
        return time.monotonic() - start

    def log(self) -> str:
        self._log.flush()
        return self.log_path.read_text()

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=self.stop_seconds + 2)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)  # anything left behind
        self._log.close()


def _children(pid: int) -> list[int]:
    try:
        return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def _group_alive(pgid: int) -> bool:
    """Whether a process of the group still runs (zombies do not count)."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[2]) == pgid and fields[0] != "Z":
            return True
    return False


def wait_for(
    condition: Callable[[], object], *, timeout: float, what: str, worker: Worker | None = None
):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.05)
    tail = ("\n--- worker log ---\n" + worker.log()[-6000:]) if worker else ""
    raise AssertionError(f"timed out after {timeout}s waiting for {what}{tail}")
