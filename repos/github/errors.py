"""What a failed GitHub call means: permanent or worth retrying, how long to wait, and
its code (tasuku/errors.py says what each code means and what to do)."""

from __future__ import annotations

import time
from typing import Any

from github import GithubException


class GitHubError(Exception):
    """A GitHub call that did not succeed.

    `permanent` says whether repeating the same call can ever help (a 404, a 422, a bad
    credential) or whether it is worth retrying later (5xx, network, rate limit). `code`
    names the cause; without one it follows from the status.
    """

    def __init__(
        self,
        message: str,
        *,
        permanent: bool,
        status: int | None = None,
        retry_after: float | None = None,
        data: Any = None,
        code: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.permanent = permanent
        self.status = status
        self.retry_after = retry_after
        self.data = data
        self.code = code or status_code(status, permanent=permanent, data=data)


# What GitHub's refusals mean, by status.
STATUS_CODES = {
    401: "github-credentials",
    403: "github-permission",
    404: "github-not-found",
    422: "github-422",
}


def refusal_code(status: int | None, data: Any) -> str:
    """The code of a refusal (a permanent error): by its status, except a token GitHub
    would not mint for a permission the installation lacks (a 422)."""
    if status == 422 and _not_granted(data):
        return "github-permission"
    return STATUS_CODES.get(status or 0, "github-error")


def status_code(status: int | None, *, permanent: bool, data: Any = None) -> str:
    """The code of a GitHub error raised without one: a failure worth retrying is GitHub
    not answering (5xx, the network); a refusal is read from its status."""
    if (status is not None and status >= 500) or not permanent:
        return "github-unavailable"
    return refusal_code(status, data)


class GitHubNotConfigured(GitHubError):
    def __init__(self, missing: list[str]) -> None:
        super().__init__(
            "The GitHub App is not configured: set " + ", ".join(missing) + ".",
            permanent=True,
            code="github-credentials",
        )
        self.missing = missing


def classify(description: str, exc: GithubException) -> GitHubError:
    status = exc.status
    headers = {k.lower(): v for k, v in (exc.headers or {}).items()}
    message = error_message(exc)
    graphql = graphql_error_types(exc)
    if graphql & {"RATE_LIMITED", "RATE_LIMIT"}:
        # GraphQL answers its rate limit with HTTP 200 and an error (typed RATE_LIMITED,
        # and RATE_LIMIT has been seen too); PyGithub calls it 400.
        return GitHubError(
            f"Could not {description}: rate limited by GitHub's GraphQL API ({message})",
            permanent=False,
            status=status,
            retry_after=60.0,
            data=exc.data,
            code="github-rate-limit",
        )
    if "FORBIDDEN" in graphql:
        return GitHubError(
            f"Could not {description}: {message} — the App may lack a permission this needs "
            "(resolving review threads needs Contents: read and write)",
            permanent=True,
            status=403,
            data=exc.data,
            code="github-permission",
        )
    retry_after = rate_limit_wait(status, headers, message)
    if retry_after is None and status == 422 and content_limited(message):
        # GitHub's content-creation limit can answer 422 ("was submitted too quickly"),
        # not 403/429: the same weather, waited out, never a refusal of the content.
        retry_after = _retry_after(headers) or SECONDARY_WAIT
    if retry_after is not None:
        return GitHubError(
            f"Could not {description}: rate limited by GitHub ({status}: {message})",
            permanent=False,
            status=status,
            retry_after=retry_after,
            data=exc.data,
            code="github-rate-limit",
        )
    if status is not None and status >= 500:
        return GitHubError(
            f"Could not {description}: GitHub answered {status} ({message})",
            permanent=False,
            status=status,
            data=exc.data,
            code="github-unavailable",
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
        code=refusal_code(status, exc.data),
    )


# GitHub's docs: without `retry-after`, wait at least a minute after a secondary limit.
SECONDARY_WAIT = 60.0


def content_limited(message: str) -> bool:
    """Whether an error's message is GitHub's secondary (content-creation) limit: "You
    have exceeded a secondary rate limit", or the answer seen to too many review
    comments or posts in a row, "was submitted too quickly"."""
    text = message.lower()
    return "submitted too quickly" in text or "secondary rate limit" in text


def _retry_after(headers: dict[str, str]) -> float | None:
    try:
        return max(0.0, float(headers["retry-after"]))
    except (KeyError, ValueError):
        return None


def rate_limit_wait(status: int | None, headers: dict[str, str], message: str) -> float | None:
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


def quota_spent(exc: GithubException) -> bool:
    """Whether GitHub refused a call because the token's primary rate limit is spent
    (403 or 429 with `x-ratelimit-remaining: 0`): every call of the installation is
    refused until the reset."""
    headers = {k.lower(): v for k, v in (exc.headers or {}).items()}
    return exc.status in (403, 429) and headers.get("x-ratelimit-remaining") == "0"


def graphql_error_types(exc: GithubException) -> set[str]:
    data = exc.data
    if isinstance(data, dict) and isinstance(data.get("errors"), list):
        return {str(e.get("type")) for e in data["errors"] if isinstance(e, dict)}
    return set()


def error_message(exc: GithubException) -> str:
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


def permissions_not_granted(error: GitHubError) -> bool:
    """Whether a token was refused because it asked for a permission the installation
    lacks (GitHub answers 422 and mints nothing)."""
    return error.status == 422 and _not_granted(error.data)


def _not_granted(data: Any) -> bool:
    message = data.get("message", "") if isinstance(data, dict) else ""
    return "permissions requested are not granted" in message
