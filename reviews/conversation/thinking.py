"""Replies that think: a person's reply in one of a model reviewer's threads is answered
by that reviewer's model (docs/reviews.md, *Replies and what Tasuku learns*).

A short, bounded job (sandbox/agent/reply.py) reads the finding, the thread — people's
words fenced as untrusted data — and the code at the pull request's head with the
review's read-only tools, and either concedes (with why) or explains. It runs in the
local runner's sandbox with only the provider's key, whatever the reviewer's runner: it
executes nothing, it only reads. Its answer, usage and cost are kept on the reply's row
before anything is posted, so a retried post never asks the model twice.

A concession silences the finding only as a dismissal would: when the person who
replied may dismiss (write access, or the author where the policy allows). Otherwise the
answer says who may, and the finding stays open. A model that fails, falls silent or
answers garbage leaves the row's reason, and the thread gets the canned answer.
"""

from __future__ import annotations

import logging
import re
from decimal import Decimal

from django.conf import settings
from django.utils import timezone

from repos.github import GitHubError, RepoRef
from repos.selectors import effective_config
from reviews.engines import boundary as engines
from reviews.models import Dismissal, Finding, ThreadReply
from reviews.pipeline.forges import mirror_for
from reviews.publication.threads import dismiss_command, may_dismiss
from reviews.scope.budget import installation_budget
from reviews.text.escaping import block_text
from reviews.text.markers import is_ours
from sandbox.agent.tools import ToolError, Tools
from sandbox.contract import (
    MAX_BODY,
    MAX_CODE,
    MAX_MESSAGE,
    MAX_REPLY,
    MAX_THREAD,
    EarlierFinding,
    Limits,
    ReplyJob,
    Severity,
    ThreadMessage,
)
from sandbox.engines import REGISTRY
from sandbox.runners import local as local_runner
from sandbox.workspace import Workspace

logger = logging.getLogger(__name__)

# A reply is a short job: a few reads, then an answer.
REPLY_STEPS = 6
REPLY_DEADLINE = 120  # seconds
REPLY_TOKENS = 60_000  # input and output over the whole job
REPLY_COST_CAP = Decimal("0.25")  # dollars, or the reviewer's own cap when lower
CONTEXT_LINES = 15
MARKER_TAIL = re.compile(r"\s*<!-- tasuku:[^>]*-->\s*\Z")


def thinks(reply: ThreadReply, finding: Finding, slug: str) -> bool:
    """Whether the reviewer's model answers this reply: a model reviewer's finding, a
    reply that is not a dismiss command, on a finding nobody dismissed yet."""
    facts = REGISTRY.get(finding.review.reviewer.engine)
    if facts is None or facts.provider is None:
        return False
    if dismiss_command(reply.body, slug) is not None:
        return False
    return not Dismissal.objects.filter(
        pull_request_id=finding.pull_request_id, fingerprint=finding.fingerprint
    ).exists()


def reply_model_ask(
    reply: ThreadReply, finding: Finding, gateway, repo: RepoRef, slug: str
) -> None:
    """Ask the reviewer's model once, and keep what it said (or why it said nothing) on
    the reply's row. GitHub's errors while preparing the job are raised: the reply waits
    and the model is asked on the next try."""
    reviewer = finding.review.reviewer
    fields: dict = {"model": reviewer.model[:100]}
    repository = finding.pull_request.repository
    config = effective_config(repository)
    budget = installation_budget(repository.installation)
    if budget.exhausted and config.degrade_over_budget:
        fields["model_error"] = (
            f"not asked: this month's review budget is spent (${budget.spent:.2f} of ${budget.cap})"
        )
    else:
        try:
            result = _run(reply, finding, gateway, repo, slug)
        except GitHubError:
            raise
        except Exception as exc:  # noqa: BLE001 - the model failing is an answer too
            logger.warning("reply %s: the reply job failed: %s", reply.pk, exc)
            fields["model_error"] = f"the reply job failed: {exc}"[:2000]
        else:
            usage = result.usage
            fields.update(
                decision=result.decision,
                model_answer=result.text,
                model_error=result.failure if not result.decision else "",
                input_tokens=usage.input_tokens,
                output_tokens=usage.output_tokens,
                cost_usd=Decimal(str(round(usage.cost_usd, 4))),
                steps=usage.steps,
            )
    # Once: an attempt that lost its lease and asked again does not overwrite the answer
    # the thread may already have been given.
    ThreadReply.objects.filter(pk=reply.pk, asked_at__isnull=True).update(
        asked_at=timezone.now(), **fields
    )


def _run(reply: ThreadReply, finding: Finding, gateway, repo: RepoRef, slug: str):
    pull_request = finding.pull_request
    repository = pull_request.repository
    reviewer = finding.review.reviewer
    messages = thread_messages(gateway, repo, pull_request.number, finding, reply, slug)
    cap = REPLY_COST_CAP
    if reviewer.cost_cap_usd is not None:
        cap = min(cap, Decimal(reviewer.cost_cap_usd))
    info = gateway.repository_get(repo)
    token = gateway.contents_token(repo)
    with Workspace(settings.TASUKU_WORKSPACE_ROOT) as workspace:
        checkout = workspace.checkout(
            clone_url=info.clone_url,
            token=token,
            head_sha=pull_request.head_sha,
            base_sha=pull_request.base_sha,
            previous_sha=None,
            since_sha=None,
            mirror=mirror_for(repository),
        )
        job = ReplyJob(
            job_id=f"reply-{reply.pk}",
            repository=repository.full_name,
            pull_request=pull_request.number,
            head_sha=pull_request.head_sha,
            finding=EarlierFinding(
                id=finding.fingerprint,
                path=finding.path,
                start_line=max(finding.start_line, 1),
                end_line=max(finding.end_line, finding.start_line, 1),
                severity=Severity(finding.severity),
                category=finding.category,
                title=finding.title[:200],
                body=finding.body[:MAX_BODY],
            ),
            thread=messages,
            code=code_around(checkout.root, finding),
            model=reviewer.model,
            price=engines.model_price(reviewer.model),
            limits=Limits(
                steps=min(reviewer.step_limit, REPLY_STEPS),
                cost_cap_usd=float(cap),
                deadline_seconds=REPLY_DEADLINE,
            ),
            max_tokens=REPLY_TOKENS,
        )
        seconds = REPLY_DEADLINE + 30
        return local_runner.reply_run(
            reviewer.engine,
            job,
            checkout.root,
            limits=local_runner.Limits(wall_seconds=seconds, cpu_seconds=seconds),
            allow_env=engines.engine_environment(reviewer),
        )


def thread_messages(
    gateway, repo: RepoRef, number: int, finding: Finding, reply: ThreadReply, slug: str
) -> tuple[ThreadMessage, ...]:
    """The finding's thread as GitHub has it, oldest first, Tasuku's own comments marked
    (by author, never by what a comment says), the reply to answer last."""
    found = next(
        (
            t
            for t in gateway.review_threads(repo, number=number)
            if t.first is not None and t.first.id == finding.github_comment_id
        ),
        None,
    )
    messages = []
    seen = False
    for comment in found.comments if found else []:
        seen = seen or comment.id == reply.github_comment_id
        messages.append(
            ThreadMessage(
                author=(comment.author_login or "someone")[:100],
                body=MARKER_TAIL.sub("", comment.body)[:MAX_MESSAGE],
                tasuku=is_ours(comment.author_login, comment.author_type, slug),
            )
        )
        if seen:
            break  # what came after the reply is not what it answers
    if not seen:
        messages.append(ThreadMessage(author=reply.login[:100], body=reply.body[:MAX_MESSAGE]))
    return tuple(messages[-MAX_THREAD:])


def code_around(root, finding: Finding) -> str:
    """The finding's lines and some around them at the head, numbered, through the same
    read-only tool the model has (a path leading out of the checkout is refused)."""
    start = max(1, finding.start_line - CONTEXT_LINES)
    end = max(finding.end_line, finding.start_line) + CONTEXT_LINES
    try:
        text = Tools(root).read_file({"path": finding.path, "start_line": start, "end_line": end})
    except (ToolError, OSError) as exc:
        text = f"(not readable at the head: {exc})"
    return text[:MAX_CODE]


def answer_text(
    reply: ThreadReply, finding: Finding, gateway, repo: RepoRef, slug: str, static: str
) -> tuple[str, str]:
    """What the thread is told, and the dismissing person's role when the reviewer's
    concession silences the finding ("" otherwise). `static`: the canned answer, for a
    model that gave none."""
    reviewer = finding.review.reviewer
    said = block_text(reply.model_answer, MAX_REPLY)
    signature = f"<sub>The {reviewer.slug} reviewer ({reviewer.model or reviewer.engine}).</sub>"
    if reply.decision == "explain" and said:
        return (
            f"{said}\n\nReplies are read, not taken as decisions: someone with write access "
            f"can dismiss this finding with `@{slug} dismiss <reason>`, or by resolving the "
            f"thread.\n\n{signature}",
            "",
        )
    if reply.decision != "concede" or not said:
        return static, ""
    pull_request = finding.pull_request
    allowed = effective_config(pull_request.repository).author_may_dismiss
    ok, role = may_dismiss(
        gateway,
        repo,
        reply.login,
        author=pull_request.author_login,
        author_allowed=allowed,
        user_type="User",
    )
    if ok:
        return (
            f"{said}\n\nConceded: this finding is dismissed on {reply.login}'s reply and will "
            f"not be raised again on this pull request.\n\n{signature}",
            role or "write",
        )
    who_may = "people with write access to this repository" + (
        " and the pull request's author" if allowed else ""
    )
    return (
        f"{said}\n\nThe reviewer concedes this point, but {reply.login} cannot dismiss "
        f"findings here: only {who_may} can. The finding stays open; one of them can reply "
        f"`@{slug} dismiss <reason>` or resolve this thread.\n\n{signature}",
        "",
    )


def concession_apply(
    reply: ThreadReply, finding: Finding, gateway, repo: RepoRef, role: str
) -> str:
    """The reviewer conceded to someone who may dismiss: the finding is dismissed (once),
    and its thread resolved. Returns a note when GitHub would not resolve it."""
    Dismissal.objects.get_or_create(
        pull_request=finding.pull_request,
        fingerprint=finding.fingerprint,
        defaults={
            "login": reply.login,
            "how": Dismissal.How.CONCEDED,
            "role": role,
            "reason": f"the reviewer conceded: {reply.model_answer}"[:2000],
        },
    )
    try:
        for thread in gateway.review_threads(repo, number=finding.pull_request.number):
            if thread.first is not None and thread.first.id == finding.github_comment_id:
                if not thread.is_resolved:
                    gateway.thread_resolve(repo, thread_id=thread.id)
                break
    except GitHubError as exc:
        # The dismissal stands (the check no longer counts it); only the thread is open.
        logger.warning("reply %s: could not resolve the thread: %s", reply.pk, exc)
        return f"could not resolve the thread: {exc}"
    return ""
