"""The gateway's transport: the App's and installations' tokens, the clients that carry
them, and the one call loop every GitHub call goes through (retries, rate limits, the
usage count), and the pagination of a pull request's lists. The calls themselves are
methods of `GitHubGateway` (gateway.py) and its mixins, each a subclass of `Transport`:
they depend on this and on nothing above it."""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import requests
from github import Github, GithubException, GithubIntegration

from repos.github.clients import (
    REACH_TTL_SECONDS,
    cache_lock,
    installation_client,
    integration_client,
    permissions_cache,
    reach_cache,
    slug_cache,
    token_cache,
    token_key,
    write_pacer,
)
from repos.github.config import AppCredentials, RetryPolicy
from repos.github.errors import GitHubError, classify, permissions_not_granted, quota_spent
from repos.github.repo import RepoRef
from repos.github.schemas import (
    InstallationToken,
    parse_time,
)
from repos.github.usage import APP, usage_counted

logger = logging.getLogger(__name__)

T = TypeVar("T")

PERMISSION_LEVELS = {"read": 1, "write": 2, "admin": 3}
# What a review's API calls need, at most (each only where the installation was granted
# it): its pull request and its reviews, threads and comments; its check runs; the
# conversation's comments; the checks and statuses of a head; the repository's metadata.
API_PERMISSIONS = {
    "pull_requests": "write",
    "checks": "write",
    "issues": "write",
    "contents": "read",
    "metadata": "read",
    "statuses": "read",
}
# What the token a repository's reads share holds when every write has a token of its own
# (`Transport.single_use_writes`): the same, read only.
API_READ_PERMISSIONS = dict.fromkeys(API_PERMISSIONS, "read")
# How long an installation's permissions are trusted: one an owner accepts later is used
# within this long (or at once, after `installation_permissions(..., fresh=True)`).
PERMISSIONS_TTL_SECONDS = 300.0


class Transport:
    """One App's view of GitHub. Cheap to create; tokens and clients are cached per
    process (never on disk: they are credentials)."""

    # Every call gets a token of its own, minted for it and revoked right after: for an
    # App whose identity an agent works as (the author's App, reviews/passes/author.py),
    # so that no token outlives the one post it was made for.
    single_use_tokens = False
    # Every call that changes something on GitHub (`write`, `creates`) gets a token of its
    # own in the same way, with just the permissions it asks for; the token the reads
    # share can only read. For the App that approves: no token that can post on a pull
    # request — approve it, above all — is kept between posts (docs/review-passes.md).
    single_use_writes = True
    # A repository's API calls share one token with the permissions they all need
    # (`_api_permissions`); an App whose tokens are single-use asks for just enough.
    shared_api_tokens = True

    def __init__(self, creds: AppCredentials, policy: RetryPolicy) -> None:
        self.creds = creds
        self.policy = policy
        # Called before every call made for a repository (each try): a run's gateway
        # raises there once the run was asked to stop (reviews/queue/runs.py, Heartbeat.guard),
        # so a cancelled run makes no further post, reply or check update.
        self.guard: Callable[[], None] | None = None

    def _integration(self) -> GithubIntegration:
        return integration_client(self.creds, self.policy)

    def app_jwt(self) -> str:
        """A fresh App JWT (RS256, issued 60 s in the past, expiring within 10 minutes)."""
        return self._integration().auth.token  # type: ignore[union-attr]

    def installation_token(
        self,
        installation_id: int,
        *,
        repository_ids: tuple[int, ...] = (),
        permissions: dict[str, str] | None = None,
    ) -> InstallationToken:
        """A token for one installation, narrowed to `repository_ids` and `permissions`.

        Cached until five minutes before it expires. PyGithub's `get_access_token` cannot
        send `repository_ids`, so the request is made through its requester directly.
        """
        key = token_key(self.creds, installation_id, repository_ids, permissions)
        with cache_lock:
            cached = token_cache.get(key)
        if cached and cached.fresh():
            return cached
        token = self._token_mint(
            installation_id, repository_ids=repository_ids, permissions=permissions
        )
        with cache_lock:
            token_cache[key] = token
        return token

    def _token_mint(
        self,
        installation_id: int,
        *,
        repository_ids: tuple[int, ...] = (),
        permissions: dict[str, str] | None = None,
    ) -> InstallationToken:
        """A new installation token, never cached."""
        body: dict[str, Any] = {}
        if repository_ids:
            body["repository_ids"] = list(repository_ids)
        if permissions:
            body["permissions"] = permissions

        def create() -> InstallationToken:
            # Reference: https://docs.github.com/rest/apps/apps#create-an-installation-access-token-for-an-app
            _, data = self._integration().requester.requestJsonAndCheck(
                "POST", f"/app/installations/{installation_id}/access_tokens", input=body
            )
            return InstallationToken(
                token=data["token"],
                expires_at=parse_time(data["expires_at"]),
                permissions=data.get("permissions") or {},
                repository_ids=tuple(r["id"] for r in data.get("repositories") or ()),
            )

        # Minting a second token is harmless, so this POST may be repeated.
        return self._app_call(f"create a token for installation {installation_id}", create)

    def _token_revoke(self, client: Github, installation_id: int) -> None:
        """Revoke the token `client` carries. A token that outlives its post is a risk,
        not a failure of the post: a refusal is logged and the post stands."""
        try:
            # Reference: https://docs.github.com/rest/apps/installations#revoke-an-installation-access-token
            with usage_counted(self.creds.app_id, installation_id, client.requester):
                client.requester.requestJsonAndCheck("DELETE", "/installation/token")
        except (GithubException, requests.RequestException) as exc:
            logger.warning(
                "could not revoke a single-use token of installation %s (it expires within "
                "the hour): %s",
                installation_id,
                exc,
            )

    def installation_permissions(
        self, installation_id: int, *, fresh: bool = False
    ) -> dict[str, str]:
        """What the installation was granted, e.g. {"checks": "write", ...} (App JWT;
        cached for PERMISSIONS_TTL_SECONDS unless `fresh`).

        A token asking for anything more is refused with 422 and nothing is minted, so a
        call whose permission the App may lack (Administration, Commit statuses) asks
        here first.
        """
        key = (self.creds.base_url, self.creds.app_id, installation_id)
        with cache_lock:
            cached = permissions_cache.get(key)
        if cached and not fresh and time.monotonic() - cached[0] < PERMISSIONS_TTL_SECONDS:
            return dict(cached[1])

        def get() -> dict[str, str]:
            # Reference: https://docs.github.com/rest/apps/apps#get-an-installation-for-the-authenticated-app
            _, data = self._integration().requester.requestJsonAndCheck(
                "GET", f"/app/installations/{installation_id}"
            )
            return dict(data.get("permissions") or {})

        permissions = self._app_call(f"read the permissions of installation {installation_id}", get)
        with cache_lock:
            permissions_cache[key] = (time.monotonic(), permissions)
        return dict(permissions)

    def _granted(self, installation_id: int, wanted: dict[str, str]) -> dict[str, str]:
        """The part of `wanted` the installation was granted (at the level asked or higher)."""
        have = self.installation_permissions(installation_id)
        return {
            name: level
            for name, level in wanted.items()
            if PERMISSION_LEVELS.get(have.get(name, ""), 0) >= PERMISSION_LEVELS[level]
        }

    def app_slug(self) -> str:
        """The App's slug (its bot posts as `<slug>[bot]`): GITHUB_APP_SLUG, or asked of
        GitHub once per process."""
        if self.creds.slug:
            return self.creds.slug
        key = (self.creds.base_url, self.creds.app_id)
        if key not in slug_cache:
            # Reference: https://docs.github.com/rest/apps/apps#get-the-authenticated-app
            slug_cache[key] = self._app_call(
                "read the App", lambda: self._integration().get_app().slug
            )
        return slug_cache[key]

    def posted_by_us(self, user: dict[str, Any] | None) -> bool:
        """Whether a REST `user` object is this App's bot: the only author whose hidden
        markers Tasuku trusts (a person can copy one into a post of their own)."""
        user = user or {}
        login = (user.get("login") or "").lower()
        return user.get("type") == "Bot" and login == f"{self.app_slug().lower()}[bot]"

    def repository_installation_id(self, full_name: str) -> int | None:
        """The id of the installation through which the App reaches `full_name`, or None
        when the App cannot reach it (uninstalled, or the repository was deselected)."""
        owner, name = full_name.split("/", 1)
        key = (self.creds.base_url, self.creds.app_id, full_name.lower())
        with cache_lock:
            cached = reach_cache.get(key)
        if cached and time.monotonic() - cached[0] < REACH_TTL_SECONDS:
            return cached[1]

        def get() -> int | None:
            try:
                # Reference: https://docs.github.com/rest/apps/apps#get-a-repository-installation-for-the-authenticated-app
                return self._integration().get_repo_installation(owner, name).id
            except GithubException as exc:
                if exc.status == 404:
                    return None
                raise

        found = self._app_call(f"look up the installation of {full_name}", get)
        if found is not None:
            with cache_lock:
                reach_cache[key] = (time.monotonic(), found)
        return found

    def _api_permissions(
        self, installation_id: int, repository_id: int | None, asked: dict[str, str]
    ) -> dict[str, str]:
        """The permissions of the one token a repository's API calls share: every
        permission of API_PERMISSIONS the installation was granted. One token serves a
        review's every call (it never leaves the worker; the checkout's read-only token
        is another), instead of a token minted per permission set. A call that asks for
        more than those (Actions, Administration), or for a whole installation, gets a
        token of exactly what it asks."""
        if (
            not self.shared_api_tokens
            or repository_id is None
            or any(name not in API_PERMISSIONS for name in asked)
        ):
            return asked
        have = self.installation_permissions(installation_id)
        shared = API_READ_PERMISSIONS if self.single_use_writes else API_PERMISSIONS
        wide = {
            name: level
            for name, level in shared.items()
            if PERMISSION_LEVELS.get(have.get(name, ""), 0) >= PERMISSION_LEVELS[level]
        }
        for name, level in asked.items():
            if PERMISSION_LEVELS[level] > PERMISSION_LEVELS.get(wide.get(name, ""), 0):
                wide[name] = level
        return wide

    def _client(
        self,
        installation_id: int,
        repository_id: int | None,
        permissions: dict[str, str],
        *,
        exact: bool = False,
    ) -> Github:
        scope = (repository_id,) if repository_id else ()
        wide = (
            permissions
            if exact
            else self._api_permissions(installation_id, repository_id, permissions)
        )
        try:
            token = self.installation_token(installation_id, repository_ids=scope, permissions=wide)
        except GitHubError as error:
            if wide == permissions or not permissions_not_granted(error):
                raise
            # An owner took a permission away since it was read: read them afresh and
            # ask again (once, and only for less), so the calls that need no such
            # permission go on.
            self.installation_permissions(installation_id, fresh=True)
            narrower = self._api_permissions(installation_id, repository_id, permissions)
            if narrower == wide:
                raise
            token = self.installation_token(
                installation_id, repository_ids=scope, permissions=narrower
            )
        return installation_client(self.creds, self.policy, token.token)

    def _drop_token(
        self,
        installation_id: int,
        repository_id: int | None,
        permissions: dict[str, str],
        *,
        exact: bool = False,
    ) -> None:
        key = token_key(
            self.creds,
            installation_id,
            (repository_id,) if repository_id else (),
            permissions
            if exact
            else self._api_permissions(installation_id, repository_id, permissions),
        )
        with cache_lock:
            token_cache.pop(key, None)

    def _pull_list(
        self, client: Github, full_name: str, number: int, suffix: str
    ) -> list[dict[str, Any]]:
        """Every page of a pull request's REST list `suffix` (reviews, comments, ...)."""
        owner, name = full_name.split("/", 1)
        url = f"/repos/{owner}/{name}/pulls/{number}/{suffix}"
        items: list[dict[str, Any]] = []
        page = 1
        while True:
            _, data = client.requester.requestJsonAndCheck(
                "GET", url, parameters={"per_page": 100, "page": page}
            )
            items.extend(data)
            if len(data) < 100:
                return items
            page += 1

    def _repo_call(
        self,
        description: str,
        repo: RepoRef,
        *,
        permissions: dict[str, str],
        fn: Callable[[Github], T],
        recover: Callable[[Github], T | None] | None = None,
        creates: bool = False,
        write: bool = False,
        exact: bool = False,
    ) -> T:
        """Run `fn` with a client holding a token scoped to one repository (with the
        permissions a repository's calls share; `exact`: with just `permissions`, for a
        call made on someone else's behalf, such as a connector's). `write` (or
        `creates`): `fn` changes something on GitHub, and waits its turn among the
        installation's writes first (repos/github/pacing.py), each try.

        A 401 means the cached token was revoked or expired early: it is dropped and the
        call repeated once with a new token. A call made with a single-use token
        (`single_use_tokens`, or a write under `single_use_writes`) mints it with just
        `permissions` and revokes it after, whatever the call's outcome.
        """
        installation_id, repository_id = repo.installation_id, repo.repository_id
        paced = write or creates
        if self.single_use_tokens or (paced and self.single_use_writes):
            return self._call(
                description,
                lambda: self._single_use(
                    installation_id, repository_id, permissions, fn, paced=paced
                ),
                recover=(
                    (lambda: self._single_use(installation_id, repository_id, permissions, recover))
                    if recover
                    else None
                ),
                creates=creates,
            )

        def attempt() -> T:
            # The write's turn in the installation's budget, held while it is sent; before
            # the guard: a stop while waiting counts.
            with self._writing(installation_id, paced):
                if self.guard is not None:
                    self.guard()  # every try: a retry after a 502 is a post like the first
                client = self._client(installation_id, repository_id, permissions, exact=exact)
                try:
                    with usage_counted(self.creds.app_id, installation_id, client.requester):
                        return fn(client)
                except GithubException as exc:
                    self._weather_seen(installation_id, exc)
                    if exc.status != 401:
                        raise
                    self._drop_token(installation_id, repository_id, permissions, exact=exact)
                    client = self._client(installation_id, repository_id, permissions, exact=exact)
                    if paced:
                        self._pace(installation_id)
                    with usage_counted(self.creds.app_id, installation_id, client.requester):
                        return fn(client)

        def recover_with_client() -> T | None:
            assert recover is not None
            client = self._client(installation_id, repository_id, permissions, exact=exact)
            with usage_counted(self.creds.app_id, installation_id, client.requester):
                return recover(client)

        return self._call(
            description,
            attempt,
            recover=recover_with_client if recover else None,
            creates=creates,
        )

    def _single_use(
        self,
        installation_id: int,
        repository_id: int | None,
        permissions: dict[str, str],
        fn: Callable[[Github], T],
        *,
        paced: bool = False,
    ) -> T:
        """`fn` with a client whose token is minted for it and revoked after it; a write
        takes its turn in the installation's budget like any other (held while it is
        sent), and a rate limit it meets pauses every process's writes."""
        with self._writing(installation_id, paced):
            if self.guard is not None:
                self.guard()
            return self._single_use_call(installation_id, repository_id, permissions, fn)

    def _single_use_call(
        self,
        installation_id: int,
        repository_id: int | None,
        permissions: dict[str, str],
        fn: Callable[[Github], T],
    ) -> T:
        token = self._token_mint(
            installation_id,
            repository_ids=(repository_id,) if repository_id else (),
            permissions=permissions,
        )
        client = installation_client(self.creds, self.policy, token.token, cached=False)
        spent = False
        try:
            with usage_counted(self.creds.app_id, installation_id, client.requester):
                return fn(client)
        except GithubException as exc:
            self._weather_seen(installation_id, exc)
            spent = quota_spent(exc)
            raise
        finally:
            if spent:
                # GitHub would refuse the revocation too, and a call made while the
                # quota is spent counts against the installation like any other.
                logger.warning(
                    "left a single-use token of installation %s to expire within the hour: "
                    "its rate limit is spent, so GitHub would refuse to revoke it",
                    installation_id,
                )
            else:
                self._token_revoke(client, installation_id)

    def _budget_key(self, installation_id: int) -> tuple[str, int]:
        return (str(self.creds.app_id), int(installation_id))

    def _pace(self, installation_id: int) -> None:
        """Take a write's place in the installation's budget and wait for it."""
        pacer = write_pacer(self.policy)
        if pacer is not None:
            waited = pacer.wait(self._budget_key(installation_id), guard=self.guard)
            if waited > 0:
                logger.debug(
                    "GitHub: a write for installation %s waited %.2fs", installation_id, waited
                )

    @contextmanager
    def _writing(self, installation_id: int, paced: bool) -> Iterator[None]:
        """A write's turn in the installation's budget, held while the block runs (its
        place among the writes in flight); a read only waits out a pause GitHub asked
        for; nothing without a budget."""
        pacer = write_pacer(self.policy)
        if pacer is None:
            yield
            return
        if not paced:
            pacer.read_wait(self._budget_key(installation_id), guard=self.guard)
            yield
            return
        with pacer.writing(self._budget_key(installation_id), guard=self.guard) as waited:
            if waited > 0:
                logger.debug(
                    "GitHub: a write for installation %s waited %.2fs", installation_id, waited
                )
            yield

    def _weather_seen(self, installation_id: int, exc: GithubException) -> None:
        """GitHub answered a call for the installation with a rate limit: every process's
        writes for it wait as long as GitHub asked (repos/github/budget.py)."""
        pacer = write_pacer(self.policy)
        if pacer is None:
            return
        error = classify("call GitHub", exc)
        if error.code != "github-rate-limit" or error.retry_after is None:
            return
        try:
            pacer.pause(self._budget_key(installation_id), error.retry_after, error.message)
        except Exception:  # noqa: BLE001 - the limit is still raised to the caller
            logger.exception("could not record GitHub's rate limit for installation %s",
                             installation_id)  # fmt: skip

    def _app_call(self, description: str, fn: Callable[[], T]) -> T:
        """`_call` for a call made with the App's JWT, counted as the App's own."""

        def counted() -> T:
            with usage_counted(self.creds.app_id, APP, self._integration().requester):
                return fn()

        return self._call(description, counted)

    def _call(
        self,
        description: str,
        fn: Callable[[], T],
        *,
        recover: Callable[[], T | None] | None = None,
        creates: bool = False,
    ) -> T:
        attempts = self.policy.max_attempts
        for attempt in range(1, attempts + 1):
            try:
                return fn()
            except GithubException as exc:
                error = classify(description, exc)
            except (requests.ConnectionError, requests.Timeout) as exc:
                error = GitHubError(
                    f"Could not {description}: network error ({type(exc).__name__}: {exc})",
                    permanent=False,
                )
            if error.permanent or attempt == attempts:
                if not error.permanent and attempts > 1:
                    error.message = f"{error.message} (gave up after {attempts} attempts)"
                    error.args = (error.message,)
                raise error
            wait = self._wait_before_retry(error, attempt)
            if wait is None:
                raise error
            logger.warning(
                "GitHub: %s (attempt %d of %d); retrying in %.1fs",
                error.message,
                attempt,
                attempts,
                wait,
            )
            time.sleep(wait)
            if creates:
                if recover is None:
                    # The first POST may have succeeded; without a way to look, do not repeat it.
                    raise error
                found = self._call(f"look for the result of: {description}", recover)
                if found is not None:
                    logger.info("GitHub: %s had succeeded; using the existing result", description)
                    return found
        raise AssertionError("unreachable")

    def _wait_before_retry(self, error: GitHubError, attempt: int) -> float | None:
        if error.retry_after is not None:
            if error.retry_after > self.policy.max_rate_limit_wait:
                return None
            return error.retry_after
        base = self.policy.backoff * (2 ** (attempt - 1))
        return base + random.uniform(0, base / 2)  # noqa: S311  (jitter, not security)
