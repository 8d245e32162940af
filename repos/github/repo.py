"""`RepoRef`: one repository as every repository call of the gateway names it.

A call needs three things of the repository it is about: the installation whose token
reaches it, the repository's id (to narrow that token to it) and its `owner/name` (for
the URL). They travel together as one value, made once from a `Repository` row (or
spelled out where only GitHub's ids are known) and handed to each call:
`gateway.pull_request_get(repo, number=7)`."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any


@dataclass(frozen=True)
class RepoRef:
    installation_id: int
    # None when not known (a repository named by a user, not yet seen): the call's token
    # is then the installation's, not narrowed to one repository.
    repository_id: int | None
    full_name: str

    @classmethod
    def of(cls, repository: Any, installation: Any = None) -> RepoRef:
        """A `Repository` row's (repos/models.py): its installation's id, its own.
        `installation`: the row's installation when the caller holds it already."""
        return cls(
            installation_id=(
                installation if installation is not None else repository.installation
            ).github_id,
            repository_id=repository.github_id,
            full_name=repository.full_name,
        )

    def other(self, full_name: str) -> RepoRef:
        """Another repository of the same installation, known by its name alone."""
        if full_name.lower() == self.full_name.lower():
            return self
        return replace(self, repository_id=None, full_name=full_name)
