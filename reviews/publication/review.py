"""What a review leaves behind: its rows (`persist`: every finding, published or not) and
one GitHub review with its inline comments (`publish`), an approval where the policy or
the run's mode asks for one and nothing withholds it (`approval_decide`), and Tasuku's
earlier approvals dismissed once findings are open (`approvals_dismiss`)."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Count, Exists, OuterRef, Subquery
from django.utils import timezone
from django.utils.translation import ngettext

from repos.github import GitHubError
from repos.policy import CHECKLESS_TRIGGERS
from reviews.checks.checkruns import dashboard_url
from reviews.core import stages
from reviews.core.context import Context, Published
from reviews.models import (
    Finding,
    Review,
    ReviewRun,
    ReviewState,
    RunAttempt,
    RunStatus,
)
from reviews.publication import threads
from reviews.publication.fixes import summary_note
from reviews.scope.coverage import Entry, entries_of, unreviewed
from reviews.scope.triage import Verdict
from reviews.text.escaping import code_span
from reviews.text.markers import is_ours
from reviews.text.rendering import (
    BODY_ONLY_NOTE,
    ReviewContext,
    comment_payload,
    location,
    markers_in,
    review_body,
    run_marker,
)
from reviews.validation.anchors import comments_sort, probe_marker, refusal_reason
from reviews.validation.findings import OPEN, Validated
from sandbox.contract import ReviewResult

logger = logging.getLogger(__name__)


def approval_withheld(ctx: Context, open_now: list[Finding]) -> str:
    """Why the open findings withhold an approval ("" when they do not): any open
    Tasuku finding does, unless the policy (or the run's mode) approves with only nits
    open."""
    blocking = sum(1 for f in open_now if f.blocking)
    if blocking:
        return ngettext(
            "%(count)d blocking finding is open", "%(count)d blocking findings are open", blocking
        ) % {"count": blocking}
    if open_now and not (ctx.config.approve_with_nits or ctx.mode.approves_with_nits):
        count = len(open_now)
        return ngettext(
            "%(count)d finding is open (this repository approves only when none is)",
            "%(count)d findings are open (this repository approves only when none is)",
            count,
        ) % {"count": count}
    return ""


def others_withhold(ctx: Context) -> str:
    """Why another of the repository's reviewers withholds an approval of this head ("":
    none does): one that has not reviewed it, is still to, did not review it in full
    (failed, skipped, incomplete, triaged, partial), or has a finding open on it. An
    approval stands for every Tasuku reviewer of the pull request, not the one that
    happens to finish last."""
    run = ctx.run
    head = run.head_sha[:7]
    lenient = ctx.config.approve_with_nits or ctx.mode.approves_with_nits
    for reviewer in ctx.config.reviewers:
        if reviewer.slug == run.reviewer.slug:
            continue
        latest = (
            ReviewRun.objects.filter(
                pull_request=run.pull_request, reviewer__slug=reviewer.slug, head_sha=run.head_sha
            )
            .exclude(trigger__in=CHECKLESS_TRIGGERS)
            .order_by("-pk")
            .first()
        )
        if latest is None:
            return f"{reviewer.slug} has not reviewed {head}"
        if latest.status in (RunStatus.QUEUED, RunStatus.RUNNING):
            return f"{reviewer.slug}'s review of {head} is still to come"
        review = Review.objects.filter(run=latest).first()
        if latest.status != RunStatus.COMPLETED or review is None:
            return f"{reviewer.slug} did not review {head} ({latest.get_status_display()})"
        if (
            review.state != ReviewState.COMPLETE
            or review.shortfall
            or unreviewed(entries_of(review.coverage))
        ):
            return f"{reviewer.slug} did not review {head} in full"
        open_there = review.findings.filter(state=OPEN)
        blocking = open_there.filter(blocking=True).count()
        if blocking or (not lenient and open_there.exists()):
            count = blocking or open_there.count()
            return ngettext(
                "%(reviewer)s has %(count)d finding open on %(head)s",
                "%(reviewer)s has %(count)d findings open on %(head)s",
                count,
            ) % {"reviewer": reviewer.slug, "count": count, "head": head}
    return ""


def approval_decide(ctx: Context, open_now: list[Finding]) -> tuple[bool, list[str]]:
    """Approve only when the policy says so, no Tasuku finding is open (or only nits,
    where the policy says so) — this reviewer's, or any other reviewer's of the
    repository on this head, each of which must have reviewed it in full — and, asked of
    GitHub again now, the reviewed head is still the head, the pull request is open and
    not a draft, and its author is not Tasuku itself. Tasuku never merges."""
    # A mode may approve every clean pull request: the approval is its verdict.
    if not (ctx.config.auto_approve or ctx.mode.approves):
        return False, []
    withheld = (
        approval_withheld(ctx, open_now)
        or (f"this head was not reviewed in full ({ctx.shortfall})" if ctx.shortfall else "")
        or others_withhold(ctx)
    )
    if withheld:
        return False, [f"not approved: {withheld}"]
    pr = ctx.gateway.pull_request_get(ctx.repo, number=ctx.run.pull_request.number)
    if pr.head_sha != ctx.run.head_sha:
        return False, [f"not approved: the head moved to {pr.head_sha[:7]} during the review"]
    if pr.state != "open" or pr.draft:
        return False, ["not approved: the pull request is " + ("a draft" if pr.draft else pr.state)]
    if pr.author_login == f"{ctx.gateway.app_slug()}[bot]":
        return False, ["not approved: GitHub does not let an App approve its own pull request"]
    refused = ctx.mode.approval_refused(pr, ctx.config)
    if refused:
        return False, [f"not approved: {refused}"]
    return True, []


def approvals_dismiss(ctx: Context) -> list[str]:
    """Dismiss Tasuku's own earlier approvals of this pull request (never a person's),
    now that findings are open — unless the head moved meanwhile: then nothing."""
    run = ctx.run
    number = run.pull_request.number
    ours = set(
        Review.objects.filter(pull_request=run.pull_request, approved=True)
        .exclude(github_review_id=None)
        .values_list("github_review_id", flat=True)
    )
    if not ours:
        return []
    pr = ctx.gateway.pull_request_get(ctx.repo, number=number)
    if pr.head_sha != run.head_sha:
        return []
    notes = []
    for posted in ctx.gateway.reviews_list(ctx.repo, number=number):
        if posted.id in ours and posted.state == "APPROVED":
            try:
                ctx.gateway.review_dismiss(
                    ctx.repo,
                    number=number,
                    review_id=posted.id,
                    message=f"Tasuku has open findings on {run.head_sha[:7]}; its approval no longer stands.",
                )
            except GitHubError as exc:
                if not exc.permanent:
                    raise
                # Branch protection can forbid dismissals; the review is posted, the check
                # fails on the findings: a note for the run page, not a failed run.
                notes.append(
                    f"could not dismiss Tasuku's earlier approval {posted.id}: {exc} — "
                    "dismiss it on GitHub (branch protection may forbid the App to)"
                )
                continue
            notes.append(f"dismissed Tasuku's earlier approval {posted.id}")
    return notes


def persist(
    run: ReviewRun,
    core: stages.Core,
    *,
    result: ReviewResult | None = None,
    incomplete: str = "",
    coverage: list[Entry] | None = None,
) -> Review:
    """Store the review, its coverage ledger and every finding, published or not. A
    retried run replaces what an earlier attempt stored (the findings it would publish
    are the same ones)."""
    summary = result.summary if result else None
    usage = result.usage if result else None
    triage = core.verdict or Verdict(verdict="", summary="")
    with transaction.atomic():
        review, created = _review_store(
            run,
            {
                "pull_request": run.pull_request,
                "reviewer": run.reviewer,
                "base_sha": run.incremental_since or run.base_sha,
                "head_sha": run.head_sha,
                "incremental_since": run.incremental_since,
                "state": (
                    ReviewState.INCOMPLETE
                    if incomplete
                    else ReviewState.TRIAGED
                    if core.stopped == "trivial"
                    else ReviewState.COMPLETE
                ),
                "incomplete_reason": incomplete,
                "triage": core.verdict.as_dict() if core.verdict else {},
                "guidelines": core.packs,
                "engine": result.engine if result else "triage",
                "rules": result.rules if result else "",
                "inspected_areas": summary.inspected_areas if summary else [],
                "important_files": summary.important_files if summary else [],
                "validation": summary.validation if summary else "",
                "context_sources": summary.context_sources if summary else [],
                "confidence": summary.confidence if summary else 0,
                "limitations": summary.limitations if summary else [],
                "input_tokens": (usage.input_tokens if usage else 0) + triage.input_tokens,
                "output_tokens": (usage.output_tokens if usage else 0) + triage.output_tokens,
                "cost_usd": Decimal(
                    str(round((usage.cost_usd if usage else 0) + triage.cost_usd, 4))
                ),
                "model": usage.model if usage else "",
                "steps": usage.steps if usage else 0,
                "engine_seconds": usage.duration_seconds if usage else 0,
                "transcript": [e.model_dump() for e in result.transcript] if result else [],
                "rulings": [r.model_dump() for r in result.rulings] if result else [],
                "walkthrough": result.walkthrough if result else "",
                "coverage": [e.as_dict() for e in coverage or ()],
            },
        )
        if not created:  # a review stored just now has no findings yet
            review.findings.all().delete()
        Finding.objects.bulk_create([_finding_row(review, run, v) for v in core.validated])
    return review


def _review_store(run: ReviewRun, values: dict[str, Any]) -> tuple[Review, bool]:
    """The run's review row written with `values`, and whether it is new. A run's first
    attempt stores none before (the usual case): the INSERT is tried first, in its
    savepoint, instead of `update_or_create`'s savepoint, locked read and second
    savepoint; a retried run's row is updated as that does."""
    try:
        with transaction.atomic():
            return Review.objects.create(run=run, **values), True
    except IntegrityError:  # an earlier attempt stored it (one review per run)
        return Review.objects.update_or_create(run=run, defaults=values)


def _finding_row(review: Review, run: ReviewRun, v: Validated) -> Finding:
    return Finding(
        review=review,
        pull_request=run.pull_request,
        path=v.path,
        side=v.side.value,
        start_line=v.start_line,
        end_line=v.end_line,
        original_start_line=v.original_lines[0] if v.original_lines else None,
        original_end_line=v.original_lines[1] if v.original_lines else None,
        narrowed=v.narrowed[:200],
        severity=v.severity.value,
        category=v.category,
        title=v.title[:200],
        body=v.body,
        evidence=v.evidence,
        suggestion=v.suggestion,
        confidence=v.confidence,
        blocking=v.blocking,
        rule=v.rule or "",
        fingerprint=v.fingerprint,
        code_digest=v.code_digest,
        state=v.state,
        suppression_reason=v.reason,
        suppressed_in_pr=v.suppressed_in_pr,
        published=v.published,
        suggestion_applies=v.suggestion_applies,
    )


@dataclass(frozen=True)
class Posted:
    """The review on the pull request (GitHub's), the findings it is the first to comment
    on (`fresh`), whether it is an earlier summary updated in place, and the notes."""

    review: Any
    fresh: list[Validated]
    updated: bool = False
    notes: list[str] = field(default_factory=list)


NOT_APPROVED_OWN = "not approved: GitHub does not let an App approve its own pull request"


def review_publish(
    ctx: Context,
    review: Review,
    result: ReviewResult,
    validated: list[Validated],
    *,
    approve: bool = False,
    carried: set[str] | frozenset[str] = frozenset(),
    still_open: int = 0,
) -> Published:
    """Post one review with the published findings as inline comments.

    Safe to repeat: a review carrying this run's marker is reused, and a finding whose
    marker is already in a comment on the pull request is not posted again. When GitHub
    rejects the anchors (422), the comments it refuses are found and go in the body
    with its reason, the others inline (`_post_without_refused`). With
    `approve`, the review is an approval; GitHub refuses that for an App's own pull
    request, and the review is posted as a comment instead, with the reason in the notes.
    A finding that was fixed (its thread resolved) and is back is not posted again: its
    thread is reopened with a reply naming the commit. `carried`: the fingerprints of
    earlier findings still open (their threads stand); `still_open`: how many of them
    are open now.
    """
    run = ctx.run
    context = review_context(ctx, review, validated, still_open)
    # The run's first try, with nothing of it ever posted: the database knows what is on
    # the pull request (every post of Tasuku's is recorded by the run that made it), so
    # the look-ups that make a retry safe are not needed. Any later try asks GitHub.
    first_try = first_try_of(run)
    known = posted_comments(run) if first_try else {}
    event = "APPROVE" if approve else "COMMENT"
    posted = review_place(
        ctx, review, result, validated, context, event=event, first_try=first_try, known=known
    )
    if posted is None:  # the approval refused: the same review again, as a comment
        again = review_publish(
            ctx, review, result, validated, carried=carried, still_open=still_open
        )
        return Published(again.approved, [NOT_APPROVED_OWN, *again.notes])
    if first_try and not posted.fresh:
        by_fingerprint: dict[str, Any] = dict(known)  # nothing new was posted: what was there, is
    else:
        by_fingerprint = comments_by_fingerprint(ctx)
    back = returned(validated, posted, by_fingerprint, carried)
    reopened = reopen_returned(ctx, back, by_fingerprint) if back else []
    review_record(review, posted.review, by_fingerprint)
    return Published(posted.review.state == "APPROVED", posted.notes + reopened)


def review_context(
    ctx: Context, review: Review, validated: list[Validated], still_open: int
) -> ReviewContext:
    """What the review's body says beside the findings."""
    run = ctx.run
    return ReviewContext(
        run_id=run.pk,
        reviewer=run.reviewer.slug,
        base_sha=run.incremental_since or run.base_sha,
        head_sha=run.head_sha,
        dashboard_url=dashboard_url(run),
        filtered=tuple((p, r) for p, r in run.filtered),
        sanitised=tuple(run.sanitised),
        incremental=bool(run.incremental_since),
        omitted=tuple((o["path"], o["reason"]) for o in run.omitted),
        guidelines=tuple(review.guidelines),
        still_open=still_open,
        not_reviewed=tuple((e.path, e.reason) for e in unreviewed(entries_of(review.coverage))),
        fixes=summary_note(
            run,
            ctx.config,
            sum(1 for v in validated if v.published and v.suggestion_applies and v.state == OPEN),
        ),
    )


def review_place(
    ctx: Context,
    review: Review,
    result: ReviewResult,
    validated: list[Validated],
    context: ReviewContext,
    *,
    event: str,
    first_try: bool,
    known: dict[str, Known],
) -> Posted | None:
    """The review on the pull request: this run's, when a later try finds it there;
    else the reviewer's earlier summary updated in place, when there is nothing new to
    comment on; else a new review. None: GitHub refused the approval (an App's own pull
    request)."""
    run = ctx.run
    number = run.pull_request.number
    marker = run_marker(run.pk)
    if not first_try:
        found = ctx.gateway.review_find(ctx.repo, number=number, marker=marker)
        if found is not None:
            return Posted(found, fresh=[])
    existing = set(known) if first_try else markers_in(c.body for c in our_comments(ctx))
    fresh = [v for v in validated if v.published and v.fingerprint not in existing]
    body = review_body(result.summary, validated, context)
    ctx.beat.check()
    previous = None if fresh or event != "COMMENT" else summary_to_update(ctx, review)
    if previous is not None:
        # Nothing new to say inline: the summary already on the pull request is
        # brought up to date instead of a second review saying the same.
        summary = ctx.gateway.review_update(
            ctx.repo, number=number, review_id=previous.id, body=body
        )
        said = (
            f"nothing new to comment on: the summary of review {previous.id} was updated in place"
        )
        return Posted(summary, fresh, updated=True, notes=[said])
    try:
        created = ctx.gateway.review_create(
            ctx.repo,
            number=number,
            commit_sha=run.head_sha,
            body=body,
            event=event,
            comments=[comment_payload(v) for v in fresh],
            marker=marker,
        )
    except GitHubError as exc:
        if exc.status == 422 and event == "APPROVE" and "own pull request" in exc.message:
            return None
        # A rate limit answered with 422 ("submitted too quickly") is not permanent:
        # raised, the run waits it out like any rate limit.
        if exc.status != 422 or not exc.permanent or not fresh:
            raise
        return _post_without_refused(ctx, result, validated, context, fresh, exc, event=event)
    return Posted(created, fresh)


def our_comments(ctx: Context) -> list:
    """Tasuku's own inline comments on the pull request, as GitHub has them: Tasuku
    trusts its markers on its own posts only."""
    slug = ctx.gateway.app_slug()
    return [
        comment
        for comment in ctx.gateway.review_comments_list(
            ctx.repo, number=ctx.run.pull_request.number
        )
        if is_ours(comment.user_login, comment.user_type, slug)
    ]


def comments_by_fingerprint(ctx: Context) -> dict[str, Any]:
    """Tasuku's inline comments on the pull request, by the finding each carries (the
    first comment of each)."""
    by_fingerprint: dict[str, Any] = {}
    for comment in our_comments(ctx):
        for found in markers_in([comment.body]):
            by_fingerprint.setdefault(found, comment)
    return by_fingerprint


def returned(
    validated: list[Validated],
    posted: Posted,
    by_fingerprint: dict[str, Any],
    carried: set[str] | frozenset[str],
) -> list[Validated]:
    """The published findings an earlier review raised (their comment is there) that
    are back: not carried open, and not commented on by this review."""
    return [
        v
        for v in validated
        if v.published
        and v.fingerprint not in carried
        and v.fingerprint in by_fingerprint
        # posted by an earlier review: its thread exists, and this one did not repeat it
        # (an updated summary posted no comment of its own)
        and (posted.updated or by_fingerprint[v.fingerprint].review_id != posted.review.id)
    ]


def review_record(review: Review, posted: Any, by_fingerprint: dict[str, Any]) -> None:
    """The review as posted, and each open published finding's comment, on their rows."""
    with transaction.atomic():
        Review.objects.filter(pk=review.pk).update(
            body=posted.body,
            github_review_id=posted.id,
            github_review_url=posted.html_url,
            body_only=BODY_ONLY_NOTE in posted.body,
            approved=posted.state == "APPROVED",
            published_at=timezone.now(),
        )
        commented = []
        for finding in review.findings.filter(state=OPEN, published=True):
            comment = by_fingerprint.get(finding.fingerprint)
            if comment is not None:
                finding.github_comment_id = comment.id
                finding.github_comment_url = comment.html_url
                commented.append(finding)
        # One statement for them all.
        Finding.objects.bulk_update(commented, ["github_comment_id", "github_comment_url"])


def _post_without_refused(
    ctx: Context,
    result: ReviewResult,
    validated: list[Validated],
    context: ReviewContext,
    fresh: list[Validated],
    refusal: GitHubError,
    *,
    event: str,
) -> Posted:
    """GitHub refused the review for its anchors (422): the comments it refuses are
    found (reviews/validation/anchors.py), the review is posted with the others inline and those
    in its body, each with GitHub's reason. Should GitHub refuse that too, every
    finding goes in the body."""
    run = ctx.run
    number = run.pull_request.number
    marker = run_marker(run.pk)
    comments = [comment_payload(v) for v in fresh]
    sorting = comments_sort(
        ctx.gateway,
        ctx.repo,
        number,
        run.head_sha,
        comments,
        reason=refusal_reason(refusal),
        marker=probe_marker(run.pk),
        check=ctx.beat.check,
    )
    refused = [(fresh[i], why) for i, why in sorted(sorting.refused.items())]
    logger.warning(
        "run %s: GitHub refused %d of %d inline comments (%s)",
        run.pk,
        len(refused),
        len(fresh),
        refusal,
    )
    notes = [
        ngettext(
            "GitHub refused %(count)d of %(total)d inline comments; it is in the review's body",
            "GitHub refused %(count)d of %(total)d inline comments; they are in the review's body",
            len(refused),
        )
        % {"count": len(refused), "total": len(fresh)}
        + ": "
        + "; ".join(f"{location(v)} ({why})" for v, why in refused[:10])
    ]
    try:
        posted = ctx.gateway.review_create(
            ctx.repo,
            number=number,
            commit_sha=run.head_sha,
            body=review_body(result.summary, validated, context, refused=refused),
            event=event,
            comments=[comments[i] for i in sorting.accepted],
            marker=marker,
        )
        return Posted(posted, fresh, notes=notes)
    except GitHubError as exc:
        if exc.status != 422 or not exc.permanent:
            raise
        logger.warning("run %s: GitHub refused the review again (%s); body-only", run.pk, exc)
    posted = ctx.gateway.review_create(
        ctx.repo,
        number=number,
        commit_sha=run.head_sha,
        body=review_body(result.summary, validated, context, inline=fresh, body_only=True),
        event=event,
        comments=[],
        marker=marker,
    )
    return Posted(posted, fresh, notes=notes)


def summary_to_update(ctx: Context, review: Review):
    """This reviewer's latest review on the pull request, when it can be updated in
    place: posted by this App as a comment (an approval is never rewritten), and still on
    GitHub as Tasuku left it — someone with write access can edit it, and their words
    are not Tasuku's to overwrite. None otherwise: a new review is posted."""
    run = ctx.run
    earlier = (
        Review.objects.filter(
            pull_request=run.pull_request,
            reviewer=run.reviewer,
            github_review_id__isnull=False,
            approved=False,
        )
        .exclude(pk=review.pk)
        .order_by("-published_at", "-pk")
        .first()
    )
    if earlier is None:
        return None
    found = ctx.gateway.review_find(
        ctx.repo, number=run.pull_request.number, marker=run_marker(earlier.run_id)
    )
    if found is None or found.id != earlier.github_review_id or found.state != "COMMENTED":
        return None
    return found


@dataclass(frozen=True)
class Known:
    """A comment of Tasuku's on the pull request, as the database recorded it."""

    id: int
    html_url: str
    review_id: int | None = None


def first_try_of(run: ReviewRun) -> bool:
    """Whether this is the run's first try and nothing of it was ever posted (one read)."""
    tries = (
        RunAttempt.objects.filter(run_id=OuterRef("pk"))
        .order_by()
        .values("run_id")
        .annotate(n=Count("pk"))
        .values("n")
    )
    posted = Review.objects.filter(run_id=OuterRef("pk"), github_review_id__isnull=False)
    found = (
        ReviewRun.objects.filter(pk=run.pk)
        .annotate(tries=Subquery(tries), posted=Exists(posted))
        .values_list("tries", "posted")
        .first()
    )
    return found is None or ((found[0] or 0) <= 1 and not found[1])


def posted_comments(run: ReviewRun) -> dict[str, Known]:
    """The inline comments Tasuku posted on the pull request, by finding fingerprint."""
    rows = (
        Finding.objects.filter(pull_request=run.pull_request, github_comment_id__isnull=False)
        .order_by("pk")
        .values_list("fingerprint", "github_comment_id", "github_comment_url")
    )
    return {fingerprint: Known(comment, url) for fingerprint, comment, url in rows}


def reopen_returned(ctx: Context, back: list[Validated], by_fingerprint: dict) -> list[str]:
    """Findings that an earlier review raised, a later one found fixed, and that are in
    the code again: their threads are reopened, each with a reply naming this commit,
    so what fails the check is visible on the pull request."""
    run = ctx.run
    number = run.pull_request.number
    short = run.head_sha[:7]
    by_first = {
        t.first.id: t
        for t in ctx.gateway.review_threads(ctx.repo, number=number)
        if t.first is not None
    }
    notes: list[str] = []
    for finding in back:
        thread = by_first.get(by_fingerprint[finding.fingerprint].id)
        if thread is None:
            continue
        text = (
            f"Back in {short}: this problem is in the code again, at "
            f"{code_span(location(finding))}."
        )
        notes += threads.thread_reopen(
            ctx.gateway, ctx.repo, number, thread, text, f"{finding.fingerprint}-back-{short}"
        )
    return notes
