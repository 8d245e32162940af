"""The gate: a run's check run on its head. It goes `in_progress` when the review starts and
concludes from every open finding on the pull request at that head, whatever path the
run took (`gate_complete`); a finding dismissed between pushes concludes it again
(`gate_refresh`). A run that ends before publication still completes its check, never
`success` (`run_check_conclude`)."""

from __future__ import annotations

import logging
from typing import Any

from repos.github import GitHubError
from repos.policy import CHECKLESS_TRIGGERS, EffectiveConfig
from reviews.checks.checkruns import dashboard_url, details_url, run_check_ensure
from reviews.checks.conclusions import REFUSED, check_final, conclusion_send
from reviews.core.context import Context
from reviews.models import (
    Dismissal,
    Finding,
    FindingState,
    PullRequest,
    Review,
    ReviewRun,
    ReviewState,
    RunStatus,
    Stage,
)
from reviews.queue import runs
from reviews.scope.coverage import entries_of, unreviewed
from reviews.text.rendering import (
    check_conclusion,
    check_output,
)
from reviews.validation.findings import OPEN
from sandbox.errors import StageError

logger = logging.getLogger(__name__)


def reports_on_check(run: ReviewRun) -> bool:
    """Whether the run reports on a check run of its head (some kinds of run report
    elsewhere: repos.policy.CHECKLESS_TRIGGERS)."""
    return run.trigger not in CHECKLESS_TRIGGERS


def gate_complete(
    ctx: Context,
    review: Review,
    open_now: list[Finding],
    *,
    shortfall: str = "",
    limitations: tuple[str, ...] | list[str] = (),
    also: dict[str, Any] | None = None,
) -> None:
    """Complete the check run from every open finding of this reviewer on the pull
    request at this head (the review's own and those it carried), whatever path the
    run took, and from what was reviewed: a head not reviewed in depth (`shortfall`
    says why) or with a changed file its coverage ledger names as not reviewed
    (`review.coverage`) is never `success`. `also`: the review's other fields, written
    with its shortfall (one UPDATE)."""
    Review.objects.filter(pk=review.pk).update(shortfall=shortfall, **(also or {}))
    ledger = entries_of(review.coverage)
    fail_on = ctx.config.fail_check_on
    conclusion = check_conclusion(
        open_now, fail_on, in_full=not shortfall and not unreviewed(ledger)
    )
    title, summary = check_output(
        open_now,
        conclusion,
        fail_on,
        shortfall=shortfall,
        limitations=limitations,
        ledger=ledger,
    )
    check_complete(ctx, conclusion, title, summary)


def _check_id(ctx: Context) -> int:
    return run_check_ensure(ctx.run, created=False, installation=ctx.repository.installation)


def check_in_progress(ctx: Context) -> None:
    """The check run says the review is under way, with its Details link. A check run
    created `in_progress` by this run, whose link is still the run page, already says
    so: nothing is sent (a review's write saved)."""
    run = ctx.run
    if not reports_on_check(run):
        return
    if (
        run.check_run_id
        and run.check_status == "in_progress"
        and details_url(run) == dashboard_url(run)
    ):
        return
    try:
        ctx.gateway.check_run_update(
            ctx.repo,
            check_run_id=_check_id(ctx),
            status="in_progress",
            details_url=details_url(run),
        )
        runs.run_check_in_progress(run.pk)
        run.check_status = "in_progress"
    except GitHubError as exc:
        raise StageError(
            str(exc), permanent=exc.permanent, stage=Stage.PUBLICATION, code=exc.code
        ) from exc


def check_complete(ctx: Context, conclusion: str, title: str, summary: str) -> None:
    """The run's check run concludes: recorded on the run, then sent. GitHub not taking
    it now does not fail the review (the reaper sends it again until GitHub accepts it:
    reviews/checks/conclusions.py); a refusal does."""
    if not reports_on_check(ctx.run):
        return
    if check_final(ctx.run.pk, conclusion, title, summary) == REFUSED:
        error = ReviewRun.objects.values_list("check_error", flat=True).get(pk=ctx.run.pk)
        raise StageError(error, permanent=True, stage=Stage.PUBLICATION, code="check-refused")


def run_check_conclude(run_pk: int) -> None:
    """Send a conclusion that is due; else complete the check run of a run that ended
    without reaching publication: failed (`failure`) or superseded while it waited
    (`cancelled`) — never `success`."""
    run = ReviewRun.objects.filter(pk=run_pk).first()
    if run is None or not reports_on_check(run):
        return  # no check run
    if run.check_due_at is not None:
        conclusion_send(run_pk)
    elif run.status == RunStatus.CANCELLED and run.check_run_id:  # else never shown on GitHub
        title = f"Superseded by {run.superseded_by[:7]}" if run.superseded_by else "Cancelled"
        check_final(run.pk, "cancelled", title, f"This commit was not reviewed: {run.reason}.")
    elif run.status == RunStatus.FAILED:
        check_final(
            run.pk,
            "failure",
            f"Review failed at {run.stage or 'its start'}",
            f"Tasuku could not review this commit: {run.reason}\n\n"
            f"An operator can retry it from the [run page]({dashboard_url(run)}).",
        )


def gate_refresh(pull_request_pk: int, reviewer_pk: int) -> str:
    """A finding was dismissed between pushes: conclude the check run of the pull
    request's current head again, from the findings open on it now. Only the last
    completed run of that head is touched; a run still to come concludes by itself."""
    pull_request = PullRequest.objects.select_related("repository__installation").get(
        pk=pull_request_pk
    )
    run = (
        ReviewRun.objects.filter(
            pull_request=pull_request,
            reviewer_id=reviewer_pk,
            head_sha=pull_request.head_sha,
            status=RunStatus.COMPLETED,
            check_run_id__isnull=False,
            review__isnull=False,
        )
        .exclude(trigger__in=CHECKLESS_TRIGGERS)
        .select_related("review")
        .order_by("-pk")
        .first()
    )
    if run is None:
        return "no completed review of the head"
    review = run.review
    dismissed = dict(
        Dismissal.objects.filter(pull_request=pull_request).values_list("fingerprint", "login")
    )
    for finding in review.findings.filter(state=OPEN, fingerprint__in=dismissed):
        Finding.objects.filter(pk=finding.pk).update(
            state=FindingState.SUPPRESSED,
            suppression_reason=f"dismissed by {dismissed[finding.fingerprint]}",
        )
    open_now = list(review.findings.filter(state=OPEN))
    config = EffectiveConfig.model_validate(run.config)
    shortfall = review.shortfall
    if review.state != ReviewState.COMPLETE and not shortfall:
        shortfall = "this head was not reviewed in full (the run page says why)."
    ledger = entries_of(review.coverage)
    conclusion = check_conclusion(
        open_now, config.fail_check_on, in_full=not shortfall and not unreviewed(ledger)
    )
    title, summary = check_output(
        open_now,
        conclusion,
        config.fail_check_on,
        shortfall=shortfall,
        limitations=review.limitations,
        ledger=ledger,
    )
    if (conclusion, title[:255]) == (run.check_conclusion, run.check_title):
        return "unchanged"
    check_final(run.pk, conclusion, title, summary)
    return conclusion
