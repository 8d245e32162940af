"""Issues on the fake GitHub, for the GitHub issue connector (repos/connectors/).

- `GET /repos/{owner}/{repo}/issues/{issue_number}` answers as GitHub's "get an issue"
  does: an issue a test added (`add_issue`), or a pull request seen as an issue (GitHub
  numbers both in one sequence; a pull request's issue carries `pull_request`), else 404.
  It needs Issues: read, or Pull requests: read for a pull request's number; a token
  scoped to other repositories, or of another installation, gets 404, as on GitHub.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from tests.fakes.github import shapes
from tests.fakes.github.state import HTTPError, Repo, Request, Response


@dataclass
class Issue:
    number: int
    title: str
    body: str | None = ""
    state: str = "open"  # open | closed
    labels: list[str] = field(default_factory=list)
    author_login: str = "octocat"
    id: int = 0


class IssuesRoutes:
    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)  # type: ignore[call-arg]
        self.issues: dict[str, dict[int, Issue]] = {}
        owner_repo = r"/repos/(?P<owner>[^/]+)/(?P<repo>[^/]+)"
        table = [("GET", owner_repo + r"/issues/(?P<number>\d+)", "token", self._get_issue)]
        self.routes += [(m, re.compile(p), a, fn) for m, p, a, fn in table]  # type: ignore[attr-defined]

    def reset(self) -> None:
        super().reset()  # type: ignore[misc]
        with self.lock:  # type: ignore[attr-defined]
            self.issues = {}

    def add_issue(self, full_name: str, issue: Issue) -> Issue:
        with self.lock:  # type: ignore[attr-defined]
            issue.id = issue.id or self.next_id()  # type: ignore[attr-defined]
            self.issues.setdefault(full_name, {})[issue.number] = issue
            return issue

    def _get_issue(self, request: Request) -> Response:
        number = int(request.params["number"])
        full_name = f"{request.params['owner']}/{request.params['repo']}"
        issue = self.issues.get(full_name, {}).get(number)
        if issue is not None:
            repo = self._repo_for_token(request, "issues", "read")  # type: ignore[attr-defined]
            return 200, self._issue_json(repo, issue), {}
        repo = self._issue_repo(request, "read")  # type: ignore[attr-defined]
        pull = repo.pulls.get(number)
        if pull is None:
            raise HTTPError(404, "Not Found")
        as_issue = Issue(number=pull.number, title=pull.title, body=pull.body,
                         state="closed" if pull.merged else pull.state,
                         author_login=pull.author_login, id=pull.id)  # fmt: skip
        data = self._issue_json(repo, as_issue)
        html = f"{self.url}/{repo.full_name}/pull/{pull.number}"  # type: ignore[attr-defined]
        data["html_url"] = html
        data["pull_request"] = {
            "url": f"{self.url}/repos/{repo.full_name}/pulls/{pull.number}",  # type: ignore[attr-defined]
            "html_url": html,
            "diff_url": f"{html}.diff",
            "patch_url": f"{html}.patch",
            "merged_at": None,
        }
        return 200, data, {}

    def _issue_json(self, repo: Repo, issue: Issue) -> dict[str, Any]:
        """An `issue`, whole (every field GitHub's description requires)."""
        base = self.url  # type: ignore[attr-defined]
        api = f"{base}/repos/{repo.full_name}"
        url = f"{api}/issues/{issue.number}"
        return {
            "id": issue.id,
            "node_id": f"I_{issue.id}",
            "url": url,
            "repository_url": api,
            "labels_url": f"{url}/labels{{/name}}",
            "comments_url": f"{url}/comments",
            "events_url": f"{url}/events",
            "html_url": f"{base}/{repo.full_name}/issues/{issue.number}",
            "number": issue.number,
            "state": issue.state,
            "state_reason": "completed" if issue.state == "closed" else None,
            "title": issue.title,
            "body": issue.body,
            "user": shapes.user(base, issue.author_login, "User", 583231),
            "labels": [
                {
                    "id": 7_000_000 + i,
                    "node_id": f"LA_{i}",
                    "url": f"{api}/labels/{name}",
                    "name": name,
                    "description": None,
                    "color": "ededed",
                    "default": False,
                }
                for i, name in enumerate(issue.labels)
            ],
            "assignee": None,
            "assignees": [],
            "milestone": None,
            "locked": False,
            "active_lock_reason": None,
            "comments": 0,
            "closed_at": shapes.CREATED_AT if issue.state == "closed" else None,
            "created_at": shapes.CREATED_AT,
            "updated_at": shapes.CREATED_AT,
            "author_association": "CONTRIBUTOR",
        }
