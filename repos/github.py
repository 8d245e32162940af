"""The GitHub gateway: every call Tasuku makes to GitHub goes through this module.

It owns the App's credentials, the App JWT, installation tokens (scoped to the
repositories and permissions a caller names, cached until shortly before they expire),
the retry policy, and a pydantic model for every response it returns.

Retry policy (one place, explicit):
- 5xx answers and network errors are transient; a 403/429 carrying rate-limit headers
  (`x-ratelimit-remaining: 0`) or `Retry-After` is a rate limit. Both are retried, up to
  `GITHUB_MAX_ATTEMPTS` attempts in all, with exponential backoff and jitter; a rate
  limit waits as long as GitHub asks when that is at most `GITHUB_MAX_RATE_LIMIT_WAIT`,
  otherwise the error is raised at once (transient, with `retry_after`) so the caller's
  own queue backs off instead of a worker sleeping.
- Other 4xx answers are permanent and never retried.
- A POST that creates something is never retried blindly: a 5xx or a dropped connection
  may hide a success (PyGithub's own `GithubRetry` re-sends POSTs, which is why it is
  switched off here). Such a call names a `recover` function that looks for what the
  first try may have created; only when nothing is found is the POST sent again.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import cache
from pathlib import Path
from typing import Any, TypeVar

import requests
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from django.conf import settings
from github import Auth, Github, GithubException, GithubIntegration
from pydantic import BaseModel

logger = logging.getLogger(__name__)

T = TypeVar("T")

# Refresh an installation token when less than this is left of its hour.
TOKEN_REFRESH_MARGIN = timedelta(minutes=5)
# GitHub allows at most 10 minutes; leave room for clock drift between us and GitHub.
JWT_EXPIRY_SECONDS = 540
# "we recommend that you set this 60 seconds in the past" (App JWT docs)
JWT_ISSUED_AT_OFFSET = -60


# --- Errors ---------------------------------------------------------------------------


class GitHubError(Exception):
    """A GitHub call that did not succeed.

    `permanent` says whether repeating the same call can ever help (a 404, a 422, a bad
    credential) or whether it is worth retrying later (5xx, network, rate limit).
    """

    def __init__(
        self,
        message: str,
        *,
        permanent: bool,
        status: int | None = None,
        retry_after: float | None = None,
        data: Any = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.permanent = permanent
        self.status = status
        self.retry_after = retry_after
        self.data = data


class GitHubNotConfigured(GitHubError):
    def __init__(self, missing: list[str]) -> None:
        super().__init__(
            "The GitHub App is not configured: set " + ", ".join(missing) + ".", permanent=True
        )
        self.missing = missing


# --- Configuration --------------------------------------------------------------------


@dataclass(frozen=True)
class AppCredentials:
    app_id: int
    private_key: str
    webhook_secret: str
    slug: str
    base_url: str


@dataclass(frozen=True)
class RetryPolicy:
    max_attempts: int
    backoff: float
    max_rate_limit_wait: float
    timeout: int
    seconds_between_requests: float | None
    seconds_between_writes: float | None


def private_key_text() -> tuple[str, str | None]:
    """The PEM text of the App's private key and the variable it came from.

    Raises ValueError naming the variable when the key cannot be read.
    """
    inline = settings.GITHUB_PRIVATE_KEY.strip()
    path = settings.GITHUB_PRIVATE_KEY_PATH.strip()
    if inline and path:
        raise ValueError(
            "GITHUB_PRIVATE_KEY and GITHUB_PRIVATE_KEY_PATH are both set; set only one."
        )
    if inline:
        # Keys pasted into one-line environment files arrive with literal "\n".
        return inline.replace("\\n", "\n"), "GITHUB_PRIVATE_KEY"
    if path:
        try:
            return Path(path).expanduser().read_text(), "GITHUB_PRIVATE_KEY_PATH"
        except OSError as exc:
            raise ValueError(
                f"GITHUB_PRIVATE_KEY_PATH: cannot read {path!r}: {exc.strerror or exc}"
            ) from exc
    return "", None


def private_key_problem(pem: str, variable: str) -> str | None:
    """Why `pem` is not an RSA private key GitHub could have issued, or None."""
    try:
        key = serialization.load_pem_private_key(pem.encode(), password=None)
    except (ValueError, TypeError) as exc:
        return f"{variable} is not a PEM private key ({exc})."
    if not isinstance(key, rsa.RSAPrivateKey):
        return f"{variable} is not an RSA key; GitHub App keys are RSA (RS256)."
    return None


def missing_settings() -> list[str]:
    """Names of the variables without which Tasuku cannot talk to GitHub."""
    missing = []
    if not settings.GITHUB_APP_ID:
        missing.append("GITHUB_APP_ID")
    if not (settings.GITHUB_PRIVATE_KEY or settings.GITHUB_PRIVATE_KEY_PATH):
        missing.append("GITHUB_PRIVATE_KEY or GITHUB_PRIVATE_KEY_PATH")
    if not settings.GITHUB_WEBHOOK_SECRET:
        missing.append("GITHUB_WEBHOOK_SECRET")
    return missing


def credentials() -> AppCredentials:
    """The App's credentials, or GitHubNotConfigured naming what is missing.

    Malformed values are reported by the system checks at start-up; here they are
    permanent errors (a run cannot fix them).
    """
    missing = missing_settings()
    if missing:
        raise GitHubNotConfigured(missing)
    try:
        app_id = int(settings.GITHUB_APP_ID)
        pem, variable = private_key_text()
    except ValueError as exc:
        raise GitHubError(f"GitHub App misconfigured: {exc}", permanent=True) from exc
    problem = private_key_problem(pem, variable or "")
    if problem:
        raise GitHubError(f"GitHub App misconfigured: {problem}", permanent=True)
    return AppCredentials(
        app_id=app_id,
        private_key=pem,
        webhook_secret=settings.GITHUB_WEBHOOK_SECRET,
        slug=settings.GITHUB_APP_SLUG,
        base_url=settings.GITHUB_API_URL,
    )


def retry_policy() -> RetryPolicy:
    return RetryPolicy(
        max_attempts=max(1, int(settings.GITHUB_MAX_ATTEMPTS)),
        backoff=float(settings.GITHUB_RETRY_BACKOFF),
        max_rate_limit_wait=float(settings.GITHUB_MAX_RATE_LIMIT_WAIT),
        timeout=int(float(settings.GITHUB_TIMEOUT)),
        seconds_between_requests=getattr(settings, "GITHUB_SECONDS_BETWEEN_REQUESTS", 0.25),
        seconds_between_writes=getattr(settings, "GITHUB_SECONDS_BETWEEN_WRITES", 1.0),
    )


# --- Response models ------------------------------------------------------------------


class InstallationToken(BaseModel):
    token: str
    expires_at: datetime
    permissions: dict[str, str] = {}
    repository_ids: tuple[int, ...] = ()

    def fresh(self, now: datetime | None = None) -> bool:
        return self.expires_at - (now or datetime.now(UTC)) > TOKEN_REFRESH_MARGIN

    def __repr__(self) -> str:  # never print the token itself
        return f"InstallationToken(expires_at={self.expires_at.isoformat()})"

    __str__ = __repr__


class CheckRunOutput(BaseModel):
    title: str
    summary: str
    text: str | None = None


class CheckRunInfo(BaseModel):
    id: int
    name: str
    head_sha: str
    status: str
    conclusion: str | None = None
    external_id: str | None = None
    details_url: str | None = None
    html_url: str | None = None


class PullRequestInfo(BaseModel):
    number: int
    title: str
    state: str
    draft: bool
    merged: bool
    head_sha: str
    head_ref: str
    base_sha: str
    base_ref: str
    author_login: str
    author_type: str
    changed_files: int
    html_url: str


# --- The gateway ----------------------------------------------------------------------


class GitHubGateway:
    """One App's view of GitHub. Cheap to create; tokens and clients are cached per
    process (never on disk: they are credentials)."""

    def __init__(self, creds: AppCredentials, policy: RetryPolicy) -> None:
        self.creds = creds
        self.policy = policy

    # --- App (JWT) calls ---

    def _integration(self) -> GithubIntegration:
        return _integration_client(self.creds, self.policy)

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
        key = _token_key(self.creds, installation_id, repository_ids, permissions)
        with _cache_lock:
            cached = _token_cache.get(key)
        if cached and cached.fresh():
            return cached

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
                expires_at=_parse_time(data["expires_at"]),
                permissions=data.get("permissions") or {},
                repository_ids=tuple(r["id"] for r in data.get("repositories") or ()),
            )

        # Minting a second token is harmless, so this POST may be repeated.
        token = self._call(f"create a token for installation {installation_id}", create)
        with _cache_lock:
            _token_cache[key] = token
        return token

    def repository_installation_id(self, full_name: str) -> int | None:
        """The id of the installation through which the App reaches `full_name`, or None
        when the App cannot reach it (uninstalled, or the repository was deselected)."""
        owner, name = full_name.split("/", 1)

        def get() -> int | None:
            try:
                # Reference: https://docs.github.com/rest/apps/apps#get-a-repository-installation-for-the-authenticated-app
                return self._integration().get_repo_installation(owner, name).id
            except GithubException as exc:
                if exc.status == 404:
                    return None
                raise

        return self._call(f"look up the installation of {full_name}", get)

    # --- Installation calls ---

    def _client(
        self, installation_id: int, repository_id: int | None, permissions: dict[str, str]
    ) -> Github:
        token = self.installation_token(
            installation_id,
            repository_ids=(repository_id,) if repository_id else (),
            permissions=permissions,
        )
        return _installation_client(self.creds, self.policy, token.token)

    def _drop_token(
        self, installation_id: int, repository_id: int | None, permissions: dict[str, str]
    ) -> None:
        key = _token_key(
            self.creds, installation_id, (repository_id,) if repository_id else (), permissions
        )
        with _cache_lock:
            _token_cache.pop(key, None)

    def _repo_call(
        self,
        description: str,
        *,
        installation_id: int,
        repository_id: int | None,
        permissions: dict[str, str],
        fn: Callable[[Github], T],
        recover: Callable[[Github], T | None] | None = None,
        creates: bool = False,
    ) -> T:
        """Run `fn` with a client holding a token scoped to one repository.

        A 401 means the cached token was revoked or expired early: it is dropped and the
        call repeated once with a new token.
        """

        def attempt() -> T:
            client = self._client(installation_id, repository_id, permissions)
            try:
                return fn(client)
            except GithubException as exc:
                if exc.status != 401:
                    raise
                self._drop_token(installation_id, repository_id, permissions)
                return fn(self._client(installation_id, repository_id, permissions))

        def recover_with_client() -> T | None:
            assert recover is not None
            return recover(self._client(installation_id, repository_id, permissions))

        return self._call(
            description,
            attempt,
            recover=recover_with_client if recover else None,
            creates=creates,
        )

    def pull_request_get(
        self, *, installation_id: int, repository_id: int | None, full_name: str, number: int
    ) -> PullRequestInfo:
        def get(client: Github) -> PullRequestInfo:
            # Reference: https://docs.github.com/rest/pulls/pulls#get-a-pull-request
            pr = client.get_repo(full_name).get_pull(number)
            return PullRequestInfo(
                number=pr.number,
                title=pr.title or "",
                state=pr.state,
                draft=bool(pr.draft),
                merged=bool(pr.merged),
                head_sha=pr.head.sha,
                head_ref=pr.head.ref,
                base_sha=pr.base.sha,
                base_ref=pr.base.ref,
                author_login=pr.user.login,
                author_type=pr.user.type,
                changed_files=pr.changed_files,
                html_url=pr.html_url,
            )

        return self._repo_call(
            f"read pull request {full_name}#{number}",
            installation_id=installation_id,
            repository_id=repository_id,
            permissions={"pull_requests": "read"},
            fn=get,
        )

    def check_run_create(
        self,
        *,
        installation_id: int,
        repository_id: int | None,
        full_name: str,
        name: str,
        head_sha: str,
        external_id: str,
        details_url: str,
        status: str = "queued",
        conclusion: str | None = None,
        output: CheckRunOutput | None = None,
    ) -> CheckRunInfo:
        """Create a check run; `external_id` makes it findable, so a POST whose answer was
        lost is looked up instead of posted twice."""
        params: dict[str, Any] = {
            "name": name,
            "head_sha": head_sha,
            "external_id": external_id,
            "details_url": details_url,
        }
        if conclusion:
            params["conclusion"] = conclusion
            params["completed_at"] = datetime.now(UTC)
        else:
            params["status"] = status
        if output:
            params["output"] = output.model_dump(exclude_none=True)

        def create(client: Github) -> CheckRunInfo:
            # Reference: https://docs.github.com/rest/checks/runs#create-a-check-run
            return _check_run_info(client.get_repo(full_name).create_check_run(**params))

        def find(client: Github) -> CheckRunInfo | None:
            return self._check_run_find(client, full_name, head_sha, name, external_id)

        return self._repo_call(
            f"create check run {name!r} on {full_name}@{head_sha[:7]}",
            installation_id=installation_id,
            repository_id=repository_id,
            permissions={"checks": "write"},
            fn=create,
            recover=find,
            creates=True,
        )

    def check_run_find(
        self,
        *,
        installation_id: int,
        repository_id: int | None,
        full_name: str,
        head_sha: str,
        name: str,
        external_id: str,
    ) -> CheckRunInfo | None:
        """The check run named `name` on `head_sha` carrying `external_id`, if any."""
        return self._repo_call(
            f"find check run {name!r} on {full_name}@{head_sha[:7]}",
            installation_id=installation_id,
            repository_id=repository_id,
            permissions={"checks": "read"},
            fn=lambda client: self._check_run_find(client, full_name, head_sha, name, external_id),
        )

    @staticmethod
    def _check_run_find(
        client: Github, full_name: str, head_sha: str, name: str, external_id: str
    ) -> CheckRunInfo | None:
        # Reference: https://docs.github.com/rest/checks/runs#list-check-runs-for-a-git-reference
        commit = client.get_repo(full_name).get_commit(head_sha)
        for run in commit.get_check_runs(check_name=name, filter="all"):
            if run.external_id == external_id:
                return _check_run_info(run)
        return None

    def check_run_update(
        self,
        *,
        installation_id: int,
        repository_id: int | None,
        full_name: str,
        check_run_id: int,
        status: str | None = None,
        conclusion: str | None = None,
        output: CheckRunOutput | None = None,
        details_url: str | None = None,
    ) -> CheckRunInfo:
        """Update a check run. A PATCH sets the same fields again when repeated, so it is
        retried like a read."""
        body: dict[str, Any] = {}
        if status:
            body["status"] = status
        if conclusion:
            body["conclusion"] = conclusion
            body["completed_at"] = _format_time(datetime.now(UTC))
        if output:
            body["output"] = output.model_dump(exclude_none=True)
        if details_url:
            body["details_url"] = details_url

        def update(client: Github) -> CheckRunInfo:
            # Reference: https://docs.github.com/rest/checks/runs#update-a-check-run
            # Through the requester: PyGithub's CheckRun.edit needs the run fetched first.
            owner, name = full_name.split("/", 1)
            _, data = client.requester.requestJsonAndCheck(
                "PATCH", f"/repos/{owner}/{name}/check-runs/{check_run_id}", input=body
            )
            return CheckRunInfo.model_validate(data)

        return self._repo_call(
            f"update check run {check_run_id} on {full_name}",
            installation_id=installation_id,
            repository_id=repository_id,
            permissions={"checks": "write"},
            fn=update,
        )

    # --- The retry loop ---

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
                error = _classify(description, exc)
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


def _classify(description: str, exc: GithubException) -> GitHubError:
    status = exc.status
    headers = {k.lower(): v for k, v in (exc.headers or {}).items()}
    message = _error_message(exc)
    retry_after = _rate_limit_wait(status, headers, message)
    if retry_after is not None:
        return GitHubError(
            f"Could not {description}: rate limited by GitHub ({status}: {message})",
            permanent=False,
            status=status,
            retry_after=retry_after,
            data=exc.data,
        )
    if status is not None and status >= 500:
        return GitHubError(
            f"Could not {description}: GitHub answered {status} ({message})",
            permanent=False,
            status=status,
            data=exc.data,
        )
    hint = {
        401: " — check GITHUB_APP_ID and the private key",
        403: " — the App may lack a permission this needs",
        404: " — not found, or the App cannot see it",
    }.get(status or 0, "")
    return GitHubError(
        f"Could not {description}: GitHub answered {status} ({message}){hint}",
        permanent=True,
        status=status,
        data=exc.data,
    )


def _rate_limit_wait(status: int | None, headers: dict[str, str], message: str) -> float | None:
    """Seconds GitHub asks us to wait, when the answer is a rate limit; else None."""
    if status not in (403, 429):
        return None
    if "retry-after" in headers:
        try:
            return max(0.0, float(headers["retry-after"]))
        except ValueError:
            return 60.0
    if headers.get("x-ratelimit-remaining") == "0":
        try:
            reset = float(headers["x-ratelimit-reset"])
        except (KeyError, ValueError):
            return 60.0
        return max(0.0, reset - time.time()) + 1
    if "rate limit" in message.lower():
        # Secondary limits without headers: "wait a few minutes" per GitHub's docs.
        return 60.0
    return None


def _error_message(exc: GithubException) -> str:
    data = exc.data
    if isinstance(data, dict):
        message = str(data.get("message") or "")
        errors = data.get("errors")
        if errors:
            details = "; ".join(
                e if isinstance(e, str) else str(e.get("message") or e) for e in errors
            )
            message = f"{message}: {details}" if message else details
        return message or str(data)
    return str(data or exc)


def _check_run_info(run: Any) -> CheckRunInfo:
    return CheckRunInfo(
        id=run.id,
        name=run.name,
        head_sha=run.head_sha,
        status=run.status,
        conclusion=run.conclusion,
        external_id=run.external_id,
        details_url=run.details_url,
        html_url=run.html_url,
    )


def _parse_time(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def _format_time(value: datetime) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# --- Process-wide caches (credentials never touch disk) -------------------------------

_cache_lock = threading.Lock()
_token_cache: dict[tuple[Any, ...], InstallationToken] = {}


def _token_key(
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


@cache
def _integration_client(creds: AppCredentials, policy: RetryPolicy) -> GithubIntegration:
    auth = Auth.AppAuth(
        creds.app_id,
        creds.private_key,
        jwt_expiry=JWT_EXPIRY_SECONDS,
        jwt_issued_at=JWT_ISSUED_AT_OFFSET,
    )
    return GithubIntegration(
        auth=auth,
        base_url=creds.base_url,
        timeout=policy.timeout,
        retry=None,  # the gateway's own loop retries; see the module docstring
        seconds_between_requests=policy.seconds_between_requests,
        seconds_between_writes=policy.seconds_between_writes,
    )


_client_cache: dict[tuple[Any, ...], Github] = {}


def _installation_client(creds: AppCredentials, policy: RetryPolicy, token: str) -> Github:
    key = (creds.base_url, policy, token)
    with _cache_lock:
        client = _client_cache.get(key)
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
                seconds_between_writes=policy.seconds_between_writes,
            )
            _client_cache[key] = client
    return client


def caches_clear() -> None:
    """Forget cached tokens and clients (tests; a changed App key)."""
    with _cache_lock:
        _token_cache.clear()
        _client_cache.clear()
    _integration_client.cache_clear()


def gateway() -> GitHubGateway:
    """The gateway for the configured App; GitHubNotConfigured names what is missing."""
    return GitHubGateway(credentials(), retry_policy())
