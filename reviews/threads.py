"""Keeping Tasuku's threads honest across pushes (DESIGN §3 steps 13-14).

After each review of a pull request that had earlier open findings:
- found again → current: its thread is kept and nothing is posted;
- gone and its code still there → a "Verified fixed in <sha>" reply, then the thread
  is resolved; gone because its code was removed → an "Outdated" reply, then resolved;
- not re-examined (incremental, lines untouched) → current.
A person who resolves one of Tasuku's threads while the problem is still there, or says
in a reply that it is a false positive or won't be fixed, has dismissed it: it is never
posted again on that pull request. Threads and replies by people are never touched.
Every step is keyed (hidden markers, thread state), so a retry repeats nothing.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field

from django.db import IntegrityError, transaction
from django.db.models import Q

from repos.github import GitHubError, GitHubGateway, ThreadInfo
from reviews.diff import Diff
from reviews.models import Dismissal, Finding, FindingState, Review, ReviewRun
from reviews.reconcile import (
    ACCEPTED,
    CURRENT,
    OUTDATED,
    RESOLVED,
    Decision,
    Earlier,
    reconcile,
)

logger = logging.getLogger(__name__)

REPLY_MARKER = "<!-- tasuku:reconcile:{}:{} -->"
DISMISSAL_WORDS = re.compile(
    r"\b(false[ -]positive|won'?t fix|wontfix|not a (bug|problem|issue)|not an issue|by design|"
    r"intended|intentional|working as intended|ignore (this|it)|acceptable risk|not applicable|"
    r"n/a|disagree)\b",
    re.IGNORECASE,
)


def says_dismissed(text: str) -> bool:
    """Whether a person's reply dismisses the finding it answers."""
    return bool(DISMISSAL_WORDS.search(text or ""))


@dataclass
class Outcome:
    decisions: dict[str, Decision] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def previous_review(run: ReviewRun, previous_sha: str | None) -> Review | None:
    if not previous_sha:
        return None
    return (
        Review.objects.filter(
            pull_request=run.pull_request, reviewer=run.reviewer, head_sha=previous_sha
        )
        .exclude(run=run)
        .order_by("-created_at", "-pk")
        .first()
    )


def earlier_open(review: Review | None, head_sha: str) -> list[Finding]:
    """The previous review's open findings — and those this head already resolved or
    outdated, so that a retried run finishes what an interrupted one began."""
    if review is None:
        return []
    return list(
        review.findings.filter(
            Q(state=FindingState.OPEN)
            | Q(state__in=(FindingState.RESOLVED, FindingState.OUTDATED), resolved_in_sha=head_sha)
        ).order_by("pk")
    )


@dataclass
class Conversation:
    threads: list[ThreadInfo] = field(default_factory=list)
    dismissed: dict[str, str] = field(default_factory=dict)  # fingerprint -> who
    resolved_by_person: dict[str, str] = field(default_factory=dict)  # fingerprint -> who


def conversation_read(
    gateway: GitHubGateway,
    where: dict,
    number: int,
    run: ReviewRun,
    earlier: list[Finding],
    bot: str,
) -> Conversation:
    """Read the pull request's threads; record as dismissed the earlier findings where a
    person's reply says they are not to be fixed, and note the threads a person resolved.
    `dismissed` holds every dismissed fingerprint of the PR with who dismissed it."""
    found = Conversation()
    if earlier:
        found.threads = gateway.review_threads(**where, number=number)
    by_comment = {t.first.id: t for t in found.threads if t.first is not None}
    for finding in earlier:
        thread = by_comment.get(finding.github_comment_id or -1)
        if thread is None:
            continue
        people = [
            c for c in thread.comments[1:] if c.author_type != "Bot" and c.author_login != bot
        ]
        for comment in people:
            if says_dismissed(comment.body):
                _dismiss(run, finding, comment.author_login, f"replied: {comment.body[:300]}")
                break
        if thread.is_resolved and thread.resolved_by and thread.resolved_by != bot:
            found.resolved_by_person[finding.fingerprint] = thread.resolved_by
    found.dismissed = dict(
        Dismissal.objects.filter(pull_request=run.pull_request).values_list("fingerprint", "login")
    )
    return found


def _dismiss(run: ReviewRun, finding: Finding, login: str, reason: str) -> None:
    try:
        with transaction.atomic():
            Dismissal.objects.create(
                pull_request=run.pull_request,
                fingerprint=finding.fingerprint,
                login=login,
                reason=reason,
            )
    except IntegrityError:
        pass  # dismissed already


def decide(
    run: ReviewRun,
    earlier: list[Finding],
    found_again: set[str],
    *,
    since_previous: Diff | None,
    incremental: bool,
) -> dict[str, Decision]:
    deleted = (
        {f.path for f in since_previous.files if f.status == "deleted"} if since_previous else set()
    )
    return reconcile(
        [Earlier(f.fingerprint, f.path, f.start_line, f.end_line, f.side) for f in earlier],
        found_again,
        diff=since_previous,
        deleted_files=deleted,
        incremental=incremental,
        head_sha=run.head_sha,
    )


def carry(
    review: Review, earlier: list[Finding], decisions: dict[str, Decision], talk: Conversation
) -> None:
    """Carry current findings onto the new review (keeping their identity and thread);
    a person who resolved a thread of a problem still there has dismissed it."""
    new = {f.fingerprint: f for f in review.findings.all()}
    dismissed = talk.dismissed
    with transaction.atomic():
        for finding in earlier:
            decision = decisions[finding.fingerprint]
            if decision.state != CURRENT:
                continue
            person = talk.resolved_by_person.get(finding.fingerprint)
            if person and finding.fingerprint not in dismissed:
                _dismiss(review.run, finding, person, "resolved the thread without a code change")
                dismissed[finding.fingerprint] = person
            successor = new.get(finding.fingerprint)
            if successor is None:
                # Not re-examined (an incremental review that did not touch it): it stays.
                successor = Finding.objects.get(pk=finding.pk)
                successor.pk = None
                successor.review = review
                successor.carried_to = None
                successor.published = False
                successor.save()
            if finding.fingerprint in dismissed:
                Finding.objects.filter(pk=successor.pk).update(
                    state=FindingState.SUPPRESSED,
                    suppression_reason=f"dismissed by {dismissed[finding.fingerprint]}",
                )
            Finding.objects.filter(pk=successor.pk).update(
                first_seen_sha=finding.first_seen_sha or finding.review.head_sha,
                github_comment_id=finding.github_comment_id,
                github_comment_url=finding.github_comment_url,
            )
            Finding.objects.filter(pk=finding.pk).update(carried_to=successor)
        Finding.objects.filter(review=review, first_seen_sha="").update(
            first_seen_sha=review.head_sha
        )


def mark_gone(finding: Finding, decision: Decision, head_sha: str) -> None:
    """Record that an earlier finding is resolved or outdated at `head_sha`."""
    state = FindingState.OUTDATED if decision.state == OUTDATED else FindingState.RESOLVED
    Finding.objects.filter(pk=finding.pk).update(
        state=state, resolved_in_sha=head_sha, resolution=decision.reason
    )
    finding.state, finding.resolved_in_sha, finding.resolution = state, head_sha, decision.reason


def close_threads(
    gateway: GitHubGateway,
    where: dict,
    number: int,
    run: ReviewRun,
    earlier: list[Finding],
    decisions: dict[str, Decision],
    threads: list[ThreadInfo],
) -> list[str]:
    """Reply on and resolve the thread of each earlier finding that is gone. Returns
    notes (what could not be done, and why)."""
    notes: list[str] = []
    by_comment = {t.first.id: t for t in threads if t.first is not None}
    short = run.head_sha[:7]
    for finding in earlier:
        decision = decisions[finding.fingerprint]
        if decision.state == CURRENT:
            continue
        mark_gone(finding, decision, run.head_sha)
        thread = by_comment.get(finding.github_comment_id or -1)
        if thread is None:
            continue
        marker = REPLY_MARKER.format(finding.fingerprint, short)
        if not any(marker in c.body for c in thread.comments):
            if decision.state == ACCEPTED:
                text = f"Resolved in {short}: {decision.reason}."
            elif decision.state == RESOLVED:
                text = f"Verified fixed in {short}: {decision.reason}."
            else:
                text = (
                    f"Outdated: the code this referred to was removed or rewritten in {short} "
                    f"({decision.reason})."
                )
            gateway.comment_reply(
                **where,
                number=number,
                comment_id=thread.first.id,
                body=f"{text}\n\n{marker}",
                marker=marker,
            )
        if not thread.is_resolved:
            try:
                gateway.thread_resolve(**where, thread_id=thread.id)
            except GitHubError as exc:
                if not exc.permanent:
                    raise
                notes.append(f"could not resolve the thread of “{finding.title}”: {exc.message}")
                logger.warning("run %s: %s", run.pk, exc.message)
    return notes
