"""Dashboard pages (staff only): the overview, a pull request's runs, one run."""

from __future__ import annotations

import json

from django.contrib import messages
from django.contrib.admin.views.decorators import staff_member_required
from django.db.models import Count
from django.http import HttpRequest, HttpResponse, HttpResponseForbidden
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from repos.github import GitHubError
from repos.models import Repository, Reviewer
from reviews.budget import month_start
from reviews.models import BudgetAlert, Finding, PullRequest, Review, ReviewRun, RunStatus
from reviews.outcomes import figures
from reviews.triggers import manual_review
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
    latest = {}
    for finding in (
        Finding.objects.filter(pull_request=pull_request)
        .select_related("review__reviewer")
        .order_by("review__created_at", "pk")
    ):
        latest[(finding.review.reviewer_id, finding.fingerprint)] = finding
    findings = sorted(
        latest.values(),
        key=lambda f: (f.state != "open", -SEVERITY_RANK.get(f.severity, 0), f.path),
    )
    return render(
        request,
        "reviews/pull_request.html",
        {
            "pull_request": pull_request,
            "runs": runs,
            "findings": findings,
            "may_act": may_act(request.user),
        },
    )


def may_act(user) -> bool:
    """Staff may look; acting (review now, retry) needs the change-run permission."""
    return user.has_perm("reviews.change_reviewrun")


@staff_member_required
@require_POST
def pull_request_review(request: HttpRequest, owner: str, name: str, number: int) -> HttpResponse:
    pull_request = get_object_or_404(
        PullRequest.objects.select_related("repository__installation"),
        repository__full_name__iexact=f"{owner}/{name}",
        number=number,
    )
    if not may_act(request.user):
        return HttpResponseForbidden("You may look at reviews but not start them.")
    full = request.POST.get("full") == "1"
    try:
        runs, refusal = manual_review(pull_request, full=full)
    except GitHubError as exc:
        messages.error(request, f"GitHub refused: {exc.message}")
        return redirect(request.path.rsplit("review", 1)[0])
    if refusal:
        messages.warning(request, f"Not reviewed: {refusal}.")
    else:
        kind = "Full review" if full else "Review"
        messages.success(request, f"{kind} queued: run {', '.join(f'#{r.pk}' for r in runs)}.")
    return redirect("reviews:pull_request", owner=owner, name=name, number=number)


@staff_member_required
def repositories(request: HttpRequest) -> HttpResponse:
    rows = []
    for repository in Repository.objects.select_related("installation", "policy").order_by(
        "full_name"
    ):
        last = (
            ReviewRun.objects.filter(pull_request__repository=repository)
            .order_by("-created_at")
            .first()
        )
        rows.append(
            {"repository": repository, "figures": figures(repository=repository), "last": last}
        )
    reviewers = [
        {"reviewer": r, "figures": figures(reviewer=r)} for r in Reviewer.objects.order_by("slug")
    ]
    return render(request, "reviews/repositories.html", {"rows": rows, "reviewers": reviewers})


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
    # Earlier findings this run closed (fixed or outdated at its head), with the reason.
    closed = []
    if review is not None:
        closed = list(
            Finding.objects.filter(
                pull_request=run.pull_request,
                review__reviewer=run.reviewer,
                resolved_in_sha=run.head_sha,
                review__created_at__lt=review.created_at,
            ).order_by("path", "start_line")
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
            "closed": closed,
            "attempts": run.attempt_rows.all(),
            "duration": duration,
            "config_json": json.dumps(run.config, indent=2, sort_keys=True),
        },
    )
