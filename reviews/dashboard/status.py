"""The operator's status page: deliveries (search, detail, retry), the broker, the
schedules, rate limits and missed deliveries; and `/healthz` (readiness) and `/livez`
(liveness) for load balancers."""

from __future__ import annotations

import json
from datetime import timedelta

from django.conf import settings
from django.contrib import messages
from django.contrib.admin.views.decorators import staff_member_required
from django.core.paginator import Paginator
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
from django.views.decorators.http import require_POST
from django_q.models import Schedule, Task

from repos.github import missing_settings, webhook_secret
from repos.models import Installation
from repos.refs import ref_parse
from reviews.dashboard.views import may_act
from reviews.queue.reaper import reaper_last
from reviews.queue.schedules import schedule_late, schedules_missing
from sandbox.checks import workspace_problems
from webhooks.health import broker_health, database_health, static_health
from webhooks.models import DeliveryStatus, Redelivery, WebhookDelivery
from webhooks.services import delivery_retry
from webhooks.signature import signature_valid


def _deliveries_filtered(request: HttpRequest):
    deliveries = WebhookDelivery.objects.defer("payload")
    status = request.GET.get("status", "")
    if status in DeliveryStatus.values:
        deliveries = deliveries.filter(status=status)
    query = request.GET.get("q", "").strip()
    if query:
        ref = ref_parse(query)
        if ref is None:
            deliveries = deliveries.none()  # names no repository: nothing matches
        else:
            deliveries = deliveries.filter(repository_full_name__iexact=ref.full_name)
            if ref.number:
                deliveries = deliveries.filter(pr_number=ref.number)
    return deliveries, status, query


@staff_member_required
def status(request: HttpRequest) -> HttpResponse:
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
            **_reaper(),
            "redeliveries": Redelivery.objects.all()[:20],
            "rate_limited": _rate_limited(),
            "now": timezone.now(),
            "may_act": may_act(request.user),
        },
    )


def _rate_limited() -> list:
    """Installations whose work waits for GitHub's rate limit, or waited in the last day."""
    since = timezone.now() - timedelta(days=1)
    return list(Installation.objects.filter(quiet_until__gte=since).order_by("-quiet_until")[:20])


def _schedules() -> list[dict]:
    """django-q2's schedules with the result of each one's latest task, when kept, and
    whether each is late (past its period and the scheduler's slack, not merely due)."""
    now = timezone.now()
    schedules = list(Schedule.objects.order_by("name"))
    tasks = {t.id: t for t in Task.objects.filter(id__in=[s.task for s in schedules if s.task])}
    return [
        {
            "schedule": s,
            "last": tasks.get(s.task),
            "late": schedule_late(s.next_run, s.minutes, now),
        }
        for s in schedules
    ]


def _reaper() -> dict:
    """The reaper's last turn (reviews/queue/reaper.py), and whether its next one is overdue."""
    row = reaper_last()
    period = settings.TASUKU_REAP_SECONDS
    late = row is not None and timezone.now() - row.due_at > timedelta(seconds=3 * period)
    return {"reaper": row, "reaper_late": late, "reap_seconds": period}


def healthz(request: HttpRequest) -> JsonResponse:
    """Readiness, for load balancers: 200 while this node can serve — the database
    answers, the static files are collected (else every admin page is a 500), the
    workspace root can hold a checkout, and the periodic work is registered (else no
    reaper) — else 503 with what is wrong. No login. `/livez` is liveness alone."""
    database = database_health()
    problems = {}
    if not database.ok:
        problems["database"] = database.detail
    static = static_health()
    if not static.ok:
        problems["static"] = static.detail
    workspace = workspace_problems()
    if workspace:
        problems["workspace"] = "; ".join(workspace)
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
        target = reverse("reviews:status")
    return HttpResponseRedirect(target)
