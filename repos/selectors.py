"""Reads of installations, repositories and policies, and of who may write to a
repository (asked of GitHub)."""

from __future__ import annotations

import re

from repos import github, revisions
from repos.connectors.calls import connector_tools
from repos.github import RepoRef
from repos.github.conversation import WRITE_ROLES
from repos.models import Installation, Repository, RepositoryPolicy, Reviewer
from repos.policy import (
    NEVER,
    EffectiveConfig,
    ReviewerConfig,
    SecondaryRepositoryConfig,
    Trigger,
    config_merge,
    lines,
)
from sandbox.contract import SkillDocument


def write_access(installation: Installation, repository: Repository, login: str) -> bool:
    """Whether `login` has write access or above to the repository, asked of GitHub (its
    collaborator permission: write, maintain or admin; cached for a minute by the
    gateway). The webhook's `author_association` is no answer either way: a read-only
    organisation member arrives as MEMBER and a `triage` collaborator as COLLABORATOR,
    while a member whose membership is private arrives as CONTRIBUTOR. A transient
    GitHub error raises (the delivery is retried); a permanent one is no access."""
    if not login:
        return False
    try:
        role = github.gateway().collaborator_role(
            RepoRef.of(repository, installation),
            login=login,
        )
    except github.GitHubError as exc:
        if not exc.permanent:
            raise
        return False
    return role in WRITE_ROLES


def reviewer_config(reviewer: Reviewer, *, runner: str = "") -> ReviewerConfig:
    """The reviewer as a run's configuration, with the hash of its definition (the
    revision it is: `repos.services.revision_for_config` finds or records that row);
    `runner` (a repository's policy) overrides the reviewer's own runner."""
    config = ReviewerConfig(
        slug=reviewer.slug,
        engine=reviewer.engine,
        runner=runner or reviewer.runner,
        model=reviewer.model,
        triage_model=reviewer.triage_model,
        base_url=reviewer.base_url,
        rules=reviewer.rules,
        skills=reviewer.skills,
        skill_documents=tuple(
            SkillDocument(name=s.name, description=s.description, body=s.body)
            for s in reviewer.skill_documents.all()
        ),
        cost_cap_usd=reviewer.cost_cap_usd,
        step_limit=reviewer.step_limit,
        context_budget_tokens=reviewer.context_budget_tokens,
        max_output_tokens=reviewer.max_output_tokens,
        explorer_model=reviewer.explorer_model,
        explorer_limit=reviewer.explorer_limit,
        web_research=reviewer.web_research,
        connectors=connector_tools(reviewer),
    )
    return config.model_copy(update={"revision": revisions.config_digest(config)})


def policy_values(policy: RepositoryPolicy) -> dict[str, object]:
    """A policy row as the keys of `EffectiveConfig` it sets."""
    triggers = {
        Trigger.OPENED: policy.trigger_opened,
        Trigger.REOPENED: policy.trigger_reopened,
        Trigger.READY_FOR_REVIEW: policy.trigger_ready_for_review,
        Trigger.SYNCHRONIZE: policy.trigger_synchronize,
    }
    return {
        "triggers": frozenset(t for t, on in triggers.items() if on),
        "review_drafts": policy.review_drafts,
        "strictness": policy.strictness,
        "max_changed_files": policy.max_changed_files,
        "comment_limit": policy.comment_limit,
        "excluded_paths": lines(policy.excluded_paths),
        "excluded_authors": lines(policy.excluded_authors),
        "min_severity": policy.min_severity,
        "fail_check_on": None if policy.fail_check_on == NEVER else policy.fail_check_on,
        "auto_approve": policy.auto_approve,
        "approve_with_nits": policy.approve_with_nits,
        "author_may_dismiss": policy.author_may_dismiss,
        "honour_pr_suppressions": policy.honour_pr_suppressions,
        "static_rules": tuple(
            word for word in re.split(r"[\s,]+", policy.static_rules or "") if word
        ),
        "triage_enabled": policy.triage_enabled,
        "walkthrough": policy.walkthrough,
        "tests": {
            "enabled": policy.tests_enabled,
            "command": policy.tests_command.strip(),
            "runner": policy.tests_runner,
            "image": policy.tests_image.strip(),
            "timeout_seconds": policy.tests_timeout_seconds,
            "network": policy.tests_network,
        },
        "fix_pull_requests": policy.fix_pull_requests,
    }


def effective_config(repository: Repository) -> EffectiveConfig:
    """Site defaults ← the repository's policy (and its installation's budget).

    Only enabled reviewers and approved secondary repositories are part of it.
    """
    return effective_config_reviewers(repository)[0]


def effective_config_reviewers(
    repository: Repository, *, policy_read: bool = False
) -> tuple[EffectiveConfig, dict[str, Reviewer]]:
    """`effective_config`, and its reviewers' rows by slug (read for it: a caller that
    makes their runs reads them no second time). `policy_read`: the repository was just
    read with its policy (`select_related("policy")`), which is taken as read."""
    if policy_read and Repository.policy.is_cached(repository):
        policy = getattr(repository, "policy", None)  # None: it has none
    else:
        policy = RepositoryPolicy.objects.filter(repository=repository).first()
    reviewers = (
        policy.reviewers.filter(enabled=True)
        if policy
        else Reviewer.objects.filter(enabled=True, default_for_new_repositories=True)
    )
    installation = repository.installation
    rows = list(reviewers.order_by("slug"))
    config = config_merge(
        policy=policy_values(policy) if policy else None,
        reviewers=[reviewer_config(r, runner=policy.runner if policy else "") for r in rows],
        secondary_repositories=[
            SecondaryRepositoryConfig(full_name=s.full_name, commit=s.pinned_commit)
            for s in repository.secondary_repositories.filter(approved=True).order_by("full_name")
        ],
        installation={
            "monthly_budget_usd": installation.monthly_budget_usd,
            "degrade_over_budget": installation.degrade_over_budget,
            "installation_excluded_paths": lines(installation.excluded_paths),
        },
    )
    return config, {r.slug: r for r in rows}
