"""A client that sends a delivery's body too slowly is answered 408 and cut off, under
the same server `manage.py serve` runs (gunicorn), so its thread is free for GitHub's
next delivery. (A buffering proxy in front is the real defence: benchmarks/slow_clients.py
measures both.)"""

from __future__ import annotations

import os
import secrets
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.fakes.github import rsa_keypair

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def one_thread_server(tmp_path):
    port = free_port()
    private, _ = rsa_keypair()
    env = {
        **os.environ,
        "DATABASE_URL": f"sqlite:///{tmp_path / 'web.sqlite3'}",
        "SECRET_KEY": secrets.token_urlsafe(40),
        "GITHUB_APP_ID": "1",
        "GITHUB_PRIVATE_KEY": private,
        "GITHUB_WEBHOOK_SECRET": "s",
        "GITHUB_APP_SLUG": "t",
        "TASUKU_WEBHOOK_READ_SECONDS": "1",
    }
    env.pop("DJANGO_SETTINGS_MODULE", None)
    web = subprocess.Popen(  # noqa: S603
        [sys.executable, "-m", "gunicorn", "tasuku.wsgi", "--bind", f"127.0.0.1:{port}",
         "--workers", "1", "--threads", "1", "--log-level", "warning"],
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        for _ in range(300):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.05)
        yield port
    finally:
        web.terminate()
        web.wait(timeout=20)


def test_a_body_that_does_not_arrive_in_time_is_answered_408_and_the_thread_is_freed(
    one_thread_server,
):
    port = one_thread_server
    slow = socket.create_connection(("127.0.0.1", port), timeout=10)
    slow.sendall(
        b"POST /webhooks/github HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        b"X-GitHub-Event: ping\r\nX-GitHub-Delivery: d\r\nX-Hub-Signature-256: sha256=00\r\n"
        b"Content-Length: 1000\r\n\r\n{"
    )
    started = time.monotonic()
    answer = b""
    while chunk := slow.recv(4096):  # ... and then it stops sending
        answer += chunk
    assert answer.startswith(b"HTTP/1.1 408")
    assert b"the body did not arrive in time" in answer
    # The deadline is 1 s and the server closes the connection (a hung one would end only
    # at the socket's 10 s timeout); a loaded machine may take seconds to get there.
    assert time.monotonic() - started < 9
    # The only thread answers the next request (a page that is not there: an answer).
    fresh = socket.create_connection(("127.0.0.1", port), timeout=5)
    fresh.sendall(b"GET /nothing HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
    assert fresh.recv(64).startswith(b"HTTP/1.1 404")
