"""The built-in `github_issue` connector: an issue of the pull request's repository (or
of another repository of the same installation), read through the gateway with the
App's installation token, Issues: read only. The answer is the issue's title, state,
labels and body, bounded."""

from __future__ import annotations

from typing import Any

from repos.connectors.errors import Failed, Refused
from repos.github import GitHubError, GitHubGateway, RepoRef


def github_issue(
    arguments: dict[str, Any],
    *,
    repo: RepoRef | None,
    gateway: GitHubGateway | None,
    max_chars: int,
) -> str:
    if repo is None or gateway is None:
        raise Refused("This review is not of a pull request on GitHub: there is no issue to read.")
    repository = str(arguments.get("repository") or repo.full_name)
    number = int(arguments["number"])
    same = repository.lower() == repo.full_name.lower()
    try:
        if not same and gateway.repository_installation_id(repository) != repo.installation_id:
            # Only what the App reaches through this pull request's installation: another
            # account's repositories are not this review's to read.
            raise Refused(
                f"{repository} is not a repository of this pull request's installation: "
                "only those can be read."
            )
        issue = gateway.issue_get(repo.other(repository), number=number)
    except GitHubError as exc:
        if exc.status == 404:
            raise Failed(f"{repository} has no issue #{number} that Tasuku can see.") from exc
        raise Failed(f"Could not read it from GitHub: {exc.message}") from exc
    body = issue.body
    if len(body) > max_chars:
        body = body[:max_chars] + f"\n… ({len(issue.body) - max_chars} more characters not shown)"
    kind = "pull request" if issue.pull_request else "issue"
    return "\n".join(
        [
            f"{repository}#{issue.number} ({kind}, {issue.state}): {issue.title}",
            f"Labels: {', '.join(issue.labels) or '(none)'}",
            f"URL: {issue.html_url}",
            "",
            body or "(no description)",
        ]
    )
