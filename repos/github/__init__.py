"""The GitHub gateway: every call Tasuku makes to GitHub goes through this package.

It owns the App's credentials, the App JWT, installation tokens (scoped to the
repositories and permissions a caller names, cached until shortly before they expire),
the retry policy, and a pydantic model for every response it returns. Several Apps can
each have a gateway: tokens, clients and permissions are cached per App.

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

from repos.github.clients import caches_clear
from repos.github.config import (
    AppCredentials,
    RetryPolicy,
    credentials,
    missing_settings,
    private_key_problem,
    private_key_text,
    registration_forget,
    retry_policy,
    webhook_secret,
)
from repos.github.errors import GitHubError, GitHubNotConfigured
from repos.github.gateway import GitHubGateway, gateway
from repos.github.repo import RepoRef
from repos.github.schemas import (
    ActionsRunInfo,
    CheckRunInfo,
    CheckRunOutput,
    CheckRunState,
    DispatchedRun,
    InstallationToken,
    IssueCommentInfo,
    IssueInfo,
    PullRequestInfo,
    RepositoryInfo,
    ReviewCommentInfo,
    ReviewInfo,
    ThreadComment,
    ThreadInfo,
    WorkflowInfo,
)

__all__ = [
    "ActionsRunInfo",
    "AppCredentials",
    "CheckRunInfo",
    "CheckRunOutput",
    "CheckRunState",
    "DispatchedRun",
    "GitHubError",
    "GitHubGateway",
    "GitHubNotConfigured",
    "InstallationToken",
    "IssueCommentInfo",
    "IssueInfo",
    "ThreadComment",
    "ThreadInfo",
    "WorkflowInfo",
    "PullRequestInfo",
    "RepoRef",
    "RepositoryInfo",
    "RetryPolicy",
    "ReviewCommentInfo",
    "ReviewInfo",
    "caches_clear",
    "credentials",
    "gateway",
    "missing_settings",
    "private_key_problem",
    "private_key_text",
    "registration_forget",
    "retry_policy",
    "webhook_secret",
]
