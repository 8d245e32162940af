"""The `actions` runner: a review executed on a GitHub Actions runner (DESIGN §5).

1. The worker builds the run's `ReviewJob` as for any runner, then dispatches
   `.github/workflows/<TASUKU_ACTIONS_WORKFLOW>` on the repository's default branch (so a
   pull request cannot change what the review job does), with the run's id as input and
   `return_run_details`. The run is `dispatched`; no worker holds it. (`dispatch`)
2. The workflow's `tasuku-runner` fetches the job with its OIDC token, which must prove
   it is exactly that workflow run, still waiting. (`job_for`)
3. It posts the result back (accepted once). The run is queued again and the worker
   takes it through validation and publication as usual, with the stored result in
   place of running an engine. (`result_accept`)

A `workflow_run` completed with no result, or no result after
TASUKU_ACTIONS_RESULT_TIMEOUT, fails the run at stage `sandbox`.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from pydantic import ValidationError

from repos.github import GitHubError
from repos.github.actions import workflow_path
from reviews.models import AttemptOutcome, ReviewRun, RunAttempt, RunStatus, Stage
from reviews.oidc import subject_repository
from reviews.runs import CONCLUDE_TASK, Held, run_ring
from sandbox.contract import ReviewJob, ReviewResult
from sandbox.errors import StageError
from tasuku.broker import ring
from webhooks.routing import Outcome

logger = logging.getLogger(__name__)

RUN_NAME = "Tasuku review (run {})"  # docs/actions/tasuku.yml's `run-name`


def workflow_ref(full_name: str, branch: str) -> str:
    """What the OIDC token's `workflow_ref` and `job_workflow_ref` must say."""
    return f"{full_name}/{workflow_path(settings.TASUKU_ACTIONS_WORKFLOW)}@refs/heads/{branch}"


# --- 1. Dispatch (the worker) ---------------------------------------------------------------


def dispatch(ctx: Any, job: ReviewJob) -> str:
    """Dispatch the run's workflow and leave the run `dispatched`. GitHub errors are
    retried by the gateway (3 attempts in all) and then fail the run, with a check run
    that names the fix when the repository has no workflow or the App may not
    dispatch."""
    run: ReviewRun = ctx.run
    repository = ctx.repository
    info = ctx.repository_info or ctx.gateway.repository_get(**ctx.where)
    branch = info.default_branch or repository.default_branch or "main"
    try:
        dispatched = ctx.gateway.workflow_dispatch(
            **ctx.where,
            workflow=settings.TASUKU_ACTIONS_WORKFLOW,
            ref=branch,
            # The workflow checks out `head_sha`; the runner checks the checkout is at the
            # head its job names, so a wrong input cannot change what is reviewed.
            inputs={"tasuku_run": str(run.pk), "head_sha": run.head_sha},
            # The template's `run-name`: how a dispatch whose answer was lost is found.
            run_name=RUN_NAME.format(run.pk),
        )
    except GitHubError as exc:
        raise StageError(_dispatch_problem(exc), permanent=True, stage=Stage.SANDBOX) from exc
    now = timezone.now()
    held: Held = ctx.held
    with transaction.atomic():
        updated = ReviewRun.objects.filter(
            pk=run.pk, status=RunStatus.RUNNING, attempts=held.attempt, worker=held.worker
        ).update(
            status=RunStatus.DISPATCHED,
            job=job.model_dump(mode="json"),
            actions_run_id=dispatched.workflow_run_id,
            actions_run_attempt=1,
            actions_run_url=dispatched.html_url,
            actions_workflow_ref=workflow_ref(repository.full_name, branch),
            dispatched_at=now,
            lease_expires_at=None,
            reason=f"dispatched to GitHub Actions: {dispatched.html_url}",
        )
        if updated:
            RunAttempt.objects.filter(run_id=run.pk, outcome=AttemptOutcome.RUNNING).update(
                outcome=AttemptOutcome.SUCCEEDED, finished_at=now, stage=Stage.SANDBOX,
                error=f"dispatched as Actions run {dispatched.workflow_run_id}",
            )  # fmt: skip
    run.actions_run_url = dispatched.html_url
    logger.info("run %s dispatched as Actions run %s", run.pk, dispatched.workflow_run_id)
    return RunStatus.DISPATCHED


def _dispatch_problem(exc: GitHubError) -> str:
    """The gateway's refusals name their cause and fix; say where the template is."""
    if not exc.permanent:
        return f"GitHub did not accept the workflow dispatch after 3 attempts: {exc}"
    return f"{exc} The workflow to add is docs/actions/tasuku.yml in Tasuku's repository."


# --- 2. and 3. The runner's requests (the web process) -----------------------------------


class Refused(Exception):
    """The caller is not the dispatched run, or the run is not waiting: the API answers
    403 and says nothing more. The message is for the log."""


@dataclass(frozen=True)
class JobAnswer:
    status: str  # "review" | "cancelled"
    run: ReviewRun
    reason: str = ""


def _run_for(claims: dict[str, Any]) -> ReviewRun:
    """The dispatched run the token proves to be, or Refused."""
    try:
        run_id = int(str(claims.get("run_id", "")))
        attempt = int(str(claims.get("run_attempt", "")))
    except ValueError as exc:
        raise Refused(f"run_id/run_attempt are not numbers: {claims.get('run_id')!r}") from exc
    run = (
        ReviewRun.objects.select_related("pull_request__repository__installation", "reviewer")
        .filter(actions_run_id=run_id)
        .first()
    )
    if run is None:
        raise Refused(f"no run was dispatched as Actions run {run_id}")
    repository = run.pull_request.repository
    if str(claims.get("repository", "")).lower() != repository.full_name.lower():
        raise Refused(f"token for {claims.get('repository')!r}, run is in {repository.full_name}")
    repo_id = claims.get("repository_id")
    if repo_id is not None and str(repo_id) != str(repository.github_id):
        raise Refused(f"token for repository id {repo_id}, run's is {repository.github_id}")
    subject, _, subject_repo_id = subject_repository(str(claims.get("sub", "")))
    if subject.lower() != repository.full_name.lower() or (
        subject_repo_id is not None and subject_repo_id != str(repository.github_id)
    ):
        raise Refused(f"subject {claims.get('sub')!r} is not of {repository.full_name}")
    if attempt != run.actions_run_attempt:
        raise Refused(f"run attempt {attempt}, Tasuku dispatched {run.actions_run_attempt}")
    expected = run.actions_workflow_ref
    for claim in ("workflow_ref", "job_workflow_ref"):
        if claim in claims and claims[claim] != expected:
            raise Refused(f"{claim} {claims[claim]!r} is not {expected!r}")
    if "workflow_ref" not in claims and "job_workflow_ref" not in claims:
        raise Refused("the token names no workflow")
    return run


def job_for(claims: dict[str, Any]) -> JobAnswer:
    """The job of the dispatched run the token proves to be, while it waits. A head
    that moved meanwhile cancels the run: the answer says so."""
    run = _run_for(claims)
    if run.status != RunStatus.DISPATCHED or run.runner_result is not None or not run.job:
        raise Refused(f"run {run.pk} is {run.status}, not waiting for its runner")
    pull_request = run.pull_request
    if pull_request.head_sha and pull_request.head_sha != run.head_sha:
        reason = (
            f"the pull request's head moved to {pull_request.head_sha[:12]} before the "
            "runner fetched its job"
        )
        if ReviewRun.objects.filter(pk=run.pk, status=RunStatus.DISPATCHED).update(
            status=RunStatus.CANCELLED,
            reason=reason,
            superseded_by=pull_request.head_sha,
            finished_at=timezone.now(),
        ):
            ring(CONCLUDE_TASK, run.pk, name=f"conclude-{run.pk}")
        return JobAnswer("cancelled", run, reason)
    ReviewRun.objects.filter(pk=run.pk, job_fetched_at__isnull=True).update(
        job_fetched_at=timezone.now()
    )
    return JobAnswer("review", run)


@dataclass(frozen=True)
class ResultAnswer:
    status: str  # "accepted" | "already accepted" | "failed"
    run: ReviewRun


def result_accept(claims: dict[str, Any], body: dict[str, Any]) -> ResultAnswer:
    """Accept the runner's result (or its failure) once: a repeat is answered as the
    first was and changes nothing. A result that does not match the contract fails
    the run (ValueError carries the reason for the caller)."""
    run = _run_for(claims)
    if run.runner_result is not None:
        return ResultAnswer("already accepted", run)
    if run.status != RunStatus.DISPATCHED:
        if run.status == RunStatus.FAILED and run.stage == Stage.SANDBOX and run.result_received_at:
            return ResultAnswer("already accepted", run)  # a failure posted twice
        raise Refused(f"run {run.pk} is {run.status}, not waiting for its runner")
    now = timezone.now()
    failure = body.get("failure")
    if failure is not None or "result" not in body:
        reason = str(failure or "the runner posted neither a result nor a failure")[:1500]
        _fail(run, f"the GitHub Actions runner failed: {reason}", received=now)
        return ResultAnswer("failed", run)
    try:
        result = ReviewResult.model_validate(body["result"])
    except ValidationError as exc:
        problem = f"the runner's result does not match the contract: {exc.error_count()} errors"
        _fail(run, problem + f" ({str(exc)[:500]})", received=now)
        raise ValueError(problem) from exc
    with transaction.atomic():
        if not ReviewRun.objects.filter(
            pk=run.pk, status=RunStatus.DISPATCHED, runner_result__isnull=True
        ).update(
            status=RunStatus.QUEUED,
            runner_result=result.model_dump(mode="json"),
            result_received_at=now,
            next_attempt_at=None,
            reason="the GitHub Actions runner posted its result",
        ):
            return ResultAnswer("already accepted", run)
        run_ring(run)
    return ResultAnswer("accepted", run)


def _fail(run: ReviewRun, reason: str, *, received=None) -> bool:
    updates: dict[str, Any] = {
        "status": RunStatus.FAILED,
        "stage": Stage.SANDBOX,
        "reason": reason[:2000],
        "finished_at": timezone.now(),
    }
    if received is not None:
        updates["result_received_at"] = received
    with transaction.atomic():
        failed = ReviewRun.objects.filter(pk=run.pk, status=RunStatus.DISPATCHED).update(**updates)
        if failed:
            ring(CONCLUDE_TASK, run.pk, name=f"conclude-{run.pk}")
    if failed:
        logger.warning("run %s failed: %s", run.pk, reason)
    return bool(failed)


def stored_result(run: ReviewRun) -> ReviewResult | None:
    return ReviewResult.model_validate(run.runner_result) if run.runner_result else None


# --- GitHub's side: the workflow run ended; the fallback -----------------------------------


def workflow_run_event(payload: dict[str, Any], *, delivery_id: int) -> Outcome:
    """`workflow_run.completed` of a run Tasuku dispatched that posted no result: the
    run fails with the Actions run's conclusion as its reason."""
    workflow_run = payload.get("workflow_run") or {}
    if payload.get("action") != "completed":
        return Outcome.ignore(f"workflow_run.{payload.get('action')} needs no action")
    run = ReviewRun.objects.filter(actions_run_id=workflow_run.get("id") or 0).first()
    if run is None:
        return Outcome.ignore("not a workflow run Tasuku dispatched")
    if run.status != RunStatus.DISPATCHED:
        return Outcome(f"run {run.pk} already has its result ({run.status})", ignored=True)
    conclusion = workflow_run.get("conclusion") or "unknown"
    reason = (
        f"the GitHub Actions run ended ({conclusion}) without posting a result"
        + (" (it was cancelled)" if conclusion == "cancelled" else "")
        + (": it timed out" if conclusion == "timed_out" else "")
        + f"; see {workflow_run.get('html_url') or run.actions_run_url}"
    )
    if _fail(run, reason):
        return Outcome(f"run {run.pk} failed: {reason}")
    return Outcome(f"run {run.pk} already has its result", ignored=True)


def dispatched_sweep(now=None) -> int:
    """Fail runs dispatched longer ago than TASUKU_ACTIONS_RESULT_TIMEOUT with no result
    (the runner never reached Tasuku and no workflow_run event said so)."""
    now = now or timezone.now()
    limit = timedelta(seconds=settings.TASUKU_ACTIONS_RESULT_TIMEOUT)
    failed = 0
    for run in ReviewRun.objects.filter(status=RunStatus.DISPATCHED, dispatched_at__lt=now - limit):
        minutes = int(limit.total_seconds() // 60)
        if _fail(run, f"dispatched to GitHub Actions {minutes} minutes ago and no result came "
                      f"back; see {run.actions_run_url}"):  # fmt: skip
            failed += 1
    return failed
