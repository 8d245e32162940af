"""Comments arriving from GitHub on a task's pull requests: recorded as feedback for the
author (`comment_record`), sent to it when a person with write access (or a bot the task
counts) wrote them."""

from __future__ import annotations

import logging
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from repos.models import Repository
from repos.selectors import write_access
from reviews.models import (
    TASK_FINAL_STATES,
    Task,
    TaskComment,
    TaskPullRequest,
    TaskState,
)
from webhooks import payloads

logger = logging.getLogger(__name__)


def task_pulls_for(repository: Repository, number: int):
    """The tasks a comment on this pull request concerns: its open task, or, while it has
    none, the done one (a comment after done holds it until the author answers)."""
    pulls = TaskPullRequest.objects.filter(repository=repository, number=number).exclude(
        task__state__in=(TaskState.RETURNED, TaskState.RECALLED)
    )
    # A done task whose pull request another task has taken since is not brought back:
    # a pull request belongs to one open task at a time.
    if pulls.exclude(task__state__in=TASK_FINAL_STATES).exists():
        pulls = pulls.exclude(task__state__in=TASK_FINAL_STATES)
    return pulls.select_related("task")


def comment_record(
    *,
    repository: Repository,
    number: int,
    kind: str,
    comment: payloads.Remark,
    tasuku_logins: set[str],
) -> int:
    """Record a comment (or a review body) on a task's pull request: routed to the
    author when its writer counts, counted and shown otherwise; the author's own and
    Tasuku's are not feedback. Returns how many tasks it was recorded for.

    1. Tasuku's own, or on a pull request no task names: nothing.
    2. A person counts with write access to the repository, asked of GitHub (the
       command path's `write_access`; `author_association` cannot tell a private
       member from a stranger); a bot counts when the task names it in `counted_bots`.
    3. Recorded per task, under a lock on the repository's row (below)."""
    user = comment.user or payloads.NO_USER
    if user.login in tasuku_logins:
        return 0
    if not TaskPullRequest.objects.filter(repository=repository, number=number).exists():
        return 0  # no task names this pull request: nothing to record
    is_bot = user.type == "Bot" or user.login.endswith("[bot]")
    # Asked before the lock is taken: no row stays locked while GitHub answers.
    writes = not is_bot and write_access(repository.installation, repository, user.login)
    with transaction.atomic():
        # Race: a task created for this pull request meanwhile (reviews/passes/handoff.py
        # locks the same row) would leave a done task brought back beside it.
        Repository.objects.select_for_update().filter(pk=repository.pk).first()
        return _comment_record(repository, number, kind, comment, is_bot=is_bot, writes=writes)


def _comment_record(
    repository: Repository,
    number: int,
    kind: str,
    comment: payloads.Remark,
    *,
    is_bot: bool,
    writes: bool,
) -> int:
    user = comment.user or payloads.NO_USER
    login = user.login
    # Who wrote it decides, never what it says: a person's comment that carries a copy
    # of one of Tasuku's markers is feedback like any other.
    body = comment.body or ""
    recorded = 0
    for tpr in task_pulls_for(repository, number):
        task = tpr.task
        if task.author_login and login.lower() == task.author_login.lower():
            continue
        association = comment.author_association
        counted = (login in task.counted_bots) if is_bot else writes
        anchored = comment if isinstance(comment, payloads.ReviewComment) else None
        try:
            with transaction.atomic():
                TaskComment.objects.create(
                    task=task,
                    task_pull=tpr,
                    kind=kind,
                    github_id=comment.id,
                    login=login,
                    association=association,
                    counted=counted,
                    body=body[:20_000],
                    url=comment.html_url,
                    path=anchored.path if anchored else "",
                    line=(anchored.line or None) if anchored else None,
                    in_reply_to=anchored.in_reply_to_id if anchored else None,
                    created_at=_parse_time(comment.written_at) or timezone.now(),
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
