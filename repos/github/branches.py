"""Branches of Tasuku's own, written through GitHub's Git Data API, and the pull requests
opened from them: what a review's one-click fixes need (reviews/publication/fixes.py). The head's
files are read object by object (commit, trees, blobs: reads, never paced); a commit is
made from a tree over the head's, and a branch of Tasuku's points at it. Nothing here
pushes to a branch Tasuku did not create: the one ref it moves is named by its caller."""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import Any

from github import Github
from pydantic import BaseModel

from repos.github.errors import GitHubError
from repos.github.repo import RepoRef
from repos.github.transport import Transport

CONTENTS_WRITE = {"contents": "write"}
FIX_PERMISSIONS = {"contents": "write", "pull_requests": "write"}


class TreeEntry(BaseModel):
    path: str
    mode: str
    type: str
    sha: str


class FixPullInfo(BaseModel):
    """A pull request as Tasuku's fix branch needs it."""

    number: int
    state: str
    merged: bool = False
    html_url: str
    head_ref: str
    head_sha: str
    base_ref: str
    title: str = ""
    body: str = ""


def _fix_pull(data: dict[str, Any]) -> FixPullInfo:
    return FixPullInfo(
        number=data["number"],
        state=data["state"],
        merged=bool(data.get("merged") or data.get("merged_at")),
        html_url=data["html_url"],
        head_ref=data["head"]["ref"],
        head_sha=data["head"]["sha"],
        base_ref=data["base"]["ref"],
        title=data.get("title") or "",
        body=data.get("body") or "",
    )


class BranchCalls(Transport):
    def fix_permissions_missing(self, installation_id: int) -> list[str]:
        """The permissions a fix branch needs that the installation was not granted, in
        words (empty: it may)."""
        granted = self._granted(installation_id, FIX_PERMISSIONS)
        return [f"{name.replace('_', ' ').capitalize()}: Read and write"
                for name in FIX_PERMISSIONS if name not in granted]  # fmt: skip

    def _read(self, repo: RepoRef, description: str, path: str, params=None) -> Any:
        def get(client: Github) -> Any:
            _, data = client.requester.requestJsonAndCheck("GET", path, parameters=params)
            return data

        return self._repo_call(
            description,
            repo,
            permissions={"contents": "read"},
            fn=get,
        )

    def git_commit_tree(self, repo: RepoRef, *, sha: str) -> str:
        """The tree of commit `sha`."""
        owner, name = repo.full_name.split("/", 1)
        # Reference: https://docs.github.com/rest/git/commits#get-a-commit-object
        data = self._read(
            repo,
            f"read commit {repo.full_name}@{sha[:7]}",
            f"/repos/{owner}/{name}/git/commits/{sha}",
        )
        return data["tree"]["sha"]

    def git_tree(self, repo: RepoRef, *, sha: str) -> list[TreeEntry]:
        """The entries of one tree (not recursive: a directory at a time)."""
        owner, name = repo.full_name.split("/", 1)
        # Reference: https://docs.github.com/rest/git/trees#get-a-tree
        data = self._read(
            repo,
            f"read tree {repo.full_name}@{sha[:7]}",
            f"/repos/{owner}/{name}/git/trees/{sha}",
        )
        return [
            TreeEntry(path=e["path"], mode=e["mode"], type=e["type"], sha=e["sha"])
            for e in data["tree"]
        ]

    def git_blob(self, repo: RepoRef, *, sha: str) -> bytes:
        owner, name = repo.full_name.split("/", 1)
        # Reference: https://docs.github.com/rest/git/blobs#get-a-blob
        data = self._read(
            repo,
            f"read blob {repo.full_name}@{sha[:7]}",
            f"/repos/{owner}/{name}/git/blobs/{sha}",
        )
        if data.get("encoding") != "base64":
            raise GitHubError(
                f"GitHub sent blob {sha[:7]} of {repo.full_name} as {data.get('encoding')!r}, "
                "not base64",
                permanent=True,
            )
        return base64.b64decode(data["content"])

    def _write(
        self,
        repo: RepoRef,
        description: str,
        send: Callable[[Github], Any],
        *,
        permissions: dict[str, str],
        recover=None,
    ) -> Any:
        return self._repo_call(
            description,
            repo,
            permissions=permissions,
            fn=send,
            recover=recover,
            creates=recover is not None,  # looked up, not sent again, after a lost answer
            write=True,
        )

    def git_tree_create(
        self,
        repo: RepoRef,
        *,
        base_tree: str,
        files: dict[str, tuple[str, str]],
    ) -> str:
        """A tree: `base_tree` with `files` ({path: (mode, text)}) written over it. Its
        SHA is its content's, so a repeat makes the same tree."""
        owner, name = repo.full_name.split("/", 1)
        # Reference: https://docs.github.com/rest/git/trees#create-a-tree
        entries = [
            {"path": path, "mode": mode, "type": "blob", "content": text}
            for path, (mode, text) in sorted(files.items())
        ]
        data = self._write(
            repo,
            f"create a tree in {repo.full_name}",
            lambda client: client.requester.requestJsonAndCheck(
                "POST",
                f"/repos/{owner}/{name}/git/trees",
                input={"base_tree": base_tree, "tree": entries},
            )[1],
            permissions=CONTENTS_WRITE,
        )
        return data["sha"]

    def git_commit_create(
        self,
        repo: RepoRef,
        *,
        message: str,
        tree: str,
        parent: str,
    ) -> str:
        """A commit of `tree` on `parent`, by the App's bot. A repeat after a lost answer
        makes another commit no ref points at: harmless, and GitHub collects it."""
        owner, name = repo.full_name.split("/", 1)
        # Reference: https://docs.github.com/rest/git/commits#create-a-commit
        data = self._write(
            repo,
            f"create a commit in {repo.full_name}",
            lambda client: client.requester.requestJsonAndCheck(
                "POST",
                f"/repos/{owner}/{name}/git/commits",
                input={"message": message, "tree": tree, "parents": [parent]},
            )[1],
            permissions=CONTENTS_WRITE,
        )
        return data["sha"]

    def git_branch_sha(self, repo: RepoRef, *, branch: str) -> str | None:
        """Where branch `branch` points, or None when there is no such branch."""
        owner, name = repo.full_name.split("/", 1)
        ref = f"heads/{branch}"
        try:
            # Reference: https://docs.github.com/rest/git/refs#get-a-reference
            data = self._read(
                repo,
                f"read branch {branch} of {repo.full_name}",
                f"/repos/{owner}/{name}/git/ref/{ref}",
            )
        except GitHubError as exc:
            if exc.status == 404:
                return None
            raise
        return data["object"]["sha"]

    def git_branch_create(
        self,
        repo: RepoRef,
        *,
        branch: str,
        sha: str,
    ) -> None:
        """Create branch `branch` at `sha`; GitHub refuses it (422 "Reference already
        exists") when the branch is there."""
        owner, name = repo.full_name.split("/", 1)

        def find(client: Github) -> bool | None:
            found = self.git_branch_sha(repo, branch=branch)
            return True if found == sha else None

        # Reference: https://docs.github.com/rest/git/refs#create-a-reference
        self._write(
            repo,
            f"create branch {branch} in {repo.full_name}",
            lambda client: client.requester.requestJsonAndCheck(
                "POST",
                f"/repos/{owner}/{name}/git/refs",
                input={"ref": f"refs/heads/{branch}", "sha": sha},
            )[1],
            permissions=CONTENTS_WRITE,
            recover=find,
        )

    def git_branch_move(
        self,
        repo: RepoRef,
        *,
        branch: str,
        sha: str,
    ) -> None:
        """Point branch `branch` at `sha`, forced (the branch is Tasuku's, rebuilt on
        every head); 422 "Reference does not exist" when it is gone."""
        owner, name = repo.full_name.split("/", 1)
        ref = f"heads/{branch}"
        # Reference: https://docs.github.com/rest/git/refs#update-a-reference
        self._write(
            repo,
            f"move branch {branch} of {repo.full_name} to {sha[:7]}",
            lambda client: client.requester.requestJsonAndCheck(
                "PATCH",
                f"/repos/{owner}/{name}/git/refs/{ref}",
                input={"sha": sha, "force": True},
            )[1],
            permissions=CONTENTS_WRITE,
        )

    def git_branch_delete(self, repo: RepoRef, *, branch: str) -> bool:
        """Delete branch `branch`; False when it was already gone."""
        owner, name = repo.full_name.split("/", 1)
        ref = f"heads/{branch}"
        try:
            # Reference: https://docs.github.com/rest/git/refs#delete-a-reference
            self._write(
                repo,
                f"delete branch {branch} of {repo.full_name}",
                lambda client: client.requester.requestJsonAndCheck(
                    "DELETE", f"/repos/{owner}/{name}/git/refs/{ref}"
                )[1],
                permissions=CONTENTS_WRITE,
            )
        except GitHubError as exc:
            # GitHub describes this 422 without a body: a branch that does not exist (or
            # the default branch, which Tasuku's never is).
            if exc.status == 422:
                return False
            raise
        return True

    def pull_requests_from(
        self,
        repo: RepoRef,
        *,
        branch: str,
        base: str | None,
    ) -> list[FixPullInfo]:
        """The pull requests, open or closed, from this repository's branch `branch` into
        `base` (None: into any branch), newest first."""
        owner, name = repo.full_name.split("/", 1)

        def get(client: Github) -> list[FixPullInfo]:
            # Reference: https://docs.github.com/rest/pulls/pulls#list-pull-requests
            found, page = [], 1
            while True:
                _, data = client.requester.requestJsonAndCheck(
                    "GET",
                    f"/repos/{owner}/{name}/pulls",
                    parameters={
                        "state": "all",
                        "head": f"{owner}:{branch}",
                        **({"base": base} if base is not None else {}),
                        "per_page": 100,
                        "page": page,
                    },  # fmt: skip
                )
                found += [_fix_pull(item) for item in data]
                if len(data) < 100:
                    return found
                page += 1

        return self._repo_call(
            f"list the pull requests from {branch} in {repo.full_name}",
            repo,
            permissions={"pull_requests": "read"},
            fn=get,
        )

    def fix_pull_create(
        self,
        repo: RepoRef,
        *,
        branch: str,
        base: str,
        title: str,
        body: str,
    ) -> FixPullInfo:
        """Open a pull request from branch `branch` into `base`. A create whose answer
        was lost is looked up (the open one from that branch) instead of sent again."""
        owner, name = repo.full_name.split("/", 1)

        def find(client: Github) -> FixPullInfo | None:
            pulls = self.pull_requests_from(repo, branch=branch, base=base)
            return next((p for p in pulls if p.state == "open"), None)

        # Reference: https://docs.github.com/rest/pulls/pulls#create-a-pull-request
        data = self._write(
            repo,
            f"open a pull request from {branch} into {base} in {repo.full_name}",
            lambda client: client.requester.requestJsonAndCheck(
                "POST",
                f"/repos/{owner}/{name}/pulls",
                input={"title": title, "head": branch, "base": base, "body": body},
            )[1],
            permissions={"pull_requests": "write"},
            recover=find,
        )
        return data if isinstance(data, FixPullInfo) else _fix_pull(data)

    def fix_pull_update(
        self,
        repo: RepoRef,
        *,
        number: int,
        title: str | None = None,
        body: str | None = None,
        state: str | None = None,
    ) -> FixPullInfo:
        """Edit one of Tasuku's pull requests: its title, body or state (closed)."""
        owner, name = repo.full_name.split("/", 1)
        fields = {
            k: v for k, v in (("title", title), ("body", body), ("state", state)) if v is not None
        }
        # Reference: https://docs.github.com/rest/pulls/pulls#update-a-pull-request
        data = self._write(
            repo,
            f"update pull request {repo.full_name}#{number}",
            lambda client: client.requester.requestJsonAndCheck(
                "PATCH", f"/repos/{owner}/{name}/pulls/{number}", input=fields
            )[1],
            permissions={"pull_requests": "write"},
        )
        return _fix_pull(data)
