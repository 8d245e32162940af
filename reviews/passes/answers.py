"""The author's answers to a pass's findings (docs/review-passes.md): `answers_record`
stores them, `answer_post` posts each as the author's App, on a durable queue."""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

from django.db import IntegrityError, transaction

from repos.github import GitHubError
from reviews.models import (
    TASK_FINAL_STATES,
    Answer,
    AnswerKind,
    Finding,
    PassStatus,
    Task,
    TaskComment,
    TaskState,
)
from reviews.passes.author import author_poster
from reviews.passes.flow import SHA, task_answered, task_evaluate, task_stuck
from reviews.passes.handoff import TaskError
from reviews.passes.selectors import (
    answer_text,
    failing_checks,
    finding_id,
    latest_pass,
    open_findings,
)
from reviews.text.escaping import block_text, code_span, inline_text
from reviews.text.markers import marker as signed_marker
from tasuku import durable

logger = logging.getLogger(__name__)


ANSWER_TASK = "reviews.tasks.answer_post"


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


def answers_record(task: Task, answers: list[dict[str, Any]]) -> list[Answer]:
    """Record the author's answers (all or none) and queue each to be posted on its
    pull request as the author's App.

    To a finding of the last pass: `fixed` (a commit), `reply` (reasons), `skip` (nits
    only), `follow_up` (names the follow-up). To a counted comment, or a failing required
    check (on the head it failed on): `reply` or `fixed`.
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
    checks = {c["id"]: c for c in failing_checks(task)}
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
        check_key = str(item.get("check") or "")
        if sum(map(bool, (key, comment_key, check_key))) != 1:
            raise TaskError(f"{where}: answer one `finding`, `comment` or `check`.")
        if check_key:
            check = checks.get(check_key)
            if check is None:
                raise TaskError(
                    f"{where}: {check_key!r} is not a failing required check of this task.",
                    status=422,
                )
            if kind not in (AnswerKind.REPLY, AnswerKind.FIXED):
                raise TaskError(f"{where}: a failing check is answered with reply or fixed.")
            if check_key in seen or check["answer"] is not None:
                raise TaskError(
                    f"{where}: {check_key!r} is answered already on this head.", status=409
                )
            seen.add(check_key)
            rows.append(
                Answer(
                    task=task,
                    task_pull=check["task_pull"],
                    review_pass=review_pass,
                    check_name=check["name"],
                    check_head=check["head"],
                    kind=kind,
                    commit=commit,
                    text=text,
                )
            )
        elif key:
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
            rows.append(
                Answer(
                    task=task,
                    task_pull=tpr,
                    review_pass=review_pass,
                    fingerprint=finding.fingerprint,
                    kind=kind,
                    commit=commit,
                    text=text,
                )
            )
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
            rows.append(
                Answer(
                    task=task,
                    task_pull=comment.task_pull,
                    review_pass=review_pass,
                    comment=comment,
                    kind=kind,
                    commit=commit,
                    text=text,
                )
            )
    try:
        with transaction.atomic():
            for row in rows:
                row.save()
                ANSWERS.ring(row.pk)
    except IntegrityError as exc:
        raise TaskError(
            "An answer was recorded twice at once; read the feedback again.", status=409
        ) from exc
    # Waiting for these answers before its owner decides: stuck once all are in.
    if task.state == TaskState.AUTHOR_FIXING and not task_answered(task):
        task_evaluate(task)
    return rows


def answer_post(answer_pk: int) -> str:
    """Post one answer on its pull request as the author's App: a reply in the finding's
    (or the inline comment's) thread, or a conversation comment. Idempotent by marker."""
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
    if answer.check_name:
        # A check has no thread: the answer is a conversation comment saying which.
        body = (
            f"About the failing check {code_span(answer.check_name)} on "
            f"{code_span(answer.check_head[:7])}:\n\n{body}"
        )
    elif answer.comment is not None and answer.comment.kind == TaskComment.Kind.REVIEW_COMMENT:
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


def answers_sweep() -> int:
    """Hand answers whose worker died to another, and ring again for answers still
    waiting to be posted (a lost doorbell, GitHub down when they were tried): how many
    were rung."""
    lost = {"error": "The worker stopped while posting this answer."}
    return ANSWERS.sweep(lost=lost, lost_last=lost)["rung"]
