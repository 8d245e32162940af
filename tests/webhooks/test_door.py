"""The intake's WSGI door (webhooks/wsgi.py) as a WSGI server calls it: the answers of
the view without Django's request handling around it, and what that handling did that
still has to happen."""

from __future__ import annotations

import io
import json
import socket
import threading
import time

import pytest
from django.core.signals import request_finished

from tasuku.doors import door_for
from tests.helpers import payload, post_webhook, signed_webhook, wsgi_serve
from webhooks.intake import _Watchdog
from webhooks.models import WebhookDelivery


@pytest.fixture
def secret(fake_github, test_app) -> str:
    return test_app.webhook_secret


def _body() -> bytes:
    """A `pull_request` delivery's body as GitHub sends it (a recorded one)."""
    return json.dumps(payload("pull_request", "opened")).encode()


def _environ(body: bytes, secret: str, *, stream: io.BytesIO | None = None, **extra) -> dict:
    """The WSGI environ of a delivery of `body` as `pull_request`, held to GitHub's schema
    as `post_webhook` holds what it sends (tests/helpers.py, `signed_webhook`)."""
    _, headers = signed_webhook("pull_request", body, secret=secret, hook_id="7")
    return {
        "REQUEST_METHOD": "POST",
        "PATH_INFO": "/webhooks/github",
        "SCRIPT_NAME": "",
        "QUERY_STRING": "",
        "SERVER_NAME": "testserver",
        "SERVER_PORT": "80",
        "SERVER_PROTOCOL": "HTTP/1.1",
        "wsgi.url_scheme": "http",
        "wsgi.input": stream or io.BytesIO(body),
        "wsgi.errors": io.StringIO(),
        "CONTENT_LENGTH": str(len(body)),
        "CONTENT_TYPE": headers["Content-Type"],
        **{f"HTTP_{name.upper().replace('-', '_')}": value
           for name, value in headers.items() if name != "Content-Type"},
        **extra,
    }  # fmt: skip


def _serve(environ: dict) -> tuple[int, dict[str, str], bytes]:
    status, headers, content = wsgi_serve(environ)
    return status, dict(headers), content


@pytest.mark.django_db
def test_the_door_answers_only_a_post_to_the_intake():
    assert door_for({"REQUEST_METHOD": "POST", "PATH_INFO": "/webhooks/github"}) is not None
    assert door_for({"REQUEST_METHOD": "GET", "PATH_INFO": "/webhooks/github"}) is None
    assert door_for({"REQUEST_METHOD": "POST", "PATH_INFO": "/webhooks/github/"}) is None
    assert door_for({"REQUEST_METHOD": "POST", "PATH_INFO": "/admin/"}) is None


@pytest.mark.django_db
def test_a_delivery_through_the_door_is_stored_and_answered_as_json(secret):
    body = _body()
    status, headers, content = _serve(_environ(body, secret))
    assert status == 202
    assert headers["Content-Type"] == "application/json"
    assert headers["Content-Length"] == str(len(content))
    assert json.loads(content)["status"] == "accepted"
    assert WebhookDelivery.objects.get().raw_body == body


@pytest.mark.django_db
def test_the_door_reads_no_further_than_the_content_length_of_a_raw_stream(secret):
    """A server that hands over the connection's stream as it is (wsgiref, `runserver`)
    leaves what follows the body in it: the door must not wait for it, nor store it."""
    body = _body()
    stream = io.BytesIO(body + b"GET /next HTTP/1.1\r\n")
    status, _, _ = _serve(_environ(body, secret, stream=stream))
    assert status == 202
    assert WebhookDelivery.objects.get().raw_body == body
    assert stream.read() == b"GET /next HTTP/1.1\r\n"


@pytest.mark.django_db
def test_a_body_without_a_length_is_empty_as_for_the_view(secret):
    """Django reads as much of a body as its Content-Length says, none without one (a
    chunked upload); the door does the same. GitHub always sends the length."""
    body = _body()
    environ = _environ(body, secret, **{"wsgi.input_terminated": True})
    del environ["CONTENT_LENGTH"]
    status, _, _ = _serve(environ)
    assert status == 401  # the signature of an empty body does not match
    assert not WebhookDelivery.objects.exists()


@pytest.mark.django_db
def test_the_door_answers_with_the_headers_the_views_middleware_adds(secret):
    from django.test import Client

    body = _body()
    _, door, _ = _serve(_environ(body, secret))
    view = post_webhook(Client(), "pull_request", body, secret=secret)
    for name in (
        "X-Content-Type-Options",
        "Referrer-Policy",
        "Cross-Origin-Opener-Policy",
        "X-Frame-Options",
    ):
        assert door.get(name) == view.headers.get(name), name


@pytest.mark.django_db
def test_an_error_behind_the_door_is_a_logged_500_and_the_request_still_finishes(
    secret, monkeypatch, caplog
):
    finished = []

    def on_finished(**kwargs):
        finished.append(kwargs["sender"])

    def broken(*args, **kwargs):
        raise RuntimeError("a bug")

    monkeypatch.setattr("webhooks.intake.delivery_record", broken)
    request_finished.connect(on_finished)
    try:
        status, _, content = _serve(_environ(_body(), secret))
    finally:
        request_finished.disconnect(on_finished)
    assert status == 500
    assert "internal error" in json.loads(content)["error"]
    assert finished, "request_finished was not sent: the database connection is never given back"
    # Logged with its exception (exc_info: exc_text is only filled once a handler formats
    # the record, which depends on what configured logging before this test).
    assert any(
        r.exc_info and "a bug" in str(r.exc_info[1])
        for r in caplog.records
        if r.name == "django.request"
    )
    assert not WebhookDelivery.objects.exists()


@pytest.mark.django_db
def test_other_requests_on_the_intakes_path_are_djangos():
    from django.test import Client

    assert Client().get("/webhooks/github").status_code == 405  # the view's require_POST


def test_the_watchdog_cuts_off_a_body_that_stops_arriving_and_sleeps_when_idle():
    watchdog = _Watchdog()
    watchdog.IDLE_TICKS = 2  # asleep after half a second without a watched socket

    def cut_within(seconds: float) -> float:
        ours, theirs = socket.socketpair()
        try:
            started = time.monotonic()
            key = watchdog.watch(ours, seconds)
            assert ours.recv(10) == b""  # blocked until the watchdog shut the reading side
            watchdog.release(key)
            return time.monotonic() - started
        finally:
            ours.close()
            theirs.close()

    assert 0.3 <= cut_within(0.3) < 0.3 + 5 * _Watchdog.TICK
    deadline = time.monotonic() + 5
    while not watchdog._sleeping and time.monotonic() < deadline:
        time.sleep(0.05)
    assert watchdog._sleeping, "the watchdog kept ticking with nothing to watch"
    assert 0.3 <= cut_within(0.3) < 0.3 + 5 * _Watchdog.TICK  # woken by the next watch

    # A body that arrives in time is not cut, and its entry is gone once released.
    ours, theirs = socket.socketpair()
    key = watchdog.watch(ours, 5)
    threading.Timer(0.1, theirs.sendall, args=(b"{}",)).start()
    assert ours.recv(10) == b"{}"
    watchdog.release(key)
    assert key not in watchdog._watched
    ours.close()
    theirs.close()
