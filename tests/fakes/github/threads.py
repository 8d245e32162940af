"""Routes: review threads (GraphQL), replies, review dismissals, issue comments, review
requests.

Thread resolution exists only in GraphQL and needs Contents: write on the token; a
GraphQL error comes back with HTTP 200 and an `errors` list, as GitHub answers. A Bot
author's GraphQL `login` has no `[bot]` suffix (REST's has it).
"""

from __future__ import annotations

import base64
import time
from typing import Any

from tests.fakes.github.contract import selection
from tests.fakes.github.pulls import commentable
from tests.fakes.github.state import (
    PERMISSION_LEVELS,
    HTTPError,
    Repo,
    Request,
    Response,
    iso,
)


def _graphql_error(
    message: str, kind: str = "FORBIDDEN", path: str | None = None
) -> dict[str, Any]:
    error: dict[str, Any] = {
        "type": kind,
        "message": message,
        "locations": [{"line": 1, "column": 1}],
    }
    if path:
        error["path"] = [path]
    return error


class ThreadsRoutes:
    # --- GraphQL ---

    def _graphql(self, request: Request) -> Response:
        token = request.token
        assert token is not None
        body = request.body if isinstance(request.body, dict) else {}
        query = body.get("query") or ""
        variables = body.get("variables") or {}
        if not query:
            raise HTTPError(400, "A query attribute must be specified and must be a string.")
        if "resolveReviewThread" in query or "unresolveReviewThread" in query:
            answer = self._graphql_resolve(
                token, variables, resolve="unresolveReviewThread" not in query
            )
        elif "reviewThreads" in query:
            answer = self._graphql_threads(token, variables)
        else:
            answer = None
        if answer is not None:
            status, payload, headers = answer
            if isinstance(payload, dict) and "data" in payload and "errors" not in payload:
                # GitHub answers exactly the fields the document selects, no more.
                payload = {**payload, "data": selection(query, variables, payload["data"])}
            return status, payload, headers
        return (
            200,
            {
                "errors": [
                    _graphql_error("This fake GitHub does not answer that query.", "NOT_SUPPORTED")
                ]
            },
            {},
        )

    def _graphql_repo(self, token, owner: str, name: str) -> Repo | None:
        repo = self.repos.get(f"{owner}/{name}")  # type: ignore[attr-defined]
        if token.login is not None:
            private = repo is not None and repo.private and token.login not in repo.collaborators
            return None if repo is None or private else repo
        if repo is None or token.installation_id not in repo.installation_ids:
            return None
        if token.repository_ids is not None and repo.id not in token.repository_ids:
            return None
        return repo

    def _graphql_author(self, user: dict[str, Any]) -> dict[str, Any]:
        login = user["login"]
        if user.get("type") == "Bot":
            return {"__typename": "Bot", "login": login.removesuffix("[bot]")}
        return {"__typename": "User", "login": login}

    def _thread_json(self, repo: Repo, number: int, thread: dict[str, Any]) -> dict[str, Any]:
        first = repo.review_comments[thread["first"]]
        comments = [first] + sorted(
            (c for c in repo.review_comments.values() if c.get("in_reply_to_id") == first["id"]),
            key=lambda c: c["id"],
        )
        pull = repo.pulls[number]
        files = {f.filename: f for f in self._files_of(repo, pull)}  # type: ignore[attr-defined]
        file = files.get(first["path"])
        still = file is not None and first["line"] in commentable(file.patch).get(first["side"], {})
        outdated = first["commit_id"] != pull.head_sha and not still
        return {
            "id": thread["id"],
            "isResolved": thread["isResolved"],
            "isOutdated": outdated,
            "path": first["path"],
            "line": None if outdated else first["line"],
            "originalLine": first["original_line"],
            "diffSide": first["side"],
            # An Actor: a bot's login has no "[bot]"; its typename tells it from a person.
            "resolvedBy": {
                "__typename": thread.get("resolvedByType") or "User",
                "login": thread["resolvedBy"],
            }
            if thread["resolvedBy"]
            else None,
            "viewerCanResolve": True,
            "comments": {
                "totalCount": len(comments),
                "nodes": [
                    {
                        "id": c["node_id"],
                        "databaseId": c["id"],
                        "fullDatabaseId": str(c["id"]),
                        "body": c["body"],
                        "author": self._graphql_author(c["user"]),
                        "createdAt": c["created_at"],
                    }
                    for c in comments[:100]
                ],
            },
        }

    def _graphql_threads(self, token, variables: dict[str, Any]) -> Response:
        repo = self._graphql_repo(token, variables.get("owner", ""), variables.get("name", ""))
        if repo is None:
            return 200, {"data": {"repository": None}, "errors": [_graphql_error(
                f"Could not resolve to a Repository with the name '{variables.get('owner')}/{variables.get('name')}'.",
                "NOT_FOUND", "repository")]}, {}  # fmt: skip
        number = int(variables.get("number") or 0)
        if number not in repo.pulls:
            return 200, {"data": {"repository": {"pullRequest": None}}, "errors": [_graphql_error(
                f"Could not resolve to a PullRequest with the number of {number}.", "NOT_FOUND", "pullRequest")]}, {}  # fmt: skip
        first = int(variables.get("first") or 100)
        if not 1 <= first <= 100:
            return (
                200,
                {
                    "errors": [
                        _graphql_error("`first` must be between 1 and 100.", "INVALID_ARGUMENTS")
                    ]
                },
                {},
            )
        threads = sorted(
            (
                t
                for t in repo.threads.values()
                if repo.review_comments[t["first"]]["_number"] == number
            ),
            key=lambda t: t["first"],
        )
        start = (
            int(base64.b64decode(variables["cursor"]).decode()) if variables.get("cursor") else 0
        )
        page = threads[start : start + first]
        end = start + len(page)
        data = {
            "repository": {
                "pullRequest": {
                    "reviewThreads": {
                        "totalCount": len(threads),
                        "pageInfo": {
                            "hasNextPage": end < len(threads),
                            "endCursor": base64.b64encode(str(end).encode()).decode()
                            if page
                            else None,
                        },
                        "nodes": [self._thread_json(repo, number, t) for t in page],
                    }
                }
            }
        }
        return 200, {"data": data}, {}

    def _graphql_resolve(self, token, variables: dict[str, Any], *, resolve: bool) -> Response:
        field = "resolveReviewThread" if resolve else "unresolveReviewThread"
        thread_id = variables.get("threadId") or (variables.get("input") or {}).get("threadId")
        found = None
        for repo in self.repos.values():  # type: ignore[attr-defined]
            if thread_id in repo.threads:
                found = repo
        if found is None or self._graphql_repo(token, found.owner, found.name) is None:
            return 200, {"data": {field: None}, "errors": [_graphql_error(
                f"Could not resolve to a node with the global id of '{thread_id}'", "NOT_FOUND", field)]}, {}  # fmt: skip
        granted = token.permissions.get("contents")
        if token.login is not None:  # a person: with write access to the repository
            role = found.collaborators.get(token.login)
            granted = "write" if role in ("admin", "maintain", "write") else None
        if not granted or PERMISSION_LEVELS[granted] < PERMISSION_LEVELS["write"]:
            return 200, {"data": {field: None}, "errors": [_graphql_error(
                "Resource not accessible by integration", "FORBIDDEN", field)]}, {}  # fmt: skip
        thread = found.threads[thread_id]
        thread["isResolved"] = resolve
        thread["resolvedBy"] = self._bot_login(token) if resolve else None
        thread["resolvedByType"] = "Bot" if resolve else None
        return 200, {"data": {field: {"thread": {"id": thread_id, "isResolved": resolve}}}}, {}

    def _bot_login(self, token) -> str:
        if token.login is not None:
            return token.login
        app = self.apps[self.installations[token.installation_id].app_id]  # type: ignore[attr-defined]
        return app.slug

    # --- REST: replies, dismissals, issue comments, review requests ---

    def _reply(self, request: Request) -> Response:
        repo = self._repo_for_token(request, "pull_requests", "write")  # type: ignore[attr-defined]
        pull = self._pull(request, repo)  # type: ignore[attr-defined]
        body = request.body if isinstance(request.body, dict) else {}
        if not body.get("body"):
            raise HTTPError(
                422,
                "Validation Failed",
                errors=[
                    {
                        "resource": "PullRequestReviewComment",
                        "field": "body",
                        "code": "missing_field",
                    }
                ],
            )
        parent = repo.review_comments.get(int(request.params["id"]))
        if parent is None or parent["_number"] != pull.number:
            raise HTTPError(404, "Not Found")
        if parent.get("in_reply_to_id"):
            raise HTTPError(
                422, "Unprocessable Entity", errors=["Replies to replies are not supported."]
            )
        comment = self._comment_add(
            repo, pull.number, self._bot_user(request), body["body"], parent
        )  # type: ignore[attr-defined]
        return 201, self._comment_json(repo, comment), {}  # type: ignore[attr-defined]

    def _comment_add(self, repo: Repo, number: int, user: dict[str, Any], text: str, parent: dict[str, Any] | None,
                     *, path: str | None = None, line: int | None = None, side: str = "RIGHT") -> dict[str, Any]:  # fmt: skip
        comment_id = self.next_id()  # type: ignore[attr-defined]
        now = iso(time.time())
        pull = repo.pulls[number]
        source = parent or {
            "path": path,
            "line": line,
            "side": side,
            "start_line": None,
            "start_side": None,
        }
        comment = {
            "id": comment_id,
            "node_id": f"PRRC_{comment_id}",
            "pull_request_review_id": None,
            "user": user,
            "body": text,
            "commit_id": pull.head_sha,
            "original_commit_id": pull.head_sha,
            "line": source["line"],
            "original_line": source["line"],
            "side": source["side"],
            "start_line": source.get("start_line"),
            "original_start_line": source.get("start_line"),
            "start_side": source.get("start_side"),
            "path": source["path"],
            "subject_type": "line",
            "diff_hunk": "",
            "author_association": "NONE" if user.get("type") == "Bot" else "MEMBER",
            "created_at": now,
            "updated_at": now,
            "_number": number,
        }
        if parent is not None:
            comment["in_reply_to_id"] = parent["id"]
        else:
            repo.threads[f"PRRT_{comment_id}"] = {"id": f"PRRT_{comment_id}", "first": comment_id,
                                                   "isResolved": False, "resolvedBy": None}  # fmt: skip
        # A comment outside a review still belongs to a (single-comment) review on GitHub.
        review_id = self.next_id()  # type: ignore[attr-defined]
        repo.reviews[review_id] = {"id": review_id, "node_id": f"PRR_{review_id}", "user": user, "body": "",
                                   "state": "COMMENTED", "commit_id": pull.head_sha, "submitted_at": now,
                                   "author_association": comment["author_association"], "_number": number}  # fmt: skip
        comment["pull_request_review_id"] = review_id
        repo.review_comments[comment_id] = comment
        return comment

    def _dismiss_review(self, request: Request) -> Response:
        repo = self._repo_for_token(request, "pull_requests", "write")  # type: ignore[attr-defined]
        pull = self._pull(request, repo)  # type: ignore[attr-defined]
        review = self._review(request, repo, pull)  # type: ignore[attr-defined]
        body = request.body if isinstance(request.body, dict) else {}
        if not body.get("message"):
            raise HTTPError(
                422,
                "Validation Failed",
                errors=[
                    {"resource": "PullRequestReview", "field": "message", "code": "missing_field"}
                ],
            )
        if review["state"] not in ("APPROVED", "CHANGES_REQUESTED"):
            raise HTTPError(
                422,
                "Unprocessable Entity",
                errors=[f"Can not dismiss a {review['state'].lower()} pull request review"],
            )
        review["state"] = "DISMISSED"
        review["_dismissal_message"] = body["message"]
        return 200, self._review_json(repo, review), {}  # type: ignore[attr-defined]

    def _issue_comment_json(self, repo: Repo, comment: dict[str, Any]) -> dict[str, Any]:
        url = self.url  # type: ignore[attr-defined]
        return {**{k: v for k, v in comment.items() if not k.startswith("_")},
                "url": f"{url}/repos/{repo.full_name}/issues/comments/{comment['id']}",
                "html_url": f"{url}/{repo.full_name}/pull/{comment['_number']}#issuecomment-{comment['id']}",
                "issue_url": f"{url}/repos/{repo.full_name}/issues/{comment['_number']}"}  # fmt: skip

    def _issue_repo(self, request: Request, level: str) -> Repo:
        """Comments on a pull request's conversation need Issues or Pull requests."""
        try:
            return self._repo_for_token(request, "pull_requests", level)  # type: ignore[attr-defined]
        except HTTPError as exc:
            if exc.status != 403:
                raise
            return self._repo_for_token(request, "issues", level)  # type: ignore[attr-defined]

    def _create_issue_comment(self, request: Request) -> Response:
        repo = self._issue_repo(request, "write")
        number = int(request.params["number"])
        if number not in repo.pulls:
            raise HTTPError(404, "Not Found")
        body = request.body if isinstance(request.body, dict) else {}
        if not body.get("body"):
            raise HTTPError(
                422,
                "Validation Failed",
                errors=[{"resource": "IssueComment", "field": "body", "code": "missing_field"}],
            )
        if len(body["body"]) > 65536:
            raise HTTPError(
                422, "Validation Failed", errors=["Body is too long (maximum is 65536 characters)"]
            )
        comment_id = self.next_id()  # type: ignore[attr-defined]
        now = iso(time.time())
        comment = {"id": comment_id, "node_id": f"IC_{comment_id}", "user": self._bot_user(request),  # type: ignore[attr-defined]
                   "body": body["body"], "author_association": "NONE", "created_at": now, "updated_at": now,
                   "_number": number}  # fmt: skip
        repo.issue_comments[comment_id] = comment
        return 201, self._issue_comment_json(repo, comment), {}

    def _update_issue_comment(self, request: Request) -> Response:
        """PATCH /repos/{owner}/{repo}/issues/comments/{comment_id}: GitHub lets the
        comment's author edit it (an App: its own bot's comments); `body` is required."""
        repo = self._issue_repo(request, "write")
        comment = repo.issue_comments.get(int(request.params["id"]))
        if comment is None:
            raise HTTPError(404, "Not Found")
        if comment["user"]["login"] != self._bot_user(request)["login"]:  # type: ignore[attr-defined]
            raise HTTPError(403, "Resource not accessible by integration")
        body = request.body if isinstance(request.body, dict) else {}
        if not isinstance(body.get("body"), str) or not body["body"]:
            raise HTTPError(
                422,
                "Validation Failed",
                errors=[{"resource": "IssueComment", "field": "body", "code": "missing_field"}],
            )
        if len(body["body"]) > 65536:
            raise HTTPError(
                422, "Validation Failed", errors=["Body is too long (maximum is 65536 characters)"]
            )
        comment["body"] = body["body"]
        comment["updated_at"] = iso(time.time())
        return 200, self._issue_comment_json(repo, comment), {}

    def _list_issue_comments(self, request: Request) -> Response:
        repo = self._issue_repo(request, "read")
        number = int(request.params["number"])
        items = [self._issue_comment_json(repo, c) for c in sorted(repo.issue_comments.values(), key=lambda c: c["id"])
                 if c["_number"] == number]  # fmt: skip
        chunk, headers = self._paginate(request, items)  # type: ignore[attr-defined]
        return 200, chunk, headers

    def _remove_requested_reviewers(self, request: Request) -> Response:
        repo = self._repo_for_token(request, "pull_requests", "write")  # type: ignore[attr-defined]
        pull = self._pull(request, repo)  # type: ignore[attr-defined]
        body = request.body if isinstance(request.body, dict) else {}
        if "reviewers" not in body:
            raise HTTPError(
                422,
                "Validation Failed",
                errors=[{"resource": "PullRequest", "field": "reviewers", "code": "missing_field"}],
            )
        pull.requested_reviewers = [
            r for r in pull.requested_reviewers if r not in body["reviewers"]
        ]
        return 200, self._pull_json(repo, pull), {}  # type: ignore[attr-defined]

    # --- helpers for tests: what people do on GitHub ---

    def person_comment(self, full_name: str, number: int, *, login: str, body: str, path: str | None = None,
                       line: int | None = None, reply_to: int | None = None) -> dict[str, Any]:  # fmt: skip
        """A person comments on a line (starting a thread) or replies in a thread."""
        with self.lock:  # type: ignore[attr-defined]
            repo = self.repos[full_name]  # type: ignore[attr-defined]
            parent = repo.review_comments[reply_to] if reply_to else None
            user = self._user_json(login, "User", abs(hash(login)) % 10**6)  # type: ignore[attr-defined]
            return self._comment_add(repo, number, user, body, parent, path=path, line=line)

    def person_review(
        self,
        full_name: str,
        number: int,
        *,
        login: str,
        body: str,
        state: str = "COMMENTED",
        association: str = "MEMBER",
    ) -> dict[str, Any]:
        """A person submits a review (no line comments) on the pull request's head;
        returns it as `GET …/reviews` lists it."""
        assert state in ("COMMENTED", "APPROVED", "CHANGES_REQUESTED"), state
        with self.lock:  # type: ignore[attr-defined]
            repo = self.repos[full_name]  # type: ignore[attr-defined]
            pull = repo.pulls[number]
            review_id = self.next_id()  # type: ignore[attr-defined]
            review = {
                "id": review_id,
                "node_id": f"PRR_{review_id}",
                "user": self._user_json(login, "User", abs(hash(login)) % 10**6),  # type: ignore[attr-defined]
                "body": body,
                "state": state,
                "commit_id": pull.head_sha,
                "submitted_at": iso(time.time()),
                "author_association": association,
                "_number": number,
            }
            repo.reviews[review_id] = review
            return self._review_json(repo, review)  # type: ignore[attr-defined]

    def person_resolves(self, full_name: str, thread_id: str, *, login: str) -> None:
        with self.lock:  # type: ignore[attr-defined]
            thread = self.repos[full_name].threads[thread_id]  # type: ignore[attr-defined]
            thread.update(isResolved=True, resolvedBy=login, resolvedByType="User")

    def threads_of(self, full_name: str, number: int) -> list[dict[str, Any]]:
        """Test helper: each thread with its comments (oldest first)."""
        with self.lock:  # type: ignore[attr-defined]
            repo = self.repos[full_name]  # type: ignore[attr-defined]
            found = []
            for thread in sorted(repo.threads.values(), key=lambda t: t["first"]):
                first = repo.review_comments[thread["first"]]
                if first["_number"] != number:
                    continue
                replies = sorted((c for c in repo.review_comments.values() if c.get("in_reply_to_id") == first["id"]),
                                 key=lambda c: c["id"])  # fmt: skip
                found.append({**thread, "comments": [first, *replies]})
            return found

    def issue_comments_of(self, full_name: str, number: int) -> list[dict[str, Any]]:
        with self.lock:  # type: ignore[attr-defined]
            repo = self.repos[full_name]  # type: ignore[attr-defined]
            return [
                c
                for c in sorted(repo.issue_comments.values(), key=lambda c: c["id"])
                if c["_number"] == number
            ]
