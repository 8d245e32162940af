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
from django.contrib import messages
from django.contrib.admin.views.decorators import staff_member_required
from django.core.paginator import Paginator
from django.db import DatabaseError
from django.db.models import Count
from django.http import (
    HttpRequest,
    HttpResponse,
    HttpResponseForbidden,
    HttpResponseRedirect,
    JsonResponse,
)
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.utils import timezone
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST
from django_q.models import Schedule, Task

from repos.github import missing_settings, webhook_secret
from webhooks.health import broker_health, database_health, static_health
from webhooks.models import DeliveryStatus, Redelivery, WebhookDelivery
from webhooks.services import delivery_record, delivery_retry
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
                self._thread = threading.Thread(target=self._run, name="tasuku-body-watchdog",
                                                daemon=True)  # fmt: skip
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
    missing = missing_settings()
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

    if not signature_valid(webhook_secret(), body, request.headers.get("X-Hub-Signature-256")):
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
    try:
        recorded = delivery_record(
            hook_id=hook_id, delivery_id=delivery_id, event=event, text=text, payload=payload,
            body=body, signature=request.headers.get("X-Hub-Signature-256", ""),
        )  # fmt: skip
    except DatabaseError as exc:
        # Not stored: say so (503, not 500) so GitHub's delivery log shows a failure that
        # can be redelivered — GitHub does not retry by itself.
        logger.error("webhook %s (%s) not stored: the database is unavailable: %s",
                     delivery_id, event, exc)  # fmt: skip
        response = _error(503, "the database is unavailable; the delivery was not stored")
        response["Retry-After"] = "60"
        return response
    if not recorded.created:
        return JsonResponse({"status": "duplicate", "delivery": delivery_id}, status=200)
    if event == "ping":
        return JsonResponse({"status": "pong", "delivery": delivery_id}, status=200)
    return JsonResponse({"status": "accepted", "delivery": delivery_id}, status=202)


# --- Status page (staff) ----------------------------------------------------------------


def _deliveries_filtered(request: HttpRequest):
    deliveries = WebhookDelivery.objects.defer("payload")
    status = request.GET.get("status", "")
    if status in DeliveryStatus.values:
        deliveries = deliveries.filter(status=status)
    query = request.GET.get("q", "").strip()
    if query:
        repo, _, number = query.partition("#")
        deliveries = deliveries.filter(repository_full_name__iexact=repo.strip())
        if number.strip().isdigit():
            deliveries = deliveries.filter(pr_number=int(number))
    return deliveries, status, query


@staff_member_required
def status(request: HttpRequest) -> HttpResponse:
    from reviews.views import may_act

    deliveries, current, query = _deliveries_filtered(request)
    page = Paginator(deliveries, 50).get_page(request.GET.get("page"))
    counts = dict(WebhookDelivery.objects.values_list("status").annotate(n=Count("*")).order_by())
    return render(
        request,
        "webhooks/status.html",
        {
            "page": page,
            "current": current,
            "query": query,
            "counts": [(s, counts.get(s, 0)) for s in DeliveryStatus.values],
            "configured": not missing_settings(),
            "missing": missing_settings(),
            "database": database_health(),
            "broker": broker_health(),
            "schedules": _schedules(),
            "redeliveries": Redelivery.objects.all()[:20],
            "rate_limited": _rate_limited(),
            "now": timezone.now(),
            "may_act": may_act(request.user),
        },
    )


def _rate_limited() -> list:
    """Installations whose work waits for GitHub's rate limit, or waited in the last day."""
    from datetime import timedelta

    from django.apps import apps

    since = timezone.now() - timedelta(days=1)
    return list(
        apps.get_model("repos", "Installation")
        .objects.filter(quiet_until__gte=since)
        .order_by("-quiet_until")[:20]
    )


def _schedules() -> list[dict]:
    """django-q2's schedules with the result of each one's latest task, when kept, and
    whether each is late (past its period and the scheduler's slack, not merely due)."""
    from reviews.schedules import schedule_late

    now = timezone.now()
    schedules = list(Schedule.objects.order_by("name"))
    tasks = {t.id: t for t in Task.objects.filter(id__in=[s.task for s in schedules if s.task])}
    return [
        {
            "schedule": s,
            "last": tasks.get(s.task),
            "late": schedule_late(s.next_run, s.minutes, now),
        }  # fmt: skip
        for s in schedules
    ]


def healthz(request: HttpRequest) -> JsonResponse:
    """Readiness, for load balancers: 200 while this node can serve — the database
    answers, the static files are collected (else every admin page is a 500), and the
    periodic work is registered (else no reaper) — else 503 with what is wrong. No
    login. `/livez` is liveness alone."""
    from reviews.schedules import schedules_missing

    database = database_health()
    problems = {}
    if not database.ok:
        problems["database"] = database.detail
    static = static_health()
    if not static.ok:
        problems["static"] = static.detail
    if database.ok:
        missing = schedules_missing()
        if missing:
            problems["schedules"] = (
                f"not registered: {', '.join(missing)} (run `manage.py migrate` or "
                "`manage.py setup_schedules`)"
            )
    body = {"status": "unavailable" if problems else "ok", "database": database.detail}
    body.update(problems)
    return JsonResponse(body, status=503 if problems else 200)


def livez(request: HttpRequest) -> JsonResponse:
    """Liveness: the process answers (a restart would not help anything /healthz finds)."""
    return JsonResponse({"status": "ok"})


@staff_member_required
def delivery_detail(request: HttpRequest, pk: int) -> HttpResponse:
    from reviews.views import may_act

    delivery = get_object_or_404(WebhookDelivery, pk=pk)
    payload = json.dumps(delivery.payload, indent=2, sort_keys=True)
    raw = delivery.raw_body
    return render(
        request,
        "webhooks/delivery.html",
        {
            "delivery": delivery,
            "payload": payload[:200_000],
            "truncated": len(payload) > 200_000,
            "body_bytes": len(raw),
            "body_verifies": bool(raw)
            and signature_valid(webhook_secret(), raw, delivery.signature),
            "runs": delivery.runs.select_related("reviewer", "pull_request__repository"),
            "may_act": may_act(request.user),
        },
    )


@staff_member_required
@require_POST
def delivery_retry_view(request: HttpRequest, pk: int) -> HttpResponse:
    from reviews.views import may_act

    delivery = get_object_or_404(WebhookDelivery, pk=pk)
    if not may_act(request.user):
        return HttpResponseForbidden("You may look at deliveries but not retry them.")
    if delivery_retry(delivery):
        messages.success(request, f"Delivery {delivery.delivery_id} queued again.")
    else:
        messages.warning(
            request,
            f"Delivery {delivery.delivery_id} is {delivery.status}; only failed ones retry.",
        )
    target = request.POST.get("next", "")
    if not url_has_allowed_host_and_scheme(target, allowed_hosts={request.get_host()}):
        target = reverse("webhooks:status")
    return HttpResponseRedirect(target)
