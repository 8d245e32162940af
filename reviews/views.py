"""Dashboard pages (staff only): the overview, a pull request's runs, one run."""

from __future__ import annotations

import json

from django.contrib.admin.views.decorators import staff_member_required
from django.db.models import Count
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render

from reviews.budget import month_start
from reviews.models import BudgetAlert, PullRequest, Review, ReviewRun, RunStatus
from sandbox.contract import Severity
from webhooks.models import DeliveryStatus, WebhookDelivery

SEVERITY_RANK = {s.value: s.rank for s in Severity}


@staff_member_required
def overview(request: HttpRequest) -> HttpResponse:
    runs = ReviewRun.objects.select_related("reviewer", "pull_request__repository")[:50]
    run_counts = dict(ReviewRun.objects.values_list("status").annotate(n=Count("id")).order_by())
    failed_deliveries = WebhookDelivery.objects.filter(status=DeliveryStatus.FAILED).count()
    alerts = BudgetAlert.objects.filter(month=month_start()).select_related("installation")
    return render(
        request,
        "reviews/overview.html",
        {
            "runs": runs,
            "run_counts": [(s, run_counts.get(s, 0)) for s in RunStatus.values],
            "failed_deliveries": failed_deliveries,
            "budget_alerts": alerts,
        },
    )


@staff_member_required
def pull_request_detail(request: HttpRequest, owner: str, name: str, number: int) -> HttpResponse:
    pull_request = get_object_or_404(
        PullRequest.objects.select_related("repository"),
        repository__full_name__iexact=f"{owner}/{name}",
        number=number,
    )
    runs = pull_request.runs.select_related("reviewer")
    return render(
        request, "reviews/pull_request.html", {"pull_request": pull_request, "runs": runs}
    )


@staff_member_required
def run_detail(request: HttpRequest, pk: int) -> HttpResponse:
    run = get_object_or_404(
        ReviewRun.objects.select_related("reviewer", "pull_request__repository", "delivery"),
        pk=pk,
    )
    review = Review.objects.filter(run=run).first()
    findings = list(review.findings.all()) if review else []
    findings.sort(
        key=lambda f: (f.state != "open", -SEVERITY_RANK.get(f.severity, 0), f.path, f.start_line)
    )
    duration = None
    if run.started_at and run.finished_at:
        duration = (run.finished_at - run.started_at).total_seconds()
    return render(
        request,
        "reviews/run.html",
        {
            "run": run,
            "review": review,
            "findings": findings,
            "open_count": sum(1 for f in findings if f.state == "open"),
            "attempts": run.attempt_rows.all(),
            "duration": duration,
            "config_json": json.dumps(run.config, indent=2, sort_keys=True),
        },
    )
