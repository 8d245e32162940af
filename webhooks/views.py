"""`POST /webhooks/github`: verify, store, answer. Nothing else happens here.

No GitHub call, no policy lookup, no parsing beyond the headers and JSON validity: the
worker does the rest, so GitHub's 10-second answer deadline is never at risk.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import json
import logging
import socket
import threading
import time

from django.conf import settings
from django.db import DatabaseError, InterfaceError, OperationalError, connection
from django.http import (
    HttpRequest,
    JsonResponse,
)
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from webhooks import signing
from webhooks.services import delivery_record
from webhooks.signature import signature_valid

logger = logging.getLogger(__name__)


def _not_json(constant: str) -> None:
    """`NaN`, `Infinity` and `-Infinity`: Python's json reads them, JSON has no such thing."""
    raise ValueError(f"{constant} is not a JSON value")


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


def _error(status: int, message: str, **extra: object) -> JsonResponse:
    return JsonResponse({"error": message, **extra}, status=status)


class _Watchdog:
    """One thread per process that cuts off the reading side of sockets whose deadline
    has passed (a blocked read then ends at once, as at the end of the body)."""

    def __init__(self) -> None:
        self._due: list[tuple[float, int, socket.socket]] = []
        self._cv = threading.Condition()
        self._ids = itertools.count()
        self._thread: threading.Thread | None = None

    def watch(self, sock: socket.socket, seconds: float) -> int:
        with self._cv:
            key = next(self._ids)
            heapq.heappush(self._due, (time.monotonic() + seconds, key, sock))
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="tasuku-body-watchdog", daemon=True
                )
                self._thread.start()
            self._cv.notify()
            return key

    def release(self, key: int) -> None:
        with self._cv:
            self._due = [entry for entry in self._due if entry[1] != key]
            heapq.heapify(self._due)

    def _run(self) -> None:
        while True:
            with self._cv:
                while not self._due or self._due[0][0] > time.monotonic():
                    self._cv.wait(None if not self._due else self._due[0][0] - time.monotonic())
                _, _, sock = heapq.heappop(self._due)
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RD)


_watchdog = _Watchdog()


def _body_read(request: HttpRequest, size: int, seconds: float) -> bytes:
    """Up to `size` bytes of the body, all within `seconds` (TimeoutError otherwise).

    Under gunicorn the connection's socket is at hand: when the time is up, its reading
    side is shut (the read ends; the answer can still be written, and the server closes
    the connection rather than wait for the rest). Elsewhere (a test client, another
    server) the body is read as the server gives it. A buffering proxy in front
    (deploy/nginx/tasuku.conf) is what keeps slow clients away from the threads at all;
    this bounds the damage when there is none."""
    sock = request.META.get("gunicorn.socket")
    if sock is None:
        return request.read(size)
    started = time.monotonic()
    key = _watchdog.watch(sock, seconds)
    try:
        body = request.read(size)
    except Exception as exc:
        if time.monotonic() - started >= seconds:
            raise TimeoutError from exc
        raise
    finally:
        _watchdog.release(key)
    declared = int(request.META.get("CONTENT_LENGTH") or 0)
    if len(body) < min(declared, size) and time.monotonic() - started >= seconds:
        raise TimeoutError
    return body


@csrf_exempt
@require_POST
def github_webhook(request: HttpRequest) -> JsonResponse:
    missing = signing.missing()
    if missing:
        return _error(503, "not configured", missing=missing)

    limit = settings.TASUKU_WEBHOOK_MAX_BYTES
    try:
        declared = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        return _error(400, "invalid Content-Length")
    if declared > limit:
        return _error(413, f"payload larger than {limit} bytes")
    # Read the raw bytes ourselves (not request.body) so the size bound is ours, and
    # the time bound: a client sending its body slowly holds a thread only so long.
    try:
        body = _body_read(request, limit + 1, settings.TASUKU_WEBHOOK_READ_SECONDS)
    except TimeoutError:
        return _error(408, "the body did not arrive in time")
    if len(body) > limit:
        return _error(413, f"payload larger than {limit} bytes")

    if not signature_valid(signing.secret(), body, request.headers.get("X-Hub-Signature-256")):
        return _error(401, "missing or invalid X-Hub-Signature-256")

    event = request.headers.get("X-GitHub-Event", "").strip()
    delivery_id = request.headers.get("X-GitHub-Delivery", "").strip()
    if not event or not delivery_id:
        return _error(400, "X-GitHub-Event and X-GitHub-Delivery headers are required")
    if len(event) > 64 or len(delivery_id) > 64:
        return _error(400, "X-GitHub-Event or X-GitHub-Delivery is too long")
    try:
        text = body.decode()
        payload = json.loads(text, parse_constant=_not_json)
    except UnicodeDecodeError:
        return _error(400, "body is not UTF-8")
    except RecursionError:
        return _error(400, "body is not valid JSON: nested too deeply")
    except ValueError as exc:
        return _error(400, f"body is not valid JSON: {exc}")
    if not isinstance(payload, dict):
        return _error(400, "body is not a JSON object")
    if ("\\ud" in text or "\\uD" in text) and _lone_surrogate(payload):
        # JSON can escape half of a UTF-16 pair; no database column can hold it.
        return _error(400, "body is not valid JSON: a string holds a lone surrogate")

    hook_id = request.headers.get("X-GitHub-Hook-ID", "").strip()[:32]

    def record():
        return delivery_record(
            hook_id=hook_id,
            delivery_id=delivery_id,
            event=event,
            text=text,
            payload=payload,
            body=body,
            signature=request.headers.get("X-Hub-Signature-256", ""),
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
        response = _error(503, "the database is unavailable; the delivery was not stored")
        response["Retry-After"] = "60"
        return response
    if not recorded.created:
        return JsonResponse({"status": "duplicate", "delivery": delivery_id}, status=200)
    if event == "ping":
        return JsonResponse({"status": "pong", "delivery": delivery_id}, status=200)
    return JsonResponse({"status": "accepted", "delivery": delivery_id}, status=202)
