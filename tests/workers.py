"""Real worker processes (`manage.py qcluster`) for tests that need them."""

from __future__ import annotations

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
    """A qcluster subprocess on the test database, talking to the fake GitHub."""

    def __init__(self, log: Path, *, lease: int = 3, heartbeat: int = 1, workers: int = 2) -> None:
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
        }
        self._log = open(log, "w")  # noqa: SIM115
        self.process = subprocess.Popen(  # noqa: S603
            [sys.executable, "manage.py", "qcluster"],
            cwd=ROOT,
            env=env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def log(self) -> str:
        self._log.flush()
        return self.log_path.read_text()

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=3)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        self._log.close()


def wait_for(
    condition: Callable[[], object], *, timeout: float, what: str, worker: Worker | None = None
):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.2)
    tail = ("\n--- worker log ---\n" + worker.log()[-6000:]) if worker else ""
    raise AssertionError(f"timed out after {timeout}s waiting for {what}{tail}")
