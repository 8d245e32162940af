"""The web server stops gracefully (`manage.py serve`: gunicorn with
tasuku/gunicorn_config.py, beside the worker). When the stop comes — SIGTERM to the group
(systemd), to the main process alone, or SIGINT to the group (Ctrl-C, which gunicorn by
itself treats as a quick shutdown that drops connections) — a webhook whose body is still
arriving is read to the end, stored and answered 202, and so is one on a connection
already accepted whose request had not begun; then everything exits within the bound."""

from __future__ import annotations

import json
import socket
import time

import pytest
import requests

from tests.fakes.github import FakeGitHub
from tests.gitworld import world_build
from tests.helpers import pull_request_payload, signed_webhook
from tests.test_production_path import free_port
from tests.workers import Worker, wait_for
from webhooks.models import WebhookDelivery

pytestmark = pytest.mark.django_db(transaction=True)


def _request(port: int, payload: dict, secret: str, delivery: str) -> bytes:
    """The raw HTTP request of a `pull_request` delivery (held to GitHub's schema)."""
    body, headers = signed_webhook("pull_request", payload, secret=secret, delivery_id=delivery)
    head = "".join(
        [
            "POST /webhooks/github HTTP/1.1\r\n",
            f"Host: 127.0.0.1:{port}\r\n",
            f"Content-Length: {len(body)}\r\n",
            *(f"{name}: {value}\r\n" for name, value in headers.items()),
            "Connection: close\r\n\r\n",
        ]
    )
    return head.encode() + body


def _answer(client: socket.socket) -> str:
    answer = client.recv(4096).decode()
    client.close()
    return answer


@pytest.mark.parametrize("how", ["group", "main", "interrupt"])
def test_a_request_in_flight_is_finished_when_the_web_server_stops(
    how, tmp_path, fake_github: FakeGitHub, test_app
):
    world = world_build(fake_github)
    payload = pull_request_payload(fake_github, world.repo, world.pull)
    body = json.dumps(payload).encode()  # as signed_webhook writes it
    port = free_port()
    server = Worker(tmp_path / "serve.log", stop_seconds=10,
                    args=("serve", "--bind", f"127.0.0.1:{port}", "--web-workers", "1"))  # fmt: skip
    try:

        def answers() -> bool:
            try:
                return requests.get(f"http://127.0.0.1:{port}/livez", timeout=2).ok
            except requests.RequestException:
                return False

        wait_for(answers, timeout=60, what="the web server", worker=server)
        server.ready()
        slow = _request(port, payload, test_app.webhook_secret, "0b1c2d3e-slow-body")
        late = _request(port, payload, test_app.webhook_secret, "0b1c2d3e-late-start")
        midway = socket.create_connection(("127.0.0.1", port), timeout=30)
        midway.sendall(slow[: len(slow) - len(body) // 2])  # headers and half the body
        waiting = socket.create_connection(("127.0.0.1", port), timeout=30)  # nothing yet
        time.sleep(0.5)  # both accepted; the first in a thread of gunicorn's, reading
        server.signal(how)
        time.sleep(1.5)
        midway.sendall(slow[len(slow) - len(body) // 2 :])
        waiting.sendall(late)
        for client in (midway, waiting):
            answer = _answer(client)
            assert answer.startswith("HTTP/1.1 202"), (answer, server.log()[-3000:])
        stored = set(WebhookDelivery.objects.values_list("delivery_id", flat=True))
        assert stored == {"0b1c2d3e-slow-body", "0b1c2d3e-late-start"}
        assert server.exited_within(14) < 14
    finally:
        server.stop()
