"""A repository's memory: a few lines on what its team fixes and dismisses, and why, that
later reviews receive as data (sandbox/prompt.py fences it with the pull request's text).

After each review the engine completed, the reviewer's fast model (its triage model)
folds the review's summary and the fates of its findings — raised, suppressed and why,
fixed, outdated, dismissed with the person's reason — into the memory
(sandbox/agent/memory.py). When a pull request closes, the outcomes are folded the same
way. Without a fast model the memory is the tally of outcomes (reviews/memory/outcomes.py), and
a memory a model or an operator wrote is never overwritten by that tally.

Each write starts from the memory as it is and is a conditional UPDATE on its version:
an operator's edit in the admin, or another fold, that lands meanwhile is folded again,
never lost. A fold that fails leaves the memory as it was and says why (`MemoryFold`).

A fold is a durable queue's row (tasuku/durable.py, `FOLDS`): written when the fold is
asked for, rung, and claimed by the worker that folds. A lost doorbell is rung again by
the sweeper (`folds_sweep`, from the reaper), a fold whose worker died is taken over, and
a doorbell rung twice folds once.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import timedelta
from decimal import Decimal

from repos.models import RepoMemory, Repository, Reviewer
from repos.policy import EffectiveConfig, ReviewerConfig
from reviews.engines import boundary as engines
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
from tasuku import durable
from tasuku.logs import log_context

logger = logging.getLogger(__name__)

FOLD_TASK = "reviews.tasks.memory_fold_process"  # rung with a fold's row
ATTEMPTS = 3  # folds that lost the race to another write before giving up
FATES_MAX = 80  # findings described to the model per fold

FOLDS = durable.Queue(
    model="reviews.MemoryFold",
    task=FOLD_TASK,
    name="memory-fold",
    waiting=(MemoryFold.Status.QUEUED,),
    working=MemoryFold.Status.FOLDING,
    failed=MemoryFold.Status.FAILED,
    deferrals=None,  # a fold asks the model, never GitHub: no weather to wait out
    max_attempts=3,
    # The fold's model call has its own timeout (sandbox/agent/memory.py), well within.
    lease_for=lambda: timedelta(minutes=15),
    ring_again=timedelta(minutes=5),
)


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
    FOLDS.ring(_review_fold(review).pk)


def _review_fold(review: Review) -> MemoryFold:
    return MemoryFold.objects.create(
        repository_id=review.pull_request.repository_id,
        review=review,
        pull_request_id=review.pull_request_id,
        status=MemoryFold.Status.QUEUED,
    )


def _review_folder(review: Review) -> Folder | None:
    config = EffectiveConfig.model_validate(review.run.config or {})
    reviewer_config = next((r for r in config.reviewers if r.slug == review.reviewer.slug), None)
    return folder_for(review.reviewer, reviewer_config)


def _review_of(review_pk: int | None) -> Review | None:
    return (
        Review.objects.select_related("pull_request__repository", "reviewer", "run")
        .filter(pk=review_pk)
        .first()
    )


def memory_fold_review(review_pk: int) -> str:
    """Fold one completed review into its repository's memory now (its fold's row made
    if there is none yet). Returns what happened. The doorbell of folds asked for before
    they were rows (`reviews.tasks.memory_fold`)."""
    review = _review_of(review_pk)
    if review is None:
        return "no such review"
    fold = MemoryFold.objects.filter(review=review).order_by("-pk").first()
    if fold is None:
        if _review_folder(review) is None:
            return "no fast model to fold with"
        fold = _review_fold(review)
    elif fold.status == MemoryFold.Status.DONE:
        return "folded already"  # a doorbell rung twice
    return memory_fold_process(fold.pk)


def memory_fold_process(fold_pk: int) -> str:
    """Do one fold (the doorbell of `FOLDS`): claim its row, fold, record what the fold
    did on the row. Returns what happened."""
    attempt = FOLDS.claim(fold_pk)
    if attempt is None:
        return "not claimed"  # another worker has it, or it is done
    fold = MemoryFold.objects.select_related("repository").get(pk=fold_pk)
    with log_context(repository=fold.repository.full_name):
        try:
            return _fold_do(fold, attempt)
        except Exception as exc:  # a task boundary: the attempt is recorded, retried or failed
            verdict = FOLDS.verdict(exc, attempt=attempt, deferrals=0, since=fold.created_at)
            FOLDS.settle(fold.pk, attempt, verdict, error=f"{type(exc).__name__}: {exc}"[:2000])
            logger.warning("memory fold %s (%s): %s", fold.pk, verdict.kind, exc, exc_info=True)
            return "failed" if verdict.kind == durable.FAILED else "waiting"


def _fold_do(fold: MemoryFold, attempt: int) -> str:
    if fold.review_id is not None:
        review = _review_of(fold.review_id)
        folder = _review_folder(review) if review else None
        if review is None or folder is None:
            return _fold_end(fold, attempt, note="no fast model to fold with")
        return _fold(
            review.pull_request.repository,
            folder,
            summary=review_summary(review),
            fates=review_fates(review),
            held=(fold, attempt),
        )
    pull_request = (
        PullRequest.objects.select_related("repository").filter(pk=fold.pull_request_id).first()
    )
    folder = _closed_folder(pull_request) if pull_request else None
    if pull_request is None or folder is None:
        return _fold_end(fold, attempt, note="no fast model to fold with")
    return _closed_fold_do(pull_request, folder, held=(fold, attempt))


def _fold_end(fold: MemoryFold, attempt: int, *, note: str, **done) -> str:
    FOLDS.finish(fold.pk, attempt, MemoryFold.Status.DONE, note=note, error="", **done)
    return note


def folds_sweep() -> int:
    """Hand folds whose worker died to another, and ring again for folds whose doorbell
    was lost (from the reaper). Returns how many were rung."""
    lost = {"error": "The worker stopped while folding."}
    return FOLDS.sweep(lost=lost, lost_last=lost)["rung"]


def _closed_folder(pull_request: PullRequest) -> Folder | None:
    reviewers = Reviewer.objects.filter(outcomes__pull_request=pull_request).distinct()
    return next((f for f in (folder_for(r) for r in reviewers) if f is not None), None)


def _closed_fold(pull_request: PullRequest) -> tuple[MemoryFold, bool]:
    """The closed pull request's fold still to do, or a new one; and whether it is new
    (a fold not yet done reads the outcomes as they are when it runs)."""
    waiting = MemoryFold.objects.filter(
        pull_request=pull_request, review__isnull=True, status=MemoryFold.Status.QUEUED
    ).first()
    if waiting is not None:
        return waiting, False
    made = MemoryFold.objects.create(
        repository_id=pull_request.repository_id,
        pull_request=pull_request,
        status=MemoryFold.Status.QUEUED,
    )
    return made, True


def memory_fold_closed_later(pull_request: PullRequest) -> bool:
    """Ask for a fold of a closed pull request's outcomes when one of its reviewers has a
    fast model to fold with; False when none has (the tally of outcomes decides)."""
    if _closed_folder(pull_request) is None:
        return False
    fold, new = _closed_fold(pull_request)
    if new:
        FOLDS.ring(fold.pk)
    return True


def memory_fold_outcomes(pull_request_pk: int) -> str:
    """A closed pull request's outcomes folded into the memory now, by the fast model of
    one of its reviewers that has one. The doorbell of folds asked for before they were
    rows (`reviews.tasks.memory_fold_closed`)."""
    pull_request = (
        PullRequest.objects.select_related("repository").filter(pk=pull_request_pk).first()
    )
    folder = _closed_folder(pull_request) if pull_request else None
    if folder is None:
        return "no fast model to fold with"
    fold, _ = _closed_fold(pull_request)
    return memory_fold_process(fold.pk)


def _closed_fold_do(
    pull_request: PullRequest, folder: Folder, *, held: tuple[MemoryFold, int]
) -> str:
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
        held=held,
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
    held: tuple[MemoryFold, int],
) -> str:
    """Fold, and record on the held fold's row what the fold did and cost."""
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
    _fold_end(
        *held,
        note=note,
        model=folder.model,
        input_tokens=sum(f.input_tokens for f in spent),
        output_tokens=sum(f.output_tokens for f in spent),
        cost_usd=Decimal(str(round(sum(f.cost_usd for f in spent), 4))),
        changed=changed,
    )
    if note:
        logger.info("memory of %s: %s", repository.full_name, note)
    return "folded" if changed else note
