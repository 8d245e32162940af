"""The pass flow (docs/review-passes.md): the author reports done (`task_done`), a pass
reviews each pull request at its pinned head (`pass_start`), and when every run has ended
the pass concludes (`pass_conclude`): clean, findings, failed or superseded. A clean pass
is done once the required checks are green and every counted comment is answered
(`task_evaluate`). An operator's actions (`action_take`) and the sweep that catches a
task left waiting (`tasks_sweep`) move it on too."""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from django.utils.translation import ngettext

from repos import github
from repos.github import GitHubError, RepoRef
from repos.models import Repository, Reviewer, ReviewSkill
from repos.policy import Trigger
from repos.selectors import effective_config, reviewer_config
from repos.services import revision_for_config
from reviews.intake.pull_requests import pull_request_refresh
from reviews.models import (
    RUN_FINAL_STATES,
    TASK_FINAL_STATES,
    Answer,
    AuthorMessage,
    PassLink,
    PassStatus,
    PullRequest,
    Review,
    ReviewPass,
    ReviewRun,
    ReviewState,
    RunStatus,
    Stage,
    Task,
    TaskPullRequest,
    TaskState,
)
from reviews.passes.handoff import TaskError, pull_free_check
from reviews.passes.selectors import (
    author_came_back,
    author_told_at,
    failing_checks,
    heads_moved,
    latest_pass,
    open_findings,
    pass_counts,
    unanswered_comments,
)
from reviews.queue.runs import run_cancel_request, run_ring, run_supersede_waiting
from sandbox.contract import INCOMPLETE_AT_DEADLINE

logger = logging.getLogger(__name__)


SHA = re.compile(r"^[0-9a-f]{7,40}$")


@dataclass
class DoneOutcome:
    started: ReviewPass | None = None
    told: str = ""
    stuck: str = ""
    differing: list[dict] = field(default_factory=list)
    done: bool = False  # handed off with review passes off: done as it is


# What ends a pass reviewer that ran past its time (tasuku/errors.py): the sandbox's
# limit, or the run's deadline.
TIMEOUT_CODES = ("sandbox-timeout", "run-deadline")


def task_done(task: Task, *, heads: dict[str, str], uncommitted: bool = False) -> DoneOutcome:
    """The author says it is done. Handed off with review passes off, the task is done
    as it would be without them: nothing is reviewed or checked. Otherwise every pull
    request's head on GitHub must be the one it reports, with nothing uncommitted. If
    not, it is told once (as data, in its feedback) to push or discard; told already,
    the task is stuck. Otherwise the next pass starts."""
    if task.state in TASK_FINAL_STATES:
        raise TaskError(f"The task is {task.get_state_display()}.", status=409)
    if task.handed_off_at is None:
        raise TaskError("The task has not been handed off: hand it off first.", status=409)
    if not task.passes_enabled:
        return _done_without_passes(task, heads)
    if task.stuck_when_answered:
        last = latest_pass(task)
        raise TaskError(
            f"Answer the findings of pass {last.number if last else '?'} first: then the task "
            f"waits for its owner ({task.stuck_when_answered}).",
            status=409,
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
            differing.append(
                {"pull_request": str(tpr), "reported": reported, "on_github": pull_request.head_sha}
            )
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


def _done_without_passes(task: Task, heads: dict[str, str]) -> DoneOutcome:
    """Review passes off: the author's word ends the task, as it would without Tasuku.
    A pass still running (handed off with passes on, then off) is waited for."""
    if task.passes.filter(status=PassStatus.RUNNING).exists():
        raise TaskError("A pass is running; wait for it to end.", status=409)
    pulls = {str(tpr): tpr for tpr in task.pulls.select_related("repository")}
    unknown = sorted(set(heads) - set(pulls))
    if unknown:
        raise TaskError(f"Not pull requests of this task: {', '.join(unknown)}.")
    for ref, sha in heads.items():
        if not isinstance(sha, str) or not SHA.match(sha):
            raise TaskError(f"{ref}: {sha!r} is not a commit sha.")
    with transaction.atomic():
        for ref, tpr in pulls.items():
            TaskPullRequest.objects.filter(pk=tpr.pk).update(reported_head=heads.get(ref, ""))
        # Race: two done calls at once, or an owner's recall meanwhile; one final state wins.
        ended = (
            Task.objects.filter(pk=task.pk, passes_enabled=False)
            .exclude(state__in=TASK_FINAL_STATES)
            .update(state=TaskState.DONE, done_at=timezone.now(), stuck_reason="")
        )
    task.refresh_from_db()
    if not ended:
        raise TaskError(f"The task is {task.get_state_display()}.", status=409)
    return DoneOutcome(done=True)


def _refresh(tpr: TaskPullRequest) -> PullRequest:
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
    # Tasks made before a pull request could be in only one open task: the earliest
    # one still open keeps it.
    for tpr in pulls:
        pull_free_check(tpr.repository, tpr.number, task=task)
    with transaction.atomic():
        number = (task.passes.order_by("-number").values_list("number", flat=True).first() or 0) + 1
        review_pass = ReviewPass.objects.create(
            task=task,
            number=number,
            heads={str(tpr.pk): tpr.pull_request.head_sha for tpr in pulls},
        )
        Task.objects.filter(pk=task.pk).update(
            state=TaskState.REVIEWING, stuck_reason="", stuck_when_answered=""
        )
        for tpr in pulls:
            _pass_run(review_pass, tpr, reviewer, task)
    task.refresh_from_db()
    return review_pass


def _pass_run(
    review_pass: ReviewPass, tpr: TaskPullRequest, reviewer: Reviewer, task: Task
) -> ReviewRun:
    """The run of one pull request in a pass: the task's reviewer (its model and skill
    as the handoff chose them), triage off — a pass always reviews in depth."""
    base = effective_config(tpr.repository)
    config_reviewer = reviewer_config(reviewer)
    overrides: dict[str, Any] = {}
    # Both were the operator's when the handoff chose them; one the operator has since
    # taken from the reviewer is not used (and a task's `legacy_skill_text`, a caller's
    # words, never is).
    if task.reviewer_model and task.reviewer_model in reviewer.models_allowed:
        overrides["model"] = task.reviewer_model
    skill = task.skill
    if (
        skill is not None
        and ReviewSkill.objects.for_reviewer(reviewer).filter(pk=skill.pk).exists()
    ):
        chosen = f"The review skill `{skill.name}`:\n{skill.text}"
        overrides["skills"] = "\n\n".join(s for s in (config_reviewer.skills, chosen) if s)
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
        run_supersede_waiting(pk, f"superseded by pass {review_pass.number} of task {task.pk}")
    run = ReviewRun.objects.create(
        pull_request=pull_request,
        reviewer=reviewer,
        head_sha=pull_request.head_sha,
        base_sha=pull_request.base_sha,
        trigger=Trigger.REVIEW_PASS.value,
        status=RunStatus.QUEUED,
        config=config.model_dump(mode="json"),
        # The reviewer's revision; what the task adds to it (its model, its skill) is
        # the task's, shown with the pass.
        reviewer_revision=revision_for_config(reviewer=reviewer, config=config_reviewer),
    )
    PassLink.objects.create(run=run, review_pass=review_pass)
    run_ring(run)
    return run


def pass_conversation_noted(run_pk: int, note: str) -> None:
    """Why the run continued the reviewer's conversation of the previous pass, or could
    not: kept on the run's pass link."""
    PassLink.objects.filter(run_id=run_pk).update(conversation_note=note)


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
        elif run.status == RunStatus.FAILED and run.error_code in TIMEOUT_CODES:
            problem = _timed_out(run, run.reason)
        elif (
            review is not None
            and review.state == ReviewState.INCOMPLETE
            and review.incomplete_reason.startswith(INCOMPLETE_AT_DEADLINE)
        ):
            problem = _timed_out(run, review.incomplete_reason)
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
            f"{review_pass.number} passes (the most allowed) and "
            + ngettext(
                "%(count)d blocking finding still open",
                "%(count)d blocking findings still open",
                counts["blocking_open"],
            )
            % {"count": counts["blocking_open"]},
        )
    elif (
        counts["blocking_new"]
        and previous is not None
        and previous.blocking_new
        and review_pass.number >= 2
        and previous.number >= 2
    ):
        # The owner decides with the author's answers to this pass in hand: the author
        # answers first (it may dispute a finding, or say it is fixed), then the task is
        # stuck (task_answered).
        Task.objects.filter(pk=task.pk).exclude(state__in=TASK_FINAL_STATES).update(
            state=TaskState.AUTHOR_FIXING,
            stuck_when_answered=(
                f"two passes in a row (passes {previous.number} and {review_pass.number}) "
                "found new blocking problems in the author's fixes"
            ),
        )
    else:
        Task.objects.filter(pk=task.pk).exclude(state__in=TASK_FINAL_STATES).update(
            state=TaskState.AUTHOR_FIXING
        )


def _timed_out(run: ReviewRun, why: str) -> str:
    return (
        f"the reviewer ran past its time on {run.pull_request} ({why.rstrip('.')}); "
        "Run another pass to try again"
    )


def task_answered(task: Task) -> bool:
    """The author has answered every open finding of the last pass: a task waiting for
    that (two passes in a row found new blocking problems) is now stuck, for its owner.
    Returns whether it became stuck."""
    task.refresh_from_db()
    if not task.stuck_when_answered or task.state != TaskState.AUTHOR_FIXING:
        return False
    last = latest_pass(task)
    if last is None:
        return False
    answered = set(
        Answer.objects.filter(review_pass=last, comment__isnull=True, check_name="").values_list(
            "task_pull_id", "fingerprint"
        )
    )
    if any((tpr.pk, f.fingerprint) not in answered for tpr, f in open_findings(task, last)):
        return False
    task_stuck(task, task.stuck_when_answered)
    return True


def task_stuck(task: Task, reason: str) -> None:
    Task.objects.filter(pk=task.pk).exclude(state__in=TASK_FINAL_STATES).update(
        state=TaskState.STUCK, stuck_reason=reason[:2000], stuck_when_answered=""
    )
    task.refresh_from_db()
    logger.info("task %s stuck: %s", task.pk, reason)


def checks_refresh(task: Task) -> list[dict]:
    """Read the required checks of every pull request's head from GitHub; returns the
    ones not green (pending or failing), and stores each pull request's checks."""
    gateway = github.gateway()
    not_green = []
    for tpr in task.pulls.select_related("repository__installation", "pull_request"):
        pull_request = tpr.pull_request
        if pull_request is None:
            continue
        repo = RepoRef.of(tpr.repository)
        required = gateway.required_checks(repo, branch=pull_request.base_ref or "main")
        if required is None:
            required = list(task.required_checks)
        runs = {c.name: c for c in gateway.commit_check_runs(repo, sha=pull_request.head_sha)}
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
                "head": pull_request.head_sha,
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
    # A failing check the author answered at this head ("a flaky test") asks nothing more
    # of the author; it still is not green, so the task waits for it like a pending one.
    answered = {(c["pull_request"], c["name"]) for c in failing_checks(task) if c["answer"]}
    failing = [
        c
        for c in not_green
        if c["state"] == "failure" and (c["pull_request"], c["name"]) not in answered
    ]
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


ACTIONS = ("run_another_pass", "message_author", "return_as_is", "recall")


def action_take(task: Task, action: str, *, text: str = "", sender=None) -> Task:
    """What an operator (or the owner over the API) does with a task, above all a stuck
    one: run another pass, message the author, return it as is, or recall it. `sender`:
    the user acting; a message is recorded as theirs and reaches the author so marked."""
    if action not in ACTIONS:
        raise TaskError(f"action must be one of {', '.join(ACTIONS)}.")
    if task.state in TASK_FINAL_STATES:
        raise TaskError(f"The task is {task.get_state_display()}.", status=409)
    if action == "message_author":
        if not text.strip():
            raise TaskError("message_author needs `text`.")
        with transaction.atomic():
            AuthorMessage.objects.create(
                task=task,
                kind="message",
                text=text.strip()[:10_000],
                sender=sender,
                sender_name=sender.get_username() if sender is not None else "",
            )
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
        reviewing = review_in_flight(task)
        if reviewing:
            raise TaskError(
                f"A review is running ({reviewing}): return the task as is once it ends, or "
                "recall it now.",
                status=409,
            )
        Task.objects.filter(pk=task.pk).update(state=TaskState.RETURNED)
    elif action == "recall":
        # Recall always wins: a review in flight is stopped before it posts anything more.
        with transaction.atomic():
            Task.objects.filter(pk=task.pk).update(state=TaskState.RECALLED)
            for review_pass in task.passes.filter(status=PassStatus.RUNNING):
                for pk in review_pass.runs.filter(status__in=IN_FLIGHT).values_list(
                    "pk", flat=True
                ):
                    run_cancel_request(pk, f"task {task.pk} recalled")
                ReviewPass.objects.filter(pk=review_pass.pk, status=PassStatus.RUNNING).update(
                    status=PassStatus.FAILED,
                    reason="the task was recalled",
                    finished_at=timezone.now(),
                )
    task.refresh_from_db()
    return task


IN_FLIGHT = (RunStatus.QUEUED, RunStatus.RUNNING, RunStatus.DISPATCHED)


def review_in_flight(task: Task) -> str:
    """Which pass is being reviewed now ("" when none is)."""
    running = (
        ReviewRun.objects.filter(pass_link__review_pass__task=task, status__in=IN_FLIGHT)
        .order_by("-pass_link__review_pass__number")
        .values_list("pass_link__review_pass__number", flat=True)
        .first()
    )
    return f"pass {running}" if running else ""


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


def author_silent_stuck(*, now=None) -> int:
    """Tasks whose author was told about feedback (a pass's findings, a failing check, a
    routed comment, a message, the notice to push) and has not come back since — no
    answer, no push, no done — within its silence limit are stuck with that reason; the
    owner's actions (another pass, a message, return, recall) apply as for any stuck
    task. Returns how many got stuck."""
    now = now or timezone.now()
    stuck = 0
    for task in Task.objects.filter(state=TaskState.AUTHOR_FIXING):
        told = author_told_at(task)
        if told is None:
            continue
        minutes = task.author_silence_minutes or settings.TASUKU_AUTHOR_SILENCE_MINUTES
        if now - told < timedelta(minutes=minutes) or author_came_back(task, since=told):
            continue
        task_stuck(
            task,
            f"the author was told about feedback at {told:%Y-%m-%d %H:%M} UTC and has not "
            f"answered, pushed or reported done since (the limit is "
            + ngettext("%(count)d minute", "%(count)d minutes", minutes) % {"count": minutes}
            + ")",
        )
        stuck += 1
    return stuck


def tasks_sweep() -> int:
    """Every minute: conclude passes whose runs have all ended (a run cancelled by a
    push ends no pipeline), re-read the checks of tasks waiting for them, and make the
    tasks of silent authors stuck."""
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
    return swept + author_silent_stuck()
