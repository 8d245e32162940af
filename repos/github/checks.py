"""The gateway's calls about the checks a commit must pass: every App's check runs and
commit statuses on it, and the checks branch protection requires.

A mixin of `GitHubGateway`: every call still goes through its retry loop. Tasuku's App
is not required to hold Administration (branch protection) or Commit statuses; without
them these calls answer what they can (None; check runs only) instead of failing, and
never ask GitHub for a token the installation would refuse.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from github import Github, GithubException

from repos.github.errors import (
    GitHubError,
    error_message,
    permissions_not_granted,
    rate_limit_wait,
)
from repos.github.repo import RepoRef
from repos.github.schemas import (
    CheckRunState,
    latest_check_runs,
    required_check_names,
    status_check_state,
)
from repos.github.transport import Transport

ADMINISTRATION_READ = {"administration": "read"}
STATUSES_READ = {"statuses": "read"}
PAGE_SIZE = 100
# What GitHub answers (404) when a branch's protection names no required checks.
NO_REQUIRED_CHECKS = ("Branch not protected", "Required status checks not enabled")


def _protection_unreadable(exc: GithubException) -> bool:
    """Whether a required-status-checks answer means "no list to follow here": the branch
    requires none, or the App may not read it (a 403 without Administration, or a plan
    without protection for private repositories). A rate limit is not that: it is retried."""
    message = error_message(exc)
    if exc.status == 404:
        return message in NO_REQUIRED_CHECKS
    if exc.status == 403:
        headers = {k.lower(): v for k, v in (exc.headers or {}).items()}
        return rate_limit_wait(403, headers, message) is None
    return False


class CheckCalls(Transport):
    def required_checks(
        self,
        repo: RepoRef,
        *,
        branch: str,
    ) -> list[str] | None:
        """The names of the status checks branch protection requires on `branch`, or None
        when it names none or the App may not read it; the caller then follows the list
        its user configured.

        Checks that only a repository ruleset requires do not appear here.
        """
        if not self._granted(repo.installation_id, ADMINISTRATION_READ):
            return None
        owner, name = repo.full_name.split("/", 1)
        url = (
            f"/repos/{owner}/{name}/branches/{quote(branch, safe='/')}"
            "/protection/required_status_checks"
        )

        def get(client: Github) -> list[str] | None:
            # Reference: https://docs.github.com/rest/branches/branch-protection#get-status-checks-protection
            try:
                _, data = client.requester.requestJsonAndCheck("GET", url)
            except GithubException as exc:
                if _protection_unreadable(exc):
                    return None
                raise
            return required_check_names(data) or None

        try:
            return self._repo_call(
                f"read the required checks of {repo.full_name}@{branch}",
                repo,
                permissions=ADMINISTRATION_READ,
                fn=get,
            )
        except GitHubError as error:
            if not permissions_not_granted(error):
                raise
            # Withdrawn after the permissions were read: refresh them so that the next
            # call asks for no token GitHub would refuse.
            self.installation_permissions(repo.installation_id, fresh=True)
            return None

    def commit_check_runs(
        self,
        repo: RepoRef,
        *,
        sha: str,
    ) -> list[CheckRunState]:
        """Every check on commit `sha`, from any App: the newest check run of each name
        of each App (by name), then the latest status of each commit status context in
        the same shape (by context). Statuses are read only when the App holds Commit
        statuses: read; a run and a status sharing a name are both listed."""
        with_statuses = bool(self._granted(repo.installation_id, STATUSES_READ))
        try:
            return self._commit_checks(repo, sha, with_statuses=with_statuses)
        except GitHubError as error:
            if not (with_statuses and permissions_not_granted(error)):
                raise
            self.installation_permissions(repo.installation_id, fresh=True)
            return self._commit_checks(repo, sha, with_statuses=False)

    def _commit_checks(
        self,
        repo: RepoRef,
        sha: str,
        *,
        with_statuses: bool,
    ) -> list[CheckRunState]:
        owner, name = repo.full_name.split("/", 1)

        def pages(client: Github, url: str, key: str, **params: Any) -> list[dict[str, Any]]:
            items: list[dict[str, Any]] = []
            page = 1
            while True:
                _, data = client.requester.requestJsonAndCheck(
                    "GET", url, parameters={**params, "per_page": PAGE_SIZE, "page": page}
                )
                items.extend(data[key])
                if len(data[key]) < PAGE_SIZE or len(items) >= data["total_count"]:
                    return items
                page += 1

        def read(client: Github) -> list[CheckRunState]:
            # Reference: https://docs.github.com/rest/checks/runs#list-check-runs-for-a-git-reference
            # A run created while paging shifts the newest-first pages; keeping the newest
            # run per name and App makes a run seen twice harmless.
            runs = pages(
                client,
                f"/repos/{owner}/{name}/commits/{sha}/check-runs",
                "check_runs",
                filter="latest",
            )
            checks = latest_check_runs(runs)
            if with_statuses:
                # Reference: https://docs.github.com/rest/commits/statuses#get-the-combined-status-for-a-specific-reference
                statuses = pages(client, f"/repos/{owner}/{name}/commits/{sha}/status", "statuses")
                checks += sorted(
                    (status_check_state(s) for s in statuses), key=lambda check: check.name
                )
            return checks

        return self._repo_call(
            f"list the checks of {repo.full_name}@{sha[:7]}",
            repo,
            permissions={"checks": "read", **(STATUSES_READ if with_statuses else {})},
            fn=read,
        )
