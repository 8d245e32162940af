"""A run's secondary repositories (docs/reviewers.md, *Secondary repositories*): the
approved ones of its effective config, each mounted read-only beside the checkout at its
pinned commit (sandbox/secondaries.py), named in the job, and listed in the review as
context sources.

The App reaches a secondary through its own installation — the primary's or another
one (`repository_installation_id`) — with a token that can read that one repository's
contents and nothing else. One it cannot reach, or whose pinned commit is gone, is not
mounted: the run says so, and so do the review's limitations; the review goes on
without it. GitHub's weather (a 5xx, a rate limit) is retried with the run, as for the
checkout.

For the GitHub Actions runner, Tasuku mints the same kind of token when the runner,
authenticated by its OIDC token, fetches its job (`runner_access`): it travels beside
the job, never in it, and the runner uses it for git alone, then revokes it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from repos.github import GitHubError, GitHubGateway, RepoRef
from repos.policy import SecondaryRepositoryConfig
from sandbox.contract import ReviewJob, ReviewResult, Secondary, secondary_path
from sandbox.errors import CloneError
from sandbox.secondaries import (
    SecondaryMount,
    mount,
    says_unmounted,
    unmounted,
    unmounted_limitation,
)

logger = logging.getLogger(__name__)

CONTEXT_SOURCE = "secondary repository {full_name} at {commit} (read-only context, not reviewed)"
# Bounds of the review summary's lists (sandbox/contract.py, ReviewSummary).
SUMMARY_LIST_MAX = 50

NOT_REACHABLE = (
    "the App cannot reach it (it is not installed on that repository's account, or the "
    "repository is not among those it may read)"
)


@dataclass(frozen=True)
class Access:
    """How the App reads a secondary repository now."""

    repository_id: int
    clone_url: str
    token: str


def access(gateway: GitHubGateway, full_name: str, *, handed_out: bool = False) -> Access | None:
    """Its installation (whichever it is in), id and clone URL, and a token that can
    read its contents and nothing else (`handed_out`: one of its own, for the Actions
    runner, which revokes it); None when the App cannot reach it."""
    installation_id = gateway.repository_installation_id(full_name)
    if installation_id is None:
        return None
    info = gateway.repository_get(RepoRef(installation_id, None, full_name))
    if info.id is None:
        return None
    token = gateway.contents_token(
        RepoRef(installation_id, info.id, full_name), handed_out=handed_out
    )
    return Access(repository_id=info.id, clone_url=info.clone_url, token=token)


def mount_all(
    gateway: GitHubGateway,
    workspace: Path,
    configured: tuple[SecondaryRepositoryConfig, ...],
    *,
    mirror: Callable[[int], Path | None] = lambda repository_id: None,
) -> list[SecondaryMount]:
    """Each approved secondary repository, mounted in `workspace` or with why not.
    `mirror`: the checkout cache's mirror of a repository, by its GitHub id."""
    return [_mount_one(gateway, workspace, config, mirror) for config in configured]


def _mount_one(
    gateway: GitHubGateway,
    workspace: Path,
    config: SecondaryRepositoryConfig,
    mirror: Callable[[int], Path | None],
) -> SecondaryMount:
    name, commit = config.full_name, config.commit
    try:
        Secondary(full_name=name, commit=commit, path=secondary_path(name))
    except ValueError:
        return unmounted(name, commit, "its name or pinned commit is not one GitHub has")
    try:
        reach = access(gateway, name)
    except GitHubError as exc:
        if not exc.permanent:
            raise
        return unmounted(name, commit, f"GitHub refused to let the App read it ({exc})")
    if reach is None:
        return unmounted(name, commit, NOT_REACHABLE)
    try:
        return mount(
            workspace,
            full_name=name,
            commit=commit,
            clone_url=reach.clone_url,
            token=reach.token,
            mirror=mirror(reach.repository_id),
        )
    except CloneError as exc:
        if not exc.permanent:
            raise
        if exc.code == "clone-commit-gone":
            why = f"its pinned commit {commit[:12]} is not on GitHub any more"
        elif exc.code == "clone-access":
            why = "the App may not read its contents (grant it Contents: read there)"
        else:
            why = str(exc)
        logger.warning("secondary repository %s not mounted: %s", name, exc)
        return unmounted(name, commit, why)


def noted(result: ReviewResult, mounts: list[SecondaryMount]) -> ReviewResult:
    """The result with the secondaries in its summary: each mounted one a context source
    (unless the runner that ran the engine could not mount it after all, and said so in
    the limitations), each other one a limitation."""
    if not mounts:
        return result
    summary = result.summary
    sources, limitations = list(summary.context_sources), list(summary.limitations)
    for secondary in mounts:
        said = any(says_unmounted(text, secondary.full_name) for text in limitations)
        if secondary.mounted and not said:
            sources.append(
                CONTEXT_SOURCE.format(full_name=secondary.full_name, commit=secondary.commit[:12])
            )
        elif not secondary.mounted:
            limitations.append(unmounted_limitation(secondary.full_name, secondary.note))
    summary = summary.model_copy(
        update={
            "context_sources": _kept(sources, len(mounts)),
            "limitations": _kept(limitations, len(mounts)),
        }
    )
    return result.model_copy(update={"summary": summary})


def _kept(texts: list[str], ours: int) -> list[str]:
    """Within the summary's bound, Tasuku's own entries (the last `ours`) kept first."""
    if len(texts) <= SUMMARY_LIST_MAX:
        return texts
    return [*texts[: SUMMARY_LIST_MAX - ours], *texts[-ours:]]


def runner_access(gateway: GitHubGateway, job: ReviewJob) -> list[dict]:
    """What the GitHub Actions runner needs to fetch the job's secondaries: each one's
    clone URL and a fresh token that can read it and nothing else (with where to revoke
    it). One the App cannot reach now is left out: the runner then says it could not
    mount it."""
    given = []
    for secondary in job.secondaries:
        try:
            reach = access(gateway, secondary.full_name, handed_out=True)
        except GitHubError as exc:
            logger.warning("no token for secondary repository %s: %s", secondary.full_name, exc)
            continue
        if reach is None:
            continue
        given.append(
            {
                **secondary.model_dump(),
                "clone_url": reach.clone_url,
                "token": reach.token,
                "api_url": gateway.creds.base_url,
            }
        )
    return given
