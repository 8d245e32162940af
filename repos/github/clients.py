"""PyGithub clients and installation tokens, cached per process (never on disk:
they are credentials)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from functools import cache, lru_cache
from typing import Any

import jwt
from github import Auth, Github, GithubIntegration
from jwt.algorithms import RSAAlgorithm

from repos.github.budget import SharedBudget
from repos.github.config import AppCredentials, RetryPolicy
from repos.github.pacing import WriteLimits
from repos.github.schemas import InstallationToken

# GitHub allows at most 10 minutes; leave room for clock drift between us and GitHub.
JWT_EXPIRY_SECONDS = 540
# "we recommend that you set this 60 seconds in the past" (App JWT docs)
JWT_ISSUED_AT_OFFSET = -60

cache_lock = threading.Lock()
token_cache: dict[tuple[Any, ...], InstallationToken] = {}
# The API base URLs of GitHub servers that refused the dispatch's `return_run_details`
# (an Enterprise Server older than the key): not offered it again (repos/github/actions.py).
run_details_refused: set[str] = set()
# Each App's slug, read once from `GET /app` when GITHUB_APP_SLUG is not set.
slug_cache: dict[tuple[str, int], str] = {}
# (base_url, app_id, installation_id) -> (time.monotonic() when read, granted permissions)
permissions_cache: dict[tuple[Any, ...], tuple[float, dict[str, str]]] = {}
# (base_url, repository, login) -> (time.monotonic() when read, role): who may silence a
# finding is asked of GitHub, and remembered only briefly (access can be taken away).
roles_cache: dict[tuple[Any, ...], tuple[float, str]] = {}
ROLE_TTL_SECONDS = 60
# (base_url, app_id, repository) -> (time.monotonic() when read, what was read): that the
# App reaches a repository (only a "yes" is kept: a repository deselected is seen at once
# the other way round) and the repository's metadata, which a review reads to clone.
reach_cache: dict[tuple[Any, ...], tuple[float, Any]] = {}
REACH_TTL_SECONDS = 60
repository_cache: dict[tuple[Any, ...], tuple[float, Any]] = {}
REPOSITORY_TTL_SECONDS = 300


def token_key(
    creds: AppCredentials,
    installation_id: int,
    repository_ids: tuple[int, ...],
    permissions: dict[str, str] | None,
) -> tuple[Any, ...]:
    return (
        creds.base_url,
        creds.app_id,
        installation_id,
        tuple(sorted(repository_ids)),
        tuple(sorted((permissions or {}).items())),
    )


# The REST API version Tasuku is written against, sent on every request (GitHub answers
# an unversioned request with its default version, which may change).
API_VERSION = "2022-11-28"


def _pinned(requester: Any) -> None:
    """PyGithub's Requester sends `X-GitHub-Api-Version` when it has a version, but its
    client classes take none: set it on the one requester every object of the client
    shares."""
    requester._Requester__apiVersion = API_VERSION


@lru_cache(maxsize=8)
def _parsed_key(pem: str) -> Any:
    """The App's private key, parsed once. Given the PEM text, PyJWT parses and checks
    the key again for every signature (tens of milliseconds of CPU, more on a busy
    host, for each App JWT); given the parsed key it only signs (about 2 ms)."""
    return RSAAlgorithm(RSAAlgorithm.SHA256).prepare_key(pem)


def _jwt_signer(pem: str) -> Callable[[dict], str]:
    def sign(payload: dict) -> str:
        return jwt.encode(payload, key=_parsed_key(pem), algorithm="RS256")

    return sign


@cache
def integration_client(creds: AppCredentials, policy: RetryPolicy) -> GithubIntegration:
    auth = Auth.AppAuth(
        creds.app_id,
        sign_func=_jwt_signer(creds.private_key),
        jwt_expiry=JWT_EXPIRY_SECONDS,
        jwt_issued_at=JWT_ISSUED_AT_OFFSET,
    )
    integration = GithubIntegration(
        auth=auth,
        base_url=creds.base_url,
        timeout=policy.timeout,
        retry=None,  # the gateway's own loop retries; see the module docstring
        seconds_between_requests=policy.seconds_between_requests,
        # The App's own calls (a token minted, its permissions read) create no content:
        # GitHub's pacing of content-creating requests is not for them, and pacing them
        # made every review wait a second per token.
        seconds_between_writes=None,
    )
    _pinned(integration.requester)
    return integration


_client_cache: dict[tuple[Any, ...], Github] = {}
_pacers: dict[WriteLimits, SharedBudget] = {}
# A write that waits longer than this for its place in the budget is not slept through:
# its queue defers it (unless GitHub's own longest wait, GITHUB_MAX_RATE_LIMIT_WAIT, is
# longer).
BUDGET_MAX_WAIT = 60.0


def write_pacer(policy: RetryPolicy) -> SharedBudget | None:
    """The installations' write budget under `policy`, shared by every process through
    the database (None: unpaced)."""
    if not policy.seconds_between_writes:
        return None
    limits = WriteLimits(
        burst=policy.write_burst,
        interval=float(policy.seconds_between_writes),
        per_minute=policy.writes_per_minute,
        per_hour=policy.writes_per_hour,
        at_once=policy.writes_at_once,
    )
    with cache_lock:
        pacer = _pacers.get(limits)
        if pacer is None:
            pacer = _pacers[limits] = SharedBudget(
                limits,
                max_wait=max(BUDGET_MAX_WAIT, policy.max_rate_limit_wait),
                hold_for=policy.timeout + 15.0,
            )
    return pacer


def installation_client(
    creds: AppCredentials, policy: RetryPolicy, token: str, *, cached: bool = True
) -> Github:
    """A client carrying `token`; `cached` false for a token used once (never kept)."""
    key = (creds.base_url, policy, token)
    with cache_lock:
        client = _client_cache.get(key) if cached else None
        if client is None:
            if len(_client_cache) > 256:
                _client_cache.clear()
            client = Github(
                auth=Auth.Token(token),
                base_url=creds.base_url,
                timeout=policy.timeout,
                retry=None,  # never PyGithub's GithubRetry: it re-sends POSTs on 5xx
                per_page=100,
                lazy=True,  # objects load when read: no GET before every call
                seconds_between_requests=policy.seconds_between_requests,
                # Writes are paced per installation by the gateway (repos/github/pacing.py),
                # not per client: one installation's writes go through many clients.
                seconds_between_writes=None,
            )
            _pinned(client.requester)
            if cached:
                _client_cache[key] = client
    return client


def caches_clear() -> None:
    """Forget cached tokens, installation permissions, clients, the App's slug and the
    writes' pace (tests; a changed App key)."""
    with cache_lock:
        token_cache.clear()
        permissions_cache.clear()
        roles_cache.clear()
        reach_cache.clear()
        repository_cache.clear()
        _client_cache.clear()
        _pacers.clear()
        run_details_refused.clear()
        slug_cache.clear()
    integration_client.cache_clear()
