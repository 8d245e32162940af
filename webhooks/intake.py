"""The webhook intake: verify, store, answer. Nothing else happens here.

No GitHub call, no policy lookup, no parsing beyond the headers and JSON validity: the
worker does the rest, so GitHub's 10-second answer deadline is never at risk.

Written once for both of its doors: the WSGI door production serves
(`webhooks/wsgi.py`, in front of Django's request handling) and the Django view
(`webhooks/views.py`, for any other way Django is served). Each hands `intake` the
request's WSGI environ and a way to read the body, and writes the `Answer` back.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
import socket
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.db import DatabaseError, InterfaceError, OperationalError, connection

from webhooks import signing
from webhooks.services import delivery_record
from webhooks.signature import signature_valid

logger = logging.getLogger(__name__)

# The one path GitHub posts to (webhooks/urls.py routes the Django view to it too).
INTAKE_PATH = "/webhooks/github"


@dataclass(frozen=True)
class Answer:
    status: int
    body: dict[str, Any]
    headers: tuple[tuple[str, str], ...] = field(default=())

    def content(self) -> bytes:
        return json.dumps(self.body).encode()


def _error(status: int, message: str, **extra: object) -> Answer:
    return Answer(status, {"error": message, **extra})


def _not_json(constant: str) -> None:
    """`NaN`, `Infinity` and `-Infinity`: Python's json reads them, JSON has no such thing."""
    raise ValueError(f"{constant} is not a JSON value")


# A `\\ud…` escape, where half a UTF-16 pair can hide (a regular expression finds it
# four times faster than two substring searches of a 27 KB payload).
_SURROGATE_ESCAPE = re.compile(r"\\u[dD]")


def _lone_surrogate(payload: object) -> bool:
    """Whether a string anywhere in `payload` holds half a surrogate pair (walked without
    recursion; only when the text has a `\\ud…` escape at all)."""
    pending = [payload]
    while pending:
        item = pending.pop()
        if isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                return True
        elif isinstance(item, dict):
            pending.extend(item.keys())
            pending.extend(item.values())
        elif isinstance(item, list):
            pending.extend(item)
    return False


class _Watchdog:
    """One thread per process that cuts off the reading side of sockets whose deadline
    has passed (a blocked read then ends at once, as at the end of the body).

    It looks every TICK seconds while any socket is watched, and sleeps until the next
    one is watched when none has been for a while: a request only adds and removes its
    entry under a lock. (Woken for every request, as it once was, the thread took the
    interpreter lock from the request threads twice a request: about a tenth of the
    intake's time under load, benchmarks/webhook_intake.py.) A slow body is cut off
    within TICK of its deadline."""

    TICK = 0.25
    IDLE_TICKS = 40  # ten seconds without a watched socket: sleep until the next one

    def __init__(self) -> None:
        self._watched: dict[int, tuple[float, socket.socket]] = {}
        self._cv = threading.Condition()
        self._next_key = 0
        self._sleeping = False
        self._thread: threading.Thread | None = None

    def watch(self, sock: socket.socket, seconds: float) -> int:
        with self._cv:
            self._next_key += 1
            key = self._next_key
            self._watched[key] = (time.monotonic() + seconds, sock)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="tasuku-body-watchdog", daemon=True
                )
                self._thread.start()
            elif self._sleeping:
                self._sleeping = False
                self._cv.notify()
            return key

    def release(self, key: int) -> None:
        with self._cv:
            self._watched.pop(key, None)

    def _run(self) -> None:
        empty = 0
        while True:
            with self._cv:
                if empty >= self.IDLE_TICKS:
                    self._sleeping = True
                    while self._sleeping:
                        self._cv.wait()
                    empty = 0
                self._cv.wait(self.TICK)
                now = time.monotonic()
                due = [key for key, (deadline, _) in self._watched.items() if deadline <= now]
                socks = [self._watched.pop(key)[1] for key in due]
                empty = 0 if self._watched else empty + 1
            for sock in socks:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RD)


_watchdog = _Watchdog()


def _body_read(
    meta: Mapping[str, Any], read: Callable[[int], bytes], size: int, seconds: float
) -> bytes:
    """Up to `size` bytes of the body, all within `seconds` (TimeoutError otherwise).

    Under gunicorn the connection's socket is at hand: when the time is up, its reading
    side is shut (the read ends; the answer can still be written, and the server closes
    the connection rather than wait for the rest). Elsewhere (a test client, another
    server) the body is read as the server gives it. A buffering proxy in front
    (deploy/nginx/tasuku.conf) is what keeps slow clients away from the threads at all;
    this bounds the damage when there is none."""
    sock = meta.get("gunicorn.socket")
    if sock is None:
        return read(size)
    started = time.monotonic()
    key = _watchdog.watch(sock, seconds)
    try:
        body = read(size)
    except Exception as exc:  # re-raised: only said to be a timeout when it came after one
        if time.monotonic() - started >= seconds:
            raise TimeoutError from exc
        raise
    finally:
        _watchdog.release(key)
    declared = int(meta.get("CONTENT_LENGTH") or 0)
    if len(body) < min(declared, size) and time.monotonic() - started >= seconds:
        raise TimeoutError
    return body


def intake(meta: Mapping[str, Any], read: Callable[[int], bytes]) -> Answer:
    """Take one POST to the intake: `meta` is its WSGI environ (headers as `HTTP_…`),
    `read(n)` reads up to n bytes of its body.

    1. Refuse when Tasuku has no webhook secret yet (503), a body over the size bound
       (413) or one that does not arrive in time (408).
    2. Verify `X-Hub-Signature-256` over the raw bytes (401).
    3. Check the event and delivery headers and that the body is a JSON object (400).
    4. Store the delivery and its doorbell in one statement (a copy already stored:
       200 `duplicate`; the database unavailable: 503, so GitHub shows a failure that
       can be redelivered).
    """

    def refused(status: int, message: str, **extra: object) -> Answer:
        """The answer to a request not stored, logged at INFO with why and what GitHub's
        headers said (never the body): a refused delivery is found in the log."""
        logger.info(
            "webhook refused (%d): %s [delivery %r, event %r, hook %r]",
            status, message, meta.get("HTTP_X_GITHUB_DELIVERY", "-")[:64],
            meta.get("HTTP_X_GITHUB_EVENT", "-")[:64], meta.get("HTTP_X_GITHUB_HOOK_ID", "-")[:32],
            extra={"status": status, "reason": message,
                   "delivery": meta.get("HTTP_X_GITHUB_DELIVERY", "")[:64],
                   "event": meta.get("HTTP_X_GITHUB_EVENT", "")[:64]},
        )  # fmt: skip
        return _error(status, message, **extra)

    missing = signing.missing()
    if missing:
        return refused(503, "not configured", missing=missing)

    limit = settings.TASUKU_WEBHOOK_MAX_BYTES
    try:
        declared = int(meta.get("CONTENT_LENGTH") or 0)
    except ValueError:
        return refused(400, "invalid Content-Length")
    if declared > limit:
        return refused(413, f"payload larger than {limit} bytes")
    # Read the raw bytes ourselves so the size bound is ours, and the time bound: a
    # client sending its body slowly holds a thread only so long.
    try:
        body = _body_read(meta, read, limit + 1, settings.TASUKU_WEBHOOK_READ_SECONDS)
    except TimeoutError:
        return refused(408, "the body did not arrive in time")
    if len(body) > limit:
        return refused(413, f"payload larger than {limit} bytes")

    signature = meta.get("HTTP_X_HUB_SIGNATURE_256")
    if not signature_valid(signing.secret(), body, signature):
        return refused(401, "missing or invalid X-Hub-Signature-256")

    event = meta.get("HTTP_X_GITHUB_EVENT", "").strip()
    delivery_id = meta.get("HTTP_X_GITHUB_DELIVERY", "").strip()
    if not event or not delivery_id:
        return refused(400, "X-GitHub-Event and X-GitHub-Delivery headers are required")
    if len(event) > 64 or len(delivery_id) > 64:
        return refused(400, "X-GitHub-Event or X-GitHub-Delivery is too long")
    try:
        text = body.decode()
        payload = json.loads(text, parse_constant=_not_json)
    except UnicodeDecodeError:
        return refused(400, "body is not UTF-8")
    except RecursionError:
        return refused(400, "body is not valid JSON: nested too deeply")
    except ValueError as exc:
        return refused(400, f"body is not valid JSON: {exc}")
    if not isinstance(payload, dict):
        return refused(400, "body is not a JSON object")
    if _SURROGATE_ESCAPE.search(text) and _lone_surrogate(payload):
        # JSON can escape half of a UTF-16 pair; no database column can hold it.
        return refused(400, "body is not valid JSON: a string holds a lone surrogate")

    hook_id = meta.get("HTTP_X_GITHUB_HOOK_ID", "").strip()[:32]

    def record():
        return delivery_record(
            hook_id=hook_id,
            delivery_id=delivery_id,
            event=event,
            text=text,
            payload=payload,
            body=body,
            signature=signature or "",
        )

    # Django checks a kept connection with a SELECT 1 before a request's first
    # statement; here the one statement is the check: a connection the database dropped
    # fails it, and it is tried once more on a new one (a copy already stored writes
    # nothing, so a retry after a lost answer is harmless).
    connection.health_check_done = True
    try:
        try:
            recorded = record()
        except (OperationalError, InterfaceError):
            if connection.in_atomic_block:
                raise  # a caller's transaction: not this view's connection to replace
            connection.close()
            recorded = record()
    except DatabaseError as exc:
        # Not stored: say so (503, not 500) so GitHub's delivery log shows a failure that
        # can be redelivered — GitHub does not retry by itself.
        logger.error(
            "webhook %s (%s) not stored: the database is unavailable: %s", delivery_id, event, exc
        )
        return Answer(
            503,
            {"error": "the database is unavailable; the delivery was not stored"},
            (("Retry-After", "60"),),
        )
    if not recorded.created:
        return Answer(200, {"status": "duplicate", "delivery": delivery_id})
    if event == "ping":
        return Answer(200, {"status": "pong", "delivery": delivery_id})
    return Answer(202, {"status": "accepted", "delivery": delivery_id})
