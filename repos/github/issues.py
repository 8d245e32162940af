"""Issues, read-only: what the GitHub issue connector (repos/connectors/github_issue.py)
reads of the issue a pull request says it fixes."""

from __future__ import annotations

from github import Github

from repos.github.errors import GitHubError
from repos.github.repo import RepoRef
from repos.github.schemas import IssueInfo
from repos.github.transport import Transport

ISSUES_READ = {"issues": "read"}


class IssueCalls(Transport):
    def issue_get(self, repo: RepoRef, *, number: int) -> IssueInfo:
        """Issue `number` of `repo` (a pull request's number reads as its issue). The
        token asks for Issues: read only, and only of `repo`'s id when it is known;
        an installation that was never granted Issues is a permanent error that says so
        (a token asking for it would be refused)."""
        if not self._granted(repo.installation_id, ISSUES_READ):
            raise GitHubError(
                "Tasuku's GitHub App may not read issues: give it the repository permission "
                "Issues: Read-only.",
                permanent=True,
                code="github-permission",
            )
        owner, name = repo.full_name.split("/", 1)

        def get(client: Github) -> IssueInfo:
            # Reference: https://docs.github.com/rest/issues/issues#get-an-issue
            _, data = client.requester.requestJsonAndCheck(
                "GET", f"/repos/{owner}/{name}/issues/{number}"
            )
            return IssueInfo(
                number=data["number"],
                title=data.get("title") or "",
                state=data.get("state") or "",
                labels=[
                    label if isinstance(label, str) else str(label.get("name") or "")
                    for label in data.get("labels") or []
                ],
                body=data.get("body") or "",
                html_url=data.get("html_url") or "",
                pull_request=data.get("pull_request") is not None,
            )

        return self._repo_call(
            f"read issue {repo.full_name}#{number}",
            repo,
            permissions=ISSUES_READ,
            fn=get,
            exact=True,  # a connector's read: none of the review's permissions
        )
