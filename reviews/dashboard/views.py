"""Dashboard pages (staff only): the overview, repositories, a pull request's runs and
findings, one run, workflow diagnostics, search; and /metrics."""

from __future__ import annotations

import hmac
import json

from django.conf import settings
from django.contrib import messages
from django.contrib.admin.views.decorators import staff_member_required
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse, HttpResponseForbidden, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views.decorators.http import require_POST

from repos.github import GitHubError, missing_settings
from repos.models import Repository
from repos.policy import Trigger
from repos.refs import ref_parse
from repos.services import github_usage_flush
from reviews.checks.diagnosis import diagnose
from reviews.dashboard import selectors
from reviews.dashboard.charts import daily_chart
from reviews.dashboard.metrics import metrics_text
from reviews.intake.triggers import manual_review
from reviews.models import (
    RUN_FINAL_STATES,
    Finding,
    FindingState,
    PullRequest,
    Review,
    ReviewRun,
    RunStatus,
    ThreadReply,
    Walkthrough,
)
from reviews.queue.runs import run_cancel_request, run_retry
from reviews.queue.timeline import timeline
from reviews.queue.workers import silent_after
from sandbox.contract import Severity
from webhooks.models import DeliveryStatus, WebhookDelivery

SEVERITY_RANK = {s.value: s.rank for s in Severity}


@staff_member_required
def overview(request: HttpRequest) -> HttpResponse:
    now = timezone.now()
    workers = selectors.worker_heartbeats(now, silent_after=silent_after())
    steps = selectors.first_steps(workers, app_missing=missing_settings())
    return render(
        request,
        "reviews/overview.html",
        {
            # A new install: the way to its first review, in place of tables of zeros.
            "steps": steps if not all(step.done for step in steps) else [],
            "fresh": not ReviewRun.objects.exists(),
            "runs": ReviewRun.objects.select_related("reviewer", "pull_request__repository")[:25],
            "run_counts": selectors.runs_by_status(now),
            "failures": selectors.failures_by_stage(now - selectors.WINDOWS["7d"]),
            "queue": selectors.queue_state(now),
            "workers": workers,
            "spend": selectors.spend_by_installation(now),
            "chart": daily_chart(selectors.reviews_per_day(now)),
            "failed_deliveries": WebhookDelivery.objects.filter(
                status=DeliveryStatus.FAILED
            ).count(),
            # What the budget stopped, and whether it allows a review now.
            "budget_stopped": selectors.budget_stopped(),
            "may_act": may_act(request.user),
        },
    )


@staff_member_required
def pull_request_detail(request: HttpRequest, owner: str, name: str, number: int) -> HttpResponse:
    pull_request = get_object_or_404(
        PullRequest.objects.select_related("repository"),
        repository__full_name__iexact=f"{owner}/{name}",
        number=number,
    )
    runs = pull_request.runs.select_related("reviewer").order_by("-created_at", "-pk")
    filters = {
        "state": _choice(request, "state", FindingState.values),
        "severity": _choice(request, "severity", [s.value for s in Severity]),
        "reviewer": request.GET.get("reviewer", "")[:50],
    }
    problems, reviewers = selectors.pull_request_problems(pull_request, **filters)
    return render(
        request,
        "reviews/pull_request.html",
        {
            "pull_request": pull_request,
            "runs": runs,
            "problems": problems,
            "filters": filters,
            "states": FindingState.values,
            "severities": [s.value for s in Severity],
            "reviewers": reviewers,
            "dismissals": selectors.pull_request_dismissals(pull_request),
            "tests_rows": selectors.tests_rows(pull_request),
            "may_act": may_act(request.user),
        },
    )


def _choice(request: HttpRequest, name: str, allowed: list[str]) -> str:
    value = request.GET.get(name, "")
    return value if value in allowed else ""


def may_act(user) -> bool:
    """Staff may look; acting (review now, retrying a run or a delivery) needs the one
    permission "Can change review run". Staff without it are the read-only role."""
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
    if pull_request.repository.local:
        messages.warning(
            request,
            "Not reviewed: a local review is run from the command line (`manage.py review`), "
            "where its repository is.",
        )
        return redirect("reviews:pull_request", owner=owner, name=name, number=number)
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
    repositories = Repository.objects.select_related("installation", "policy").prefetch_related(
        "policy__reviewers"
    )
    page = Paginator(repositories.order_by("full_name"), 50).get_page(request.GET.get("page"))
    return render(
        request,
        "reviews/repositories.html",
        {
            "page": page,
            "rows": selectors.repository_rows(list(page)),
            "reviewers": selectors.reviewer_rows(),
        },
    )


@staff_member_required
def run_detail(request: HttpRequest, pk: int) -> HttpResponse:
    # A run of a review pass shows its pass link's note (none for other runs: the
    # template reads a missing link as empty).
    run = get_object_or_404(
        ReviewRun.objects.select_related(
            "reviewer", "pull_request__repository", "delivery", "reviewer_revision", "pass_link"
        ),
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
    attempts = list(run.attempt_rows.all())
    now = timezone.now()
    for attempt in attempts:
        attempt.timeline = timeline(
            attempt.stage_times, attempt.started_at, attempt.finished_at, now
        )
    failed_attempts = [a for a in attempts if a.error]
    advice = None
    if run.status == RunStatus.FAILED:
        advice = diagnose(
            run.error_code or (failed_attempts[-1].error_code if failed_attempts else "")
        )
    return render(
        request,
        "reviews/run.html",
        {
            "run": run,
            "review": review,
            "findings": findings,
            "open_count": sum(1 for f in findings if f.state == "open"),
            "suppressed_count": sum(1 for f in findings if f.state == FindingState.SUPPRESSED),
            "published_count": sum(1 for f in findings if f.published),
            # A local review (`manage.py review`) posted nothing unless `--post` put it on
            # the pull request: its findings went to the command's report.
            "told_locally": run.trigger == Trigger.LOCAL
            and not (review is not None and review.github_review_url),
            "closed": closed,
            "attempts": attempts,
            "duration": duration,
            "config_json": json.dumps(run.config, indent=2, sort_keys=True),
            "revision": selectors.run_revision(run),
            "tests_rows": selectors.tests_rows(run.pull_request, head_sha=run.head_sha),
            "live": run.status not in RUN_FINAL_STATES,
            "version": _run_version(run, len(attempts)),
            "advice": advice,
            "may_act": may_act(request.user),
            "walkthrough": _walkthrough_of(run),
            "write_waiting": run.status not in RUN_FINAL_STATES
            and run.write_wait_until is not None
            and run.write_wait_until > timezone.now(),
            # Tasuku's own record of the connector calls it made for the run's engine.
            "connector_calls": list(run.connector_calls.all()),
            # People's replies in this review's threads, and what answering them cost.
            "replies": list(
                ThreadReply.objects.filter(finding__review=review)
                .select_related("finding")
                .order_by("pk")
            )
            if review is not None
            else [],
        },
    )


def _walkthrough_of(run: ReviewRun) -> Walkthrough | None:
    """The pull request's walkthrough, on the run page of a run it speaks for."""
    found = Walkthrough.objects.filter(pull_request=run.pull_request).first()
    if found is None or (found.runs or {}).get(str(run.reviewer_id)) != run.pk:
        return None
    return found


def _run_version(run: ReviewRun, attempts: int) -> str:
    """Changes whenever what the run page shows of an unfinished run changes."""
    version = f"{run.status}:{run.stage}:{attempts}:{run.attempts}"
    if run.write_wait_until is not None:  # a write's wait for the budget, shown
        version += f":{run.write_wait_until.timestamp():.0f}"
    return version


@staff_member_required
def run_status(request: HttpRequest, pk: int) -> JsonResponse:
    """What the run page polls while the run is in flight (static/tasuku.js)."""
    run = get_object_or_404(ReviewRun, pk=pk)
    attempts = run.attempt_rows.count()
    return JsonResponse(
        {
            "status": run.status,
            "stage": run.stage,
            "final": run.status in RUN_FINAL_STATES,
            "version": _run_version(run, attempts),
        }
    )


@staff_member_required
@require_POST
def run_retry_view(request: HttpRequest, pk: int) -> HttpResponse:
    run = get_object_or_404(ReviewRun, pk=pk)
    if not may_act(request.user):
        return HttpResponseForbidden("You may look at runs but not retry them.")
    if run_retry(run):
        messages.success(request, f"Run #{run.pk} queued again.")
    else:
        messages.warning(request, f"Run #{run.pk} is {run.status}; only failed runs retry.")
    return redirect("reviews:run", pk=run.pk)


@staff_member_required
@require_POST
def run_cancel_view(request: HttpRequest, pk: int) -> HttpResponse:
    """An operator stops a run: a waiting one at once, one under way at its next step."""
    run = get_object_or_404(ReviewRun, pk=pk)
    if not may_act(request.user):
        return HttpResponseForbidden("You may look at runs but not cancel them.")
    done = run_cancel_request(run.pk, f"cancelled by {request.user.get_username()}")
    if done == "already ended":
        messages.warning(request, f"Run #{run.pk} had already ended.")
    else:
        messages.success(request, f"Run #{run.pk}: {done}.")
    return redirect("reviews:run", pk=run.pk)


@staff_member_required
def diagnostics(request: HttpRequest) -> HttpResponse:
    """Why runs failed (by stage and cause, with what to do), and why deliveries did
    not become runs (admission decisions, searchable by owner/repo#n)."""
    now = timezone.now()
    window, since = selectors.since(request.GET.get("window", ""), now)
    decisions = WebhookDelivery.objects.defer("payload").exclude(decision="")
    decision = _choice(request, "decision", ["admitted", "skipped"])
    if decision:
        decisions = decisions.filter(decision=decision)
    text = request.GET.get("q", "").strip()
    query = ref_parse(text)
    if query is not None:
        decisions = decisions.filter(repository_full_name__iexact=query.full_name)
        if query.number:
            decisions = decisions.filter(pr_number=query.number)
    elif text:
        decisions = decisions.none()  # not owner/repo#n: nothing matches
    page = Paginator(decisions.order_by("-received_at", "-pk"), 50).get_page(
        request.GET.get("page")
    )
    return render(
        request,
        "reviews/diagnostics.html",
        {
            "window": window,
            "windows": list(selectors.WINDOWS),
            "failures": selectors.failures_by_stage(since, sample=200),
            "page": page,
            "decision": decision,
            "query": text,
        },
    )


@staff_member_required
def search(request: HttpRequest) -> HttpResponse:
    """`owner/repo#n` (or a pull request's URL) opens the pull request's page; a
    repository lists its pull requests; an unknown pull request shows what the webhook
    deliveries for it said, which is usually why it was not reviewed."""
    text = request.GET.get("q", "").strip()
    query = ref_parse(text)
    context: dict = {"text": text, "query": query, "search_text": text}
    if query is None:
        return render(request, "reviews/search.html", context)
    repository = Repository.objects.filter(full_name__iexact=query.full_name).first()
    context["repository"] = repository
    if query.number:
        pull_request = PullRequest.objects.filter(
            repository__full_name__iexact=query.full_name, number=query.number
        ).first()
        if pull_request is not None:
            return redirect(
                "reviews:pull_request",
                owner=pull_request.repository.owner,
                name=pull_request.repository.name,
                number=pull_request.number,
            )
        context["deliveries"] = (
            WebhookDelivery.objects.defer("payload")
            .filter(repository_full_name__iexact=query.full_name, pr_number=query.number)
            .order_by("-received_at")[:20]
        )
    elif repository is not None:
        context["pulls"] = selectors.repository_pull_requests(repository)
    return render(request, "reviews/search.html", context)


def metrics(request: HttpRequest) -> HttpResponse:
    """Prometheus text format. A staff session may read it; a scraper sends
    `Authorization: Bearer <TASUKU_METRICS_TOKEN>`."""
    token = settings.TASUKU_METRICS_TOKEN
    sent = request.headers.get("Authorization", "")
    allowed = (request.user.is_authenticated and request.user.is_staff) or (
        bool(token) and hmac.compare_digest(sent.encode(), f"Bearer {token}".encode())
    )
    if not allowed:
        response = HttpResponse("metrics need a staff login or the metrics token\n", status=401)
        response["WWW-Authenticate"] = 'Bearer realm="tasuku-metrics"'
        return response
    github_usage_flush()  # this process's own calls, before reading everyone's
    return HttpResponse(metrics_text(), content_type="text/plain; version=0.0.4; charset=utf-8")
