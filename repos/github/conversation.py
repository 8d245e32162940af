"""The gateway's calls about conversations on a pull request: review threads (GraphQL),
replies, review dismissals, issue comments (docs/reviews.md, *Across pushes*).

A mixin of `GitHubGateway`: every call still goes through its retry loop."""

from __future__ import annotations

import time
from typing import Any
from urllib.parse import quote

from github import Github

from repos.github.clients import ROLE_TTL_SECONDS, cache_lock, roles_cache
from repos.github.repo import RepoRef
from repos.github.schemas import (
    IssueCommentInfo,
    ReviewCommentInfo,
    ThreadComment,
    ThreadInfo,
    review_comment_info,
)
from repos.github.transport import Transport

THREADS_QUERY = """
query($owner: String!, $name: String!, $number: Int!, $first: Int!, $cursor: String) {
  repository(owner: $owner, name: $name) {
    pullRequest(number: $number) {
      reviewThreads(first: $first, after: $cursor) {
        pageInfo { hasNextPage endCursor }
        nodes {
          id isResolved isOutdated path line
          resolvedBy { __typename login }
          comments(first: 100) {
            nodes { id fullDatabaseId body author { __typename login } }
          }
        }
      }
    }
  }
}"""

RESOLVE_MUTATION = (
    "mutation($threadId: ID!) { resolveReviewThread(input: {threadId: $threadId})"
    " { thread { id isResolved } } }"
)
UNRESOLVE_MUTATION = (
    "mutation($threadId: ID!) { unresolveReviewThread(input: {threadId: $threadId})"
    " { thread { id isResolved } } }"
)


def _thread(node: dict[str, Any]) -> ThreadInfo:
    return ThreadInfo(
        id=node["id"],
        is_resolved=node["isResolved"],
        is_outdated=node["isOutdated"],
        path=node.get("path") or "",
        line=node.get("line"),
        resolved_by=(node.get("resolvedBy") or {}).get("login"),
        resolved_by_type=(node.get("resolvedBy") or {}).get("__typename", ""),
        comments=[
            ThreadComment(
                id=int(c["fullDatabaseId"]),
                node_id=c["id"],
                body=c.get("body") or "",
                author_login=(c.get("author") or {}).get("login", ""),
                author_type=(c.get("author") or {}).get("__typename", ""),
            )
            for c in node["comments"]["nodes"]
        ],
    )


def _issue_comment(data: dict[str, Any]) -> IssueCommentInfo:
    user = data.get("user") or {}
    return IssueCommentInfo(
        id=data["id"],
        body=data.get("body") or "",
        html_url=data.get("html_url") or "",
        user_login=user.get("login") or "",
        user_type=user.get("type") or "",
    )


# Roles that may decide about the code: GitHub's "write access or above".
WRITE_ROLES = ("admin", "maintain", "write")


class ConversationCalls(Transport):
    def collaborator_role(
        self,
        repo: RepoRef,
        *,
        login: str,
    ) -> str:
        """`login`'s role on the repository: admin, maintain, write, triage, read or none
        (a custom role counts as its base). Asked of GitHub — a webhook's
        `author_association` is no answer: members whose membership is private arrive
        as CONTRIBUTOR — and remembered for a minute."""
        key = (self.creds.base_url, repo.full_name.lower(), login.lower())
        with cache_lock:
            cached = roles_cache.get(key)
        if cached is not None and time.monotonic() - cached[0] < ROLE_TTL_SECONDS:
            return cached[1]
        owner, name = repo.full_name.split("/", 1)

        def get(client: Github) -> str:
            # Reference: https://docs.github.com/rest/collaborators/collaborators#get-repository-permissions-for-a-user
            _, data = client.requester.requestJsonAndCheck(
                "GET", f"/repos/{owner}/{name}/collaborators/{quote(login, safe='')}/permission"
            )
            role = (data.get("role_name") or "").lower()
            legacy = (data.get("permission") or "none").lower()
            return role if role in (*WRITE_ROLES, "triage", "read") else legacy

        role = self._repo_call(
            f"read {login}'s permission on {repo.full_name}",
            repo,
            permissions={"metadata": "read"},
            fn=get,
        )
        with cache_lock:
            if len(roles_cache) > 4096:
                roles_cache.clear()
            roles_cache[key] = (time.monotonic(), role)
        return role

    def review_threads(
        self,
        repo: RepoRef,
        *,
        number: int,
    ) -> list[ThreadInfo]:
        """Every review thread of a pull request with its comments (GraphQL only: REST has
        no thread state). Match comments on their ids, never on logins."""
        owner, name = repo.full_name.split("/", 1)

        def get(client: Github) -> list[ThreadInfo]:
            # Reference: https://docs.github.com/graphql/reference/objects#pullrequestreviewthread
            threads: list[ThreadInfo] = []
            cursor = None
            while True:
                _, data = client.requester.graphql_query(
                    THREADS_QUERY,
                    {
                        "owner": owner,
                        "name": name,
                        "number": number,
                        "first": 100,
                        "cursor": cursor,
                    },
                )
                page = data["data"]["repository"]["pullRequest"]["reviewThreads"]
                threads.extend(_thread(node) for node in page["nodes"])
                if not page["pageInfo"]["hasNextPage"]:
                    return threads
                cursor = page["pageInfo"]["endCursor"]

        return self._repo_call(
            f"list the review threads of {repo.full_name}#{number}",
            repo,
            permissions={"pull_requests": "read"},
            fn=get,
        )

    def thread_resolve(
        self,
        repo: RepoRef,
        *,
        thread_id: str,
        resolved: bool = True,
    ) -> None:
        """Resolve a review thread (or, with `resolved=False`, reopen it). GitHub requires
        Contents: write for this (Pull requests: write is not enough) and refuses with
        HTTP 200 and a FORBIDDEN error."""

        def resolve(client: Github) -> None:
            # Reference: https://docs.github.com/graphql/reference/mutations#resolvereviewthread
            # Reference: https://docs.github.com/graphql/reference/mutations#unresolvereviewthread
            client.requester.graphql_query(
                RESOLVE_MUTATION if resolved else UNRESOLVE_MUTATION, {"threadId": thread_id}
            )

        self._repo_call(
            f"{'resolve' if resolved else 'reopen'} review thread {thread_id} on {repo.full_name}",
            repo,
            permissions={"pull_requests": "write", "contents": "write"},
            fn=resolve,
            write=True,
        )

    def comment_reply(
        self,
        repo: RepoRef,
        *,
        number: int,
        comment_id: int,
        body: str,
        marker: str,
    ) -> ReviewCommentInfo:
        """Reply in the thread of top-level review comment `comment_id`; `marker` in `body`
        finds a reply whose answer was lost instead of posting it twice."""
        owner, name = repo.full_name.split("/", 1)

        def post(client: Github) -> ReviewCommentInfo:
            # Reference: https://docs.github.com/rest/pulls/comments#create-a-reply-for-a-review-comment
            _, data = client.requester.requestJsonAndCheck(
                "POST",
                f"/repos/{owner}/{name}/pulls/{number}/comments/{comment_id}/replies",
                input={"body": body},
            )
            return review_comment_info(data)

        def find(client: Github) -> ReviewCommentInfo | None:
            for comment in self._pull_list(client, repo.full_name, number, "comments"):
                if (
                    comment.get("in_reply_to_id") == comment_id
                    and marker in (comment.get("body") or "")
                    and self.posted_by_us(comment.get("user"))
                ):
                    return review_comment_info(comment)
            return None

        return self._repo_call(
            f"reply to comment {comment_id} on {repo.full_name}#{number}",
            repo,
            permissions={"pull_requests": "write"},
            fn=post,
            recover=find,
            creates=True,
        )

    def review_dismiss(
        self,
        repo: RepoRef,
        *,
        number: int,
        review_id: int,
        message: str,
    ) -> None:
        owner, name = repo.full_name.split("/", 1)

        def put(client: Github) -> None:
            # Reference: https://docs.github.com/rest/pulls/reviews#dismiss-a-review-for-a-pull-request
            client.requester.requestJsonAndCheck(
                "PUT",
                f"/repos/{owner}/{name}/pulls/{number}/reviews/{review_id}/dismissals",
                input={"message": message, "event": "DISMISS"},
            )

        self._repo_call(
            f"dismiss review {review_id} on {repo.full_name}#{number}",
            repo,
            permissions={"pull_requests": "write"},
            fn=put,
            write=True,
        )

    def issue_comment_create(
        self,
        repo: RepoRef,
        *,
        number: int,
        body: str,
        marker: str,
    ) -> IssueCommentInfo:
        owner, name = repo.full_name.split("/", 1)
        url = f"/repos/{owner}/{name}/issues/{number}/comments"

        def post(client: Github) -> IssueCommentInfo:
            # Reference: https://docs.github.com/rest/issues/comments#create-an-issue-comment
            _, data = client.requester.requestJsonAndCheck("POST", url, input={"body": body})
            return _issue_comment(data)

        def find(client: Github) -> IssueCommentInfo | None:
            page = 1
            while True:
                _, data = client.requester.requestJsonAndCheck(
                    "GET", url, parameters={"per_page": 100, "page": page}
                )
                for item in data:
                    if marker in (item.get("body") or "") and self.posted_by_us(item.get("user")):
                        return _issue_comment(item)
                if len(data) < 100:
                    return None
                page += 1

        return self._repo_call(
            f"comment on {repo.full_name}#{number}",
            repo,
            permissions={"pull_requests": "write"},
            fn=post,
            recover=find,
            creates=True,
        )

    def issue_comments_list(
        self,
        repo: RepoRef,
        *,
        number: int,
    ) -> list[IssueCommentInfo]:
        """Every comment on a pull request's conversation, oldest first, with its author
        (Tasuku trusts a marker only in its own bot's comments)."""
        owner, name = repo.full_name.split("/", 1)
        url = f"/repos/{owner}/{name}/issues/{number}/comments"

        def get(client: Github) -> list[IssueCommentInfo]:
            # Reference: https://docs.github.com/rest/issues/comments#list-issue-comments
            found: list[IssueCommentInfo] = []
            page = 1
            while True:
                _, data = client.requester.requestJsonAndCheck(
                    "GET", url, parameters={"per_page": 100, "page": page}
                )
                found.extend(_issue_comment(item) for item in data)
                if len(data) < 100:
                    return found
                page += 1

        return self._repo_call(
            f"list the comments of {repo.full_name}#{number}",
            repo,
            permissions={"pull_requests": "read"},
            fn=get,
        )

    def issue_comment_update(
        self,
        repo: RepoRef,
        *,
        comment_id: int,
        body: str,
    ) -> IssueCommentInfo:
        """Edit one of Tasuku's own comments on a pull request's conversation (GitHub lets
        only its author edit it). A PATCH is safe to repeat: the same body twice is one
        edit."""
        owner, name = repo.full_name.split("/", 1)

        def patch(client: Github) -> IssueCommentInfo:
            # Reference: https://docs.github.com/rest/issues/comments#update-an-issue-comment
            _, data = client.requester.requestJsonAndCheck(
                "PATCH",
                f"/repos/{owner}/{name}/issues/comments/{comment_id}",
                input={"body": body},
            )
            return _issue_comment(data)

        return self._repo_call(
            f"edit comment {comment_id} on {repo.full_name}",
            repo,
            permissions={"pull_requests": "write"},
            fn=patch,
            write=True,
        )
