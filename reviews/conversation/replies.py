"""People's replies on Tasuku's threads, and Tasuku's answers.

A reply by a person on one of Tasuku's inline comments is recorded and answered in the
thread by a short job. The static reviewer answers with the rule's documentation and
how to suppress it; a model reviewer's model answers for itself (reviews/conversation/thinking.py):
it explains, or concedes — a concession silences the finding only on the reply of
someone who may dismiss it. `@<app> dismiss <reason>` from someone with write access (or the
author, where the policy allows) dismisses the finding for the rest of the pull
request; from anyone else it is answered with who may. Free text never dismisses.
"""

from __future__ import annotations

import logging
from datetime import timedelta

from django.db import IntegrityError, transaction

from repos import github
from repos.github import RepoRef, ThreadComment, ThreadInfo
from repos.selectors import effective_config
from reviews.checks.gate import gate_refresh
from reviews.conversation import thinking as reply_jobs
from reviews.models import Dismissal, Finding, FindingState, ThreadReply
from reviews.publication.threads import dismiss_command, may_dismiss, thread_reopen
from reviews.text.markers import is_ours
from reviews.text.markers import marker as signed_marker
from tasuku import durable
from webhooks import payloads
from webhooks.routing import Outcome

logger = logging.getLogger(__name__)

ANSWER_TASK = "reviews.tasks.reply_answer"
MAX_ATTEMPTS = 3

# Answers to replies are a durable queue (tasuku/durable.py): a reply GitHub would not
# take now (5xx, a rate limit) waits and is answered later, once.
REPLIES = durable.Queue(
    model="reviews.ThreadReply",
    task=ANSWER_TASK,
    name="reply",
    waiting=(ThreadReply.Status.QUEUED,),
    working=ThreadReply.Status.ANSWERING,
    failed=ThreadReply.Status.FAILED,
    installation="finding__pull_request__repository__installation__github_id",
    max_attempts=MAX_ATTEMPTS,
    ring_again=timedelta(minutes=2),
)


def review_comment_event(
    payload: payloads.PullRequestReviewCommentEvent, *, delivery_id: int
) -> Outcome:
    """`pull_request_review_comment.created`: a person replying on one of Tasuku's
    threads. Everything else (Tasuku's own comments, people's own threads) is left alone."""
    if payload.action != "created":
        return Outcome.ignore(f"pull_request_review_comment.{payload.action} needs no action")
    comment = payload.comment
    user = comment.user or payloads.NO_USER
    parent = comment.in_reply_to_id
    if user.type == "Bot":
        return Outcome.ignore("a comment by a bot")
    if not parent:
        return Outcome.ignore("a new thread by a person: Tasuku never touches it")
    finding = (
        Finding.objects.filter(
            github_comment_id=parent,
            pull_request__repository__github_id=payload.repository.id,
        )
        .order_by("-pk")
        .first()
    )
    if finding is None:
        return Outcome.ignore("a reply in a thread Tasuku did not start")
    login = user.login
    body = comment.body
    gateway = github.gateway()
    reason = dismiss_command(body, gateway.app_slug())
    dismissal, role = False, ""
    if reason is not None:
        pull_request = finding.pull_request
        repository = pull_request.repository
        dismissal, role = may_dismiss(
            gateway,
            RepoRef.of(repository),
            login,
            author=pull_request.author_login,
            author_allowed=effective_config(repository).author_may_dismiss,
            user_type=user.type,
        )
    try:
        with transaction.atomic():
            reply = ThreadReply.objects.create(
                finding=finding,
                github_comment_id=comment.id,
                login=login,
                body=body[:20000],
                dismissal=dismissal,
            )
            if dismissal:
                Dismissal.objects.get_or_create(
                    pull_request=finding.pull_request,
                    fingerprint=finding.fingerprint,
                    defaults={
                        "login": login,
                        "how": Dismissal.How.COMMAND,
                        "role": role,
                        "reason": reason or "no reason given",
                    },
                )
            REPLIES.ring(reply.pk)
    except IntegrityError:
        return Outcome.ignore("this reply is recorded already")
    if reason is not None and not dismissal:
        what = "asked to dismiss (no right to)"
    else:
        what = "dismissed" if dismissal else "replied on"
    return Outcome(f"{login} {what} “{finding.title}”; an answer is queued")


def replies_sweep() -> int:
    """Hand replies whose worker died to another, and ring again for replies due an
    answer (a lost doorbell, a try put off): how many were rung."""
    lost = {"error": "The worker stopped while answering this reply."}
    return REPLIES.sweep(lost=lost, lost_last=lost)["rung"]


def static_answer(finding: Finding, reply: ThreadReply, slug: str = "") -> str:
    """What the static reviewer says back: where the rule is documented, and how to
    silence it on this line if it does not apply."""
    rule = finding.rule or ""
    tool, _, code = rule.partition(":")
    dismiss = f"`@{slug} dismiss <reason>`" if slug else "a dismissal"
    # A suppression comment is worth knowing of for the code's future, but the pull
    # request's own does not close the finding here (unless the repository says so).
    honoured = bool((finding.review.run.config or {}).get("honour_pr_suppressions"))
    then = (
        "this repository honours such a comment in the pull request that adds it."
        if honoured
        else "a comment this pull request adds keeps the finding open here (shown as "
        "suppressed in this pull request) until someone with write access closes it with "
        f"{dismiss}; once merged, it keeps the rule quiet on that line."
    )
    if tool == "ruff":
        lines = [
            f"This comes from ruff's rule `{code}`: https://docs.astral.sh/ruff/rules/ (search {code})."
        ]
        if code != "invalid-syntax":
            lines.append(f"If it does not apply here: `# noqa: {code}` at the end of the line is "
                         f"ruff's way to say so, and {then}")  # fmt: skip
    elif tool == "shellcheck":
        lines = [f"This comes from ShellCheck's rule {code}: https://www.shellcheck.net/wiki/{code}.",
                 f"If it does not apply here: `# shellcheck disable={code}` on the line above is "
                 f"ShellCheck's way to say so, and {then}"]  # fmt: skip
    elif tool == "detect-secrets":
        lines = ["This comes from detect-secrets, which recognises credentials by their format.",
                 "If it is one, rotate it: it stays in the history. If this value is not a "
                 f"secret: `# pragma: allowlist secret` at the end of the line says so, and {then}"]  # fmt: skip
    elif tool == "hygiene":
        lines = ["This is one of Tasuku's hygiene checks (conflict markers, private keys, debugger "
                 "breakpoints); it has no suppression: remove the line."]  # fmt: skip
    else:
        lines = ["This finding came from the reviewer's own analysis."]
    if reply.dismissal:
        lines.append(
            f"Dismissed by {reply.login}: this finding will not be raised again on this pull "
            "request."
        )
    elif slug and dismiss_command(reply.body, slug) is not None:
        lines.append(
            "Not dismissed: only people with write access to this repository (or the pull "
            "request's author, where the repository allows it) can dismiss a finding. It "
            "stays open."
        )
    elif slug:
        lines.append(
            f"Replies are read, not taken as decisions: someone with write access can dismiss "
            f"this finding with `@{slug} dismiss <reason>`, or by resolving the thread."
        )
    return "\n\n".join(lines)


class ReplyAnswer(durable.Job):
    """Answer a person's reply in its thread (idempotent: the answer carries a marker).

    A reply GitHub did not take now is put off (GitHub's weather), retried, or failed
    (refused, out of tries); the marker keeps a later try from answering twice."""

    queue = REPLIES
    retry_on = (github.GitHubError,)
    related = ("finding__pull_request__repository__installation",)
    log_as = "reply"

    def work(self) -> str:
        reply = self.row
        finding = reply.finding
        repository = finding.pull_request.repository
        gateway = github.gateway()
        slug = gateway.app_slug()
        repo = RepoRef.of(repository)
        marker = signed_marker("answer", reply.github_comment_id)
        role = ""
        text = static_answer(finding, reply, slug)
        if reply_jobs.thinks(reply, finding, slug):
            # A model reviewer answers for itself: asked once, its answer kept on the row.
            if reply.asked_at is None:
                reply_jobs.reply_model_ask(reply, finding, gateway, repo, slug)
                reply.refresh_from_db()
            text, role = reply_jobs.answer_text(reply, finding, gateway, repo, slug, text)
        posted = gateway.comment_reply(
            repo,
            number=finding.pull_request.number,
            comment_id=finding.github_comment_id,
            body=f"{text}\n\n{marker}",
            marker=marker,
        )
        error = ""
        if role:
            # The reviewer conceded to someone who may dismiss: dismissed, as their own
            # dismissal would be.
            error = reply_jobs.concession_apply(reply, finding, gateway, repo, role)
        self.finish(
            ThreadReply.Status.ANSWERED, answer=text, answer_comment_id=posted.id, error=error
        )
        if reply.dismissal or role:
            # The dismissed finding no longer counts: the head's check says so now, not at
            # the next push.
            try:
                gate_refresh(finding.pull_request_id, finding.review.reviewer_id)
            except github.GitHubError as exc:
                # The answer stands; the next review of the pull request concludes it.
                logger.warning("reply %s: could not conclude the check again: %s", reply.pk, exc)
        return "answered"


reply_answer = ReplyAnswer.run  # the task's body (reviews/tasks.py)


def thread_event(payload: payloads.PullRequestReviewThreadEvent, *, delivery_id: int) -> Outcome:
    """`pull_request_review_thread.resolved` on one of Tasuku's threads: resolving it is
    a dismissal when the person who did may dismiss (the head's check is concluded again
    at once); anyone else's resolution is undone at once, with a reply saying who may.
    Tasuku's own resolutions, and threads it did not start, are left alone."""
    action = payload.action
    if action != "resolved":
        return Outcome.ignore(f"pull_request_review_thread.{action} needs no action")
    thread = payload.thread
    comments = thread.comments
    sender = payload.sender
    gateway = github.gateway()
    slug = gateway.app_slug()
    if not comments or is_ours(sender.login, sender.type, slug):
        return Outcome.ignore("Tasuku resolved its own thread")
    first = comments[0]
    if first.user is None or not is_ours(first.user.login, first.user.type, slug):
        return Outcome.ignore("a thread Tasuku did not start")
    finding = (
        Finding.objects.filter(
            github_comment_id=first.id,
            pull_request__repository__github_id=payload.repository.id,
        )
        .select_related("pull_request__repository__installation", "review")
        .order_by("-pk")
        .first()
    )
    if finding is None or finding.state != FindingState.OPEN:
        return Outcome.ignore("not an open finding's thread")
    pull_request = finding.pull_request
    repository = pull_request.repository
    repo = RepoRef.of(repository)
    login = sender.login
    allowed = effective_config(repository).author_may_dismiss
    ok, role = may_dismiss(
        gateway,
        repo,
        login,
        author=pull_request.author_login,
        author_allowed=allowed,
        user_type=sender.type,
    )
    if ok:
        Dismissal.objects.get_or_create(
            pull_request=pull_request,
            fingerprint=finding.fingerprint,
            defaults={
                "login": login,
                "how": Dismissal.How.RESOLVED,
                "role": role,
                "reason": "resolved the thread while the problem was still there",
            },
        )
        gate_refresh(pull_request.pk, finding.review.reviewer_id)
        return Outcome(f"{login} dismissed “{finding.title}” by resolving its thread")
    info = ThreadInfo(
        id=thread.node_id,
        is_resolved=True,
        is_outdated=False,
        comments=[
            ThreadComment(
                id=c.id,
                body=c.body,
                author_login=c.user.login if c.user else "",
                author_type=c.user.type if c.user else "",
            )
            for c in comments
            if c.id
        ],
    )
    who_may = "people with write access" + (" and the author" if allowed else "")
    text = (
        f"Reopened: this finding is still open. Only {who_may} can dismiss a finding here "
        f"({login} resolved this thread): resolve it, or reply `@{slug} dismiss <reason>`."
    )
    notes = thread_reopen(
        gateway,
        repo,
        pull_request.number,
        info,
        text,
        f"{finding.fingerprint}-reopened-{delivery_id}",
    )
    return Outcome(
        f"reopened “{finding.title}”: {login} may not dismiss it"
        + (f" ({notes[0]})" if notes else "")
    )
