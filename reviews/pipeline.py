"""The review pipeline (docs/architecture.md, *One review, end to end*), one run at a time:

guards → check run in progress → workspace (clone, diff, sanitise) → filters → engine in
the sandbox → validation gate → persist → publish → check run completed.

Each stage is a function over plain data; this module is the edge that reads rows,
calls GitHub through the gateway and the sandbox through its runner. A failure carries
the stage it happened in; `run_execute` turns it into a retry or a failed run.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import transaction
from django.urls import reverse
from django.utils import timezone

from repos import github
from repos.github import CheckRunOutput, GitHubError, GitHubGateway
from repos.models import RepoMemory
from repos.policy import EffectiveConfig, ReviewerConfig, Runner, Trigger
from reviews import actions, engines, stages, threads
from reviews.budget import Budget, budget_alert, installation_budget
from reviews.conclusions import REFUSED, check_final, conclusion_send
from reviews.diff import diff_parse
from reviews.escaping import code_span
from reviews.markers import is_ours
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
from reviews.passes.author import author_bot_login
from reviews.reconcile import ACCEPTED, CURRENT, Decision
from reviews.rendering import (
    BODY_ONLY_NOTE,
    ReviewContext,
    check_conclusion,
    check_output,
    comment_payload,
    location,
    markers_in,
    review_body,
    run_marker,
)
from reviews.runs import (
    Heartbeat,
    Held,
    LeaseLost,
    run_attempt_failed,
    run_claim,
    run_finish,
    run_stage,
)
from reviews.services import run_check_ensure
from reviews.triage import Verdict
from reviews.validation import OPEN, History, Validated
from sandbox.agent.triage import model_triage
from sandbox.contract import ReviewJob, ReviewResult
from sandbox.errors import StageError
from sandbox.workspace import Checkout, Workspace

logger = logging.getLogger(__name__)


@dataclass
class Context:
    run: ReviewRun
    held: Held
    beat: Heartbeat
    config: EffectiveConfig
    gateway: GitHubGateway
    repository_info: Any = None  # the repository as GitHub described it when cloned
    reused_from: int | None = None  # the run whose engine result this run reuses

    @property
    def repository(self):
        return self.run.pull_request.repository

    @property
    def where(self) -> dict:
        repository = self.repository
        return {
            "installation_id": repository.installation.github_id,
            "repository_id": repository.github_id,
            "full_name": repository.full_name,
        }

    def stage(self, stage: str) -> None:
        self.beat.check()
        run_stage(self.held, stage)
        self.run.stage = stage


def dashboard_url(run: ReviewRun) -> str:
    return settings.TASUKU_BASE_URL + reverse("reviews:run", args=[run.pk])


def details_url(run: ReviewRun) -> str:
    """The check run's Details link: the GitHub Actions run that reviews it, if one
    does, else the run's page on the dashboard."""
    return run.actions_run_url or dashboard_url(run)


def run_execute(run_pk: int) -> str:
    """Claim a run and take it through the pipeline. Returns what became of it."""
    held = run_claim(run_pk)
    if held is None:
        return "not claimed"
    run = ReviewRun.objects.select_related(
        "pull_request__repository__installation", "reviewer"
    ).get(pk=run_pk)
    with Heartbeat(held) as beat:
        try:
            context = Context(
                run=run,
                held=held,
                beat=beat,
                config=EffectiveConfig.model_validate(run.config),
                gateway=github.gateway(),
            )
            outcome = pipeline(context)
        except LeaseLost:
            logger.warning("run %s: lease lost; another worker has it", run_pk)
            return "lease lost"
        except Exception as exc:
            stage = getattr(exc, "stage", "") or run.stage or Stage.ADMISSION
            outcome = run_attempt_failed(held, exc, stage=stage)
            if outcome == RunStatus.FAILED:
                run_check_conclude(run_pk)
    if run.review_pass_id:
        # The pass this run belongs to may be complete now.
        from reviews.passes.services import pass_after_run

        pass_after_run(run.review_pass_id)
    return outcome


def pipeline(ctx: Context) -> str:
    run = ctx.run
    ctx.stage(Stage.ADMISSION)
    stop = guards(ctx)
    if stop is not None:
        return stop
    check_in_progress(ctx)
    previous = previous_head(run)

    ctx.stage(Stage.CLONE)
    with Workspace(settings.TASUKU_WORKSPACE_ROOT) as workspace:
        checkout = clone(ctx, workspace, previous, scope_since(run, previous))
        reviewer = next(r for r in ctx.config.reviewers if r.slug == run.reviewer.slug)
        core = stages.prepare(checkout, ctx.config, reviewer)
        _record_scope(run, checkout, core)
        installation = ctx.repository.installation
        budget = installation_budget(installation)
        budget_alert(installation, budget)
        earlier = threads.earlier_open(threads.previous_review(run, previous), run.head_sha)
        job = stages.job_build(
            core, checkout=checkout, reviewer=reviewer, config=ctx.config, job_id=str(run.pk),
            repository=ctx.repository.full_name, number=run.pull_request.number,
            title=run.pull_request.title, deadline_seconds=int(settings.TASUKU_SANDBOX_TIMEOUT),
            memory=repository_memory(ctx.repository), price=engines.model_price(reviewer.model),
            earlier=engines.earlier_for_job(
                earlier, answers=pass_answers(run, earlier), rulings=pass_rulings(run, earlier)
            ),
        )  # fmt: skip
        digest = engines.job_digest(job, run.reviewer)
        ReviewRun.objects.filter(pk=run.pk).update(
            omitted=[o.model_dump() for o in job.omitted], job_digest=digest
        )
        # The engine has run for this run already (an earlier attempt, or the Actions
        # runner posted it), or for the same job before: its result, paid once.
        stored = actions.stored_result(run)
        if stored is None:
            stored, ctx.reused_from = result_reusable(run, digest)
        if stored is None and (
            core.stopped or stages.budget_gate(core, budget, ctx.config, reviewer)
        ):
            return stop_early(ctx, core, checkout, budget, previous)

        ctx.stage(Stage.SANDBOX)
        if stored is None and model_triaged(ctx, core, reviewer, job):
            return stop_early(ctx, core, checkout, budget, previous)
        if stored is not None:
            result = stored
        elif reviewer.runner == Runner.ACTIONS:
            status = actions.dispatch(ctx, job)
            check_dispatched(ctx)
            return status
        else:
            result = engines.engine_run(
                run.reviewer,
                reviewer,
                job,
                checkout.root,
                run_name=f"tasuku-run-{run.pk}-{ctx.held.attempt}",
            )
            ReviewRun.objects.filter(pk=run.pk).update(
                runner_result=result.model_dump(mode="json"), result_received_at=timezone.now()
            )
    if result.incomplete:
        return stop_incomplete(ctx, core, result, earlier, checkout)

    # Validation sees the pull request's history: what people dismissed, what earlier
    # reviews raised, and what was already there when the previous review looked.
    ctx.stage(Stage.VALIDATION)
    talk = threads.conversation_read(
        ctx.gateway, ctx.where, run.pull_request.number, run, earlier, ctx.gateway.app_slug()
    )
    since_previous = (
        diff_parse(checkout.previous_diff) if checkout.previous_diff is not None else None
    )
    history = History(
        dismissed=talk.dismissed,
        earlier=frozenset(f.fingerprint for f in earlier),
        since_previous=since_previous,
        untouched_as_nits=bool(run.review_pass_id),
        positions=threads.positions(run, earlier, talk.dismissed, since_previous, previous),
    )
    validated = stages.validate(core, result, ctx.config, history)
    review = persist(ctx.run, core, result=result)
    found_again = {v.fingerprint for v in validated if v.category != "invalid"}
    # The engine ruled that an earlier finding is still there (though it did not raise
    # it again in the same words): it stays open, its thread untouched.
    earlier_ids = {f.fingerprint for f in earlier}
    found_again |= {r.id for r in result.rulings if r.still_open and r.id in earlier_ids}
    decisions = threads.decide(
        run,
        earlier,
        found_again,
        since_previous=since_previous,
        incremental=bool(checkout.incremental_since),
    )
    if run.review_pass_id:
        decisions = disputes_ruled(run, result, decisions, found_again)
    threads.carry(review, earlier, decisions, talk, since_previous=since_previous)

    ctx.stage(Stage.PUBLICATION)
    open_now = list(review.findings.filter(state=OPEN))
    approve, notes = approval_decide(ctx, open_now)
    if ctx.reused_from:
        notes.insert(0, f"the engine's result is run {ctx.reused_from}'s: the same job "
                        "(head, base, configuration and reviewer), so the engine did not run again")  # fmt: skip
    approved = publish(
        ctx, review, result, validated, approve=approve, notes=notes, carried=earlier_ids,
        still_open=sum(1 for f in open_now if f.fingerprint in earlier_ids),
    )  # fmt: skip
    number = run.pull_request.number
    notes += threads.close_threads(
        ctx.gateway, ctx.where, number, run, earlier, decisions, talk.threads
    )
    notes += threads.reopen_unauthorised(
        ctx.gateway, ctx.where, number, run, earlier, decisions, talk
    )
    if approval_withheld(ctx, open_now):
        notes += approvals_dismiss(ctx)
    Review.objects.filter(pk=review.pk).update(approved=approved, notes=notes)
    gate_complete(
        ctx, review, open_now, limitations=result.summary.limitations,
        unread=len(result.unread),
        shortfall=f"part of the review did not run: {result.partial}" if result.partial else "",
    )  # fmt: skip
    ctx.beat.check()
    run_finish(ctx.held, status=RunStatus.COMPLETED)
    return RunStatus.COMPLETED


def gate_complete(
    ctx: Context,
    review: Review,
    open_now: list[Finding],
    *,
    shortfall: str = "",
    limitations: tuple[str, ...] | list[str] = (),
    unread: int = 0,
) -> None:
    """Complete the check run from every open finding of this reviewer on the pull
    request at this head (the review's own and those it carried), whatever path the
    run took. A head not reviewed in full (`shortfall` says why; a changed file the
    engine could not read is one reason) is never `success`."""
    if unread and not shortfall:
        shortfall = (
            f"{unread} changed file{'s' if unread != 1 else ''} could not be read "
            "(the limitations name them)."
        )
    Review.objects.filter(pk=review.pk).update(shortfall=shortfall)
    fail_on = ctx.config.fail_check_on
    conclusion = check_conclusion(open_now, fail_on, in_full=not shortfall)
    title, summary = check_output(
        open_now, conclusion, fail_on, shortfall=shortfall, limitations=limitations,
        unread=unread,
    )  # fmt: skip
    check_complete(ctx, conclusion, title, summary)


def carry_unexamined(
    ctx: Context, review: Review, earlier: list[Finding], checkout: Checkout, why: str
) -> list[Finding]:
    """A review that stopped before the engine looked (triaged trivial, over budget,
    incomplete) re-examined none of the earlier open findings: each is carried onto it
    as it was — still open, its thread untouched — unless a person with the right to
    has dismissed it. Returns the findings open at this head."""
    if earlier:
        run = ctx.run
        talk = threads.conversation_read(
            ctx.gateway, ctx.where, run.pull_request.number, run, earlier, ctx.gateway.app_slug()
        )
        since_previous = (
            diff_parse(checkout.previous_diff) if checkout.previous_diff is not None else None
        )
        decisions = {f.fingerprint: Decision(CURRENT, f"not re-examined: {why}") for f in earlier}
        threads.carry(review, earlier, decisions, talk, since_previous=since_previous)
        notes = threads.reopen_unauthorised(
            ctx.gateway, ctx.where, run.pull_request.number, run, earlier, decisions, talk
        )
        if notes:
            Review.objects.filter(pk=review.pk).update(notes=notes)
    return list(review.findings.filter(state=OPEN))


def disputes_ruled(
    run: ReviewRun, result: ReviewResult, decisions: dict[str, Decision], found_again: set[str]
) -> dict[str, Decision]:
    """A review pass: an earlier finding the author disputed (a reply, perhaps with no
    push) that the reviewer now rules not open is resolved, the author's reasons
    accepted — the code it points at may be unchanged."""
    from reviews.passes.services import disputed_fingerprints

    disputed = disputed_fingerprints(run)
    ruled = dict(decisions)
    for ruling in result.rulings:
        decision = ruled.get(ruling.id)
        if (
            not ruling.still_open
            and ruling.id in disputed
            and ruling.id not in found_again
            and decision is not None
            # Still there, or "no longer found" with its code untouched: the reviewer
            # changed its mind on the author's reasons, not on a fix.
            and (decision.state == CURRENT or not decision.code_changed)
        ):
            why = ruling.reason.strip().rstrip(".") or "no reason given"
            ruled[ruling.id] = Decision(
                ACCEPTED, f"the reviewer accepted the author's reasons ({why})"
            )
    return ruled


def pass_answers(run: ReviewRun, earlier: list[Finding]) -> dict[str, str]:
    """In a review pass, the author's answers to the earlier findings (by fingerprint)."""
    if not run.review_pass_id or not earlier:
        return {}
    from reviews.passes.services import answers_for_run

    return answers_for_run(run)


def pass_rulings(run: ReviewRun, earlier: list[Finding]) -> dict[str, str]:
    """In a review pass, what the reviewer ruled on the earlier findings last pass."""
    if not run.review_pass_id or not earlier:
        return {}
    from reviews.passes.services import rulings_for_run

    return rulings_for_run(run)


def repository_memory(repository) -> str:
    memory = RepoMemory.objects.filter(repository=repository).values_list("text", flat=True)
    return memory.first() or ""


def approval_withheld(ctx: Context, open_now: list[Finding]) -> str:
    """Why the open findings withhold an approval ("" when they do not): any open
    Tasuku finding does, unless the policy approves with only nits open. A review pass
    approves with nits open (its verdict is on the blocking ones)."""
    blocking = sum(1 for f in open_now if f.blocking)
    if blocking:
        return f"{blocking} blocking finding{'s are' if blocking != 1 else ' is'} open"
    if open_now and not (ctx.config.approve_with_nits or ctx.run.review_pass_id):
        count = len(open_now)
        return (
            f"{count} finding{'s are' if count != 1 else ' is'} open (this repository "
            "approves only when none is)"
        )
    return ""


def approval_decide(ctx: Context, open_now: list[Finding]) -> tuple[bool, list[str]]:
    """Approve only when the policy says so, no Tasuku finding is open (or only nits,
    where the policy says so), and — asked of GitHub again now — the reviewed head is
    still the head, the pull request is open and not a draft, and its author is not
    Tasuku itself. Tasuku never merges."""
    # A review pass approves every clean pull request: the approval is its verdict.
    if not (ctx.config.auto_approve or ctx.run.review_pass_id):
        return False, []
    withheld = approval_withheld(ctx, open_now)
    if withheld:
        return False, [f"not approved: {withheld}"]
    pr = ctx.gateway.pull_request_get(**ctx.where, number=ctx.run.pull_request.number)
    if pr.head_sha != ctx.run.head_sha:
        return False, [f"not approved: the head moved to {pr.head_sha[:7]} during the review"]
    if pr.state != "open" or pr.draft:
        return False, ["not approved: the pull request is " + ("a draft" if pr.draft else pr.state)]
    if pr.author_login == f"{ctx.gateway.app_slug()}[bot]":
        return False, ["not approved: GitHub does not let an App approve its own pull request"]
    if ctx.run.review_pass_id and not ctx.config.auto_approve:
        # A pass's approval speaks for an agent's work: never for anyone else's pull
        # request, whatever let the task name it (checked at the task's creation too).
        expected = author_bot_login()
        if pr.author_login.lower() != expected.lower():
            return False, [f"not approved: a review pass approves only pull requests the "
                           f"author's App ({expected}) opened; this one is {pr.author_login}'s"]  # fmt: skip
    return True, []


def approvals_dismiss(ctx: Context) -> list[str]:
    """Dismiss Tasuku's own earlier approvals of this pull request (never a person's),
    now that findings are open — unless the head moved meanwhile: then nothing."""
    run = ctx.run
    number = run.pull_request.number
    ours = set(
        Review.objects.filter(pull_request=run.pull_request, approved=True)
        .exclude(github_review_id=None)
        .values_list("github_review_id", flat=True)
    )
    if not ours:
        return []
    pr = ctx.gateway.pull_request_get(**ctx.where, number=number)
    if pr.head_sha != run.head_sha:
        return []
    notes = []
    for posted in ctx.gateway.reviews_list(**ctx.where, number=number):
        if posted.id in ours and posted.state == "APPROVED":
            try:
                ctx.gateway.review_dismiss(
                    **ctx.where,
                    number=number,
                    review_id=posted.id,
                    message=f"Tasuku has open findings on {run.head_sha[:7]}; its approval no longer stands.",
                )
            except GitHubError as exc:
                if not exc.permanent:
                    raise
                # Branch protection can forbid dismissals; the review is posted, the check
                # fails on the findings: a note for the run page, not a failed run.
                notes.append(
                    f"could not dismiss Tasuku's earlier approval {posted.id}: {exc} — "
                    "dismiss it on GitHub (branch protection may forbid the App to)"
                )
                continue
            notes.append(f"dismissed Tasuku's earlier approval {posted.id}")
    return notes


# A person who asks for a full review, an operator's "run again", and every pass of a
# review-pass task get the engine anew, whatever it said before.
FRESH_LOOK = {Trigger.FULL_REVIEW_COMMAND, Trigger.RERUN, Trigger.MANUAL, Trigger.REVIEW_PASS}


def result_reusable(
    run: ReviewRun, digest: str, *, include_self: bool = False
) -> tuple[ReviewResult | None, int | None]:
    """The result of a complete, whole review by this reviewer of this pull request whose
    job was this one (same head, base, files, configuration: the same digest), as a
    result that cost nothing this time; (None, None) when there is none or the run asks
    for a fresh look. Validation, reconciliation and the check run are this run's own:
    what people dismissed since still counts. `include_self`: a local review's run is
    its branch head's, executed again (its digest not yet updated to this job's)."""
    if run.trigger in FRESH_LOOK or run.review_pass_id:
        return None, None
    candidates = ReviewRun.objects.all() if include_self else ReviewRun.objects.exclude(pk=run.pk)
    earlier = (
        candidates.filter(
            pull_request=run.pull_request,
            reviewer=run.reviewer,
            job_digest=digest,
            runner_result__isnull=False,
            review__state=ReviewState.COMPLETE,
        )
        .order_by("-pk")
        .values_list("pk", "runner_result")
        .first()
    )
    if earlier is None:
        return None, None
    result = ReviewResult.model_validate(earlier[1])
    if result.incomplete or result.partial or result.unread:
        return None, None  # what it could not do, another run might
    free = result.usage.model_copy(
        update={"input_tokens": 0, "output_tokens": 0, "cost_usd": 0.0, "steps": 0,
                "duration_seconds": 0.0}
    )  # fmt: skip
    return result.model_copy(update={"usage": free, "transcript": []}), earlier[0]


def previous_head(run: ReviewRun) -> str | None:
    """The head of the last complete review of this pull request by this reviewer: the
    base of an incremental review. A full-review command, or no such review, means none;
    an incomplete review (budget, step ceiling) or one triaged trivial (the engine did
    not look) is never a base: what it did not look at, the next review does."""
    if run.trigger == Trigger.FULL_REVIEW_COMMAND:
        return None
    return (
        Review.objects.filter(
            pull_request=run.pull_request, reviewer=run.reviewer, state=ReviewState.COMPLETE
        )
        .exclude(run=run)
        .order_by("-created_at", "-pk")
        .values_list("head_sha", flat=True)
        .first()
    )


def scope_since(run: ReviewRun, previous: str | None) -> str | None:
    """Where the review's scope starts. The same head reviewed again (nothing pushed since
    the last complete review) keeps the scope that review had — its increment, or the
    whole pull request — so that its job is the same one and the engine's result is
    reused; otherwise the previous review's head."""
    if previous is None or previous != run.head_sha:
        return previous
    since = (
        Review.objects.filter(
            pull_request=run.pull_request,
            reviewer=run.reviewer,
            state=ReviewState.COMPLETE,
            head_sha=previous,
        )
        .exclude(run=run)
        .order_by("-created_at", "-pk")
        .values_list("incremental_since", flat=True)
        .first()
    )
    return since or previous


def _record_scope(run: ReviewRun, checkout: Checkout, core: stages.Core) -> None:
    run.sanitised = checkout.removed
    run.reviewed = core.reviewed
    run.filtered = [[f.path, f.reason] for f in core.filtered]
    run.incremental_since = checkout.incremental_since or ""
    ReviewRun.objects.filter(pk=run.pk).update(
        sanitised=run.sanitised,
        reviewed=run.reviewed,
        filtered=run.filtered,
        incremental_since=run.incremental_since,
    )


def stop_early(
    ctx: Context, core: stages.Core, checkout: Checkout, budget: Budget, previous: str | None
) -> str:
    """Trivial by triage, or over the monthly budget: the engine did not run. Record the
    review, carry every earlier open finding onto it, and complete the check run from
    them: `failure` if one reaches the threshold, else `neutral` — a head nobody looked
    at in depth is never `success`."""
    run = ctx.run
    earlier = threads.earlier_open(threads.previous_review(run, previous), run.head_sha)
    since = (
        f"the changes since `{previous[:7]}`"
        if checkout.incremental_since and previous
        else "this change"
    )
    if core.stopped == "trivial":
        review = persist(run, core)
        summary = core.verdict.summary if core.verdict else ""
        shortfall = f"triage found {since} trivial ({summary.rstrip('.')})."
        reason = "trivial: " + summary
        why = "triage found the new changes trivial"
    else:
        reason = f"this month's review budget is spent (${budget.spent:.2f} of ${budget.cap})"
        review = persist(run, core, incomplete=reason)
        shortfall = (
            f"this installation has spent ${budget.spent:.2f} of its ${budget.cap} monthly "
            f"budget for reviews, so {since} was triaged but not reviewed in depth. It will "
            "be reviewed in full when the budget allows."
        )
        why = "the review budget is spent"
    open_now = carry_unexamined(ctx, review, earlier, checkout, why)
    gate_complete(ctx, review, open_now, shortfall=shortfall)
    ctx.beat.check()
    run_finish(ctx.held, status=RunStatus.COMPLETED, reason=reason)
    return RunStatus.COMPLETED


# --- Guards -------------------------------------------------------------------------------


def guards(ctx: Context) -> str | None:
    """PR closed → skipped; head moved since the run was queued → cancelled as stale;
    repository disabled meanwhile → skipped. Each ends the run with its check run."""
    run = ctx.run
    if not ctx.repository.enabled:
        return _stop(ctx, RunStatus.SKIPPED, "reviews were disabled for this repository", "skipped",
                     "Not reviewed: reviews are disabled", "Reviews were disabled for this repository after this run was queued.")  # fmt: skip
    info = ctx.gateway.pull_request_get(**ctx.where, number=run.pull_request.number)
    if info.state != "open":
        return _stop(ctx, RunStatus.SKIPPED, "the pull request is closed", "skipped",
                     "Not reviewed: the pull request is closed", "The pull request was closed before the review started.")  # fmt: skip
    if info.head_sha != run.head_sha:
        return _stop(
            ctx, RunStatus.CANCELLED, f"stale: the head moved to {info.head_sha[:12]}", "cancelled",
            f"Superseded by {info.head_sha[:7]}",
            f"The pull request's head moved from `{run.head_sha[:12]}` to `{info.head_sha[:12]}` "
            "before this review started; the newer commit is reviewed instead.",
            superseded_by=info.head_sha,
        )  # fmt: skip
    return None


def _stop(
    ctx: Context,
    status: str,
    reason: str,
    conclusion: str,
    title: str,
    summary: str,
    superseded_by: str = "",
) -> str:
    check_complete(ctx, conclusion, title, summary)
    run_finish(ctx.held, status=status, reason=reason, superseded_by=superseded_by)
    return status


# --- Check run ----------------------------------------------------------------------------


def _check_id(ctx: Context) -> int:
    return run_check_ensure(ctx.run, created=False, installation=ctx.repository.installation)


def check_in_progress(ctx: Context) -> None:
    if ctx.run.review_pass_id:
        return  # a review pass reports through its task, not a check run
    try:
        ctx.gateway.check_run_update(**ctx.where, check_run_id=_check_id(ctx), status="in_progress",
                                     details_url=details_url(ctx.run))  # fmt: skip
    except GitHubError as exc:
        raise StageError(str(exc), permanent=exc.permanent, stage=Stage.PUBLICATION) from exc


def check_dispatched(ctx: Context) -> None:
    """The check run of a run dispatched to GitHub Actions links to the Actions run. The
    run is no longer held: a failure here is logged, the review goes on."""
    if ctx.run.review_pass_id:
        return
    url = ctx.run.actions_run_url
    try:
        ctx.gateway.check_run_update(
            **ctx.where, check_run_id=_check_id(ctx), status="in_progress", details_url=url,
            output=CheckRunOutput(
                title="Reviewing on GitHub Actions",
                summary=f"The review runs in [this GitHub Actions run]({url}); its findings are "
                "published here when the runner posts them back.",
            ),
        )  # fmt: skip
    except GitHubError as exc:
        logger.warning("run %s: could not link its check run to %s: %s", ctx.run.pk, url, exc)


def check_complete(ctx: Context, conclusion: str, title: str, summary: str) -> None:
    """The run's check run concludes: recorded on the run, then sent. GitHub not taking
    it now does not fail the review (the reaper sends it again until GitHub accepts it:
    reviews/conclusions.py); a refusal does."""
    if ctx.run.review_pass_id:
        return
    if check_final(ctx.run.pk, conclusion, title, summary) == REFUSED:
        error = ReviewRun.objects.values_list("check_error", flat=True).get(pk=ctx.run.pk)
        raise StageError(error, permanent=True, stage=Stage.PUBLICATION)


def run_check_conclude(run_pk: int) -> None:
    """Send a conclusion that is due; else complete the check run of a run that ended
    without reaching publication: failed (`failure`) or superseded while it waited
    (`cancelled`) — never `success`."""
    run = ReviewRun.objects.filter(pk=run_pk).first()
    if run is None or run.review_pass_id:
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


# --- Workspace and engine -----------------------------------------------------------------


def clone(
    ctx: Context, workspace: Workspace, previous: str | None, since: str | None = None
) -> Checkout:
    info = ctx.gateway.repository_get(**ctx.where)
    ctx.repository_info = info
    token = ctx.gateway.contents_token(
        installation_id=ctx.repository.installation.github_id,
        repository_id=ctx.repository.github_id,
    )
    return workspace.checkout(
        clone_url=info.clone_url,
        token=token,
        head_sha=ctx.run.head_sha,
        base_sha=ctx.run.base_sha,
        previous_sha=previous,
        since_sha=since,
        mirror=mirror_for(ctx.repository),
    )


def mirror_for(repository) -> Path | None:
    """The repository's mirror in the checkout cache, by its GitHub id (a rename keeps
    it; no two repositories share one), or None with the cache off."""
    cache = settings.TASUKU_CHECKOUT_CACHE
    if not cache or cache.lower() == "off":
        return None
    return Path(cache) / f"{repository.github_id}.git"


def model_triaged(
    ctx: Context, core: stages.Core, reviewer: ReviewerConfig, job: ReviewJob
) -> bool:
    """With triage on and a triage model on the reviewer, a change the rule found
    substantive is shown to that model; True when it finds it trivial (no deep review)."""
    if not ctx.config.triage_enabled or not reviewer.triage_model or core.stopped:
        return False
    conversation = engines.conversation_for(reviewer.engine)
    if conversation is None:
        return False
    verdict = model_triage(
        job,
        reviewer.triage_model,
        conversation,
        engines.engine_environment(ctx.run.reviewer),
        engines.model_price(reviewer.triage_model),
    )
    core.verdict = Verdict(
        verdict=verdict.verdict,
        summary=verdict.summary or verdict.note,
        risk_areas=verdict.risk_areas,
        decided_by=f"model {verdict.model}" if not verdict.note else "rule",
        model=verdict.model,
        input_tokens=verdict.input_tokens,
        output_tokens=verdict.output_tokens,
        cost_usd=verdict.cost_usd,
        note=verdict.note,
    )
    if core.verdict.trivial:
        core.stopped = "trivial"
        return True
    return False


def stop_incomplete(
    ctx: Context,
    core: stages.Core,
    result: ReviewResult,
    earlier: list[Finding],
    checkout: Checkout,
) -> str:
    """The engine stopped at a bound (steps, cost cap, deadline) without finishing: the
    review is recorded incomplete — never the base of an incremental review — nothing is
    posted, the earlier open findings are carried as they were, and the check run is
    `neutral` (or `failure` when they warrant it), saying why."""
    review = persist(ctx.run, core, result=result, incomplete=result.incomplete)
    open_now = carry_unexamined(ctx, review, earlier, checkout, "the review was incomplete")
    gate_complete(
        ctx, review, open_now,
        shortfall=f"the {ctx.run.reviewer.slug} reviewer {result.incomplete}. Nothing was "
        "posted; earlier findings stand. An operator can raise its limits and run it again "
        f"from the [run page]({dashboard_url(ctx.run)}).",
    )  # fmt: skip
    ctx.beat.check()
    run_finish(ctx.held, status=RunStatus.COMPLETED, reason=f"incomplete: {result.incomplete}")
    return RunStatus.COMPLETED


# --- Persist and publish ------------------------------------------------------------------


def persist(
    run: ReviewRun, core: stages.Core, *, result: ReviewResult | None = None, incomplete: str = ""
) -> Review:
    """Store the review and every finding, published or not. A retried run replaces
    what an earlier attempt stored (the findings it would publish are the same ones)."""
    summary = result.summary if result else None
    usage = result.usage if result else None
    triage = core.verdict or Verdict(verdict="", summary="")
    with transaction.atomic():
        review, _ = Review.objects.update_or_create(
            run=run,
            defaults={
                "pull_request": run.pull_request,
                "reviewer": run.reviewer,
                "base_sha": run.incremental_since or run.base_sha,
                "head_sha": run.head_sha,
                "incremental_since": run.incremental_since,
                "state": (
                    ReviewState.INCOMPLETE
                    if incomplete
                    else ReviewState.TRIAGED
                    if core.stopped == "trivial"
                    else ReviewState.COMPLETE
                ),
                "incomplete_reason": incomplete,
                "triage": core.verdict.as_dict() if core.verdict else {},
                "guidelines": core.packs,
                "engine": result.engine if result else "triage",
                "inspected_areas": summary.inspected_areas if summary else [],
                "important_files": summary.important_files if summary else [],
                "validation": summary.validation if summary else "",
                "context_sources": summary.context_sources if summary else [],
                "confidence": summary.confidence if summary else 0,
                "limitations": summary.limitations if summary else [],
                "input_tokens": (usage.input_tokens if usage else 0) + triage.input_tokens,
                "output_tokens": (usage.output_tokens if usage else 0) + triage.output_tokens,
                "cost_usd": Decimal(
                    str(round((usage.cost_usd if usage else 0) + triage.cost_usd, 4))
                ),
                "model": usage.model if usage else "",
                "steps": usage.steps if usage else 0,
                "engine_seconds": usage.duration_seconds if usage else 0,
                "transcript": [e.model_dump() for e in result.transcript] if result else [],
                "rulings": [r.model_dump() for r in result.rulings] if result else [],
            },
        )
        review.findings.all().delete()
        Finding.objects.bulk_create([_finding_row(review, run, v) for v in core.validated])
    return review


def _finding_row(review: Review, run: ReviewRun, v: Validated) -> Finding:
    return Finding(
        review=review,
        pull_request=run.pull_request,
        path=v.path,
        side=v.side.value,
        start_line=v.start_line,
        end_line=v.end_line,
        original_start_line=v.original_lines[0] if v.original_lines else None,
        original_end_line=v.original_lines[1] if v.original_lines else None,
        severity=v.severity.value,
        category=v.category,
        title=v.title[:200],
        body=v.body,
        evidence=v.evidence,
        suggestion=v.suggestion,
        confidence=v.confidence,
        blocking=v.blocking,
        rule=v.rule or "",
        fingerprint=v.fingerprint,
        code_digest=v.code_digest,
        state=v.state,
        suppression_reason=v.reason,
        published=v.published,
    )


def publish(
    ctx: Context,
    review: Review,
    result: ReviewResult,
    validated: list[Validated],
    *,
    approve: bool = False,
    notes: list[str] | None = None,
    carried: set[str] | frozenset[str] = frozenset(),
    still_open: int = 0,
) -> bool:
    """Post one review with the published findings as inline comments.

    Safe to repeat: a review carrying this run's marker is reused, and a finding whose
    marker is already in a comment on the pull request is not posted again. When GitHub
    rejects the anchors (422), the same findings go out as a body-only review. With
    `approve`, the review is an approval; GitHub refuses that for an App's own pull
    request, and the review is posted as a comment instead, with the reason in `notes`.
    A finding that was fixed (its thread resolved) and is back is not posted again: its
    thread is reopened with a reply naming the commit. `carried`: the fingerprints of
    earlier findings still open (their threads stand); `still_open`: how many of them
    are open now. Returns whether it approved.
    """
    notes = notes if notes is not None else []
    event = "APPROVE" if approve else "COMMENT"
    run = ctx.run
    number = run.pull_request.number
    marker = run_marker(run.pk)
    context = ReviewContext(
        run_id=run.pk,
        reviewer=run.reviewer.slug,
        base_sha=run.incremental_since or run.base_sha,
        head_sha=run.head_sha,
        dashboard_url=dashboard_url(run),
        filtered=tuple((p, r) for p, r in run.filtered),
        sanitised=tuple(run.sanitised),
        incremental=bool(run.incremental_since),
        omitted=tuple((o["path"], o["reason"]) for o in run.omitted),
        guidelines=tuple(review.guidelines),
        still_open=still_open,
        unread=len(result.unread),
    )
    posted = ctx.gateway.review_find(**ctx.where, number=number, marker=marker)
    updated = False
    if posted is None:
        slug = ctx.gateway.app_slug()
        existing = markers_in(
            c.body
            for c in ctx.gateway.review_comments_list(**ctx.where, number=number)
            if is_ours(c.user_login, c.user_type, slug)
        )
        fresh = [v for v in validated if v.published and v.fingerprint not in existing]
        body = review_body(result.summary, validated, context)
        ctx.beat.check()
        previous = None if fresh or event != "COMMENT" else summary_to_update(ctx, review)
        if previous is not None:
            # Nothing new to say inline: the summary already on the pull request is
            # brought up to date instead of a second review saying the same.
            posted = ctx.gateway.review_update(
                **ctx.where, number=number, review_id=previous.id, body=body
            )
            updated = True
            notes.append(
                f"nothing new to comment on: the summary of review {previous.id} was updated "
                "in place"
            )
    if posted is None:
        try:
            posted = ctx.gateway.review_create(
                **ctx.where, number=number, commit_sha=run.head_sha, body=body, event=event,
                comments=[comment_payload(v) for v in fresh], marker=marker,
            )  # fmt: skip
        except GitHubError as exc:
            if exc.status == 422 and event == "APPROVE" and "own pull request" in exc.message:
                notes.append(
                    "not approved: GitHub does not let an App approve its own pull request"
                )
                return publish(ctx, review, result, validated, approve=False, notes=notes,
                               carried=carried, still_open=still_open)  # fmt: skip
            if exc.status != 422 or not fresh:
                raise
            logger.warning(
                "run %s: GitHub refused the anchors (%s); posting body-only", run.pk, exc
            )
            body = review_body(result.summary, validated, context, inline=fresh, body_only=True)
            posted = ctx.gateway.review_create(
                **ctx.where, number=number, commit_sha=run.head_sha, body=body, event=event,
                comments=[], marker=marker,
            )  # fmt: skip
    body_only = BODY_ONLY_NOTE in posted.body
    approved = posted.state == "APPROVED"
    comments = ctx.gateway.review_comments_list(**ctx.where, number=number)

    by_fingerprint = {}
    slug = ctx.gateway.app_slug()
    for comment in comments:
        if not is_ours(comment.user_login, comment.user_type, slug):
            continue  # Tasuku trusts its markers on its own posts only
        for found in markers_in([comment.body]):
            by_fingerprint.setdefault(found, comment)
    back = [
        v
        for v in validated
        if v.published
        and v.fingerprint not in carried
        and v.fingerprint in by_fingerprint
        # posted by an earlier review: its thread exists, and this one did not repeat it
        # (an updated summary posted no comment of its own)
        and (updated or by_fingerprint[v.fingerprint].review_id != posted.id)
    ]
    if back:
        notes += reopen_returned(ctx, back, by_fingerprint)
    with transaction.atomic():
        Review.objects.filter(pk=review.pk).update(
            body=posted.body,
            github_review_id=posted.id,
            github_review_url=posted.html_url,
            body_only=body_only,
            approved=approved,
            published_at=timezone.now(),
        )
        for finding in review.findings.filter(state=OPEN, published=True):
            comment = by_fingerprint.get(finding.fingerprint)
            if comment is not None:
                Finding.objects.filter(pk=finding.pk).update(
                    github_comment_id=comment.id, github_comment_url=comment.html_url
                )
    return approved


def summary_to_update(ctx: Context, review: Review):
    """This reviewer's latest review on the pull request, when it can be updated in
    place: posted by this App as a comment (an approval is never rewritten), and still on
    GitHub as Tasuku left it. None otherwise: a new review is posted."""
    run = ctx.run
    earlier = (
        Review.objects.filter(
            pull_request=run.pull_request, reviewer=run.reviewer,
            github_review_id__isnull=False, approved=False,
        )
        .exclude(pk=review.pk)
        .order_by("-published_at", "-pk")
        .first()
    )  # fmt: skip
    if earlier is None:
        return None
    found = ctx.gateway.review_find(
        **ctx.where, number=run.pull_request.number, marker=run_marker(earlier.run_id)
    )
    if found is None or found.id != earlier.github_review_id or found.state != "COMMENTED":
        return None
    return found


def reopen_returned(ctx: Context, back: list[Validated], by_fingerprint: dict) -> list[str]:
    """Findings that an earlier review raised, a later one found fixed, and that are in
    the code again: their threads are reopened, each with a reply naming this commit,
    so what fails the check is visible on the pull request."""
    run = ctx.run
    number = run.pull_request.number
    short = run.head_sha[:7]
    by_first = {
        t.first.id: t
        for t in ctx.gateway.review_threads(**ctx.where, number=number)
        if t.first is not None
    }
    notes: list[str] = []
    for finding in back:
        thread = by_first.get(by_fingerprint[finding.fingerprint].id)
        if thread is None:
            continue
        text = (
            f"Back in {short}: this problem is in the code again, at "
            f"{code_span(location(finding))}."
        )
        notes += threads.thread_reopen(
            ctx.gateway, ctx.where, number, thread, text, f"{finding.fingerprint}-back-{short}"
        )
    return notes


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
            review_pass__isnull=True,
            check_run_id__isnull=False,
            review__isnull=False,
        )
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
    conclusion = check_conclusion(open_now, config.fail_check_on, in_full=not shortfall)
    title, summary = check_output(
        open_now, conclusion, config.fail_check_on, shortfall=shortfall,
        limitations=review.limitations,
    )  # fmt: skip
    if (conclusion, title[:255]) == (run.check_conclusion, run.check_title):
        return "unchanged"
    check_final(run.pk, conclusion, title, summary)
    return conclusion
