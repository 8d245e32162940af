"""The gateway's calls about commits and what they change: comparing two commits, the
pull requests GitHub associates with a commit, and a pull request's changed files
(what a merge group is checked against, reviews/intake/merge_queue.py).

A mixin of `GitHubGateway`: every call still goes through its retry loop. All three are
reads an App may make with Contents: read (compare) and Pull requests: read (the
other two), which Tasuku's App holds anyway.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from github import Github
from pydantic import BaseModel

from repos.github.repo import RepoRef
from repos.github.transport import Transport

PAGE_SIZE = 100
# "The list of changed files is only shown on the first page of results, and it includes
# up to 300 changed files for the entire comparison." (REST: compare two commits)
COMPARE_FILES_LIMIT = 300
# A comparison is read in pages of 100 commits; beyond this many it is not read whole.
COMPARE_MAX_PAGES = 10
# "Responses include a maximum of 3000 files." (REST: list pull requests files)
PULL_FILES_LIMIT = 3000


class ComparedCommit(BaseModel):
    sha: str
    parents: tuple[str, ...] = ()


class ChangedFile(BaseModel):
    filename: str
    status: str
    previous_filename: str | None = None


class Comparison(BaseModel):
    """`base...head` as GitHub compares it: the commits reachable from `head` and not
    from `base` (oldest first), and the files changed from their merge base to `head`."""

    status: str  # diverged | ahead | behind | identical
    total_commits: int
    commits: tuple[ComparedCommit, ...]
    files: tuple[ChangedFile, ...]

    @property
    def complete(self) -> bool:
        """Whether every commit and every changed file is listed (GitHub lists at most
        300 files of a comparison, and Tasuku reads at most 1,000 of its commits)."""
        return len(self.commits) >= self.total_commits and len(self.files) < COMPARE_FILES_LIMIT


class AssociatedPull(BaseModel):
    """A pull request as "list pull requests associated with a commit" names it."""

    number: int
    state: str
    base_ref: str
    head_sha: str
    merged: bool


def _changed_file(data: dict[str, Any]) -> ChangedFile:
    return ChangedFile(
        filename=data["filename"],
        status=data.get("status") or "modified",
        previous_filename=data.get("previous_filename"),
    )


class CommitCalls(Transport):
    def compare(
        self,
        repo: RepoRef,
        *,
        base: str,
        head: str,
    ) -> Comparison:
        """Compare `base...head` (SHAs or branch names), reading up to
        COMPARE_MAX_PAGES pages of commits; `Comparison.complete` says whether that was
        all of it."""
        owner, name = repo.full_name.split("/", 1)
        url = f"/repos/{owner}/{name}/compare/{quote(base, safe='/')}...{quote(head, safe='/')}"

        def read(client: Github) -> Comparison:
            # Reference: https://docs.github.com/rest/commits/commits#compare-two-commits
            # Paged, so that commits past the unpaged answer's 250 are listed too; the
            # files come on the first page only.
            commits: list[ComparedCommit] = []
            first: dict[str, Any] = {}
            for page in range(1, COMPARE_MAX_PAGES + 1):
                _, data = client.requester.requestJsonAndCheck(
                    "GET", url, parameters={"per_page": PAGE_SIZE, "page": page}
                )
                first = first or data
                listed = data.get("commits") or []
                commits += [
                    ComparedCommit(sha=c["sha"], parents=tuple(p["sha"] for p in c["parents"]))
                    for c in listed
                ]
                if len(listed) < PAGE_SIZE or len(commits) >= data["total_commits"]:
                    break
            return Comparison(
                status=first["status"],
                total_commits=first["total_commits"],
                commits=tuple(commits),
                files=tuple(_changed_file(f) for f in first.get("files") or []),
            )

        return self._repo_call(
            f"compare {base[:12]}...{head[:12]} in {repo.full_name}",
            repo,
            permissions={"contents": "read"},
            fn=read,
        )

    def commit_pull_requests(
        self,
        repo: RepoRef,
        *,
        sha: str,
    ) -> list[AssociatedPull]:
        """The pull requests GitHub associates with commit `sha`: the merged one that
        brought it to the default branch, or, for a commit not on it, the open and
        merged ones whose commits include it. A commit the merge queue made itself has
        none."""
        owner, name = repo.full_name.split("/", 1)

        def read(client: Github) -> list[AssociatedPull]:
            # Reference: https://docs.github.com/rest/commits/commits#list-pull-requests-associated-with-a-commit
            _, data = client.requester.requestJsonAndCheck(
                "GET",
                f"/repos/{owner}/{name}/commits/{sha}/pulls",
                parameters={"per_page": PAGE_SIZE},
            )
            return [
                AssociatedPull(
                    number=pull["number"],
                    state=pull["state"],
                    base_ref=pull["base"]["ref"],
                    head_sha=pull["head"]["sha"],
                    merged=bool(pull.get("merged_at")),
                )
                for pull in data
            ]

        return self._repo_call(
            f"list the pull requests of commit {sha[:7]} in {repo.full_name}",
            repo,
            permissions={"pull_requests": "read"},
            fn=read,
        )

    def pull_request_files(
        self,
        repo: RepoRef,
        *,
        number: int,
    ) -> list[ChangedFile]:
        """The files a pull request changes, as GitHub lists them (at most 3,000)."""
        owner, name = repo.full_name.split("/", 1)

        def read(client: Github) -> list[ChangedFile]:
            # Reference: https://docs.github.com/rest/pulls/pulls#list-pull-requests-files
            files: list[ChangedFile] = []
            for page in range(1, PULL_FILES_LIMIT // PAGE_SIZE + 1):
                _, data = client.requester.requestJsonAndCheck(
                    "GET",
                    f"/repos/{owner}/{name}/pulls/{number}/files",
                    parameters={"per_page": PAGE_SIZE, "page": page},
                )
                files += [_changed_file(f) for f in data]
                if len(data) < PAGE_SIZE:
                    break
            return files

        return self._repo_call(
            f"list the files of pull request {repo.full_name}#{number}",
            repo,
            permissions={"pull_requests": "read"},
            fn=read,
        )
