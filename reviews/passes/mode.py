"""A review pass as a kind of run (reviews/core/modes.py): what a pass adds to the pipeline.

- The engine reads the author's answers to the earlier findings and what it ruled on
  them last pass.
- A finding the author disputed that the engine now rules not open is resolved, the
  author's reasons accepted.
- Findings on untouched code are nits, and a clean pass approves (its verdict), but
  only a pull request the author's App opened.
- Every pass looks afresh, and when its last run ends the pass concludes.
"""

from __future__ import annotations

from dataclasses import dataclass

from repos.github.schemas import PullRequestInfo
from repos.policy import EffectiveConfig, ReviewerConfig
from reviews.core.modes import Continuation, EarlierContext
from reviews.models import Finding, ReviewRun
from reviews.passes.author import author_bot_login
from reviews.passes.flow import pass_after_run, pass_conversation_noted
from reviews.passes.selectors import (
    answers_for_run,
    disputed_fingerprints,
    pass_continuation,
    pass_link,
    rulings_for_run,
)
from reviews.validation.reconcile import ACCEPTED, CURRENT, Decision
from sandbox.contract import MAX_TASK_DESCRIPTION, MAX_TASK_TITLE, PassBrief, ReviewResult


@dataclass(frozen=True)
class ReviewPassMode:
    fresh_look: bool = True
    untouched_as_nits: bool = True
    approves: bool = True
    approves_with_nits: bool = True
    # The author under review never silences its own blocking finding with a comment.
    strict_suppressions: bool = True

    def earlier_context(self, run: ReviewRun, earlier: list[Finding]) -> EarlierContext:
        if not earlier:
            return EarlierContext()
        return EarlierContext(answers=answers_for_run(run), rulings=rulings_for_run(run))

    def brief(self, run: ReviewRun) -> PassBrief | None:
        """The pass's number, and the task's goal (its title and description) for the
        reviewer to judge "the task not done" against: fenced as data in the prompt."""
        link = pass_link(run)
        if link is None:
            return None
        review_pass = link.review_pass
        task = review_pass.task
        return PassBrief(
            number=review_pass.number,
            task_title=task.title[:MAX_TASK_TITLE],
            task_description=task.description[:MAX_TASK_DESCRIPTION],
        )

    def continuation(self, run: ReviewRun, reviewer: ReviewerConfig) -> Continuation:
        """A later pass continues the same reviewer's conversation, so it remembers what
        it read and decided; when it cannot, a fresh reviewer starts with a summary. The
        run's pass link notes which, and why (the run page shows it)."""
        going_on, note = pass_continuation(run, reviewer)
        if note:
            pass_conversation_noted(run.pk, note)
        return going_on

    def rulings_settle(
        self,
        run: ReviewRun,
        result: ReviewResult,
        decisions: dict[str, Decision],
        found_again: set[str],
    ) -> dict[str, Decision]:
        """An earlier finding the author disputed (a reply, perhaps with no push) that
        the reviewer now rules not open is resolved, the author's reasons accepted — the
        code it points at may be unchanged."""
        disputed = disputed_fingerprints(run)
        ruled = dict(decisions)
        for ruling in result.rulings:
            decision = ruled.get(ruling.id)
            if (
                not ruling.still_open
                and ruling.id in disputed
                and ruling.id not in found_again
                and decision is not None
                # Still there, or "no longer found" with its code untouched: the reviewer
                # changed its mind on the author's reasons, not on a fix.
                and (decision.state == CURRENT or not decision.code_changed)
            ):
                why = ruling.reason.strip().rstrip(".") or "no reason given"
                ruled[ruling.id] = Decision(
                    ACCEPTED, f"the reviewer accepted the author's reasons ({why})"
                )
        return ruled

    def approval_refused(self, pull_request: PullRequestInfo, config: EffectiveConfig) -> str:
        if config.auto_approve:
            return ""  # the repository approves clean pull requests anyway
        # A pass's approval speaks for an agent's work: never for anyone else's pull
        # request, whatever let the task name it (checked at the task's creation too).
        expected = author_bot_login()
        if pull_request.author_login.lower() != expected.lower():
            return (
                f"a review pass approves only pull requests the author's App ({expected}) "
                f"opened; this one is {pull_request.author_login}'s"
            )
        return ""

    def after(self, run: ReviewRun) -> None:
        # The pass this run belongs to may be complete now.
        link = pass_link(run)
        if link is not None:
            pass_after_run(link.review_pass_id)


PASS = ReviewPassMode()


def mode_for(run: ReviewRun):
    """The mode a run is executed in: a pass's own for a run of a review pass, else
    None (the pipeline's plain review)."""
    return PASS if pass_link(run) is not None else None
