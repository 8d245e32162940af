"""A repository's memory: a few lines on what its team fixes and dismisses, and why, that
later reviews receive as data (sandbox/prompt.py fences it with the pull request's text).

After each review the engine completed, the reviewer's fast model (its triage model)
folds the review's summary and the fates of its findings — raised, suppressed and why,
fixed, outdated, dismissed with the person's reason — into the memory
(sandbox/agent/memory.py). When a pull request closes, the outcomes are folded the same
way. Without a fast model the memory is the tally of outcomes (reviews/outcomes.py), and
a memory a model or an operator wrote is never overwritten by that tally.

Each write starts from the memory as it is and is a conditional UPDATE on its version:
an operator's edit in the admin, or another fold, that lands meanwhile is folded again,
never lost. A fold that fails leaves the memory as it was and says why (`MemoryFold`).
Losing a fold's doorbell loses that fold only; the next review folds its own.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from decimal import Decimal

from django.db import transaction

from repos.models import RepoMemory, Repository, Reviewer
from repos.policy import EffectiveConfig, ReviewerConfig
from reviews import engines
from reviews.models import (
    Dismissal,
    Finding,
    FindingOutcome,
    FindingState,
    MemoryFold,
    PullRequest,
    Review,
    ReviewState,
)
from sandbox.agent.memory import Folded, memory_fold
from tasuku.broker import ring

logger = logging.getLogger(__name__)

FOLD_TASK = "reviews.tasks.memory_fold"
CLOSED_TASK = "reviews.tasks.memory_fold_closed"
ATTEMPTS = 3  # folds that lost the race to another write before giving up
FATES_MAX = 80  # findings described to the model per fold


@dataclass(frozen=True)
class Folder:
    """Who folds: a reviewer's fast model, on its provider."""

    reviewer: Reviewer
    model: str


def folder_for(reviewer: Reviewer, config: ReviewerConfig | None = None) -> Folder | None:
    model = (config.triage_model if config else reviewer.triage_model) or ""
    if not model or engines.conversation_for(reviewer.engine) is None:
        return None
    return Folder(reviewer, model)


def memory_fold_later(review: Review, config: EffectiveConfig) -> None:
    """Ring for a fold of `review`, written in the current transaction, when its reviewer
    has a fast model to fold with."""
    reviewer_config = next((r for r in config.reviewers if r.slug == review.reviewer.slug), None)
    if review.state != ReviewState.COMPLETE or folder_for(review.reviewer, reviewer_config) is None:
        return
    ring(FOLD_TASK, review.pk, name=f"memory-{review.pk}")


def memory_fold_review(review_pk: int) -> str:
    """Fold one completed review into its repository's memory. Returns what happened."""
    review = (
        Review.objects.select_related("pull_request__repository", "reviewer", "run")
        .filter(pk=review_pk)
        .first()
    )
    if review is None:
        return "no such review"
    config = EffectiveConfig.model_validate(review.run.config or {})
    reviewer_config = next((r for r in config.reviewers if r.slug == review.reviewer.slug), None)
    folder = folder_for(review.reviewer, reviewer_config)
    if folder is None:
        return "no fast model to fold with"
    if MemoryFold.objects.filter(review=review).exists():
        return "folded already"  # a doorbell rung twice
    return _fold(
        review.pull_request.repository,
        folder,
        summary=review_summary(review),
        fates=review_fates(review),
        review=review,
    )


def _closed_folder(pull_request: PullRequest) -> Folder | None:
    reviewers = Reviewer.objects.filter(outcomes__pull_request=pull_request).distinct()
    return next((f for f in (folder_for(r) for r in reviewers) if f is not None), None)


def memory_fold_closed_later(pull_request: PullRequest) -> bool:
    """Ring for a fold of a closed pull request's outcomes when one of its reviewers has a
    fast model to fold with; False when none has (the tally of outcomes decides)."""
    if _closed_folder(pull_request) is None:
        return False
    ring(CLOSED_TASK, pull_request.pk, name=f"memory-closed-{pull_request.pk}")
    return True


def memory_fold_outcomes(pull_request_pk: int) -> str:
    """A closed pull request's outcomes folded into the memory by the fast model of one
    of its reviewers that has one."""
    pull_request = (
        PullRequest.objects.select_related("repository").filter(pk=pull_request_pk).first()
    )
    folder = _closed_folder(pull_request) if pull_request else None
    if folder is None:
        return "no fast model to fold with"
    outcomes = list(FindingOutcome.objects.filter(pull_request=pull_request).order_by("pk"))
    reasons = dict(
        Dismissal.objects.filter(pull_request=pull_request).values_list("fingerprint", "reason")
    )
    lines = [
        f"- {o.get_fate_display()}: [{o.severity}, {o.rule or o.category}] {o.title}"
        + (f" — dismissed: {reasons[o.fingerprint]}" if o.fingerprint in reasons else "")
        for o in outcomes[:FATES_MAX]
    ]
    state = "merged" if pull_request.merged else "closed without merging"
    return _fold(
        pull_request.repository,
        folder,
        summary=f"Pull request #{pull_request.number} was {state}.",
        fates="\n".join(lines) or "(no published findings)",
        pull_request=pull_request,
    )


def review_summary(review: Review) -> str:
    parts = [f"Pull request #{review.pull_request.number}, head {review.head_sha[:12]}."]
    if review.inspected_areas:
        parts.append("Inspected: " + "; ".join(review.inspected_areas))
    if review.important_files:
        parts.append("Important files: " + ", ".join(review.important_files))
    if review.validation:
        parts.append("How it was checked: " + review.validation)
    if review.limitations:
        parts.append("Limitations: " + "; ".join(review.limitations))
    return "\n".join(parts)


def review_fates(review: Review) -> str:
    """The review's findings and the earlier ones it settled, one line each."""
    reasons = dict(
        Dismissal.objects.filter(pull_request=review.pull_request).values_list(
            "fingerprint", "reason"
        )
    )
    lines = []
    for finding in review.findings.order_by("pk")[:FATES_MAX]:
        line = f"- {finding.state}: [{finding.severity}, {finding.rule or finding.category}] {finding.title}"
        if finding.state == FindingState.SUPPRESSED and finding.suppression_reason:
            line += f" — {finding.suppression_reason}"
        if finding.fingerprint in reasons:
            line += f" — dismissed: {reasons[finding.fingerprint]}"
        lines.append(line)
    settled = Finding.objects.filter(
        pull_request=review.pull_request,
        resolved_in_sha=review.head_sha,
        state__in=(FindingState.RESOLVED, FindingState.OUTDATED),
    ).order_by("pk")[:FATES_MAX]
    for finding in settled:
        lines.append(
            f"- earlier finding {finding.state} at this head: "
            f"[{finding.severity}, {finding.rule or finding.category}] {finding.title}"
            + (f" — {finding.resolution}" if finding.resolution else "")
        )
    return "\n".join(lines) or "(no findings)"


def _fold(
    repository: Repository,
    folder: Folder,
    *,
    summary: str,
    fates: str,
    review: Review | None = None,
    pull_request: PullRequest | None = None,
) -> str:
    spent: list[Folded] = []
    written = 0
    for _ in range(ATTEMPTS):
        memory, _ = RepoMemory.objects.get_or_create(repository=repository)
        folded = memory_fold(
            repository=repository.full_name,
            memory=memory.text,
            review=summary,
            fates=fates,
            model=folder.model,
            conversation=engines.conversation_for(folder.reviewer.engine),
            env=engines.engine_environment(folder.reviewer),
            price=engines.model_price(folder.model),
        )
        spent.append(folded)
        if folded.text is None:
            break
        # Written only over the version this fold read: an operator's edit (or another
        # fold) that landed while the model was thinking is folded again, not lost.
        written = RepoMemory.objects.filter(pk=memory.pk, version=memory.version).update(
            text=folded.text, source=RepoMemory.Source.MODEL, version=memory.version + 1
        )
        if written:
            break
    last = spent[-1]
    changed = last.text is not None and written == 1
    note = last.note or ("" if changed else "the memory kept changing while it was folded")
    with transaction.atomic():
        MemoryFold.objects.create(
            repository=repository,
            review=review,
            pull_request=pull_request or (review.pull_request if review else None),
            model=folder.model,
            input_tokens=sum(f.input_tokens for f in spent),
            output_tokens=sum(f.output_tokens for f in spent),
            cost_usd=Decimal(str(round(sum(f.cost_usd for f in spent), 4))),
            changed=changed,
            note=note,
        )
    if note:
        logger.info("memory of %s: %s", repository.full_name, note)
    return "folded" if changed else note
