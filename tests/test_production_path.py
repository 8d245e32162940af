"""The production steps as the README writes them, on a fresh database: `migrate` (which
registers the schedules), `collectstatic`, then the web server with DEBUG off — and the
admin, the dashboard's login and their stylesheets answer, and /healthz says ready. And
the image's own health check (the Dockerfile's HEALTHCHECK command, as shipped) against a
server configured by the README's Compose `.env`, word for word."""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import requests

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
DOCKERFILE = (ROOT / "Dockerfile").read_text()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def clean_environment() -> dict[str, str]:
    """This process's environment without the settings a test must not inherit."""
    return {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("DJANGO_", "GITHUB_", "TASUKU_", "SECRET_KEY", "ALLOWED_HOSTS"))
        and k not in ("DATABASE_URL", "DEBUG")
    }


def manage(env: dict[str, str], *step: str) -> None:
    done = subprocess.run([sys.executable, "manage.py", *step], cwd=ROOT, env=env,  # noqa: S603
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]


@contextmanager
def gunicorn(env: dict[str, str], port: int) -> Iterator[subprocess.Popen]:
    """The web process as the image and the units start it, on `port`, until /livez
    answers (a loaded machine boots gunicorn slowly)."""
    web = subprocess.Popen(  # noqa: S603
        [sys.executable, "-m", "gunicorn", "tasuku.wsgi",
         "--config", "python:tasuku.gunicorn_config", "--bind", f"127.0.0.1:{port}",
         "--workers", "1", "--threads", "2", "--log-level", "warning"],
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                requests.get(f"http://127.0.0.1:{port}/livez", timeout=15)
                break
            except (requests.ConnectionError, requests.Timeout):
                if time.monotonic() > deadline or web.poll() is not None:
                    raise
                time.sleep(0.1)
        yield web
    finally:
        web.terminate()
        web.wait(timeout=20)


def test_migrate_collectstatic_and_serve_with_debug_off_give_a_ready_node(tmp_path):
    port = free_port()
    env = {
        **clean_environment(),
        "DATABASE_URL": f"sqlite:///{tmp_path / 'prod.sqlite3'}",
        "SECRET_KEY": secrets.token_urlsafe(50),
        "DEBUG": "false",
        "TASUKU_STATIC_ROOT": str(tmp_path / "static"),
        "TASUKU_BASE_URL": f"http://127.0.0.1:{port}",
    }
    manage(env, "migrate", "--noinput")
    manage(env, "collectstatic", "--noinput")
    base = f"http://127.0.0.1:{port}"
    with gunicorn(env, port):
        health = requests.get(f"{base}/healthz", timeout=15)
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
    # Scripts are kept compressed beside themselves; source maps (read by a browser's
    # developer tools only) are not compressed at each collectstatic.
    bundles = tmp_path / "static" / "drf_spectacular_sidecar" / "swagger-ui-dist"
    assert (bundles / "swagger-ui-bundle.js.gz").exists()
    assert (bundles / "swagger-ui-bundle.js.map").exists()
    assert not list(bundles.glob("*.map.gz"))


def readme_compose_env() -> dict[str, str]:
    """The `.env` the README's Compose steps write, its placeholders filled as a reader
    would: a generated key, and a password with the characters URLs reserve."""
    block = re.search(r"cat > \.env <<'ENV'\n(.*?)\nENV\n", README, re.S)
    assert block, "the README's Compose steps no longer write a .env"
    values = {}
    for line in block.group(1).splitlines():
        name, _, value = line.partition("=")
        if value.startswith("<"):
            value = {
                "SECRET_KEY": secrets.token_urlsafe(50),
                "POSTGRES_PASSWORD": "p/ss@w:rd#1?",
            }[name]
        values[name] = value
    return values


def image_environment(root: Path) -> dict[str, str]:
    """The Dockerfile's ENV settings, with each of the image's paths under `root` (the
    Dockerfile's RUN makes the folders; here, the test does)."""
    found = {}
    for block in re.findall(r"^ENV ((?:.*\\\n)*.*)$", DOCKERFILE, re.M):
        for name, value in re.findall(r"(\w+)=(\S+)", block.replace("\\\n", " ")):
            found[name] = str(root / value.lstrip("/")) if value.startswith("/") else value
    for name in ("TASUKU_WORKSPACE_ROOT", "TASUKU_CHECKOUT_CACHE"):
        Path(found[name]).mkdir(parents=True)
    return found


def test_the_images_health_check_passes_on_a_server_configured_by_the_readmes_env(
    tmp_path, migrated_sqlite
):
    """Compose runs the web container with the README's `.env`, whose ALLOWED_HOSTS names
    the public host only; the image's HEALTHCHECK asks 127.0.0.1 and must be answered 200,
    with no error logged for it. (Its database is a copy of one the run migrated once:
    migrating a fresh one is the test above; its `migrate` finds nothing left to do.)"""
    shutil.copyfile(migrated_sqlite, tmp_path / "compose.sqlite3")
    port = free_port()
    env = {
        **clean_environment(),
        **image_environment(tmp_path),
        **readme_compose_env(),
        # The database Compose gives the container, here a file of the test's.
        "DATABASE_URL": f"sqlite:///{tmp_path / 'compose.sqlite3'}",
    }
    assert env["ALLOWED_HOSTS"] == "tasuku.example.com"
    manage(env, "migrate", "--noinput")
    manage(env, "collectstatic", "--noinput", "--verbosity", "0")
    command = json.loads(re.search(r"HEALTHCHECK .*\n\s+CMD (\[.*\])", DOCKERFILE).group(1))
    assert command[0] == "python" and "127.0.0.1:8000/healthz" in command[-1]
    command = [sys.executable, *command[1:-1], command[-1].replace(":8000", f":{port}")]
    with gunicorn(env, port) as web:
        checked = subprocess.run(command, env=env, capture_output=True, text=True, timeout=30)  # noqa: S603
        assert checked.returncode == 0, checked.stderr
        # The public host is still the only one any other page answers.
        other = requests.get(f"http://127.0.0.1:{port}/admin/login/", timeout=15)
        assert other.status_code == 400
        named = requests.get(
            f"http://127.0.0.1:{port}/admin/login/",
            headers={"Host": "tasuku.example.com", "X-Forwarded-Proto": "https"},
            timeout=15,
        )
        assert named.status_code == 200
        web.terminate()
        web.wait(timeout=20)
        logged = web.stderr.read()
    assert "healthz" not in logged, logged
