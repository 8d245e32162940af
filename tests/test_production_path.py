"""The production steps as the README writes them, on a fresh database: `migrate` (which
registers the schedules), `collectstatic`, then the web server with DEBUG off — and the
admin, the dashboard's login and their stylesheets answer, and /healthz says ready."""

from __future__ import annotations

import os
import re
import secrets
import socket
import subprocess
import sys
import time
from pathlib import Path

import requests

ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_migrate_collectstatic_and_serve_with_debug_off_give_a_ready_node(tmp_path):
    port = free_port()
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "GITHUB_"))},
        "DATABASE_URL": f"sqlite:///{tmp_path / 'prod.sqlite3'}",
        "SECRET_KEY": secrets.token_urlsafe(50),
        "DEBUG": "false",
        "TASUKU_STATIC_ROOT": str(tmp_path / "static"),
        "TASUKU_BASE_URL": f"http://127.0.0.1:{port}",
    }
    manage = [sys.executable, "manage.py"]
    for step in (["migrate", "--noinput"], ["collectstatic", "--noinput"]):
        done = subprocess.run([*manage, *step], cwd=ROOT, env=env, capture_output=True,
                              text=True, timeout=300)  # fmt: skip
        assert done.returncode == 0, done.stderr[-2000:]
    web = subprocess.Popen(  # noqa: S603
        [sys.executable, "-m", "gunicorn", "tasuku.wsgi",
         "--config", "python:tasuku.gunicorn_config", "--bind", f"127.0.0.1:{port}",
         "--workers", "1", "--threads", "2", "--log-level", "warning"],
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60  # (a loaded machine boots gunicorn slowly)
        while True:
            try:
                health = requests.get(f"{base}/healthz", timeout=15)
                break
            except (requests.ConnectionError, requests.Timeout):
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        assert health.status_code == 200, health.text  # schedules present, static collected
        login = requests.get(f"{base}/admin/login/", timeout=15)
        assert login.status_code == 200
        css = re.search(r'href="(/static/admin/css/base\.[0-9a-f]+\.css)"', login.text)
        assert css, "the admin's stylesheet is not served under its hashed name"
        assert requests.get(base + css.group(1), timeout=15).status_code == 200
        dashboard = requests.get(f"{base}/", timeout=15, allow_redirects=True)
        assert dashboard.status_code == 200 and "/admin/login/" in dashboard.url
        ours = re.search(r'href="(/static/tasuku\.[0-9a-f]+\.css)"', dashboard.text)
        assert ours is None or requests.get(base + ours.group(1), timeout=15).status_code == 200
    finally:
        web.terminate()
        web.wait(timeout=20)
