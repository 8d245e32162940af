"""Admission rules (docs/reviews.md, *What happens to a pull request event*), each from both sides, without a database."""

from __future__ import annotations

import pytest

from repos.policy import EffectiveConfig, Engine, ReviewerConfig, Trigger
from reviews.intake.admission import PullRequestFacts, admission_decide

STATIC = ReviewerConfig(slug="static", engine=Engine.STATIC)


def config(**values) -> EffectiveConfig:
    return EffectiveConfig(**{"reviewers": (STATIC,), **values})


def facts(**values) -> PullRequestFacts:
    base = dict(
        action="opened", draft=False, author_login="octocat", author_type="User", changed_files=3
    )
    return PullRequestFacts(**{**base, **values})


def decide(*, facts_=None, config_=None, active=True, enabled=True, accessible=True, asked=None):
    def access() -> bool:
        if asked is not None:
            asked.append(True)
        return accessible

    return admission_decide(
        facts=facts_ or facts(),
        config=config_ or config(),
        installation_active=active,
        repository_enabled=enabled,
        repository_accessible=access,
    )


def test_it_admits_an_ordinary_pull_request():
    decision = decide()
    assert decision.admitted
    assert decision.reason == "1 reviewer queued"
    assert decision.check is None


def test_it_skips_when_the_installation_is_suspended_or_removed():
    assert not decide(active=False).admitted
    assert "suspended or removed" in decide(active=False).reason


def test_it_skips_a_disabled_repository_without_asking_github():
    asked: list[bool] = []
    decision = decide(enabled=False, asked=asked)
    assert not decision.admitted
    assert decision.reason == "reviews are disabled for this repository"
    assert decision.check is None
    assert asked == []


@pytest.mark.parametrize("action", ["opened", "reopened", "ready_for_review", "synchronize"])
def test_each_trigger_is_admitted_when_on_and_skipped_when_off(action):
    assert decide(facts_=facts(action=action)).admitted
    off = config(triggers=frozenset(set(Trigger) - {Trigger(action)}))
    decision = decide(facts_=facts(action=action), config_=off)
    assert not decision.admitted
    assert decision.reason == f"the policy does not review on {action}"


def test_an_action_that_is_no_trigger_is_skipped():
    assert not decide(facts_=facts(action="labeled")).admitted


def test_a_draft_is_skipped_unless_the_policy_reviews_drafts():
    draft = facts(draft=True)
    assert decide(facts_=draft).reason == "draft pull request (the policy does not review drafts)"
    assert not decide(facts_=draft).admitted
    assert decide(facts_=draft, config_=config(review_drafts=True)).admitted


def test_it_skips_when_no_reviewer_is_enabled():
    decision = decide(config_=config(reviewers=()))
    assert not decision.admitted
    assert decision.reason == "no enabled reviewer on this repository's policy"


def test_it_skips_when_the_installation_can_no_longer_reach_the_repository():
    decision = decide(accessible=False)
    assert not decision.admitted
    assert "can no longer access" in decision.reason
    assert decision.check is None


def test_an_excluded_author_is_skipped_with_a_neutral_check():
    excluded = config(excluded_authors=("renovate*", "octocat"))
    decision = decide(config_=excluded)
    assert not decision.admitted
    assert decision.check.conclusion == "neutral"
    assert decide(facts_=facts(author_login="renovate-bot"), config_=excluded).check is not None
    assert decide(facts_=facts(author_login="OctoCat"), config_=excluded).check is not None
    assert decide(facts_=facts(author_login="someone"), config_=excluded).admitted


def test_a_bot_author_is_skipped_but_its_check_run_completes_neutral():
    decision = decide(facts_=facts(author_login="dependabot[bot]", author_type="Bot"))
    assert not decision.admitted
    assert decision.reason == "author dependabot[bot] is a bot"
    assert decision.check.conclusion == "neutral"
    assert decision.check.title == "Not reviewed: opened by a bot"


def test_a_pull_request_over_the_file_limit_is_not_reviewed_and_its_check_says_so():
    limited = config(max_changed_files=10)
    assert decide(facts_=facts(changed_files=10), config_=limited).admitted
    decision = decide(facts_=facts(changed_files=11), config_=limited)
    assert not decision.admitted
    assert decision.check.conclusion == "action_required"
    assert decision.check.conclusion != "success"
    assert decision.check.title == "Not reviewed: 11 files changed (limit 10)"
    assert "**not** review" in decision.check.summary
