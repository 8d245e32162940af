"""What a failed GitHub call means: permanent or worth retrying, and how long to wait."""

from __future__ import annotations

import time
from typing import Any

from github import GithubException


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
        )
    if "FORBIDDEN" in graphql:
        return GitHubError(
            f"Could not {description}: {message} — the App may lack a permission this needs "
            "(resolving review threads needs Contents: read and write)",
            permanent=True,
            status=403,
            data=exc.data,
        )
    retry_after = rate_limit_wait(status, headers, message)
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
    message = error.data.get("message", "") if isinstance(error.data, dict) else ""
    return error.status == 422 and "permissions requested are not granted" in message
