"""The review pipeline (docs/architecture.md, *One review, end to end*), one run at a time:

guards → check run in progress → workspace (clone, diff, sanitise) → filters → engine in
the sandbox → validation gate → persist → publish → check run completed.

Each stage is a function over plain data; this module is the edge that reads rows,
calls GitHub through the gateway and the sandbox through its runner. A failure carries
the stage it happened in; `run_execute` turns it into a retry or a failed run.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from django.conf import settings
from django.utils import timezone

from repos import github
from repos.github.budget import URGENT, writes_for
from repos.models import RepoMemory
from repos.policy import EffectiveConfig, ReviewerConfig, Trigger
from reviews.checks.checkruns import dashboard_url
from reviews.checks.gate import check_in_progress, gate_complete, run_check_conclude
from reviews.core import stages
from reviews.core.context import Context
from reviews.core.modes import REVIEW, RunMode
from reviews.engines import boundary as engines
from reviews.engines.connectors import RunConnectors
from reviews.memory.folds import memory_fold_later
from reviews.models import (
    Finding,
    Review,
    ReviewRun,
    ReviewState,
    RunStatus,
    Stage,
)
from reviews.pipeline.forges import GITHUB
from reviews.publication import threads
from reviews.publication.review import persist
from reviews.queue.heartbeat import Heartbeat, WorkerStopping
from reviews.queue.runs import (
    LeaseLost,
    RunCancelled,
    run_attempt_failed,
    run_claim_read,
    run_finish,
    run_job_recorded,
    run_release,
    run_result_recorded,
    run_scope_recorded,
    run_write_waited,
)
from reviews.scope import coverage, secondaries
from reviews.scope.budget import BUDGET_SPENT, Budget, budget_alert, installation_budget
from reviews.scope.diff import diff_parse
from reviews.scope.triage import Verdict
from reviews.validation.findings import INVALID, OPEN, History
from reviews.validation.reconcile import CURRENT, Decision
from sandbox.agent.triage import model_triage
from sandbox.contract import ReviewJob, ReviewResult
from sandbox.workspace import Checkout, Workspace
from tasuku import outage
from tasuku.logs import log_context

logger = logging.getLogger(__name__)


def run_execute(run_pk: int, mode_for: Callable[[ReviewRun], RunMode | None] | None = None) -> str:
    """Claim a run and take it through the pipeline. Returns what became of it.
    `mode_for` picks the run's mode (None, or a None answer: a plain review)."""
    claimed = run_claim_read(run_pk)
    if claimed is None:
        return "not claimed"
    held, run = claimed
    repository = run.pull_request.repository
    with log_context(run=run_pk, attempt=held.attempt, repository=repository.full_name,
                     installation=repository.installation.github_id
                     if repository.installation else None):  # fmt: skip
        return _run_execute(run, held, mode_for)


def _run_execute(
    run: ReviewRun, held, mode_for: Callable[[ReviewRun], RunMode | None] | None
) -> str:
    run_pk = run.pk
    mode = (mode_for(run) if mode_for else None) or REVIEW
    forge = GITHUB  # the worker's runs are GitHub's
    with Heartbeat(held) as beat:
        try:
            gateway = github.gateway()
            gateway.guard = beat.guard  # a run asked to stop makes no further GitHub call
            context = Context(
                run=run,
                held=held,
                beat=beat,
                config=EffectiveConfig.model_validate(run.config),
                gateway=gateway,
                mode=mode,
                forge=forge,
            )
            # The run's writes come before the backlog's in the installation's write
            # budget, and a wait for one is shown on the run page.
            with writes_for(URGENT, on_wait=_write_wait_shown(run_pk)):
                outcome = pipeline(context)
        except LeaseLost:
            logger.warning("run %s: lease lost; another worker has it", run_pk)
            return "lease lost"
        except Exception as exc:  # a run's boundary: every failure becomes the attempt's verdict
            if beat.cancelled or isinstance(exc, RunCancelled):
                # Stopped on request (its engine killed, a GitHub call refused): not a
                # failure of the run, and nothing of it is retried.
                outcome = run_cancelled(held, beat.cancelled or str(exc))
            elif beat.stopping or isinstance(exc, WorkerStopping):
                # The worker is stopping: whatever this is (its engine or git killed, a
                # GitHub call refused) came of the stop. Another worker takes it over.
                outcome = run_release(held, stage=run.stage or Stage.ADMISSION)
            else:
                stage = getattr(exc, "stage", "") or run.stage or Stage.ADMISSION
                outcome = run_attempt_failed(held, exc, stage=stage)
                if outcome == RunStatus.FAILED:
                    run_check_conclude(run_pk)
    forge.ended(run)
    mode.after(run)
    return outcome


def _write_wait_shown(run_pk: int) -> Callable[[float, float, str], None]:
    """What a run records when one of its writes waits its turn (the run page shows it)."""

    def shown(seconds: float, until: float, why: str) -> None:
        run_write_waited(run_pk, seconds=seconds, until=datetime.fromtimestamp(until, UTC), why=why)

    return shown


def run_cancelled(held, reason: str) -> str:
    """End a run someone asked to stop: `cancelled` with their reason, and its check run
    concluded `cancelled` saying so."""
    superseded_by = (
        ReviewRun.objects.filter(pk=held.run_pk).values_list("superseded_by", flat=True).first()
    )
    run_finish(held, status=RunStatus.CANCELLED, reason=reason, superseded_by=superseded_by or "")
    run_check_conclude(held.run_pk)
    logger.info("run %s: cancelled (%s)", held.run_pk, reason)
    return RunStatus.CANCELLED


@dataclass
class Prepared:
    """What the review's preparation gave the phases after it: the checkout and the
    core (diff, filters, notes), the reviewer, the installation's budget, the previous
    review and the earlier findings it carries, and the engine's job."""

    previous: str | None
    checkout: Checkout
    core: stages.Core
    reviewer: ReviewerConfig
    budget: Budget | None  # None: the installation has no monthly cap
    before: Review | None
    earlier: list
    job: ReviewJob


def pipeline(ctx: Context) -> str:
    """One review of a run its worker holds, phase after phase: admission, the checkout
    and the job, the engine's result, what was looked at, validation and the threads,
    publication. Each phase may end the run early (its status is returned)."""
    ctx.stage(Stage.ADMISSION)
    stop = ctx.forge.guards(ctx)
    if stop is not None:
        return stop
    check_in_progress(ctx)
    previous = previous_head(ctx.run)

    ctx.stage(Stage.CLONE)
    with Workspace(settings.TASUKU_WORKSPACE_ROOT) as workspace:
        prepared = _prepare(ctx, workspace, previous)
        result = _engine_result(ctx, prepared)
        if isinstance(result, str):
            return result
    # The secondary repositories: context the review had, or a limitation it had.
    result = secondaries.noted(result, prepared.checkout.secondaries)
    if result.incomplete:
        return stop_incomplete(ctx, prepared.core, result, prepared.earlier, prepared.checkout)
    ledger, partial = _looked_at(ctx, prepared, result)
    return _validate_and_publish(ctx, prepared, result, ledger, partial)


def _prepare(ctx: Context, workspace: Workspace, previous: str | None) -> Prepared:
    """The checkout, the core, the earlier findings and what the mode tells of them, and
    the engine's job."""
    run = ctx.run
    reviewer = next(r for r in ctx.config.reviewers if r.slug == run.reviewer.slug)
    checkout = ctx.forge.checkout(
        ctx,
        workspace,
        previous,
        scope_since(run, previous),
        materialise=stages.materialise_for(reviewer),
        agents=stages.runs_agent(reviewer),
    )
    core = ctx.core = stages.prepare(checkout, ctx.config, reviewer)
    _record_scope(run, checkout, core)
    ctx.forge.under_way(ctx, checkout)
    installation = ctx.repository.installation
    # Without a cap there is nothing to gate on: this month's spend is not summed.
    budget = None
    if installation.monthly_budget_usd is not None:
        budget = installation_budget(installation)
        budget_alert(installation, budget)
    before = threads.previous_review(run, previous)
    earlier = threads.earlier_open(before, run.head_sha)
    told = ctx.mode.earlier_context(run, earlier)
    # The mode may continue the reviewer's earlier conversation (it records which itself).
    going_on = ctx.mode.continuation(run, reviewer)
    job = stages.job_build(
        core,
        checkout=checkout,
        reviewer=reviewer,
        config=ctx.config,
        job_id=str(run.pk),
        repository=ctx.repository.full_name,
        number=run.pull_request.number,
        title=run.pull_request.title,
        body=run.pull_request.body,
        requester_note=run.requester_note,
        resume=going_on.conversation,
        previous_summary=going_on.summary,
        deadline_seconds=int(settings.TASUKU_SANDBOX_TIMEOUT),
        memory=repository_memory(ctx.repository),
        price=engines.model_price(reviewer.model),
        earlier=engines.earlier_for_job(earlier, answers=told.answers, rulings=told.rulings),
        explorers=engines.explorers_for(reviewer),
        web=engines.web_research_for(reviewer),
        connectors=engines.connectors_for(reviewer),
        brief=ctx.mode.brief(run),
    )
    return Prepared(previous, checkout, core, reviewer, budget, before, earlier, job)


def _engine_result(ctx: Context, prepared: Prepared) -> ReviewResult | str:
    """The engine's result: kept from an earlier attempt, reused from the same job, or
    the engine run now (on this worker; or dispatched elsewhere, which ends this attempt:
    its status returned). Stopped early by the core, the budget or triage: the status."""
    run, core, reviewer, job = ctx.run, prepared.core, prepared.reviewer, prepared.job
    checkout, budget, previous = prepared.checkout, prepared.budget, prepared.previous
    digest = engines.job_digest(job, run.reviewer, revision=reviewer.revision)
    # The engine has run for this run already (an earlier attempt, or a runner
    # elsewhere posted it), or for the same job before: its result, paid once.
    resumed = run.runner_result and not ctx.forge.reexecutes
    stored = ReviewResult.model_validate(run.runner_result) if resumed else None
    if stored is None:
        stored, ctx.reused_from = result_reusable(
            run, digest, fresh_look=ctx.mode.fresh_look, include_self=ctx.forge.reexecutes
        )
    # Recorded once the reusable result is found: a run executed again is a
    # candidate for its own job's result, which this digest would otherwise claim.
    run_job_recorded(
        run.pk,
        omitted=[o.model_dump() for o in job.omitted],
        digest=digest,
        result_reused=bool(stored),
    )
    if stored is None and (core.stopped or stages.budget_gate(core, budget, ctx.config, reviewer)):
        return stop_early(ctx, core, checkout, budget, previous)

    ctx.stage(Stage.SANDBOX)
    if stored is None and model_triaged(ctx, core, reviewer, job):
        return stop_early(ctx, core, checkout, budget, previous)
    if stored is not None:
        return stored
    if ctx.forge.dispatches and (dispatch := engines.dispatcher_for(reviewer.runner)):
        # A runner elsewhere: the result comes back later, and the run goes on then.
        return dispatch(ctx, job)
    run_name = f"tasuku-run-{run.pk}-{ctx.held.attempt}"
    # Cancelled while the engine works: its runner stops it at once.
    ctx.beat.stopper(lambda: engines.engine_stop(reviewer, run_name))
    result = engines.engine_run(
        run.reviewer,
        reviewer,
        job,
        checkout.root,
        run_name=run_name,
        connectors=run_connectors(ctx, job),
    )
    # The engine's result is paid for: a database that went away meanwhile is
    # waited for (and the connection it dropped replaced) rather than failing
    # the attempt and calling the model again.
    database_wait(ctx)
    run_result_recorded(run.pk, result.model_dump(mode="json"), received=timezone.now())
    return result


def _looked_at(
    ctx: Context, prepared: Prepared, result: ReviewResult
) -> tuple[list[coverage.Entry], str]:
    """What was looked at: every file the change touches, reviewed, excluded or not (the
    ledger), and what of the review did not run. Sets the run's shortfall."""
    core, before = prepared.core, prepared.before
    ledger = coverage.ledger(
        core.diff,
        core.filtered,
        job=prepared.job,
        result=result,
        notes=core.notes,
        earlier=coverage.carried(coverage.entries_of(before.coverage), before.head_sha)
        if prepared.checkout.incremental_since and before is not None
        else (),
        pull_request_paths=(core.anchors or core.diff).paths,
    )
    partial = f"part of the review did not run: {result.partial}" if result.partial else ""
    ctx.shortfall = " ".join(text for text in (coverage.shortfall(ledger), partial) if text)
    return ledger, partial


def _validate_and_publish(
    ctx: Context,
    prepared: Prepared,
    result: ReviewResult,
    ledger: list[coverage.Entry],
    partial: str,
) -> str:
    """Validation against the pull request's history, the earlier findings' threads
    decided, then the review published and the check completed."""
    run, core, checkout, earlier = ctx.run, prepared.core, prepared.checkout, prepared.earlier
    # Validation sees the pull request's history: what people dismissed, what earlier
    # reviews raised, and what was already there when the previous review looked.
    ctx.stage(Stage.VALIDATION)
    talk = ctx.forge.conversation(ctx, earlier)
    since_previous = (
        diff_parse(checkout.previous_diff) if checkout.previous_diff is not None else None
    )
    history = History(
        dismissed=talk.dismissed,
        earlier=frozenset(f.fingerprint for f in earlier),
        since_previous=since_previous,
        untouched_as_nits=ctx.mode.untouched_as_nits,
        positions=threads.positions(
            run, earlier, talk.dismissed, since_previous, prepared.previous
        ),
    )
    validated = stages.validate(
        core, result, ctx.config, history, strict_suppressions=ctx.mode.strict_suppressions
    )
    review = persist(ctx.run, core, result=result, coverage=ledger)
    found_again = {v.fingerprint for v in validated if v.category != INVALID}
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
        examined=coverage.examined(ledger),
        engine=result.engine,
        ruled_fixed={r.id for r in result.rulings if not r.still_open},
        # Retargeted: what the pull request no longer changes is no longer its own.
        pull_diff=core.diff if run.trigger == Trigger.RETARGET else None,
        base_ref=run.pull_request.base_ref,
        rules=(prepared.before.rules if prepared.before else "", result.rules),
    )
    decisions = ctx.mode.rulings_settle(run, result, decisions, found_again)
    threads.carry(review, earlier, decisions, talk, since_previous=since_previous)

    ctx.stage(Stage.PUBLICATION)
    open_now = list(review.findings.filter(state=OPEN))
    notes = []
    if ctx.reused_from:
        notes.append(
            f"the engine's result is run {ctx.reused_from}'s: the same job "
            "(head, base, configuration and reviewer), so the engine did not run again"
        )
    published = ctx.forge.publish(
        ctx,
        review,
        result,
        validated,
        open_now=open_now,
        earlier=earlier,
        decisions=decisions,
        talk=talk,
    )
    notes += published.notes
    gate_complete(
        ctx,
        review,
        open_now,
        limitations=result.summary.limitations,
        shortfall=partial,
        also={"approved": published.approved, "notes": notes},
    )
    ctx.beat.check()
    run_finish(ctx.held, status=RunStatus.COMPLETED)
    if ctx.forge.learns:
        memory_fold_later(review, ctx.config)
    return RunStatus.COMPLETED


def carry_unexamined(
    ctx: Context, review: Review, earlier: list[Finding], checkout: Checkout, why: str
) -> list[Finding]:
    """A review that stopped before the engine looked (triaged trivial, over budget,
    incomplete) re-examined none of the earlier open findings: each is carried onto it
    as it was — still open, its thread untouched — unless a person with the right to
    has dismissed it. Returns the findings open at this head."""
    if earlier:
        talk = ctx.forge.conversation(ctx, earlier)
        since_previous = (
            diff_parse(checkout.previous_diff) if checkout.previous_diff is not None else None
        )
        decisions = {f.fingerprint: Decision(CURRENT, f"not re-examined: {why}") for f in earlier}
        threads.carry(review, earlier, decisions, talk, since_previous=since_previous)
        notes = ctx.forge.unauthorised_reopen(ctx, earlier, decisions, talk)
        if notes:
            Review.objects.filter(pk=review.pk).update(notes=notes)
    return list(review.findings.filter(state=OPEN))


def repository_memory(repository) -> str:
    memory = RepoMemory.objects.filter(repository=repository).values_list("text", flat=True)
    return memory.first() or ""


# A person who asks for a full review and an operator's "run again" get the engine anew,
# whatever it said before (as does every run of a mode that asks for a fresh look).
FRESH_LOOK = {Trigger.FULL_REVIEW_COMMAND, Trigger.RERUN, Trigger.MANUAL}


def result_reusable(
    run: ReviewRun, digest: str, *, include_self: bool = False, fresh_look: bool = False
) -> tuple[ReviewResult | None, int | None]:
    """The result of a complete, whole review by this reviewer of this pull request whose
    job was this one (same head, base, files, configuration: the same digest), as a
    result that cost nothing this time; (None, None) when there is none or the run asks
    for a fresh look. Validation, reconciliation and the check run are this run's own:
    what people dismissed since still counts. `include_self`: a local review's run is
    its branch head's, executed again (its digest not yet updated to this job's)."""
    if run.trigger in FRESH_LOOK or fresh_look:
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
        update={
            "input_tokens": 0,
            "output_tokens": 0,
            "cost_usd": 0.0,
            "steps": 0,
            "duration_seconds": 0.0,
            "explorers": None,
        }
    )
    return result.model_copy(
        update={"usage": free, "transcript": [], "conversation": None}
    ), earlier[0]


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
    if run.trigger == Trigger.RETARGET:
        # The base branch changed: the whole pull request against the new base (a scope
        # that starts at the head itself is no increment), whatever the last review saw.
        return run.head_sha
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
    run.secondaries = [secondary.record() for secondary in checkout.secondaries]
    run_scope_recorded(run)


# How long a run whose engine ended waits for a database that went away (tasuku/outage.py).
DATABASE_WAIT_SECONDS = 300.0


def database_wait(ctx: Context) -> None:
    """Wait for the database after the engine, while the run is still this worker's."""
    beat = ctx.beat
    outage.wait(
        DATABASE_WAIT_SECONDS,
        who=f"run {ctx.run.pk}",
        give_up=lambda: bool(beat.lost or beat.cancelled or beat.stopping),
    )
    beat.check()


def run_connectors(ctx: Context, job: ReviewJob) -> RunConnectors | None:
    """The run's connector calls, made by this worker while its lease holds (None: the
    job offers no connector)."""
    if not job.connectors:
        return None
    # A gateway of its own, made here: the calls are made on the bridge's thread, and the
    # run's gateway is the pipeline thread's.
    gateway = github.gateway() if ctx.gateway is not None else None
    return RunConnectors(
        ctx.run,
        ctx.held.attempt,
        gateway=gateway,
        max_calls=job.limits.connector_calls,
        live=lambda: not (ctx.beat.lost or ctx.beat.cancelled),  # a cancelled run calls out no more
    )


def stop_early(
    ctx: Context,
    core: stages.Core,
    checkout: Checkout,
    budget: Budget | None,
    previous: str | None,
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
        assert budget is not None  # only a cap stops a review for its budget (budget_gate)
        reason = f"{BUDGET_SPENT} (${budget.spent:.2f} of ${budget.cap})"
        review = persist(run, core, incomplete=reason)
        shortfall = (
            f"this installation has spent ${budget.spent:.2f} of its ${budget.cap} monthly "
            f"budget for reviews, so {since} was triaged but not reviewed in depth. Once the "
            "budget allows (a new month, or a higher cap), the dashboard's overview lists "
            "this pull request as reviewable, with *Review now*; a new push is reviewed too."
        )
        why = "the review budget is spent"
    open_now = carry_unexamined(ctx, review, earlier, checkout, why)
    gate_complete(ctx, review, open_now, shortfall=shortfall)
    ctx.beat.check()
    run_finish(ctx.held, status=RunStatus.COMPLETED, reason=reason)
    return RunStatus.COMPLETED


# --- The engine -------------------------------------------------------------------------


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
        ctx,
        review,
        open_now,
        shortfall=f"the {ctx.run.reviewer.slug} reviewer {result.incomplete}. Nothing was "
        "posted; earlier findings stand. An operator can raise its limits and run it again "
        f"from the [run page]({dashboard_url(ctx.run)}).",
    )
    ctx.beat.check()
    run_finish(ctx.held, status=RunStatus.COMPLETED, reason=f"incomplete: {result.incomplete}")
    return RunStatus.COMPLETED
