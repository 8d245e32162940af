"""Review passes (docs/review-passes.md): what the API and the worker do to a task.

- `task_create`, `task_handoff`: a task with its pull requests; its pass settings.
- `task_done`: the author finished: heads checked, then the next pass starts.
- `pass_start`, `pass_after_run`, `pass_conclude`: a pass is one review run per pull
  request at pinned heads; when they have all ended the pass is clean, has findings,
  failed, or was superseded — and the task moves on or is stuck.
- `task_evaluate`: a clean pass is done once the required checks are green and every
  counted comment is answered.
- `answers_record`, `answer_post`: the author's answers, posted as the author's App.
- `action_take`: run another pass, message the author, return as is, recall.
- `comment_record`, `tasks_sweep`: comments and checks arriving from GitHub.

Reads for the API and the board are in reviews/passes/selectors.py.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from repos import github
from repos.github import GitHubError
from repos.models import Repository, Reviewer
from repos.policy import Engine, Trigger
from repos.selectors import effective_config, reviewer_config
from reviews.escaping import block_text, inline_text
from reviews.markers import marker as signed_marker
from reviews.models import (
    RUN_FINAL_STATES,
    Finding,
    FindingState,
    PullRequest,
    Review,
    ReviewRun,
    ReviewState,
    RunStatus,
    Stage,
)
from reviews.passes.models import (
    MAX_PASSES_RANGE,
    PASS_FINAL_STATES,
    TASK_FINAL_STATES,
    Answer,
    AnswerKind,
    ApiScope,
    AuthorMessage,
    PassStatus,
    ReviewPass,
    Task,
    TaskComment,
    TaskPullRequest,
    TaskState,
)
from reviews.runs import CONCLUDE_TASK, run_ring
from tasuku import durable
from tasuku.broker import ring

logger = logging.getLogger(__name__)

PULL_REF = re.compile(r"^(?P<repo>[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+)#(?P<number>[1-9]\d{0,9})$")
LOGIN = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})(?:\[bot\])?$")
SHA = re.compile(r"^[0-9a-f]{7,40}$")
COUNTED_ASSOCIATIONS = ("OWNER", "MEMBER", "COLLABORATOR")
ANSWER_TASK = "reviews.tasks.answer_post"
MAX_PULLS = 20

# The author's answers are a durable queue (tasuku/durable.py): an answer GitHub would
# not take now (5xx, no answer, a rate limit) waits and is posted later, once. The author
# App's installation is not Tasuku's, so its limits do not quiet Tasuku's queues.
ANSWERS = durable.Queue(
    model="reviews.Answer",
    task=ANSWER_TASK,
    name="answer",
    waiting=(Answer.Posting.QUEUED,),
    working=Answer.Posting.POSTING,
    failed=Answer.Posting.FAILED,
    status="posting",
    attempts="tries",
    not_before="next_try_at",
    ring_again=timedelta(minutes=2),
)


class TaskError(Exception):
    """A request the service refuses: `status` is the HTTP status the API answers."""

    def __init__(self, message: str, *, status: int = 400, details: Any = None) -> None:
        super().__init__(message)
        self.status = status
        self.details = details


# --- Creating and handing off -----------------------------------------------------------


def pull_ref_parse(text: str) -> tuple[str, int]:
    match = PULL_REF.match((text or "").strip())
    if match is None:
        raise TaskError(f"{text!r} is not a pull request reference like owner/repo#12.")
    return match["repo"], int(match["number"])


def task_create(
    *, owner, title: str, author_name: str, author_login: str = "", pulls: list[str]
) -> Task:
    """A task with its pull requests; each must be in a repository Tasuku's App is
    installed on and reviews."""
    if not pulls:
        raise TaskError("A task needs at least one pull request.")
    if len(pulls) > MAX_PULLS:
        raise TaskError(f"A task has at most {MAX_PULLS} pull requests.")
    if author_login and not LOGIN.match(author_login):
        raise TaskError(f"{author_login!r} is not a GitHub login.")
    refs = [pull_ref_parse(p) for p in pulls]
    if len(set(refs)) != len(refs):
        raise TaskError("A pull request is listed twice.")
    repositories = {}
    for full_name, _ in refs:
        repository = (
            Repository.objects.select_related("installation")
            .filter(full_name__iexact=full_name, removed_at__isnull=True)
            .first()
        )
        if not scope_covers(owner, repository):
            # What the caller may not name is not found: its existence is not told.
            raise TaskError(
                f"{full_name} is not a repository your API token may name (an administrator "
                "grants repositories under API scopes in the admin).",
                status=404,
            )
        if repository is None or not repository.installation.active:
            raise TaskError(
                f"{full_name} is not a repository Tasuku's GitHub App is installed on.",
                status=422,
            )
        repositories[full_name] = repository
    # Review passes review an agent's work: only pull requests the author's App opened,
    # never a person's (whose pull request an approval would then speak for).
    for full_name, number in refs:
        pull_authored_check(repositories[full_name], number)
    with transaction.atomic():
        task = Task.objects.create(
            owner=owner, title=title, author_name=author_name, author_login=author_login
        )
        for full_name, number in refs:
            repository = repositories[full_name]
            TaskPullRequest.objects.create(
                task=task,
                repository=repository,
                number=number,
                pull_request=PullRequest.objects.filter(
                    repository=repository, number=number
                ).first(),
            )
    return task


def scope_covers(user, repository: Repository | None) -> bool:
    """Whether `user`'s API token may name `repository` in a task: a superuser may name
    any; anyone else, what their API scope grants (reviews.passes.models.ApiScope)."""
    if getattr(user, "is_superuser", False):
        return True
    if repository is None:
        return False
    scope = ApiScope.objects.filter(user=user).first()
    return scope is not None and scope.covers(repository)


def scope_refusal(task: Task) -> str:
    """Why the task's owner may no longer act on it ("" when they may): one of its
    repositories has left their API scope since the task was made."""
    for tpr in task.pulls.select_related("repository"):
        if not scope_covers(task.owner, tpr.repository):
            return f"{tpr.repository.full_name} is no longer in your API scope."
    return ""


def pull_authored_check(repository: Repository, number: int) -> None:
    """Refuse (403) a pull request that the author's App did not open, asked of GitHub."""
    from reviews.passes.author import author_bot_login

    ref = f"{repository.full_name}#{number}"
    try:
        expected = author_bot_login()
    except GitHubError as exc:
        raise TaskError(
            "The author's App is not configured or not reachable, so Tasuku cannot tell "
            f"whether it opened {ref}: {exc}",
            status=422 if exc.permanent else 503,
        ) from exc
    try:
        pull = github.gateway().pull_request_get(
            installation_id=repository.installation.github_id,
            repository_id=repository.github_id,
            full_name=repository.full_name,
            number=number,
        )
    except GitHubError as exc:
        if exc.status == 404:
            raise TaskError(f"{ref}: there is no such pull request.", status=404) from exc
        raise TaskError(
            f"Could not read {ref} from GitHub ({exc}); try again.",
            status=422 if exc.permanent else 503,
        ) from exc
    if pull.author_login.lower() != expected.lower():
        raise TaskError(
            f"{ref} was opened by {pull.author_login}: review passes review pull requests "
            f"opened by the author's App ({expected}), never anyone else's.",
            status=403,
        )


def task_handoff(
    task: Task,
    *,
    enabled: bool,
    reviewer: str | None,
    model: str = "",
    skill: str = "",
    max_passes: int = 3,
    counted_bots: list[str] | None = None,
    required_checks: list[str] | None = None,
) -> Task:
    """Set the task's review-pass settings, refusing what cannot be honoured."""
    if task.state in TASK_FINAL_STATES:
        raise TaskError(f"The task is {task.get_state_display()}.", status=409)
    counted_bots = counted_bots or []
    required_checks = required_checks or []
    if not MAX_PASSES_RANGE[0] <= max_passes <= MAX_PASSES_RANGE[1]:
        raise TaskError(
            f"max_passes must be between {MAX_PASSES_RANGE[0]} and {MAX_PASSES_RANGE[1]}."
        )
    for login in counted_bots:
        if not isinstance(login, str) or not LOGIN.match(login):
            raise TaskError(f"counted_bots: {login!r} is not a GitHub login.")
    for name in required_checks:
        if not isinstance(name, str) or not name.strip() or len(name) > 200:
            raise TaskError(f"required_checks: {name!r} is not a check name.")
    chosen = None
    if enabled:
        if not reviewer:
            raise TaskError("Name the reviewer that reviews the passes (a reviewer's slug).")
        chosen = Reviewer.objects.filter(slug=reviewer).first()
        if chosen is None or not chosen.enabled:
            raise TaskError(f"There is no enabled reviewer {reviewer!r}.", status=422)
        if model and chosen.engine == Engine.STATIC:
            raise TaskError("The static reviewer has no model to choose.", status=422)
        _reviewer_usable(chosen)
        _apps_usable()
    elif reviewer:
        chosen = Reviewer.objects.filter(slug=reviewer).first()
    Task.objects.filter(pk=task.pk).update(
        passes_enabled=enabled,
        reviewer=chosen,
        reviewer_model=model,
        reviewer_skill=skill,
        max_passes=max_passes,
        counted_bots=counted_bots,
        required_checks=required_checks,
    )
    task.refresh_from_db()
    return task


def _reviewer_usable(reviewer: Reviewer) -> None:
    from reviews.engines import engine_environment

    if not reviewer.provider:
        return
    try:
        env = engine_environment(reviewer)
    except Exception as exc:  # noqa: BLE001 (a sealed key that cannot be read, say)
        raise TaskError(f"The reviewer {reviewer.slug!r} cannot run: {exc}", status=422) from exc
    if not any(name.endswith("_API_KEY") for name in env) and not any(
        name.endswith("_BASE_URL") for name in env
    ):
        raise TaskError(
            f"The reviewer {reviewer.slug!r} has no {reviewer.provider} API key: set one on the "
            "reviewer in the admin, or the site's key.",
            status=422,
        )


def _apps_usable() -> None:
    try:
        github.credentials()
    except GitHubError as exc:
        raise TaskError(
            f"The reviewer App (Tasuku's GitHub App) is not configured: {exc}", status=422
        ) from exc
    from reviews.passes.author import author_configured

    missing = author_configured()
    if missing:
        raise TaskError(
            "The author's App is not configured, so answers cannot be posted as the author: "
            f"set {', '.join(missing)}.",
            status=422,
        )


# --- Done, and the passes ---------------------------------------------------------------


@dataclass
class DoneOutcome:
    started: ReviewPass | None = None
    told: str = ""
    stuck: str = ""
    differing: list[dict] = field(default_factory=list)


def task_done(task: Task, *, heads: dict[str, str], uncommitted: bool = False) -> DoneOutcome:
    """The author says it is done: every pull request's head on GitHub must be the one
    it reports, with nothing uncommitted. If not, it is told once (as data, in its
    feedback) to push or discard; told already, the task is stuck. Otherwise the next
    pass starts."""
    if task.state in TASK_FINAL_STATES:
        raise TaskError(f"The task is {task.get_state_display()}.", status=409)
    if not task.passes_enabled:
        raise TaskError(
            "Review passes are not enabled for this task: hand it off first.", status=409
        )
    if task.state == TaskState.STUCK:
        raise TaskError(
            f"The review is stuck ({task.stuck_reason}); the task's owner decides what happens "
            "next: run another pass, message the author, return it as is, or recall it.",
            status=409,
        )
    if task.passes.filter(status=PassStatus.RUNNING).exists():
        raise TaskError("A pass is running; wait for its feedback.", status=409)
    pulls = list(task.pulls.select_related("repository__installation"))
    by_ref = {str(p): p for p in pulls}
    unknown = sorted(set(heads) - set(by_ref))
    if unknown:
        raise TaskError(f"Not pull requests of this task: {', '.join(unknown)}.")
    for ref, sha in heads.items():
        if not isinstance(sha, str) or not SHA.match(sha):
            raise TaskError(f"{ref}: {sha!r} is not a commit sha.")
    differing = []
    for tpr in pulls:
        reported = heads.get(str(tpr), "")
        pull_request = _refresh(tpr)
        TaskPullRequest.objects.filter(pk=tpr.pk).update(reported_head=reported)
        if pull_request.state != "open":
            task_stuck(task, f"{tpr} is {'merged' if pull_request.merged else 'closed'}")
            return DoneOutcome(stuck=task.stuck_reason)
        if not reported or not pull_request.head_sha.startswith(reported):
            differing.append({"pull_request": str(tpr), "reported": reported,
                              "on_github": pull_request.head_sha})  # fmt: skip
    if differing or uncommitted:
        what = "; ".join(
            f"{d['pull_request']} is at {d['on_github'][:12]} on GitHub, you reported "
            f"{d['reported'][:12] or 'nothing'}"
            for d in differing
        )
        if uncommitted:
            what = "you have uncommitted changes" + (f"; {what}" if what else "")
        if task.told_to_push_at is not None:
            task_stuck(task, f"the author's heads still differ after being told: {what}")
            return DoneOutcome(stuck=task.stuck_reason, differing=differing)
        text = (
            f"Not reviewed: {what}. Push your commits (or discard what you do not mean to "
            "submit), then report done again with the heads you pushed."
        )
        with transaction.atomic():
            Task.objects.filter(pk=task.pk).update(
                told_to_push_at=timezone.now(), state=TaskState.AUTHOR_FIXING
            )
            AuthorMessage.objects.create(task=task, kind="push_or_discard", text=text)
        task.refresh_from_db()
        return DoneOutcome(told=text, differing=differing)
    Task.objects.filter(pk=task.pk).update(told_to_push_at=None)
    task.refresh_from_db()
    return DoneOutcome(started=pass_start(task))


def _refresh(tpr: TaskPullRequest) -> PullRequest:
    from reviews.triggers import pull_request_refresh

    pull_request = pull_request_refresh(tpr.repository.installation, tpr.repository, tpr.number)
    if tpr.pull_request_id != pull_request.pk:
        TaskPullRequest.objects.filter(pk=tpr.pk).update(pull_request=pull_request)
        tpr.pull_request = pull_request
    return pull_request


def passes_allowed(task: Task) -> int:
    return task.max_passes + task.extra_passes


def pass_start(task: Task) -> ReviewPass:
    """Pass N+1: pin each pull request's head and queue a review run for it."""
    reviewer = task.reviewer
    if reviewer is None:
        raise TaskError("The task has no reviewer.", status=409)
    pulls = list(task.pulls.select_related("repository__installation", "pull_request"))
    with transaction.atomic():
        number = (task.passes.order_by("-number").values_list("number", flat=True).first() or 0) + 1
        review_pass = ReviewPass.objects.create(
            task=task,
            number=number,
            heads={str(tpr.pk): tpr.pull_request.head_sha for tpr in pulls},
        )
        Task.objects.filter(pk=task.pk).update(state=TaskState.REVIEWING, stuck_reason="")
        for tpr in pulls:
            _pass_run(review_pass, tpr, reviewer, task)
    task.refresh_from_db()
    return review_pass


def _pass_run(
    review_pass: ReviewPass, tpr: TaskPullRequest, reviewer: Reviewer, task: Task
) -> ReviewRun:
    """The run of one pull request in a pass: the task's reviewer (its model and skill
    as the handoff set them), triage off — a pass always reviews in depth."""
    base = effective_config(tpr.repository)
    config_reviewer = reviewer_config(reviewer)
    overrides: dict[str, Any] = {}
    if task.reviewer_model:
        overrides["model"] = task.reviewer_model
    if task.reviewer_skill:
        overrides["skills"] = "\n\n".join(
            s for s in (config_reviewer.skills, task.reviewer_skill) if s
        )
    config = base.model_copy(
        update={
            "reviewers": (config_reviewer.model_copy(update=overrides),),
            "triage_enabled": False,
        }
    )
    pull_request = tpr.pull_request
    # A run of this reviewer already waiting for this pull request gives way to the pass.
    for pk in ReviewRun.objects.filter(
        pull_request=pull_request, reviewer=reviewer, status=RunStatus.QUEUED
    ).values_list("pk", flat=True):
        if ReviewRun.objects.filter(pk=pk, status=RunStatus.QUEUED).update(
            status=RunStatus.CANCELLED,
            reason=f"superseded by pass {review_pass.number} of task {task.pk}",
        ):
            ring(CONCLUDE_TASK, pk, name=f"conclude-{pk}")
    run = ReviewRun.objects.create(
        pull_request=pull_request,
        reviewer=reviewer,
        head_sha=pull_request.head_sha,
        base_sha=pull_request.base_sha,
        trigger=Trigger.REVIEW_PASS.value,
        status=RunStatus.QUEUED,
        config=config.model_dump(mode="json"),
        review_pass=review_pass,
    )
    run_ring(run)
    return run


def pass_after_run(review_pass_id: int) -> None:
    """A run of the pass ended: when all have, conclude the pass."""
    review_pass = ReviewPass.objects.select_related("task").get(pk=review_pass_id)
    if review_pass.status != PassStatus.RUNNING:
        return
    if review_pass.runs.exclude(status__in=RUN_FINAL_STATES).exists():
        return
    pass_conclude(review_pass)


def pass_conclude(review_pass: ReviewPass) -> None:
    """All runs of the pass ended. Failed, incomplete or refused by GitHub → stuck; a
    head moved meanwhile → superseded (the author reports done again); otherwise
    clean or with findings, and the task moves on."""
    task = review_pass.task
    runs = list(review_pass.runs.select_related("pull_request"))
    now = timezone.now()
    problem = ""
    superseded = []
    for run in runs:
        review = Review.objects.filter(run=run).first()
        if run.status == RunStatus.CANCELLED:
            superseded.append(str(run.pull_request))
        elif run.status == RunStatus.SKIPPED:
            problem = f"{run.pull_request} was not reviewed: {run.reason}"
        elif run.status == RunStatus.FAILED:
            if run.stage == Stage.PUBLICATION:
                problem = f"GitHub refused a post on {run.pull_request}: {run.reason}"
            else:
                problem = f"the reviewer failed on {run.pull_request} at {run.stage}: {run.reason}"
        elif review is None or review.state == ReviewState.INCOMPLETE:
            why = review.incomplete_reason if review else "no review was recorded"
            problem = f"the reviewer did not submit a review of {run.pull_request}: {why}"
    if problem or superseded:
        status = PassStatus.FAILED if problem else PassStatus.SUPERSEDED
        reason = problem or (
            f"the head of {', '.join(superseded)} moved during the pass; report done again"
        )
        if ReviewPass.objects.filter(pk=review_pass.pk, status=PassStatus.RUNNING).update(
            status=status, reason=reason, finished_at=now
        ):
            if problem:
                task_stuck(task, problem)
            else:
                Task.objects.filter(pk=task.pk).exclude(state__in=TASK_FINAL_STATES).update(
                    state=TaskState.AUTHOR_FIXING
                )
                AuthorMessage.objects.create(task=task, kind="pass_superseded", text=reason)
        return

    counts = pass_counts(review_pass, runs)
    clean = counts["blocking_open"] == 0
    # Race: two runs ending at once both conclude; the conditional update lets one win.
    if not ReviewPass.objects.filter(pk=review_pass.pk, status=PassStatus.RUNNING).update(
        status=PassStatus.CLEAN if clean else PassStatus.FINDINGS, finished_at=now, **counts
    ):
        return
    review_pass.refresh_from_db()
    if clean:
        Task.objects.filter(pk=task.pk).exclude(state__in=TASK_FINAL_STATES).update(
            state=TaskState.APPROVED
        )
        task_evaluate(task)
        return
    previous = task.passes.filter(number=review_pass.number - 1).first()
    if review_pass.number >= passes_allowed(task):
        task_stuck(
            task,
            f"{review_pass.number} passes (the most allowed) and {counts['blocking_open']} "
            f"blocking finding{'s' if counts['blocking_open'] != 1 else ''} still open",
        )
    elif (
        counts["blocking_new"]
        and previous is not None
        and previous.blocking_new
        and review_pass.number >= 2
        and previous.number >= 2
    ):
        task_stuck(
            task,
            f"two passes in a row (passes {previous.number} and {review_pass.number}) found new "
            "blocking problems in the author's fixes",
        )
    else:
        Task.objects.filter(pk=task.pk).exclude(state__in=TASK_FINAL_STATES).update(
            state=TaskState.AUTHOR_FIXING
        )


def pass_reviews(review_pass: ReviewPass, runs: list[ReviewRun] | None = None) -> list[Review]:
    runs = runs if runs is not None else list(review_pass.runs.all())
    return list(Review.objects.filter(run__in=runs).select_related("run__pull_request"))


def pass_counts(review_pass: ReviewPass, runs: list[ReviewRun] | None = None) -> dict[str, int]:
    """Blocking findings open, and new in this pass (raised by no earlier pass of the
    task on that pull request); nits open; earlier findings resolved at its heads."""
    reviews = pass_reviews(review_pass, runs)
    open_findings = list(Finding.objects.filter(review__in=reviews, state=FindingState.OPEN))
    earlier_runs = ReviewRun.objects.filter(
        review_pass__task=review_pass.task, review_pass__number__lt=review_pass.number
    )
    seen_before = set(
        Finding.objects.filter(review__run__in=earlier_runs).values_list(
            "pull_request_id", "fingerprint"
        )
    )
    blocking = [f for f in open_findings if f.blocking]
    heads = set(review_pass.heads.values())
    return {
        "blocking_open": len(blocking),
        "blocking_new": sum(
            1 for f in blocking if (f.pull_request_id, f.fingerprint) not in seen_before
        ),
        "nits_open": len(open_findings) - len(blocking),
        "resolved": Finding.objects.filter(
            pull_request__in=[r.pull_request_id for r in reviews],
            resolved_in_sha__in=heads,
            state__in=(FindingState.RESOLVED, FindingState.OUTDATED),
        ).count(),
    }


def task_stuck(task: Task, reason: str) -> None:
    Task.objects.filter(pk=task.pk).exclude(state__in=TASK_FINAL_STATES).update(
        state=TaskState.STUCK, stuck_reason=reason[:2000]
    )
    task.refresh_from_db()
    logger.info("task %s stuck: %s", task.pk, reason)


# --- Done: checks and comments ------------------------------------------------------------


def latest_pass(task: Task) -> ReviewPass | None:
    return task.passes.order_by("-number").first()


def checks_refresh(task: Task) -> list[dict]:
    """Read the required checks of every pull request's head from GitHub; returns the
    ones not green (pending or failing), and stores each pull request's checks."""
    gateway = github.gateway()
    not_green = []
    for tpr in task.pulls.select_related("repository__installation", "pull_request"):
        pull_request = tpr.pull_request
        if pull_request is None:
            continue
        where = {
            "installation_id": tpr.repository.installation.github_id,
            "repository_id": tpr.repository.github_id,
            "full_name": tpr.repository.full_name,
        }
        required = gateway.required_checks(**where, branch=pull_request.base_ref or "main")
        if required is None:
            required = list(task.required_checks)
        runs = {c.name: c for c in gateway.commit_check_runs(**where, sha=pull_request.head_sha)}
        checks = []
        for name in required:
            found = runs.get(name)
            state = "pending"
            if found is not None and found.status == "completed":
                state = (
                    "success"
                    if found.conclusion in ("success", "neutral", "skipped")
                    else "failure"
                )
            entry = {
                "name": name,
                "pull_request": str(tpr),
                "state": state,
                "conclusion": found.conclusion if found else None,
                "title": (found.title or "") if found else "",
                "summary": ((found.summary or "")[:2000]) if found else "",
                "output": _first_lines((found.text or found.summary or "") if found else ""),
                "url": (found.details_url or found.html_url or "") if found else "",
            }
            checks.append(entry)
            if state != "success":
                not_green.append(entry)
        TaskPullRequest.objects.filter(pk=tpr.pk).update(
            checks=checks, checks_read_at=timezone.now()
        )
    return not_green


def _first_lines(text: str, lines: int = 12) -> str:
    return "\n".join(text.strip().splitlines()[:lines])[:2000]


def unanswered_comments(task: Task, since=None):
    comments = TaskComment.objects.filter(task=task, counted=True, answers__isnull=True)
    if since is not None:
        comments = comments.filter(created_at__gte=since)
    return comments


def task_evaluate(task: Task) -> str:
    """A task whose last pass was clean: done once its required checks are green and
    every counted comment since that pass is answered; else the author is fixing."""
    task.refresh_from_db()
    if task.state not in (TaskState.APPROVED, TaskState.AUTHOR_FIXING):
        return task.state
    last = latest_pass(task)
    if last is None or last.status != PassStatus.CLEAN:
        return task.state
    not_green = checks_refresh(task)
    failing = [c for c in not_green if c["state"] == "failure"]
    open_comments = unanswered_comments(task, since=last.finished_at).exists()
    if failing or open_comments or heads_moved(task, last):
        state = TaskState.AUTHOR_FIXING
    elif not_green:
        state = TaskState.APPROVED
    else:
        state = TaskState.DONE
    updates: dict[str, Any] = {"state": state}
    if state == TaskState.DONE:
        updates["done_at"] = timezone.now()
    Task.objects.filter(pk=task.pk).exclude(state__in=TASK_FINAL_STATES).update(**updates)
    task.refresh_from_db()
    return task.state


def heads_moved(task: Task, review_pass: ReviewPass) -> list[str]:
    """The pull requests whose head moved since the pass pinned it: what the pass
    approved is not what would merge, so the author reports done for another pass."""
    return [
        str(tpr)
        for tpr in task.pulls.select_related("pull_request", "repository")
        if tpr.pull_request is not None
        and review_pass.heads.get(str(tpr.pk), tpr.pull_request.head_sha)
        != tpr.pull_request.head_sha
    ]


# --- Answers --------------------------------------------------------------------------------


def finding_id(tpr: TaskPullRequest, fingerprint: str) -> str:
    return f"{tpr.pk}.{fingerprint}"


def open_findings(
    task: Task, review_pass: ReviewPass | None = None
) -> list[tuple[TaskPullRequest, Finding]]:
    """The findings of the last pass still open, with their pull request."""
    review_pass = review_pass or latest_pass(task)
    if review_pass is None:
        return []
    pulls = {tpr.pull_request_id: tpr for tpr in task.pulls.all()}
    reviews = pass_reviews(review_pass)
    found = []
    for finding in Finding.objects.filter(review__in=reviews, state=FindingState.OPEN).order_by(
        "-blocking", "path", "start_line"
    ):
        tpr = pulls.get(finding.pull_request_id)
        if tpr is not None:
            found.append((tpr, finding))
    return found


def answers_record(task: Task, answers: list[dict[str, Any]]) -> list[Answer]:
    """Record the author's answers (all or none) and queue each to be posted on its
    pull request as the author's App.

    To a finding of the last pass: `fixed` (a commit), `reply` (reasons), `skip` (nits
    only), `follow_up` (names the follow-up). To a counted comment: `reply` or `fixed`.
    """
    if task.state in TASK_FINAL_STATES:
        raise TaskError(f"The task is {task.get_state_display()}.", status=409)
    review_pass = latest_pass(task)
    if review_pass is None or review_pass.status == PassStatus.RUNNING:
        raise TaskError("There is nothing to answer until a pass has ended.", status=409)
    findings = {
        finding_id(tpr, f.fingerprint): (tpr, f) for tpr, f in open_findings(task, review_pass)
    }
    comments = {str(c.pk): c for c in TaskComment.objects.filter(task=task, counted=True)}
    rows: list[Answer] = []
    seen: set[str] = set()
    for index, item in enumerate(answers):
        where = f"answers[{index}]"
        if not isinstance(item, dict):
            raise TaskError(f"{where}: an answer is an object.")
        kind = item.get("kind")
        if kind not in AnswerKind.values:
            raise TaskError(f"{where}: kind must be one of {', '.join(AnswerKind.values)}.")
        text = (item.get("text") or "").strip()
        commit = (item.get("commit") or "").strip().lower()
        if kind == AnswerKind.FIXED and not SHA.match(commit):
            raise TaskError(f"{where}: a fixed answer names the commit that fixes it (a sha).")
        if kind in (AnswerKind.REPLY, AnswerKind.FOLLOW_UP) and not text:
            raise TaskError(
                f"{where}: a {kind} answer needs `text` "
                + ("(your reasons)." if kind == AnswerKind.REPLY else "(the follow-up, by name).")
            )
        key = item.get("finding") or ""
        comment_key = str(item.get("comment") or "")
        if bool(key) == bool(comment_key):
            raise TaskError(f"{where}: answer either a `finding` or a `comment`.")
        if key:
            if key not in findings:
                raise TaskError(
                    f"{where}: {key!r} is not an open finding of pass {review_pass.number}.",
                    status=422,
                )
            tpr, finding = findings[key]
            if kind == AnswerKind.SKIP and finding.blocking:
                raise TaskError(
                    f"{where}: {key!r} is blocking and cannot be skipped: fix it, reply with "
                    "your reasons, or name a follow-up.",
                    status=422,
                )
            if (
                key in seen
                or Answer.objects.filter(
                    review_pass=review_pass,
                    task_pull=tpr,
                    fingerprint=finding.fingerprint,
                    comment__isnull=True,
                ).exists()
            ):
                raise TaskError(f"{where}: {key!r} is answered already in this pass.", status=409)
            seen.add(key)
            rows.append(Answer(task=task, task_pull=tpr, review_pass=review_pass,
                               fingerprint=finding.fingerprint, kind=kind, commit=commit, text=text))  # fmt: skip
        else:
            comment = comments.get(comment_key)
            if comment is None:
                raise TaskError(
                    f"{where}: {comment_key!r} is not a comment routed to you.", status=422
                )
            if kind not in (AnswerKind.REPLY, AnswerKind.FIXED):
                raise TaskError(f"{where}: a comment is answered with reply or fixed.")
            if comment_key in seen or comment.answers.exists():
                raise TaskError(f"{where}: comment {comment_key} is answered already.", status=409)
            seen.add(comment_key)
            rows.append(Answer(task=task, task_pull=comment.task_pull, review_pass=review_pass,
                               comment=comment, kind=kind, commit=commit, text=text))  # fmt: skip
    try:
        with transaction.atomic():
            for row in rows:
                row.save()
                ANSWERS.ring(row.pk)
    except IntegrityError as exc:
        raise TaskError(
            "An answer was recorded twice at once; read the feedback again.", status=409
        ) from exc
    if task.state == TaskState.AUTHOR_FIXING:
        task_evaluate(task)
    return rows


def answer_text(answer: Answer) -> str:
    if answer.kind == AnswerKind.FIXED:
        return f"Fixed in {answer.commit[:12]}." + (f" {answer.text}" if answer.text else "")
    if answer.kind == AnswerKind.SKIP:
        return "Skipped (a nit)." + (f" {answer.text}" if answer.text else "")
    if answer.kind == AnswerKind.FOLLOW_UP:
        return f"Follow-up: {answer.text}"
    return answer.text


def answer_post(answer_pk: int) -> str:
    """Post one answer on its pull request as the author's App: a reply in the finding's
    (or the inline comment's) thread, or a conversation comment. Idempotent by marker."""
    from reviews.passes.author import author_poster

    attempt = ANSWERS.claim(answer_pk)
    if attempt is None:
        return "not claimed"  # posted, held by another worker, or not due
    answer = Answer.objects.select_related("task_pull__repository", "comment", "task").get(
        pk=answer_pk
    )
    tpr = answer.task_pull
    marker = signed_marker("author-answer", answer.pk)
    # The caller's words are data: escaped like everything else Tasuku posts.
    body = f"{block_text(answer_text(answer))}\n\n{marker}"
    poster = author_poster()
    reply_to = None
    if answer.comment is not None and answer.comment.kind == TaskComment.Kind.REVIEW_COMMENT:
        reply_to = answer.comment.github_id
    elif answer.comment is None:
        finding = (
            Finding.objects.filter(
                pull_request__repository=tpr.repository,
                pull_request__number=tpr.number,
                fingerprint=answer.fingerprint,
                github_comment_id__isnull=False,
            )
            .order_by("pk")
            .first()
        )
        reply_to = finding.github_comment_id if finding else None
    try:
        if reply_to is not None:
            posted = poster.reply(tpr.repository.full_name, tpr.number, reply_to, body, marker)
        else:
            if answer.comment is not None:
                quoted = "\n".join(
                    f"> {inline_text(line, 300)}" for line in answer.comment.body.splitlines()[:3]
                )
                body = f"{quoted}\n\n{body}" if quoted else body
            posted = poster.comment(tpr.repository.full_name, tpr.number, body, marker)
    except GitHubError as exc:
        # GitHub did not take it now: put off (5xx, no answer, a rate limit), retried, or
        # failed (refused, or a day of trying); the marker keeps a later try from posting
        # it twice.
        verdict = ANSWERS.verdict(
            exc, attempt=attempt, deferrals=answer.deferrals, since=answer.created_at
        )
        ANSWERS.settle(answer.pk, attempt, verdict, error=str(exc)[:2000])
        if verdict.kind == durable.FAILED:
            task_stuck(answer.task, f"GitHub refused to post the author's answer on {tpr}: {exc}")
            return "failed"
        return "waiting"
    ANSWERS.finish(answer.pk, attempt, Answer.Posting.POSTED, github_comment_id=posted, error="")
    return "posted"


def previous_pass(run: ReviewRun) -> ReviewPass | None:
    """The pass before the one `run` belongs to (None outside a pass, or for pass 1)."""
    review_pass = run.review_pass
    if review_pass is None:
        return None
    return review_pass.task.passes.filter(number__lt=review_pass.number).order_by("-number").first()


def _previous_answers(run: ReviewRun):
    """The author's answers to this pull request's findings in the previous pass."""
    previous = previous_pass(run)
    if previous is None:
        return Answer.objects.none()
    return Answer.objects.filter(
        review_pass=previous, task_pull__pull_request=run.pull_request, comment__isnull=True
    )


def answers_for_run(run: ReviewRun) -> dict[str, str]:
    """The author's answers in the previous pass, as the reviewer will read them
    (fingerprint → text)."""
    return {a.fingerprint: answer_text(a) for a in _previous_answers(run)}


def disputed_fingerprints(run: ReviewRun) -> set[str]:
    """Findings the author answered with a reply (disputed) in the previous pass."""
    return set(
        _previous_answers(run).filter(kind=AnswerKind.REPLY).values_list("fingerprint", flat=True)
    )


def rulings_for_run(run: ReviewRun) -> dict[str, str]:
    """The reviewer's rulings on this pull request's findings in the previous pass
    (fingerprint → "still open: why" / "resolved: why"), for the next pass's job."""
    previous = previous_pass(run)
    review = (
        Review.objects.filter(run__review_pass=previous, pull_request=run.pull_request).first()
        if previous is not None
        else None
    )
    rulings: dict[str, str] = {}
    for ruling in (review.rulings if review else None) or []:
        if not isinstance(ruling, dict) or not ruling.get("id"):
            continue
        verdict = "still open" if ruling.get("still_open") else "resolved"
        reason = str(ruling.get("reason") or "").strip()
        rulings[str(ruling["id"])] = f"{verdict}: {reason}" if reason else verdict
    return rulings


# --- Actions -------------------------------------------------------------------------------

ACTIONS = ("run_another_pass", "message_author", "return_as_is", "recall")


def action_take(task: Task, action: str, *, text: str = "") -> Task:
    """What an operator (or the owner over the API) does with a task, above all a stuck
    one: run another pass, message the author, return it as is, or recall it."""
    if action not in ACTIONS:
        raise TaskError(f"action must be one of {', '.join(ACTIONS)}.")
    if task.state in TASK_FINAL_STATES:
        raise TaskError(f"The task is {task.get_state_display()}.", status=409)
    if action == "message_author":
        if not text.strip():
            raise TaskError("message_author needs `text`.")
        with transaction.atomic():
            AuthorMessage.objects.create(task=task, kind="message", text=text.strip()[:10_000])
            # A stuck task goes back to the author, who reads the message in its feedback
            # and reports done again; the heads it is told about are checked afresh.
            Task.objects.filter(pk=task.pk, state=TaskState.STUCK).update(
                state=TaskState.AUTHOR_FIXING, told_to_push_at=None
            )
    elif action == "run_another_pass":
        if task.passes.filter(status=PassStatus.RUNNING).exists():
            raise TaskError("A pass is running already.", status=409)
        if not task.passes_enabled or task.reviewer is None:
            raise TaskError("Review passes are not enabled for this task.", status=409)
        number = (latest_pass(task).number if latest_pass(task) else 0) + 1
        if number > passes_allowed(task):
            Task.objects.filter(pk=task.pk).update(extra_passes=number - task.max_passes)
        for tpr in task.pulls.select_related("repository__installation"):
            _refresh(tpr)
        task.refresh_from_db()
        pass_start(task)
    elif action == "return_as_is":
        Task.objects.filter(pk=task.pk).update(state=TaskState.RETURNED)
    elif action == "recall":
        with transaction.atomic():
            Task.objects.filter(pk=task.pk).update(state=TaskState.RECALLED)
            for review_pass in task.passes.filter(status=PassStatus.RUNNING):
                for pk in review_pass.runs.filter(status=RunStatus.QUEUED).values_list(
                    "pk", flat=True
                ):
                    ReviewRun.objects.filter(pk=pk, status=RunStatus.QUEUED).update(
                        status=RunStatus.CANCELLED, reason=f"task {task.pk} recalled"
                    )
                ReviewPass.objects.filter(pk=review_pass.pk, status=PassStatus.RUNNING).update(
                    status=PassStatus.FAILED,
                    reason="the task was recalled",
                    finished_at=timezone.now(),
                )
    task.refresh_from_db()
    return task


# --- From GitHub: comments and checks --------------------------------------------------------


def task_pulls_for(repository: Repository, number: int):
    return (
        TaskPullRequest.objects.filter(repository=repository, number=number)
        .exclude(task__state__in=(TaskState.RETURNED, TaskState.RECALLED))
        .select_related("task")
    )


def comment_record(
    *,
    repository: Repository,
    number: int,
    kind: str,
    comment: dict[str, Any],
    tasuku_logins: set[str],
) -> int:
    """Record a comment (or a review body) on a task's pull request: routed to the
    author when its writer counts, counted otherwise; the author's own and Tasuku's are
    not feedback. Returns how many tasks it was recorded for."""
    user = comment.get("user") or {}
    login = user.get("login", "")
    if login in tasuku_logins:
        return 0
    # Who wrote it decides, never what it says: a person's comment that carries a copy
    # of one of Tasuku's markers is feedback like any other.
    body = comment.get("body") or ""
    recorded = 0
    for tpr in task_pulls_for(repository, number):
        task = tpr.task
        if task.author_login and login.lower() == task.author_login.lower():
            continue
        is_bot = user.get("type") == "Bot" or login.endswith("[bot]")
        association = comment.get("author_association") or ""
        counted = (login in task.counted_bots) if is_bot else association in COUNTED_ASSOCIATIONS
        created = comment.get("created_at") or comment.get("submitted_at")
        try:
            with transaction.atomic():
                TaskComment.objects.create(
                    task=task,
                    task_pull=tpr,
                    kind=kind,
                    github_id=int(comment["id"]),
                    login=login,
                    association=association,
                    counted=counted,
                    body=body[:20_000],
                    url=comment.get("html_url") or "",
                    path=comment.get("path") or "",
                    line=comment.get("line") or None,
                    in_reply_to=comment.get("in_reply_to_id"),
                    created_at=_parse_time(created) or timezone.now(),
                )
        except IntegrityError:
            continue  # a redelivery
        recorded += 1
        if counted and task.state in (TaskState.APPROVED, TaskState.DONE):
            # A comment after a clean pass: not done until the author answers it.
            Task.objects.filter(pk=task.pk, state__in=(TaskState.APPROVED, TaskState.DONE)).update(
                state=TaskState.AUTHOR_FIXING, done_at=None
            )
    return recorded


def _parse_time(value: Any):
    if not value:
        return None
    from django.utils.dateparse import parse_datetime

    return parse_datetime(str(value))


def checks_changed(repository: Repository, head_sha: str) -> int:
    """A check on a head of a task's pull request completed: re-evaluate those tasks."""
    tasks = Task.objects.filter(
        pulls__repository=repository,
        pulls__pull_request__head_sha=head_sha,
        state__in=(TaskState.APPROVED, TaskState.AUTHOR_FIXING),
    ).distinct()
    count = 0
    for task in tasks:
        task_evaluate(task)
        count += 1
    return count


def answers_sweep() -> int:
    """Hand answers whose worker died to another, and ring again for answers still
    waiting to be posted (a lost doorbell, GitHub down when they were tried): how many
    were rung."""
    lost = {"error": "The worker stopped while posting this answer."}
    return ANSWERS.sweep(lost=lost, lost_last=lost)["rung"]


def tasks_sweep() -> int:
    """Every minute: conclude passes whose runs have all ended (a run cancelled by a
    push ends no pipeline) and re-read the checks of tasks waiting for them."""
    swept = 0
    for review_pass in ReviewPass.objects.filter(status=PassStatus.RUNNING).exclude(
        runs__status__in=(RunStatus.QUEUED, RunStatus.RUNNING, RunStatus.DISPATCHED)
    ):
        pass_conclude(review_pass)
        swept += 1
    waiting = Task.objects.filter(
        state=TaskState.APPROVED, updated_at__lt=timezone.now() - timedelta(seconds=30)
    )
    for task in waiting:
        try:
            task_evaluate(task)
        except GitHubError as exc:
            logger.warning("task %s: could not read its checks: %s", task.pk, exc)
        swept += 1
    return swept


__all__ = [
    "ACTIONS",
    "PASS_FINAL_STATES",
    "DoneOutcome",
    "TaskError",
    "action_take",
    "answer_post",
    "answers_sweep",
    "answers_for_run",
    "answers_record",
    "checks_changed",
    "comment_record",
    "pass_after_run",
    "pass_conclude",
    "pass_start",
    "task_create",
    "task_done",
    "task_evaluate",
    "task_handoff",
    "tasks_sweep",
]
