"""What a kind of run adds to the one review pipeline (reviews/pipeline/flow.py).

The pipeline is the same for every run: guards, checkout, filters, the engine,
validation, reconciliation, publication, the gate. A kind of run that needs more (what
the engine is told about earlier findings, how its rulings settle them, when it
approves, what follows the run) says so through a `RunMode`. The pipeline calls the
mode and knows nothing of the feature behind it; the feature implements the mode in its
own package, and the task that executes a run picks it (reviews/tasks.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from repos.github.schemas import PullRequestInfo
    from repos.policy import EffectiveConfig, ReviewerConfig
    from reviews.models import Finding, ReviewRun
    from reviews.validation.reconcile import Decision
    from sandbox.contract import PassBrief, ReviewResult, SavedConversation


@dataclass(frozen=True)
class Continuation:
    """Whether the engine continues an earlier conversation of this reviewer (the kept
    messages), or starts fresh with a summary of it. Saying which, and why, on the run
    page is the mode's own record (a review pass's: its `PassLink`)."""

    conversation: SavedConversation | None = None
    summary: str = ""


@dataclass(frozen=True)
class EarlierContext:
    """What the engine is told about the earlier open findings beyond the findings
    themselves, by fingerprint: answers to them, and what was ruled on them before."""

    answers: dict[str, str] = field(default_factory=dict)
    rulings: dict[str, str] = field(default_factory=dict)


class RunMode(Protocol):
    # Never reuse an earlier engine result of the same job: every run is a fresh look.
    fresh_look: bool
    # Findings on code this push did not touch are nits (they never block).
    untouched_as_nits: bool
    # A clean head is approved even where the policy does not auto-approve.
    approves: bool
    # Open nits do not withhold that approval.
    approves_with_nits: bool
    # A suppression comment the pull request adds never silences a blocking finding,
    # whatever the policy says (a review pass: the author is the party under review).
    strict_suppressions: bool

    def earlier_context(self, run: ReviewRun, earlier: list[Finding]) -> EarlierContext: ...

    def brief(self, run: ReviewRun) -> PassBrief | None:
        """What the engine is told of the kind of run itself (a review pass's number and
        its task), or None."""
        ...

    def continuation(self, run: ReviewRun, reviewer: ReviewerConfig) -> Continuation:
        """An earlier conversation of this reviewer for the engine to continue."""
        ...

    def rulings_settle(
        self,
        run: ReviewRun,
        result: ReviewResult,
        decisions: dict[str, Decision],
        found_again: set[str],
    ) -> dict[str, Decision]:
        """The reconciliation's decisions once the engine's rulings on the earlier
        findings are applied (the decisions unchanged when this mode applies none)."""
        ...

    def approval_refused(self, pull_request: PullRequestInfo, config: EffectiveConfig) -> str:
        """Why this pull request may not be approved by this kind of run ("" if it may)."""
        ...

    def after(self, run: ReviewRun) -> None:
        """The run has ended (completed, failed or stopped), whatever became of it."""
        ...


@dataclass(frozen=True)
class PullRequestReview:
    """A review of a pull request's head, as its policy asks for: nothing added."""

    fresh_look: bool = False
    untouched_as_nits: bool = False
    approves: bool = False
    approves_with_nits: bool = False
    strict_suppressions: bool = False

    def earlier_context(self, run: ReviewRun, earlier: list[Finding]) -> EarlierContext:
        return EarlierContext()

    def brief(self, run: ReviewRun) -> PassBrief | None:
        return None

    def continuation(self, run: ReviewRun, reviewer: ReviewerConfig) -> Continuation:
        return Continuation()

    def rulings_settle(
        self,
        run: ReviewRun,
        result: ReviewResult,
        decisions: dict[str, Decision],
        found_again: set[str],
    ) -> dict[str, Decision]:
        return decisions

    def approval_refused(self, pull_request: PullRequestInfo, config: EffectiveConfig) -> str:
        return ""

    def after(self, run: ReviewRun) -> None:
        return None


REVIEW = PullRequestReview()
