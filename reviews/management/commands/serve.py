"""Run the web server (gunicorn) and the worker (`manage.py worker`) together in the
foreground. Ctrl-C or SIGTERM stops both gracefully — gunicorn finishes the requests in
flight (within its graceful timeout), the worker hands back or finishes its runs (within
TASUKU_STOP_SECONDS) — whether the signal reaches this process alone or the whole group;
if either dies, the other is stopped too."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from django.conf import settings
from django.core.management.base import BaseCommand

from tasuku.hosts import LOOPBACK

WEB_STOP_SECONDS = 10  # gunicorn's --graceful-timeout


def where_said(bind: str) -> list[str]:
    """What to tell about the address Tasuku's links carry, when it is not simply `bind`:
    a guess at the machine's name (a wildcard bind), or another address altogether."""
    if bind != settings.TASUKU_BIND:
        return [
            f"Links Tasuku prints and posts say {settings.TASUKU_BASE_URL}, not {bind}: set "
            f"TASUKU_BIND={bind} (as `make run BIND=...` does) or TASUKU_BASE_URL."
        ]
    if not settings.TASUKU_BASE_URL_GUESSED:
        return []
    names = ", ".join(h for h in settings.ALLOWED_HOSTS if h not in LOOPBACK)
    return [
        f"Bound to every interface: Tasuku answers as {names or 'this machine'} (and "
        f"localhost), and its links say {settings.TASUKU_BASE_URL}. If people or GitHub "
        "reach this machine by another name, set TASUKU_BASE_URL to it (it is then "
        "answered too)."
    ]


class Command(BaseCommand):
    help = "Serve the web app and run the worker in one foreground process."

    def add_arguments(self, parser) -> None:
        parser.add_argument(
            "--bind", default=None, help="host:port (default: TASUKU_BIND, 127.0.0.1:8000)"
        )
        parser.add_argument("--web-workers", type=int, default=2)

    def handle(self, *args: object, bind: str | None, web_workers: int, **options: object) -> None:
        bind = bind or settings.TASUKU_BIND
        python = sys.executable
        web = [
            python, "-m", "gunicorn", "tasuku.wsgi",
            "--config", "python:tasuku.gunicorn_config",
            "--bind", bind,
            "--workers", str(web_workers),
            "--threads", "4",
            "--access-logfile", "-",
            "--graceful-timeout", str(WEB_STOP_SECONDS),
        ]  # fmt: skip
        worker = [python, "manage.py", "worker"]
        env = dict(os.environ)
        children = {
            "web": subprocess.Popen(web, env=env),  # noqa: S603
            "worker": subprocess.Popen(worker, env=env),  # noqa: S603
        }
        self.stdout.write(
            f"Tasuku is serving on {bind}: open {settings.TASUKU_BASE_URL}/ (Ctrl-C stops it)"
        )
        for line in where_said(bind):
            self.stdout.write(line)

        stopping = False

        def stop(signum: int = signal.SIGTERM, frame: object = None) -> None:
            nonlocal stopping
            stopping = True

        signal.signal(signal.SIGINT, stop)
        signal.signal(signal.SIGTERM, stop)
        exit_code = 0
        try:
            while not stopping:
                for name, child in children.items():
                    code = child.poll()
                    if code is not None:
                        self.stderr.write(f"the {name} process exited ({code}); stopping")
                        exit_code = code or 1
                        stopping = True
                        break
                time.sleep(0.5)
        finally:
            # (Sent to the group, the signal reached them already: a second SIGTERM changes
            # nothing.) Each bounds its own stop; past both, with some slack, they are killed.
            for child in children.values():
                if child.poll() is None:
                    child.send_signal(signal.SIGTERM)
            bound = max(WEB_STOP_SECONDS, settings.TASUKU_STOP_SECONDS)
            deadline = time.monotonic() + bound + 2
            for child in children.values():
                try:
                    child.wait(timeout=max(0.1, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    child.kill()
        if exit_code:
            sys.exit(exit_code)
