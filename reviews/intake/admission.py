"""Admission: does a `pull_request` event become review runs? (docs/reviews.md, *What happens to a pull request event*)

Pure: takes the facts and the effective config, returns a decision in words. The one
question only GitHub can answer (can the installation still reach the repository?) is
passed in as a callable and asked only when every local rule has passed, so a disabled
repository or an untracked action costs no API call.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from django.utils.translation import ngettext

from repos.policy import EffectiveConfig, Trigger


@dataclass(frozen=True)
class PullRequestFacts:
    action: str
    draft: bool
    author_login: str
    author_type: str
    changed_files: int


@dataclass(frozen=True)
class CheckVerdict:
    """A check run to complete at once, so a required check never waits for a review
    that will not come."""

    conclusion: str  # neutral | action_required
    title: str
    summary: str


@dataclass(frozen=True)
class Admission:
    admitted: bool
    reason: str
    check: CheckVerdict | None = None

    @classmethod
    def admit(cls, reason: str) -> Admission:
        return cls(admitted=True, reason=reason)

    @classmethod
    def skip(cls, reason: str, check: CheckVerdict | None = None) -> Admission:
        return cls(admitted=False, reason=reason, check=check)


def admission_decide(
    *,
    facts: PullRequestFacts,
    config: EffectiveConfig,
    installation_active: bool,
    repository_enabled: bool,
    repository_accessible: Callable[[], bool],
    explicit: bool = False,
) -> Admission:
    """The first rule that refuses decides; otherwise the pull request is admitted.
    `explicit`: a person asked for this review (a command, a button, a review request,
    a re-run): the policy's event toggles and draft rule do not apply, the rest do."""
    if not installation_active:
        return Admission.skip("the App's installation is suspended or removed")
    if not repository_enabled:
        return Admission.skip("reviews are disabled for this repository")
    if not explicit:
        try:
            trigger = Trigger(facts.action)
        except ValueError:
            trigger = None
        if trigger is None or trigger not in config.triggers:
            return Admission.skip(f"the policy does not review on {facts.action}")
        if facts.draft and not config.review_drafts:
            return Admission.skip("draft pull request (the policy does not review drafts)")
    if not config.reviewers:
        return Admission.skip("no enabled reviewer on this repository's policy")
    if not repository_accessible():
        return Admission.skip("the App's installation can no longer access this repository")
    if config.author_excluded(facts.author_login):
        return Admission.skip(
            f"author {facts.author_login} is excluded by the repository's policy",
            CheckVerdict(
                conclusion="neutral",
                title=f"Not reviewed: author {facts.author_login} is excluded",
                summary=(
                    f"The repository's policy excludes pull requests by "
                    f"`{facts.author_login}` from review."
                ),
            ),
        )
    if facts.author_type == "Bot":
        return Admission.skip(
            f"author {facts.author_login} is a bot",
            CheckVerdict(
                conclusion="neutral",
                title="Not reviewed: opened by a bot",
                summary=(
                    f"`{facts.author_login}` is a bot account; Tasuku does not review "
                    "pull requests opened by bots. This check is complete so that a "
                    "required check does not wait for a review that will not come."
                ),
            ),
        )
    if facts.changed_files > config.max_changed_files:
        return Admission.skip(
            f"{facts.changed_files} files changed, more than the limit of "
            f"{config.max_changed_files}",
            CheckVerdict(
                conclusion="action_required",
                title=(
                    f"Not reviewed: {facts.changed_files} files changed "
                    f"(limit {config.max_changed_files})"
                ),
                summary=(
                    f"This pull request changes {facts.changed_files} files, more than "
                    f"this repository's limit of {config.max_changed_files}, so Tasuku did "
                    "**not** review it. Split the pull request, or raise *max changed "
                    "files* in the repository's policy (up to 5000) and push again."
                ),
            ),
        )
    count = len(config.reviewers)
    return Admission.admit(
        ngettext("%(count)d reviewer queued", "%(count)d reviewers queued", count)
        % {"count": count}
    )
