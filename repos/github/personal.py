"""GitHub as one person's token sees it, for `manage.py review <pull request URL>`: the
gateway's calls (the same methods, the same retry loop and errors) made with a token of
the person's — a personal access token, or `gh auth token`'s — instead of an App's
installation tokens.

Such a token reads what its owner may read and posts as its owner: a review with inline
comments, nothing an App alone may do (a check run, an approval on the App's behalf).
The token is the caller's: it is never minted, cached on disk or revoked here.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from github import Github

from repos.github.clients import installation_client
from repos.github.config import AppCredentials, RetryPolicy
from repos.github.errors import GitHubError
from repos.github.gateway import GitHubGateway
from repos.github.repo import RepoRef
from repos.github.schemas import InstallationToken

# Calls made with a person's token are counted under this pair (no App, no installation).
PERSONAL = 0


class PersonalGateway(GitHubGateway):
    """The gateway, every call made with `token` against the API at `base_url`. The
    installation and repository ids its methods take are ignored (a person's token is
    not scoped by them); what GitHub refuses the token is said as for an App."""

    shared_api_tokens = False
    single_use_writes = False  # the person's token is theirs: never minted or revoked

    def __init__(self, token: str, base_url: str, policy: RetryPolicy) -> None:
        creds = AppCredentials(
            app_id=PERSONAL, private_key="", webhook_secret="", slug="", base_url=base_url
        )
        super().__init__(creds, policy)
        self._token = token

    def __repr__(self) -> str:  # never the token
        return f"PersonalGateway({self.creds.base_url})"

    def _client(
        self,
        installation_id: int,
        repository_id: int | None,
        permissions: dict[str, str],
        *,
        exact: bool = False,
    ) -> Github:
        return installation_client(self.creds, self.policy, self._token)

    def _drop_token(self, *args: Any, **kwargs: Any) -> None:
        return None  # nothing cached to drop: a 401 is the token's answer

    def installation_token(
        self,
        installation_id: int,
        *,
        repository_ids: tuple[int, ...] = (),
        permissions: dict[str, str] | None = None,
    ) -> InstallationToken:
        # The person's token, as it is (its expiry is not known here).
        return InstallationToken(
            token=self._token, expires_at=datetime.now(UTC) + timedelta(hours=1)
        )

    def contents_token(self, repo: RepoRef, *, handed_out: bool = False) -> str:
        return self._token

    def _app_call(self, description: str, fn: Any) -> Any:
        raise GitHubError(
            f"Could not {description}: that takes a GitHub App, and this is a person's token",
            permanent=True,
            code="github-credentials",
        )

    def app_slug(self) -> str:
        return ""  # no App: nothing is posted as `<slug>[bot]`

    def posted_by_us(self, user: dict[str, Any] | None) -> bool:
        """Whether a REST `user` object may be the token's owner: a person. (Which one
        is not asked of GitHub: a post is recognised by the run's signed marker, which
        only a review posted by this run carries — or a copy of it made from that
        review, which then exists.)"""
        return (user or {}).get("type") == "User"
