"""Routes and set-up for merge queues on the fake GitHub: comparing two commits, the pull
requests associated with a commit, and merge groups built in a repository's real git
history.

- `GET /repos/{o}/{r}/compare/{base}...{head}` (Contents: read) answers as GitHub's
  "compare two commits" does: the commits reachable from `head` and not from `base`,
  oldest first (the last 250 without paging parameters; pages of `per_page` otherwise),
  the files changed from the merge base to `head` (at most 300, on the first page
  only), `status`/`ahead_by`/`behind_by`, and 404 for an unknown commit or "No common
  ancestor between …".
- `GET /repos/{o}/{r}/commits/{sha}/pulls` (Pull requests: read) answers as GitHub's
  "list pull requests associated with a commit" does: for a commit on the default
  branch, the merged pull request that brought it there; otherwise the open and merged
  pull requests whose commits include it. A commit the merge queue made (a merge or
  squash commit of a group) belongs to no pull request's commits, so it has none, as
  on GitHub. An unknown commit is 422 "No commit found for SHA: …".
- `merge_queue_enqueue` builds the groups GitHub's merge queue would build for pull
  requests queued one after another: each on top of the group ahead of it (or the base
  branch's tip), with the `merge` or `squash` method, on a branch
  `gh-readonly-queue/<base>/pr-<N>-<parent sha>`; it returns each group's `merge_group`
  object as the webhook carries it. `merge_queue_merge` fast-forwards the base branch
  to a group, as the queue does when the group's checks pass.

The mixin comes before `FakeGitHubBase` in `FakeGitHub`'s bases: it adds its routes
after the base's in `__init__`.
"""

from __future__ import annotations

import re
import time
from typing import Any

from tests.fakes.github.git import AUTHOR, GitRepo
from tests.fakes.github.state import HTTPError, Pull, PullFile, Repo, Request, Response, iso

SHA_RE = re.compile(r"[0-9a-f]{4,40}")
# "When calling this endpoint without any paging parameter (per_page or page), the
# returned list is limited to 250 commits, and the last commit in the list is the most
# recent of the entire comparison."
UNPAGED_COMMITS = 250
COMPARE_FILES = 300
QUEUE_PREFIX = "gh-readonly-queue"


class MergeQueueRoutes:
    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)  # type: ignore[call-arg]
        owner_repo = r"/repos/(?P<owner>[^/]+)/(?P<repo>[^/]+)"
        table = [
            ("GET", owner_repo + r"/compare/(?P<basehead>.+)", "token", self._compare),
            ("GET", owner_repo + r"/commits/(?P<sha>[^/]+)/pulls", "token", self._commit_pulls),
        ]
        self.routes += [(m, re.compile(p), a, fn) for m, p, a, fn in table]  # type: ignore[attr-defined]

    # --- resolving commits ---

    @staticmethod
    def _git_of(repo: Repo) -> GitRepo:
        if repo.git_dir is None:
            raise HTTPError(404, "Not Found")
        return GitRepo(repo.git_dir)

    def _resolve(self, git: GitRepo, ref: str) -> str | None:
        """A commit SHA for `ref`: a (possibly abbreviated) SHA or a branch name."""
        candidates = [f"refs/heads/{ref}", ref] if not SHA_RE.fullmatch(ref) else [ref]
        for candidate in candidates:
            try:
                return git.git(
                    "rev-parse", "--verify", "--quiet", f"{candidate}^{{commit}}"
                ).strip()
            except RuntimeError:
                continue
        return None

    @staticmethod
    def _count(git: GitRepo, spec: str) -> int:
        return int(git.git("rev-list", "--count", spec).strip() or 0)

    @staticmethod
    def _ancestor(git: GitRepo, ancestor: str, descendant: str) -> bool:
        try:
            git.git("merge-base", "--is-ancestor", ancestor, descendant)
        except RuntimeError:
            return False
        return True

    # --- JSON shapes ---

    def _commit_json(self, repo: Repo, git: GitRepo, sha: str) -> dict[str, Any]:
        """A commit as "compare two commits" lists it (GitHub's `commit` schema)."""
        fields = git.git(
            "show", "-s", "--format=%T%x00%P%x00%an%x00%ae%x00%aI%x00%cn%x00%ce%x00%cI%x00%B", sha
        ).split("\x00")
        tree, parents, a_name, a_email, a_date, c_name, c_email, c_date = fields[:8]
        message = "\x00".join(fields[8:]).rstrip("\n")
        api = f"{self.url}/repos/{repo.full_name}"  # type: ignore[attr-defined]
        html = f"{self.url}/{repo.full_name}"  # type: ignore[attr-defined]
        return {
            "url": f"{api}/commits/{sha}",
            "sha": sha,
            "node_id": f"C_{sha[:20]}",
            "html_url": f"{html}/commit/{sha}",
            "comments_url": f"{api}/commits/{sha}/comments",
            "commit": {
                "url": f"{api}/git/commits/{sha}",
                "author": {"name": a_name, "email": a_email, "date": a_date},
                "committer": {"name": c_name, "email": c_email, "date": c_date},
                "message": message,
                "comment_count": 0,
                "tree": {"sha": tree, "url": f"{api}/git/trees/{tree}"},
                "verification": {
                    "verified": False,
                    "reason": "unsigned",
                    "signature": None,
                    "payload": None,
                    "verified_at": None,
                },
            },
            # The git author's email is linked to no account here: GitHub sends null.
            "author": None,
            "committer": None,
            "parents": [
                {"sha": p, "url": f"{api}/commits/{p}", "html_url": f"{html}/commit/{p}"}
                for p in parents.split()
            ],
        }

    def _diff_entry_json(self, repo: Repo, head: str, f: PullFile) -> dict[str, Any]:
        """A changed file (GitHub's `diff-entry` schema)."""
        url = self.url  # type: ignore[attr-defined]
        item: dict[str, Any] = {
            "sha": f"{abs(hash((head, f.filename))):040x}"[:40],
            "filename": f.filename,
            "status": f.status,
            "additions": f.additions,
            "deletions": f.deletions,
            "changes": f.additions + f.deletions,
            "blob_url": f"{url}/{repo.full_name}/blob/{head}/{f.filename}",
            "raw_url": f"{url}/{repo.full_name}/raw/{head}/{f.filename}",
            "contents_url": f"{url}/repos/{repo.full_name}/contents/{f.filename}?ref={head}",
        }
        if f.patch is not None:
            item["patch"] = f.patch
        if f.previous_filename:
            item["previous_filename"] = f.previous_filename
        return item

    def _pull_simple_json(self, repo: Repo, pull: Pull) -> dict[str, Any]:
        """A pull request as lists name it (GitHub's `pull-request-simple` schema)."""
        api = f"{self.url}/repos/{repo.full_name}"  # type: ignore[attr-defined]
        html = f"{self.url}/{repo.full_name}/pull/{pull.number}"  # type: ignore[attr-defined]
        user = self._user_json(pull.author_login, pull.author_type, pull.author_id)  # type: ignore[attr-defined]
        owner = self._user_json(repo.owner, repo.owner_type, repo.owner_id)  # type: ignore[attr-defined]
        repo_json = self._repo_json(repo)  # type: ignore[attr-defined]

        def side(ref: str, sha: str, who: dict[str, Any]) -> dict[str, Any]:
            return {"label": f"{who['login']}:{ref}", "ref": ref, "sha": sha, "user": who,
                    "repo": repo_json}  # fmt: skip

        url = f"{api}/pulls/{pull.number}"
        issue = f"{api}/issues/{pull.number}"
        links = {
            "self": url, "html": html, "issue": issue, "comments": f"{issue}/comments",
            "review_comments": f"{url}/comments", "review_comment": f"{api}/pulls/comments{{/number}}",
            "commits": f"{url}/commits", "statuses": f"{api}/statuses/{pull.head_sha}",
        }  # fmt: skip
        return {
            "url": url,
            "id": pull.id,
            "node_id": f"PR_{pull.id}",
            "html_url": html,
            "diff_url": f"{html}.diff",
            "patch_url": f"{html}.patch",
            "issue_url": issue,
            "commits_url": links["commits"],
            "review_comments_url": links["review_comments"],
            "review_comment_url": links["review_comment"],
            "comments_url": links["comments"],
            "statuses_url": links["statuses"],
            "number": pull.number,
            "state": pull.state,
            "locked": False,
            "title": pull.title,
            "user": user,
            "body": pull.body,
            "labels": [],
            "milestone": None,
            "active_lock_reason": None,
            "created_at": "2026-01-01T00:00:00Z",
            "updated_at": "2026-01-01T00:00:00Z",
            "closed_at": "2026-01-02T00:00:00Z" if pull.state == "closed" else None,
            "merged_at": "2026-01-02T00:00:00Z" if pull.merged else None,
            "merge_commit_sha": None,
            "assignee": None,
            "assignees": [],
            "requested_reviewers": [],
            "requested_teams": [],
            "head": side(pull.head_ref, pull.head_sha, owner),
            "base": side(pull.base_ref, pull.base_sha, owner),
            "_links": {name: {"href": href} for name, href in links.items()},
            "author_association": "CONTRIBUTOR",
            "auto_merge": None,
            "draft": pull.draft,
        }

    # --- routes ---

    def _compare(self, request: Request) -> Response:
        repo = self._repo_for_token(request, "contents", "read")  # type: ignore[attr-defined]
        git = self._git_of(repo)
        base_ref, dots, head_ref = request.params["basehead"].partition("...")
        if not dots:
            raise HTTPError(404, "Not Found")
        base, head = self._resolve(git, base_ref), self._resolve(git, head_ref)
        if base is None or head is None:
            raise HTTPError(404, "Not Found")
        try:
            merge_base = git.git("merge-base", base, head).strip()
        except RuntimeError:  # git answers 1 when there is none
            merge_base = ""
        if not merge_base:
            raise HTTPError(404, f"No common ancestor between {base_ref} and {head_ref}.")
        ahead, behind = self._count(git, f"{base}..{head}"), self._count(git, f"{head}..{base}")
        status = (
            "identical"
            if not ahead and not behind
            else "ahead"
            if not behind
            else "behind"
            if not ahead
            else "diverged"
        )
        shas = git.git("rev-list", "--reverse", f"{base}..{head}").split()
        paged = "page" in request.query or "per_page" in request.query
        if paged:
            commits, headers = self._paginate(request, shas)  # type: ignore[attr-defined]
            first_page = int(request.arg("page", "1") or 1) == 1
        else:
            commits, headers, first_page = shas[-UNPAGED_COMMITS:], {}, True
        files = git.diff_files(base, head)[:COMPARE_FILES] if first_page else []
        api = f"{self.url}/repos/{repo.full_name}"  # type: ignore[attr-defined]
        html = f"{self.url}/{repo.full_name}"  # type: ignore[attr-defined]
        basehead = request.params["basehead"]
        body = {
            "url": f"{api}/compare/{basehead}",
            "html_url": f"{html}/compare/{basehead}",
            "permalink_url": f"{html}/compare/{repo.owner}:{base[:7]}...{repo.owner}:{head[:7]}",
            "diff_url": f"{html}/compare/{basehead}.diff",
            "patch_url": f"{html}/compare/{basehead}.patch",
            "base_commit": self._commit_json(repo, git, base),
            "merge_base_commit": self._commit_json(repo, git, merge_base),
            "status": status,
            "ahead_by": ahead,
            "behind_by": behind,
            "total_commits": ahead,
            "commits": [self._commit_json(repo, git, sha) for sha in commits],
            "files": [self._diff_entry_json(repo, head, f) for f in files],
        }
        return 200, body, headers

    def _commit_pulls(self, request: Request) -> Response:
        repo = self._repo_for_token(request, "pull_requests", "read")  # type: ignore[attr-defined]
        ref = request.params["sha"]
        pulls = sorted(repo.pulls.values(), key=lambda p: -p.number)
        if repo.git_dir is None:
            if ref not in repo.commits:
                raise HTTPError(422, f"No commit found for SHA: {ref}")
            found = [p for p in pulls if p.head_sha == ref]
        else:
            git = GitRepo(repo.git_dir)
            sha = self._resolve(git, ref)
            if sha is None:
                raise HTTPError(422, f"No commit found for SHA: {ref}")
            default = self._resolve(git, repo.default_branch)
            on_default = default is not None and self._ancestor(git, sha, default)
            found = [
                p
                for p in pulls
                if (p.merged or not on_default)
                and self._ancestor(git, sha, p.head_sha)
                and not self._ancestor(git, sha, p.base_sha)
            ]
        items = [self._pull_simple_json(repo, p) for p in found]
        chunk, headers = self._paginate(request, items)  # type: ignore[attr-defined]
        return 200, chunk, headers

    # --- merge queue set-up for tests ---

    def merge_queue_enqueue(
        self, full_name: str, numbers: list[int], *, method: str = "merge"
    ) -> list[dict[str, Any]]:
        """Queue pull requests `numbers` in this order: one merge group each, built on
        the one before it (the first on the base branch's tip). Returns each group's
        `merge_group` object, as `merge_group` webhooks carry it."""
        with self.lock:  # type: ignore[attr-defined]
            repo = self.repos[full_name]  # type: ignore[attr-defined]
            git = self._git_of(repo)
            groups = []
            parent: str | None = None
            for number in numbers:
                pull = repo.pulls[number]
                if parent is None:
                    parent = self._resolve(git, pull.base_ref)
                    assert parent is not None, f"no branch {pull.base_ref}"
                head = self._queue_commit(git, parent, pull, method)
                ref = f"refs/heads/{QUEUE_PREFIX}/{pull.base_ref}/pr-{number}-{parent}"
                git.git("update-ref", ref, head)
                repo.commits.add(head)
                groups.append(self._merge_group_json(git, head, ref, parent, pull.base_ref))
                parent = head
            return groups

    def merge_queue_merge(self, full_name: str, group: dict[str, Any]) -> None:
        """The group's checks passed: its base branch moves to its head and its pull
        requests are merged."""
        with self.lock:  # type: ignore[attr-defined]
            repo = self.repos[full_name]  # type: ignore[attr-defined]
            git = self._git_of(repo)
            git.git("update-ref", group["base_ref"], group["head_sha"])
            git.git("update-ref", "-d", group["head_ref"])
            for pull in repo.pulls.values():
                if pull.state == "open" and self._ancestor(git, pull.head_sha, group["head_sha"]):
                    pull.state, pull.merged = "closed", True

    def _queue_commit(self, git: GitRepo, parent: str, pull: Pull, method: str) -> str:
        """The commit the queue makes for `pull` on top of `parent`: a merge commit of
        the pull request's head (`merge`) or one new commit of its changes (`squash`)."""
        stamp = {"GIT_AUTHOR_DATE": f"{int(time.time())} +0000",
                 "GIT_COMMITTER_DATE": f"{int(time.time())} +0000"}  # fmt: skip
        env = {**AUTHOR, **stamp}
        tree = git.git("merge-tree", "--write-tree", parent, pull.head_sha).split()[0]
        if method == "squash":
            message = f"{pull.title} (#{pull.number})"
            return git.git("commit-tree", tree, "-p", parent, "-m", message, env=env).strip()
        message = f"Merge pull request #{pull.number} from {pull.head_ref}"
        args = ["commit-tree", tree, "-p", parent, "-p", pull.head_sha, "-m", message]
        return git.git(*args, env=env).strip()

    def _merge_group_json(
        self, git: GitRepo, head: str, ref: str, parent: str, base: str
    ) -> dict[str, Any]:
        tree, message, stamp = git.git("show", "-s", "--format=%T%x00%B%x00%cI", head).split("\x00")
        person = {"name": AUTHOR["GIT_AUTHOR_NAME"], "email": AUTHOR["GIT_AUTHOR_EMAIL"]}
        return {
            "head_sha": head,
            "head_ref": ref,
            "base_sha": parent,
            "base_ref": f"refs/heads/{base}",
            "head_commit": {
                "id": head,
                "tree_id": tree,
                "message": message.strip(),
                "timestamp": stamp.strip() or iso(time.time()),
                "author": person,
                "committer": person,
            },
        }
