"""Keeping Tasuku's threads honest across pushes (docs/reviews.md, *Across pushes*).

After each review of a pull request that had earlier open findings:
- found again → current: its thread is kept and nothing is posted;
- gone and its code still there → a "Verified fixed in <sha>" reply, then the thread
  is resolved; gone because its code was removed → an "Outdated" reply, then resolved;
- not re-examined (incremental, lines untouched) → current.
Only someone who may decide about the code silences a finding, and only by an explicit
act: a person with write access (asked of GitHub) or — where the policy allows — the
pull request's author, resolving the thread while the problem is still there or
replying `@<app> dismiss <reason>`. Free text never dismisses ("Is this intended?" is a
question, "NOT a false positive" a denial). A thread resolved by someone without that
right is reopened with a reply saying who may. A dismissed finding is never posted again
on that pull request; each dismissal records who, how and why. Threads and replies by
people are never touched. Every step is keyed (signed markers on Tasuku's own posts,
thread state), so a retry repeats nothing.
"""

from __future__ import annotations

import hashlib
import logging
import re
from dataclasses import dataclass, field

from django.db import IntegrityError, transaction
from django.db.models import Q

from repos.github import GitHubError, GitHubGateway, RepoRef, ThreadInfo
from repos.github.conversation import WRITE_ROLES
from reviews.models import Dismissal, Finding, FindingState, Review, ReviewRun
from reviews.scope.coverage import STATIC_CHECKERS, checker_of
from reviews.scope.diff import Diff
from reviews.text.markers import is_ours
from reviews.text.markers import marker as signed_marker
from reviews.validation.reconcile import (
    ACCEPTED,
    CURRENT,
    OUTDATED,
    RESOLVED,
    Decision,
    Earlier,
    line_moved,
    reconcile,
    text_moved,
)

logger = logging.getLogger(__name__)

QUOTED_OR_CODE = re.compile(r"(?ms)^ {0,3}(`{3,}|~{3,}).*?^ {0,3}\1[ \t]*$|`[^`\n]*`|^ {0,3}>.*?$")


def dismiss_command(text: str | None, slug: str) -> str | None:
    """The reason given in `@<slug> dismiss <reason>`, if the reply gives that command
    at the start of one of its lines ("" when it gives no reason); None when it does
    not. A sentence that mentions the command ("nobody @app dismiss this") is not one;
    quoted lines and code are not commands: quoting someone else's repeats nothing."""
    plain = QUOTED_OR_CODE.sub(" ", text or "")
    match = re.search(
        rf"^[ \t]*@{re.escape(slug)}(?:\[bot\])?[ \t]+dismiss\b[ \t:,-]*([^\n]*)",
        plain,
        re.IGNORECASE | re.MULTILINE,
    )
    if match is None:
        return None
    return match.group(1).strip()[:500]


def may_dismiss(
    gateway: GitHubGateway,
    repo: RepoRef,
    login: str,
    *,
    author: str,
    author_allowed: bool,
    user_type: str = "User",
) -> tuple[bool, str]:
    """(whether `login` may silence a finding on this pull request, in what capacity):
    a person (never a bot or an App: GraphQL drops a bot's `[bot]`, so its login could
    be a person's) with write access or above, asked of GitHub; or the pull request's
    author where the policy allows it."""
    if not login or user_type != "User":
        return False, "not a person" if login else "unknown"
    if author_allowed and login.lower() == (author or "").lower():
        return True, "author"
    try:
        role = gateway.collaborator_role(repo, login=login)
    except GitHubError as exc:
        if not exc.permanent:
            raise
        return False, "unknown"
    return role in WRITE_ROLES, role


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
    # fingerprint -> (who, their role): resolved by someone who may dismiss
    resolved_by_person: dict[str, tuple[str, str]] = field(default_factory=dict)
    # fingerprint -> (thread, who): resolved by someone without the right to dismiss
    unauthorised: dict[str, tuple[ThreadInfo, str]] = field(default_factory=dict)


def conversation_read(
    gateway: GitHubGateway,
    repo: RepoRef,
    number: int,
    run: ReviewRun,
    earlier: list[Finding],
    bot: str,
) -> Conversation:
    """Read the pull request's threads. An earlier finding is dismissed where someone
    who may (see `may_dismiss`) replied `@<app> dismiss <reason>`; a thread resolved by
    someone who may is noted (a dismissal if the problem is still there), one resolved
    by anyone else is noted to be reopened. `dismissed` holds every dismissed
    fingerprint of the PR with who dismissed it."""
    found = Conversation()
    if earlier:
        found.threads = gateway.review_threads(repo, number=number)
    by_comment = {
        t.first.id: t
        for t in found.threads
        if t.first is not None and is_ours(t.first.author_login, t.first.author_type, bot)
    }
    config = run.config or {}
    author = run.pull_request.author_login
    allowed = bool(config.get("author_may_dismiss"))

    def permitted(login: str, user_type: str) -> tuple[bool, str]:
        return may_dismiss(
            gateway, repo, login, author=author, author_allowed=allowed, user_type=user_type
        )

    for finding in earlier:
        thread = by_comment.get(finding.github_comment_id or -1)
        if thread is None:
            continue
        for comment in thread.comments[1:]:
            if is_ours(comment.author_login, comment.author_type, bot):
                continue
            reason = dismiss_command(comment.body, bot)
            if reason is None:
                continue
            ok, role = permitted(comment.author_login, comment.author_type)
            if ok:
                _dismiss(
                    run,
                    finding,
                    comment.author_login,
                    Dismissal.How.COMMAND,
                    reason or "no reason given",
                    role=role,
                )
                break
        resolver = thread.resolved_by
        if thread.is_resolved and resolver and not is_ours(resolver, thread.resolved_by_type, bot):
            ok, role = permitted(resolver, thread.resolved_by_type)
            if ok:
                found.resolved_by_person[finding.fingerprint] = (resolver, role)
            else:
                found.unauthorised[finding.fingerprint] = (thread, resolver)
    found.dismissed = dict(
        Dismissal.objects.filter(pull_request=run.pull_request).values_list("fingerprint", "login")
    )
    return found


def _dismiss(
    run: ReviewRun, finding: Finding, login: str, how: str, reason: str, *, role: str = ""
) -> None:
    try:
        with transaction.atomic():
            Dismissal.objects.create(
                pull_request=run.pull_request,
                fingerprint=finding.fingerprint,
                login=login,
                how=how,
                role=role,
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
    examined: dict[str, frozenset[str]] | None = None,
    engine: str = "",
    ruled_fixed: set[str] = frozenset(),
    pull_diff: Diff | None = None,
    base_ref: str = "",
    rules: tuple[str, str] = ("", ""),
) -> dict[str, Decision]:
    """What became of each earlier open finding (reviews/validation/reconcile.py). `examined`: what
    read each file at this head (the coverage ledger); `engine`: the reviewer's engine
    (its static checkers are told apart by the finding's rule); `pull_diff`: after a
    retarget, the pull request's whole diff against its new base (`base_ref`); `rules`:
    the rules of the review the findings come from and of this one (each a digest, ""
    where unknown)."""
    deleted = (
        {f.path for f in since_previous.files if f.status == "deleted"} if since_previous else set()
    )
    items = []
    for f in earlier:
        checker = checker_of(f.rule, engine) if engine else ""
        items.append(
            Earlier(
                f.fingerprint,
                f.path,
                f.start_line,
                f.end_line,
                f.side,
                checker=checker,
                deterministic=checker in STATIC_CHECKERS,
            )  # fmt: skip
        )
    return reconcile(
        items,
        found_again,
        diff=since_previous,
        deleted_files=deleted,
        incremental=incremental,
        head_sha=run.head_sha,
        examined=examined,
        ruled_fixed=ruled_fixed,
        in_pull=_in_pull(pull_diff) if pull_diff is not None else None,
        base_ref=base_ref,
        rules_changed=all(rules) and rules[0] != rules[1],
        # This review knows its rules and the one before did not record any.
        rules_unrecorded=bool(rules[1]) and not rules[0],
    )


def _in_pull(diff: Diff):
    """Whether any of a finding's lines is in the pull request's diff (a line a comment
    may anchor on: added, or context within a hunk)."""

    def inside(path: str, start: int, end: int) -> bool:
        file = diff.get(path)
        if file is None:
            return False
        lines = set(range(start, end + 1))
        return any(lines & (hunk.added | hunk.context_target) for hunk in file.hunks)

    return inside


def carry(
    review: Review,
    earlier: list[Finding],
    decisions: dict[str, Decision],
    talk: Conversation,
    *,
    since_previous: Diff | None = None,
) -> None:
    """Carry current findings onto the new review (keeping their identity and thread);
    someone who may dismiss and resolved a thread of a problem still there has
    dismissed it. A finding carried unexamined is moved to where its lines are at the
    new head (`since_previous`: the diff from the earlier head)."""
    new = {f.fingerprint: f for f in review.findings.all()}
    dismissed = talk.dismissed
    carried: list[Finding] = []
    with transaction.atomic():
        # The rows of those carried unexamined, read in one statement as they are now.
        unexamined = Finding.objects.in_bulk(
            [
                finding.pk
                for finding in earlier
                if decisions[finding.fingerprint].state == CURRENT
                and finding.fingerprint not in new
            ]
        )
        for finding in earlier:
            decision = decisions[finding.fingerprint]
            if decision.state != CURRENT:
                continue
            person, role = talk.resolved_by_person.get(finding.fingerprint, ("", ""))
            if person and finding.fingerprint not in dismissed:
                _dismiss(
                    review.run,
                    finding,
                    person,
                    Dismissal.How.RESOLVED,
                    "resolved the thread while the problem was still there",
                    role=role,
                )
                dismissed[finding.fingerprint] = person
            kept = {
                "first_seen_sha": finding.first_seen_sha or finding.review.head_sha,
                "github_comment_id": finding.github_comment_id,
                "github_comment_url": finding.github_comment_url,
            }
            successor = new.get(finding.fingerprint)
            if successor is None:
                # Not re-examined (an incremental review that did not touch it): it stays,
                # written once with what it keeps of its predecessor.
                successor = unexamined[finding.pk]
                successor.pk = None
                successor.review = review
                successor.carried_to = None
                successor.published = False
                if successor.side == "RIGHT":
                    start = line_moved(since_previous, successor.path, successor.start_line)
                    shift = start - successor.start_line
                    for name in ("title", "body", "evidence"):
                        setattr(successor, name, text_moved(
                            getattr(successor, name), successor.path, successor.start_line,
                            successor.end_line, shift,
                        ))  # fmt: skip
                    successor.start_line, successor.end_line = start, successor.end_line + shift
                    if successor.original_start_line is not None:
                        successor.original_start_line += shift
                    if successor.original_end_line is not None:
                        successor.original_end_line += shift
                if finding.fingerprint in dismissed:
                    successor.state = FindingState.SUPPRESSED
                    successor.suppression_reason = f"dismissed by {dismissed[finding.fingerprint]}"
                for name, value in kept.items():
                    setattr(successor, name, value)
                successor.save()
            else:
                if finding.fingerprint in dismissed:
                    Finding.objects.filter(pk=successor.pk).update(
                        state=FindingState.SUPPRESSED,
                        suppression_reason=f"dismissed by {dismissed[finding.fingerprint]}",
                    )
                Finding.objects.filter(pk=successor.pk).update(**kept)
            carried.append(Finding(pk=finding.pk, carried_to_id=successor.pk))
        Finding.objects.bulk_update(carried, ["carried_to"])
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
    repo: RepoRef,
    number: int,
    run: ReviewRun,
    earlier: list[Finding],
    decisions: dict[str, Decision],
    threads: list[ThreadInfo],
) -> list[str]:
    """Reply on and resolve the thread of each earlier finding that is gone. Returns
    notes (what could not be done, and why)."""
    notes: list[str] = []
    slug = gateway.app_slug()
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
        marker = signed_marker("reconcile", f"{finding.fingerprint}-{short}")
        if not any(
            marker in c.body
            for c in thread.comments
            if is_ours(c.author_login, c.author_type, slug)
        ):
            if decision.state == ACCEPTED:
                text = f"Resolved in {short}: {decision.reason}."
            elif decision.state == RESOLVED:
                text = f"Verified fixed in {short}: {decision.reason}."
            elif not decision.code_changed:
                text = f"Outdated at {short}: {decision.reason}."
            else:
                text = (
                    f"Outdated: the code this referred to was removed or rewritten in {short} "
                    f"({decision.reason})."
                )
            gateway.comment_reply(
                repo,
                number=number,
                comment_id=thread.first.id,
                body=f"{text}\n\n{marker}",
                marker=marker,
            )
        if not thread.is_resolved:
            try:
                gateway.thread_resolve(repo, thread_id=thread.id)
            except GitHubError as exc:
                if not exc.permanent:
                    raise
                notes.append(f"could not resolve the thread of “{finding.title}”: {exc.message}")
                logger.warning("run %s: %s", run.pk, exc.message)
    return notes


def suppression_replies(
    gateway: GitHubGateway,
    repo: RepoRef,
    number: int,
    run: ReviewRun,
    review: Review,
    earlier: list[Finding],
    decisions: dict[str, Decision],
    threads: list[ThreadInfo],
) -> list[str]:
    """Say in the thread of each earlier finding that a suppression comment now covers
    what became of it, once: one the pull request added itself leaves it open (and its
    thread open: reopened if someone resolved it); one that counts (the base branch's,
    or the pull request's where the policy honours them) suppresses it, and its thread
    is resolved. Returns notes (what GitHub refused)."""
    notes: list[str] = []
    by_comment = {t.first.id: t for t in threads if t.first is not None}
    now = {f.fingerprint: f for f in review.findings.all()}
    short = run.head_sha[:7]
    for finding in earlier:
        if decisions[finding.fingerprint].state != CURRENT:
            continue
        thread = by_comment.get(finding.github_comment_id or -1)
        successor = now.get(finding.fingerprint)
        if thread is None or successor is None:
            continue
        if successor.state == FindingState.OPEN and successor.suppressed_in_pr:
            text = (
                f"Still open in {short}: suppressed in this pull request by "
                f"{successor.suppressed_in_pr}. A pull request's own suppression does not "
                "close a finding here; it stays open until the code is fixed or someone "
                f"with write access dismisses it (`@{gateway.app_slug()} dismiss <reason>`)."
            )
            key = f"pr-suppressed-{finding.fingerprint}-{_digest(successor.suppressed_in_pr)}"
            notes += thread_reopen(gateway, repo, number, thread, text, key)
        elif successor.state == FindingState.SUPPRESSED and (
            successor.suppression_reason.startswith(("suppressed by ", "suppressed in this"))
        ):
            key = f"suppressed-{finding.fingerprint}-{short}"
            notes += thread_settle(
                gateway, repo, number, thread, f"Suppressed in {short}: "
                f"{successor.suppression_reason}.", key,
            )  # fmt: skip
    return notes


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:8]


def thread_settle(
    gateway: GitHubGateway, repo: RepoRef, number: int, thread: ThreadInfo, text: str, key: str
) -> list[str]:
    """Say `text` in one of Tasuku's threads (once: keyed by `key`) and resolve it."""
    slug = gateway.app_slug()
    marker = signed_marker("reconcile", key)
    if not any(
        marker in c.body for c in thread.comments if is_ours(c.author_login, c.author_type, slug)
    ):
        gateway.comment_reply(
            repo, number=number, comment_id=thread.first.id, body=f"{text}\n\n{marker}",
            marker=marker,
        )  # fmt: skip
    if not thread.is_resolved:
        try:
            gateway.thread_resolve(repo, thread_id=thread.id)
        except GitHubError as exc:
            if not exc.permanent:
                raise
            return [f"could not resolve a thread: {exc.message}"]
    return []


def thread_reopen(
    gateway: GitHubGateway, repo: RepoRef, number: int, thread: ThreadInfo, text: str, key: str
) -> list[str]:
    """Say `text` in one of Tasuku's threads (once: keyed by `key`) and reopen it if it is
    resolved. Returns notes (what GitHub refused)."""
    slug = gateway.app_slug()
    marker = signed_marker("reconcile", key)
    if not any(
        marker in c.body for c in thread.comments if is_ours(c.author_login, c.author_type, slug)
    ):
        gateway.comment_reply(
            repo,
            number=number,
            comment_id=thread.first.id,
            body=f"{text}\n\n{marker}",
            marker=marker,
        )
    if thread.is_resolved:
        try:
            gateway.thread_resolve(repo, thread_id=thread.id, resolved=False)
        except GitHubError as exc:
            if not exc.permanent:
                raise
            return [f"could not reopen a thread: {exc.message}"]
    return []


def reopen_unauthorised(
    gateway: GitHubGateway,
    repo: RepoRef,
    number: int,
    run: ReviewRun,
    earlier: list[Finding],
    decisions: dict[str, Decision],
    talk: Conversation,
) -> list[str]:
    """Reopen each thread that someone without the right to dismiss resolved while its
    problem is still there, saying who may."""
    slug = gateway.app_slug()
    short = run.head_sha[:7]
    allowed = bool((run.config or {}).get("author_may_dismiss"))
    who_may = "people with write access" + (" and the author" if allowed else "")
    notes: list[str] = []
    for finding in earlier:
        found = talk.unauthorised.get(finding.fingerprint)
        decision = decisions.get(finding.fingerprint)
        if found is None or decision is None or decision.state != CURRENT:
            continue
        if finding.fingerprint in talk.dismissed:
            continue
        thread, resolver = found
        text = (
            f"Reopened: this finding is still open at {short}. Only {who_may} can dismiss "
            f"a finding here ({resolver} resolved this thread): resolve it, or reply "
            f"`@{slug} dismiss <reason>`."
        )
        notes += thread_reopen(
            gateway, repo, number, thread, text, f"{finding.fingerprint}-reopened-{short}"
        )
    return notes


def positions(
    run: ReviewRun,
    earlier: list[Finding],
    dismissed: dict[str, str],
    since_previous: Diff | None,
    previous_sha: str | None,
) -> dict[str, tuple[str, int, str]]:
    """Where each earlier open finding, and each dismissed one, is at this head
    (fingerprint -> (path, line)): its lines at the previous head moved through the
    diff since, and the digest of its code. A dismissed finding no longer carried is
    placed by its latest row."""
    found: dict[str, tuple[str, int, str]] = {
        f.fingerprint: (f.path, line_moved(since_previous, f.path, f.start_line), f.code_digest)
        for f in earlier
        if f.side == "RIGHT"
    }
    missing = set(dismissed) - set(found)
    if missing:
        rows = (
            Finding.objects.filter(
                pull_request=run.pull_request, fingerprint__in=missing, side="RIGHT"
            )
            .select_related("review")
            .order_by("fingerprint", "-pk")
        )
        for row in rows:
            if row.fingerprint in found:
                continue
            line = row.start_line
            if row.review.head_sha == previous_sha:
                line = line_moved(since_previous, row.path, line)
            found[row.fingerprint] = (row.path, line, row.code_digest)
    return found
