"""`GitHubGateway`: one method per GitHub call, each through one retry loop.

The composition: its own calls (pull requests, check runs, reviews) here, the rest in the
mixins by subject (checks.py, conversation.py, commits.py, actions.py, hooks.py,
issues.py, branches.py), all over
`Transport` (transport.py: tokens, clients, the retry loop). A call about one repository
takes it first, as one value (`RepoRef`, repo.py): `gateway.pull_request_get(repo,
number=7)`."""

from __future__ import annotations

import logging
import time
from datetime import UTC, datetime
from typing import Any

from github import Github, GithubException

from repos.github.actions import ActionsCalls
from repos.github.branches import BranchCalls
from repos.github.checks import CheckCalls
from repos.github.clients import REPOSITORY_TTL_SECONDS, cache_lock, repository_cache
from repos.github.commits import CommitCalls
from repos.github.config import credentials, retry_policy
from repos.github.conversation import ConversationCalls
from repos.github.hooks import HookCalls
from repos.github.issues import IssueCalls
from repos.github.repo import RepoRef
from repos.github.schemas import (
    CheckRunInfo,
    CheckRunOutput,
    PullRequestInfo,
    RepositoryInfo,
    ReviewCommentInfo,
    ReviewInfo,
    check_run_info,
    format_time,
    review_comment_info,
    review_info,
)
from repos.github.transport import Transport

logger = logging.getLogger(__name__)


class GitHubGateway(
    ConversationCalls,
    CheckCalls,
    CommitCalls,
    ActionsCalls,
    HookCalls,
    IssueCalls,
    BranchCalls,
    Transport,
):
    """One App's view of GitHub. Cheap to create; tokens and clients are cached per
    process (never on disk: they are credentials)."""

    def pull_request_get(self, repo: RepoRef, *, number: int) -> PullRequestInfo:
        def get(client: Github) -> PullRequestInfo:
            # Reference: https://docs.github.com/rest/pulls/pulls#get-a-pull-request
            pr = client.get_repo(repo.full_name).get_pull(number)
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
                body=pr.body or "",
                # The raw answer (no further request): null once a fork is deleted.
                head_repository=((pr.raw_data.get("head") or {}).get("repo") or {}).get(
                    "full_name", ""
                ),
            )

        return self._repo_call(
            f"read pull request {repo.full_name}#{number}",
            repo,
            permissions={"pull_requests": "read"},
            fn=get,
        )

    def check_run_create(
        self,
        repo: RepoRef,
        *,
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
            return check_run_info(client.get_repo(repo.full_name).create_check_run(**params))

        def find(client: Github) -> CheckRunInfo | None:
            return self._check_run_find(client, repo.full_name, head_sha, name, external_id)

        return self._repo_call(
            f"create check run {name!r} on {repo.full_name}@{head_sha[:7]}",
            repo,
            permissions={"checks": "write"},
            fn=create,
            recover=find,
            creates=True,
        )

    def check_run_find(
        self,
        repo: RepoRef,
        *,
        head_sha: str,
        name: str,
        external_id: str,
    ) -> CheckRunInfo | None:
        """This App's check run named `name` on `head_sha` carrying `external_id`, if any."""
        return self._repo_call(
            f"find check run {name!r} on {repo.full_name}@{head_sha[:7]}",
            repo,
            permissions={"checks": "read"},
            fn=lambda client: self._check_run_find(
                client, repo.full_name, head_sha, name, external_id
            ),
        )

    def _check_run_find(
        self, client: Github, full_name: str, head_sha: str, name: str, external_id: str
    ) -> CheckRunInfo | None:
        # Reference: https://docs.github.com/rest/checks/runs#list-check-runs-for-a-git-reference
        # Filtered by this App's id: any App can create a check run of the same name and
        # external id on the commit, and Tasuku must never take another's for its own.
        owner, repo = full_name.split("/", 1)
        page = 1
        while True:
            _, data = client.requester.requestJsonAndCheck(
                "GET",
                f"/repos/{owner}/{repo}/commits/{head_sha}/check-runs",
                parameters={
                    "check_name": name,
                    "filter": "all",
                    "app_id": self.creds.app_id,
                    "per_page": 100,
                    "page": page,
                },
            )
            runs = data.get("check_runs") or []
            for run in runs:
                if run.get("external_id") == external_id:
                    return CheckRunInfo.model_validate(run)
            if len(runs) < 100:
                return None
            page += 1

    def check_run_update(
        self,
        repo: RepoRef,
        *,
        check_run_id: int,
        status: str | None = None,
        conclusion: str | None = None,
        output: CheckRunOutput | None = None,
        details_url: str | None = None,
        actions: list[dict[str, str]] | None = None,
    ) -> CheckRunInfo:
        """Update a check run (`actions`: the buttons it offers, at most 3, each a
        `label`, `description` and `identifier`). A PATCH sets the same fields again when
        repeated, so it is retried like a read."""
        body: dict[str, Any] = {}
        if status:
            body["status"] = status
        if conclusion:
            body["conclusion"] = conclusion
            body["completed_at"] = format_time(datetime.now(UTC))
        if output:
            body["output"] = output.model_dump(exclude_none=True)
        if details_url:
            body["details_url"] = details_url
        if actions is not None:
            body["actions"] = actions

        def update(client: Github) -> CheckRunInfo:
            # Reference: https://docs.github.com/rest/checks/runs#update-a-check-run
            # Through the requester: PyGithub's CheckRun.edit needs the run fetched first.
            owner, name = repo.full_name.split("/", 1)
            _, data = client.requester.requestJsonAndCheck(
                "PATCH", f"/repos/{owner}/{name}/check-runs/{check_run_id}", input=body
            )
            return CheckRunInfo.model_validate(data)

        return self._repo_call(
            f"update check run {check_run_id} on {repo.full_name}",
            repo,
            permissions={"checks": "write"},
            fn=update,
            write=True,
        )

    def repository_get(self, repo: RepoRef) -> RepositoryInfo:
        """The repository as GitHub describes it (kept for REPOSITORY_TTL_SECONDS: a
        review reads it for its clone URL, which a rename or a transfer changes rarely,
        and a stale one fails the clone, which is retried with a fresh read)."""
        key = (self.creds.base_url, self.creds.app_id, repo.installation_id, repo.full_name.lower())
        with cache_lock:
            cached = repository_cache.get(key)
        if cached and time.monotonic() - cached[0] < REPOSITORY_TTL_SECONDS:
            return cached[1]

        def get(client: Github) -> RepositoryInfo:
            # Reference: https://docs.github.com/rest/repos/repos#get-a-repository
            owner, name = repo.full_name.split("/", 1)
            _, data = client.requester.requestJsonAndCheck("GET", f"/repos/{owner}/{name}")
            return RepositoryInfo(
                full_name=data["full_name"],
                clone_url=data["clone_url"],
                default_branch=data.get("default_branch") or "main",
                private=bool(data.get("private")),
                id=data.get("id"),
            )

        info = self._repo_call(
            f"read repository {repo.full_name}",
            repo,
            permissions={"metadata": "read"},
            fn=get,
        )
        with cache_lock:
            repository_cache[key] = (time.monotonic(), info)
        return info

    def contents_token(self, repo: RepoRef, *, handed_out: bool = False) -> str:
        """A token that can read one repository's contents and nothing else (for git).
        `handed_out`: for someone else (the GitHub Actions runner), who revokes it when
        done: minted for it alone, never the cached one Tasuku's own clones use."""
        scope = {"repository_ids": (repo.repository_id,), "permissions": {"contents": "read"}}
        if handed_out:
            return self._token_mint(repo.installation_id, **scope).token
        return self.installation_token(repo.installation_id, **scope).token

    def reviews_list(self, repo: RepoRef, *, number: int) -> list[ReviewInfo]:
        # Reference: https://docs.github.com/rest/pulls/reviews#list-reviews-for-a-pull-request
        return self._repo_call(
            f"list the reviews of {repo.full_name}#{number}",
            repo,
            permissions={"pull_requests": "read"},
            fn=lambda client: [
                review_info(r) for r in self._pull_list(client, repo.full_name, number, "reviews")
            ],
        )

    def review_comments_list(self, repo: RepoRef, *, number: int) -> list[ReviewCommentInfo]:
        # Reference: https://docs.github.com/rest/pulls/comments#list-review-comments-on-a-pull-request
        return self._repo_call(
            f"list the review comments of {repo.full_name}#{number}",
            repo,
            permissions={"pull_requests": "read"},
            fn=lambda client: [
                review_comment_info(c)
                for c in self._pull_list(client, repo.full_name, number, "comments")
            ],
        )

    def review_create(
        self,
        repo: RepoRef,
        *,
        number: int,
        commit_sha: str,
        body: str,
        event: str,
        comments: list[dict[str, Any]],
        marker: str,
    ) -> ReviewInfo:
        """Post one review. `marker` is a string unique to this review inside `body`: a
        POST whose answer was lost is found by it instead of being posted twice."""

        def create(client: Github) -> ReviewInfo:
            # Reference: https://docs.github.com/rest/pulls/reviews#create-a-review-for-a-pull-request
            # `line`/`side`/`start_line` anchors, never the closing-down `position`.
            owner, name = repo.full_name.split("/", 1)
            _, data = client.requester.requestJsonAndCheck(
                "POST",
                f"/repos/{owner}/{name}/pulls/{number}/reviews",
                input={"commit_id": commit_sha, "body": body, "event": event, "comments": comments},
            )
            return review_info(data)

        def find(client: Github) -> ReviewInfo | None:
            for review in self._pull_list(client, repo.full_name, number, "reviews"):
                if (
                    marker in (review.get("body") or "")
                    and review.get("state") != "PENDING"
                    and self.posted_by_us(review.get("user"))
                ):
                    return review_info(review)
            return None

        return self._repo_call(
            f"post a review on {repo.full_name}#{number}",
            repo,
            permissions={"pull_requests": "write"},
            fn=create,
            recover=find,
            creates=True,
        )

    def review_pending_create(
        self,
        repo: RepoRef,
        *,
        number: int,
        commit_sha: str,
        body: str,
        comments: list[dict[str, Any]],
    ) -> ReviewInfo:
        """Create a pending review (no `event`: seen by nobody else, notifying nobody)
        whose body is `body`, a marker: a POST whose answer was lost is found by it."""

        def create(client: Github) -> ReviewInfo:
            # Reference: https://docs.github.com/rest/pulls/reviews#create-a-review-for-a-pull-request
            # "By leaving this blank, you set the review action state to PENDING."
            owner, name = repo.full_name.split("/", 1)
            _, data = client.requester.requestJsonAndCheck(
                "POST",
                f"/repos/{owner}/{name}/pulls/{number}/reviews",
                input={"commit_id": commit_sha, "body": body, "comments": comments},
            )
            return review_info(data)

        def find(client: Github) -> ReviewInfo | None:
            for review in self._pull_list(client, repo.full_name, number, "reviews"):
                if (
                    review.get("state") == "PENDING"
                    and body in (review.get("body") or "")
                    and self.posted_by_us(review.get("user"))
                ):
                    return review_info(review)
            return None

        return self._repo_call(
            f"try a pending review on {repo.full_name}#{number}",
            repo,
            permissions={"pull_requests": "write"},
            fn=create,
            recover=find,
            creates=True,
        )

    def review_pending_delete(
        self,
        repo: RepoRef,
        *,
        number: int,
        review_id: int,
    ) -> None:
        """Delete one of this App's pending reviews (GitHub deletes no submitted one)."""

        def delete(client: Github) -> None:
            # Reference: https://docs.github.com/rest/pulls/reviews#delete-a-pending-review-for-a-pull-request
            owner, name = repo.full_name.split("/", 1)
            try:
                client.requester.requestJsonAndCheck(
                    "DELETE", f"/repos/{owner}/{name}/pulls/{number}/reviews/{review_id}"
                )
            except GithubException as exc:
                if exc.status != 404:  # gone already: a repeated DELETE
                    raise

        self._repo_call(
            f"delete pending review {review_id} on {repo.full_name}#{number}",
            repo,
            permissions={"pull_requests": "write"},
            fn=delete,
            write=True,
        )

    def review_update(
        self,
        repo: RepoRef,
        *,
        number: int,
        review_id: int,
        body: str,
    ) -> ReviewInfo:
        """Replace the body of one of this App's reviews (its comments and state stay)."""

        def update(client: Github) -> ReviewInfo:
            # Reference: https://docs.github.com/rest/pulls/reviews#update-a-review-for-a-pull-request
            owner, name = repo.full_name.split("/", 1)
            _, data = client.requester.requestJsonAndCheck(
                "PUT",
                f"/repos/{owner}/{name}/pulls/{number}/reviews/{review_id}",
                input={"body": body},
            )
            return review_info(data)

        return self._repo_call(
            f"update review {review_id} on {repo.full_name}#{number}",
            repo,
            permissions={"pull_requests": "write"},
            fn=update,
            write=True,
        )

    def review_find(
        self,
        repo: RepoRef,
        *,
        number: int,
        marker: str,
    ) -> ReviewInfo | None:
        """This App's review on the pull request whose body carries `marker`, if any
        (a copy of the marker in someone else's review is ignored)."""
        for review in self.reviews_list(repo, number=number):
            if (
                marker in review.body
                and review.state != "PENDING"  # a pending review is no posted one
                and self.posted_by_us({"login": review.user_login, "type": review.user_type})
            ):
                return review
        return None

    def review_comments_of(
        self,
        repo: RepoRef,
        *,
        number: int,
        review_id: int,
    ) -> list[ReviewCommentInfo]:
        # Reference: https://docs.github.com/rest/pulls/reviews#list-comments-for-a-pull-request-review
        return self._repo_call(
            f"list the comments of review {review_id} on {repo.full_name}#{number}",
            repo,
            permissions={"pull_requests": "read"},
            fn=lambda client: [
                review_comment_info(c)
                for c in self._pull_list(
                    client, repo.full_name, number, f"reviews/{review_id}/comments"
                )
            ],
        )


def gateway() -> GitHubGateway:
    """The gateway for the configured App; GitHubNotConfigured names what is missing."""
    return GitHubGateway(credentials(), retry_policy())
