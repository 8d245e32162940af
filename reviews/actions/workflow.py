"""The `actions` runner: a review executed on a GitHub Actions runner (docs/reviewers.md, *Runners*).

1. The worker builds the run's `ReviewJob` as for any runner, then dispatches
   `.github/workflows/<TASUKU_ACTIONS_WORKFLOW>` on the repository's default branch (so a
   pull request cannot change what the review job does), with the run's id as input and
   `return_run_details`. The run is `dispatched`; no worker holds it. (`dispatch`)
2. The workflow's `tasuku-runner` fetches the job with its OIDC token, which must prove
   it is exactly that workflow run, still waiting. (`job_for`)
3. It posts the result back (accepted once). The run is queued again and the worker
   takes it through validation and publication as usual, with the stored result in
   place of running an engine. (`result_accept`)

Which workflow run is the run's. github.com says it in the dispatch's answer. A GitHub
Enterprise Server without `return_run_details` does not: the run's id is in its inputs,
which the workflow's `run-name` shows as the run's title (RUN_NAME), and the gateway
looks for the run this App dispatched with that title for TASUKU_ACTIONS_FIND_SECONDS
(GitHub creates it a few seconds late). A run still not listed stays `dispatched`
without its Actions run, which is attached (`attach`) by whichever comes first: the
reaper's look (`dispatched_sweep`, every 30 s), a `workflow_run` event showing the
title, or the runner itself, whose token names its workflow run (asked of GitHub for
its title). The same correlation finds the run of an earlier attempt that dispatched
and stopped before recording it, so it is not dispatched twice.

A `workflow_run` completed with no result, or no result after
TASUKU_ACTIONS_RESULT_TIMEOUT, fails the run at stage `sandbox`.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone
from pydantic import ValidationError

from repos import github
from repos.github import (
    ActionsRunInfo,
    CheckRunOutput,
    DispatchedRun,
    GitHubError,
    GitHubGateway,
    RepoRef,
)
from repos.github.actions import LOST_DISPATCH_WINDOW, workflow_path
from repos.models import Repository
from reviews.actions.oidc import subject_repository
from reviews.checks.checkruns import run_check_ensure
from reviews.checks.gate import reports_on_check
from reviews.core.context import Context
from reviews.models import ActionsDispatch, AttemptOutcome, ReviewRun, RunStatus, Stage
from reviews.queue.runs import (
    Held,
    attempt_end,
    run_actions_attached,
    run_dispatch,
    run_dispatched_cancel,
    run_dispatched_fail,
    run_job_fetched,
    run_result_received,
    run_ring,
)
from sandbox.contract import ReviewJob, ReviewResult
from sandbox.errors import StageError
from webhooks import payloads
from webhooks.routing import Outcome

logger = logging.getLogger(__name__)

RUN_NAME = "Tasuku review (run {})"  # docs/actions/tasuku.yml's `run-name`
_RUN_NAMED = re.compile(re.escape(RUN_NAME).replace(r"\{\}", r"(\d{1,18})"))
# How many runs the reaper looks for on GitHub at a time (one request each).
FINDS_PER_SWEEP = 20


def workflow_ref(full_name: str, branch: str) -> str:
    """What the OIDC token's `workflow_ref` and `job_workflow_ref` must say."""
    return f"{full_name}/{workflow_path(settings.TASUKU_ACTIONS_WORKFLOW)}@refs/heads/{branch}"


# --- 1. Dispatch (the worker) ---------------------------------------------------------------


def review_dispatch(ctx: Context, job: ReviewJob) -> str:
    """The `actions` runner's side of the pipeline (reviews/engines/boundary.py, DISPATCHERS): the
    run's workflow is dispatched and its check run links to the Actions run."""
    status = dispatch(ctx, job)
    _check_linked(ctx)
    return status


def _check_linked(ctx: Context) -> None:
    """The check run of a run dispatched to GitHub Actions links to the Actions run. The
    run is no longer held: a failure here is logged, the review goes on."""
    if not reports_on_check(ctx.run):
        return
    url = ctx.run.dispatch.actions_run_url
    try:
        check_id = run_check_ensure(
            ctx.run, created=False, installation=ctx.repository.installation
        )
        ctx.gateway.check_run_update(
            ctx.repo,
            check_run_id=check_id,
            status="in_progress",
            details_url=url,
            output=CheckRunOutput(
                title="Reviewing on GitHub Actions",
                summary=f"The review runs in [this GitHub Actions run]({url}); its findings are "
                "published here when the runner posts them back.",
            ),
        )
    except GitHubError as exc:
        logger.warning("run %s: could not link its check run to %s: %s", ctx.run.pk, url, exc)


def dispatch(ctx: Context, job: ReviewJob) -> str:
    """Dispatch the run's workflow and leave the run `dispatched`. GitHub errors are
    retried by the gateway (3 attempts in all) and then fail the run, with a check run
    that names the fix when the repository has no workflow or the App may not
    dispatch. A GitHub that does not say which run it started leaves the run
    `dispatched` without its Actions run, found later (see the module docstring)."""
    run: ReviewRun = ctx.run
    repository = ctx.repository
    if run.pull_request.from_fork:
        # A fork's code would be checked out where this repository's secrets (the model
        # key, the runner's token) are: never. GitHub itself holds fork pull requests'
        # workflows back for approval for the same reason.
        fork = run.pull_request.head_repository or "a fork since deleted"
        raise StageError(
            f"This pull request comes from a fork ({fork}): its code is not run in this "
            "repository's GitHub Actions, where the workflow holds this repository's "
            "secrets. Review forks with a reviewer on the local or Docker runner (the "
            "repository's policy, or the reviewer's runner in the admin).",
            permanent=True,
            stage=Stage.SANDBOX,
            code="actions-fork",
        )
    info = ctx.repository_info or ctx.gateway.repository_get(ctx.repo)
    branch = info.default_branch or repository.default_branch or "main"
    workflow = settings.TASUKU_ACTIONS_WORKFLOW
    run_name = RUN_NAME.format(run.pk)
    held: Held = ctx.held
    dispatched: DispatchedRun | None = None
    try:
        if held.attempt > 1:
            # An earlier attempt may have dispatched and stopped before recording it.
            since = (run.started_at or timezone.now()) - LOST_DISPATCH_WINDOW
            dispatched = ctx.gateway.workflow_run_find(
                ctx.repo, workflow=workflow, ref=branch, run_name=run_name, since=since
            )
        if dispatched is None:
            dispatched = ctx.gateway.workflow_dispatch(
                ctx.repo,
                workflow=workflow,
                ref=branch,
                # The workflow checks out `head_sha`; the runner checks the checkout is at
                # the head its job names, so a wrong input cannot change what is reviewed.
                inputs={"tasuku_run": str(run.pk), "head_sha": run.head_sha},
                # The template's `run-name`: how the run is found when GitHub does not
                # say which it is, or its answer was lost.
                run_name=run_name,
            )
    except GitHubError as exc:
        raise StageError(
            _dispatch_problem(exc), permanent=True, stage=Stage.SANDBOX, code=_dispatch_code(exc)
        ) from exc
    if dispatched is not None:
        url, run_id = dispatched.html_url, dispatched.workflow_run_id
        reason = f"dispatched to GitHub Actions: {url}"
        note = f"dispatched as Actions run {run_id}"
    else:
        # Until its run is found, the check run links to the workflow's runs.
        url, run_id = _workflow_page(info.clone_url, workflow), None
        reason = (
            f"dispatched to GitHub Actions; GitHub did not say which workflow run it started "
            f"and has not listed “{run_name}” yet: it is looked for again"
        )
        note = f"dispatched; GitHub has not listed “{run_name}” yet"
    now = timezone.now()
    recorded = {
        "job": job.model_dump(mode="json"),
        "actions_run_id": run_id,
        "actions_run_attempt": 1,
        "actions_run_url": url,
        "actions_workflow_ref": workflow_ref(repository.full_name, branch),
        "dispatched_at": now,
    }
    with transaction.atomic():
        updated = run_dispatch(held, reason=reason, dispatch=recorded)
        if updated:
            attempt_end(
                run.pk, outcome=AttemptOutcome.SUCCEEDED, now=now, stage=Stage.SANDBOX, error=note
            )
    run.dispatch = ActionsDispatch(run=run, **recorded)  # as recorded (the check links it)
    logger.info("run %s %s", run.pk, note)
    return RunStatus.DISPATCHED


def _workflow_page(clone_url: str, workflow: str) -> str:
    """The workflow's page of runs on GitHub (from the repository's clone URL, which is
    on GitHub's web host, github.com or an Enterprise Server's)."""
    web = clone_url.removesuffix(".git")
    if not web.startswith(("https://", "http://")):
        return ""
    name = workflow.rsplit("/", 1)[-1]
    return f"{web}/actions/workflows/{name}" if not name.isdigit() else f"{web}/actions"


# --- Finding the workflow run of a run dispatched without its id ----------------------------


def _since(run: ReviewRun) -> datetime:
    return (run.dispatch.dispatched_at or timezone.now()) - LOST_DISPATCH_WINDOW


def _ref(run: ReviewRun) -> str:
    """The dispatched ref (`refs/heads/<default branch>`), from the recorded workflow ref."""
    return run.dispatch.actions_workflow_ref.rpartition("@")[2] or "refs/heads/main"


def _unlisted() -> Any:
    """Dispatched runs whose workflow run GitHub has not been seen to list yet."""
    return ReviewRun.objects.select_related(
        "pull_request__repository__installation", "dispatch"
    ).filter(status=RunStatus.DISPATCHED, dispatch__actions_run_id__isnull=True)


def attach(run: ReviewRun, found: DispatchedRun, how: str) -> bool:
    """Record the workflow run found for a run dispatched without its id (once)."""
    try:
        with transaction.atomic():
            attached = run_actions_attached(
                run.pk,
                actions_run_id=found.workflow_run_id,
                url=found.html_url,
                reason=f"dispatched to GitHub Actions: {found.html_url} (found {how})",
            )
    except IntegrityError:  # another run already has that Actions run: not ours
        logger.warning("run %s: Actions run %s is another run's", run.pk, found.workflow_run_id)
        return False
    if attached:
        run.dispatch.actions_run_id = found.workflow_run_id
        run.dispatch.actions_run_url = found.html_url
        logger.info("run %s is Actions run %s (found %s)", run.pk, found.workflow_run_id, how)
    return bool(attached)


def _attach_shown(
    gateway: GitHubGateway, shown: ActionsRunInfo, how: str, **repository
) -> ReviewRun | None:
    """The unlisted run that the workflow run `shown` (as GitHub shows it) is, attached;
    None when its title names no such run or it is not the one Tasuku dispatched."""
    named = _RUN_NAMED.fullmatch(shown.display_title)
    run = named and _unlisted().filter(pk=int(named.group(1)), **repository).first()
    if not run or not gateway.workflow_run_ours(
        shown,
        run_name=RUN_NAME.format(run.pk),
        ref=_ref(run),
        since=_since(run),
        workflow=settings.TASUKU_ACTIONS_WORKFLOW,
    ):
        return None
    return run if attach(run, shown.dispatched(), how) else None


def _runs_find(cutoff: datetime) -> int:
    """The reaper's look for the workflow runs of runs dispatched without their id (not
    those past their result timeout: they fail)."""
    waiting = list(
        _unlisted()
        .filter(dispatch__dispatched_at__gte=cutoff)
        .order_by("dispatch__dispatched_at")[:FINDS_PER_SWEEP]
    )
    if not waiting:
        return 0
    try:
        gateway = github.gateway()
    except github.GitHubNotConfigured as exc:
        logger.warning("dispatched runs not looked for: %s", exc)
        return 0
    found = 0
    for run in waiting:
        repository = run.pull_request.repository
        try:
            listed = gateway.workflow_run_find(
                RepoRef.of(repository),
                workflow=settings.TASUKU_ACTIONS_WORKFLOW,
                ref=_ref(run),
                run_name=RUN_NAME.format(run.pk),
                since=_since(run),
            )
        except GitHubError as exc:
            logger.warning("run %s: could not look for its Actions run: %s", run.pk, exc)
            continue
        if listed is not None and attach(run, listed, "in the workflow's runs"):
            found += 1
    return found


def _dispatch_problem(exc: GitHubError) -> str:
    """The gateway's refusals name their cause and fix; say where the template is."""
    if not exc.permanent:
        return f"GitHub did not accept the workflow dispatch after 3 attempts: {exc}"
    return f"{exc} The workflow to add is docs/actions/tasuku.yml in Tasuku's repository."


def _dispatch_code(exc: GitHubError) -> str:
    """A refused dispatch is the App's Actions permission or the repository's workflow;
    GitHub's weather and the App's credentials keep their own codes."""
    if not exc.permanent or exc.code in (
        "github-credentials",
        "actions-permission",
        "actions-workflow",
    ):
        return exc.code
    if exc.code == "github-permission":
        return "actions-permission"
    return "actions-workflow"


# --- 2. and 3. The runner's requests (the web process) -----------------------------------


class Refused(Exception):
    """The caller is not the dispatched run, or the run is not waiting: the API answers
    403 and says nothing more. The message is for the log."""


class Unavailable(Exception):
    """GitHub could not be asked which run the caller is: the API answers 503 (the
    runner tries again)."""


@dataclass(frozen=True)
class JobAnswer:
    status: str  # "review" | "cancelled"
    run: ReviewRun
    reason: str = ""


def run_for(claims: dict[str, Any]) -> ReviewRun:
    """The dispatched run the token proves to be, or Refused."""
    try:
        run_id = int(str(claims.get("run_id", "")))
        attempt = int(str(claims.get("run_attempt", "")))
    except ValueError as exc:
        raise Refused(f"run_id/run_attempt are not numbers: {claims.get('run_id')!r}") from exc
    runs = ReviewRun.objects.select_related(
        "pull_request__repository__installation", "reviewer", "dispatch"
    )
    run = runs.filter(dispatch__actions_run_id=run_id).first()
    if run is None and _token_attach(claims, run_id):
        run = runs.filter(dispatch__actions_run_id=run_id).first()
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
    if attempt != run.dispatch.actions_run_attempt:
        raise Refused(
            f"run attempt {attempt}, Tasuku dispatched {run.dispatch.actions_run_attempt}"
        )
    expected = run.dispatch.actions_workflow_ref
    for claim in ("workflow_ref", "job_workflow_ref"):
        if claim in claims and claims[claim] != expected:
            raise Refused(f"{claim} {claims[claim]!r} is not {expected!r}")
    if "workflow_ref" not in claims and "job_workflow_ref" not in claims:
        raise Refused("the token names no workflow")
    return run


def _token_attach(claims: dict[str, Any], run_id: int) -> bool:
    """A token of a workflow run Tasuku has not matched to its run yet (GitHub did not
    say which run the dispatch started): when its repository has runs waiting for theirs,
    GitHub is asked for that workflow run, and its title (and actor, branch and time)
    says whose it is. The token's other claims are checked afterwards as for any run."""
    if claims.get("event_name", "workflow_dispatch") != "workflow_dispatch":
        return False
    repository = (
        _unlisted()
        .filter(
            pull_request__repository__full_name__iexact=str(claims.get("repository", "")),
            dispatch__actions_workflow_ref=claims.get("workflow_ref")
            or claims.get("job_workflow_ref"),
        )
        .values_list("pull_request__repository", flat=True)
        .first()
    )
    if repository is None:
        return False
    repo = Repository.objects.select_related("installation").get(pk=repository)
    try:
        gateway = github.gateway()
        shown = gateway.actions_run_get(RepoRef.of(repo), run_id=run_id)
        return (
            _attach_shown(gateway, shown, "by its runner's token", pull_request__repository=repo)
            is not None
        )
    except github.GitHubNotConfigured as exc:
        raise Refused(f"Actions run {run_id} not looked for: {exc}") from exc
    except GitHubError as exc:
        if exc.permanent:
            raise Refused(f"GitHub does not show Actions run {run_id}: {exc}") from exc
        raise Unavailable(f"could not ask GitHub about Actions run {run_id}: {exc}") from exc


def job_for(claims: dict[str, Any]) -> JobAnswer:
    """The job of the dispatched run the token proves to be, while it waits. A head
    that moved meanwhile cancels the run: the answer says so."""
    run = run_for(claims)
    if run.status != RunStatus.DISPATCHED or run.runner_result is not None or not run.dispatch.job:
        raise Refused(f"run {run.pk} is {run.status}, not waiting for its runner")
    pull_request = run.pull_request
    if pull_request.head_sha and pull_request.head_sha != run.head_sha:
        reason = (
            f"the pull request's head moved to {pull_request.head_sha[:12]} before the "
            "runner fetched its job"
        )
        run_dispatched_cancel(run.pk, reason, superseded_by=pull_request.head_sha)
        return JobAnswer("cancelled", run, reason)
    run_job_fetched(run.pk)
    return JobAnswer("review", run)


@dataclass(frozen=True)
class ResultAnswer:
    status: str  # "accepted" | "already accepted" | "failed"
    run: ReviewRun


def result_accept(claims: dict[str, Any], body: dict[str, Any]) -> ResultAnswer:
    """Accept the runner's result (or its failure) once: a repeat is answered as the
    first was and changes nothing. A result that does not match the contract fails
    the run (ValueError carries the reason for the caller)."""
    run = run_for(claims)
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
        _fail(
            run,
            f"the GitHub Actions runner failed: {reason}",
            code="actions-runner-failed",
            received=now,
        )
        return ResultAnswer("failed", run)
    try:
        result = ReviewResult.model_validate(body["result"])
    except ValidationError as exc:
        problem = f"the runner's result does not match the contract: {exc.error_count()} errors"
        _fail(run, problem + f" ({str(exc)[:500]})", code="engine-output", received=now)
        raise ValueError(problem) from exc
    with transaction.atomic():
        if not run_result_received(
            run.pk,
            result.model_dump(mode="json"),
            received=now,
            reason="the GitHub Actions runner posted its result",
        ):
            return ResultAnswer("already accepted", run)
        run_ring(run)
    return ResultAnswer("accepted", run)


def _fail(run: ReviewRun, reason: str, *, code: str, received=None) -> bool:
    updates: dict[str, Any] = {
        "stage": Stage.SANDBOX,
        "reason": reason[:2000],
        "error_code": code,
        "finished_at": timezone.now(),
    }
    if received is not None:
        updates["result_received_at"] = received
    with transaction.atomic():
        failed = run_dispatched_fail(run.pk, **updates)
    if failed:
        logger.warning("run %s failed: %s", run.pk, reason)
    return bool(failed)


# --- GitHub's side: the workflow run ended; the fallback -----------------------------------


def workflow_run_event(payload: payloads.WorkflowRunEvent, *, delivery_id: int) -> Outcome:
    """A workflow run of a run dispatched without its id, shown by any `workflow_run`
    event: it is attached. `workflow_run.completed` of a run Tasuku dispatched that
    posted no result: the run fails with the Actions run's conclusion as its reason."""
    workflow_run = payload.workflow_run
    action = payload.action
    runs = ReviewRun.objects.select_related("dispatch")
    run = runs.filter(dispatch__actions_run_id=workflow_run.id).first()
    attached = run is None and _event_attach(payload)
    if attached:
        run = runs.filter(dispatch__actions_run_id=workflow_run.id).first()
    if action != "completed":
        if attached and run is not None:
            return Outcome(f"run {run.pk} is Actions run {run.dispatch.actions_run_id}")
        return Outcome.ignore(f"workflow_run.{action} needs no action")
    if run is None:
        return Outcome.ignore("not a workflow run Tasuku dispatched")
    if run.status != RunStatus.DISPATCHED:
        return Outcome(f"run {run.pk} already has its result ({run.status})", ignored=True)
    conclusion = workflow_run.conclusion or "unknown"
    reason = (
        f"the GitHub Actions run ended ({conclusion}) without posting a result"
        + (" (it was cancelled)" if conclusion == "cancelled" else "")
        + (": it timed out" if conclusion == "timed_out" else "")
        + f"; see {workflow_run.html_url or run.dispatch.actions_run_url}"
    )
    if _fail(run, reason, code="actions-no-result"):
        return Outcome(f"run {run.pk} failed: {reason}")
    return Outcome(f"run {run.pk} already has its result", ignored=True)


def _event_attach(payload: payloads.WorkflowRunEvent) -> bool:
    repository_id = payload.repository.id
    if not repository_id or not _RUN_NAMED.fullmatch(payload.workflow_run.display_title):
        return False
    try:
        # The gateway's own model of a workflow run reads more than this event's does.
        shown = ActionsRunInfo.model_validate(payload.raw["workflow_run"])
    except ValidationError:
        return False
    try:
        gateway = github.gateway()
        found = _attach_shown(
            gateway,
            shown,
            "by its workflow_run event",
            pull_request__repository__github_id=repository_id,
        )
    except (GitHubError, github.GitHubNotConfigured) as exc:
        logger.warning("workflow run %s not matched: %s", shown.id, exc)
        return False
    return found is not None


def dispatched_sweep(now=None) -> int:
    """Look for the workflow runs of runs dispatched without their id; fail runs
    dispatched longer ago than TASUKU_ACTIONS_RESULT_TIMEOUT with no result (the runner
    never reached Tasuku and no workflow_run event said so, or GitHub never listed the
    run). Returns how many failed."""
    now = now or timezone.now()
    limit = timedelta(seconds=settings.TASUKU_ACTIONS_RESULT_TIMEOUT)
    _runs_find(now - limit)
    failed = 0
    for run in ReviewRun.objects.select_related("dispatch").filter(
        status=RunStatus.DISPATCHED, dispatch__dispatched_at__lt=now - limit
    ):
        minutes = int(limit.total_seconds() // 60)
        if run.dispatch.actions_run_id is None:
            code = "actions-run-not-listed"
            reason = (
                f"dispatched to GitHub Actions {minutes} minutes ago, and GitHub never listed "
                f"its workflow run: no run of {workflow_path(settings.TASUKU_ACTIONS_WORKFLOW)} "
                f"dispatched by Tasuku is named “{RUN_NAME.format(run.pk)}” (GitHub did not "
                f"say which run it started; the workflow's `run-name` must be the one in "
                f"docs/actions/tasuku.yml); see {run.dispatch.actions_run_url}"
            )
        else:
            code = "actions-no-result"
            reason = (
                f"dispatched to GitHub Actions {minutes} minutes ago and no result came "
                f"back; see {run.dispatch.actions_run_url}"
            )
        if _fail(run, reason, code=code):
            failed += 1
    return failed
