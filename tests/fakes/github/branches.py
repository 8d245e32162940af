"""Git's database over the REST API, and pull requests opened through it, on the fake
GitHub, for a git-backed repository (`add_git_repo`): the objects are the bare
repository's own, so what Tasuku writes can be read back with git.

- `GET /repos/{o}/{r}/git/commits/{sha}`, `.../git/trees/{sha}` (`recursive` set to any
  value lists every entry, as GitHub's does), `.../git/blobs/{sha}` (base64) need
  Contents: read; an unknown object is 404.
- `POST /repos/{o}/{r}/git/trees` (entries of `path`, `mode`, `type: blob` and `sha` or
  `content`; `sha: null` deletes the path; over `base_tree` when given),
  `POST .../git/commits` (its committer and author the token's user, the App's bot),
  `POST .../git/refs` (422 "Reference already exists"), `PATCH .../git/refs/{ref}`
  (422 "Update is not a fast forward" unless `force`, 422 "Reference does not exist"),
  `DELETE .../git/refs/{ref}` (204; 422 without a body for a missing ref or the default
  branch, as GitHub's description has it) need Contents: write. A branch that moves carries its
  open pull requests' heads (and bases) with it; a deleted branch closes the pull
  requests whose head it was, as on GitHub.
- `GET /repos/{o}/{r}/pulls` (`state`, `head` as `owner:branch`, `base`; paginated),
  `POST .../pulls` (both branches must exist; 422 "A pull request already exists for
  owner:branch." for a second open one with the same head and base, "No commits
  between …" when the head adds nothing to the base) and `PATCH .../pulls/{n}` (`title`,
  `body`, `state`) need Pull requests: read or write. A pull request opened through the
  API is its author's: the token's user (the App's bot).

The mixin comes before `FakeGitHubBase` in `FakeGitHub`'s bases: it adds its routes
after the base's in `__init__`.
"""

from __future__ import annotations

import base64
import os
import re
import tempfile
import time
from pathlib import Path
from typing import Any

from tests.fakes.github.git import GitRepo
from tests.fakes.github.state import HTTPError, Pull, Repo, Request, Response, iso

SHA40 = re.compile(r"[0-9a-f]{40}")
MODES = {"100644", "100755", "040000", "160000", "120000"}


class GitDataRoutes:
    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)  # type: ignore[call-arg]
        owner_repo = r"/repos/(?P<owner>[^/]+)/(?P<repo>[^/]+)"
        table = [
            ("GET", owner_repo + r"/git/commits/(?P<sha>[^/]+)", "token", self._get_commit),
            ("GET", owner_repo + r"/git/trees/(?P<sha>[^/]+)", "token", self._get_tree),
            ("GET", owner_repo + r"/git/blobs/(?P<sha>[^/]+)", "token", self._get_blob),
            ("POST", owner_repo + r"/git/trees", "token", self._create_tree),
            ("POST", owner_repo + r"/git/commits", "token", self._create_commit),
            ("GET", owner_repo + r"/git/ref/(?P<ref>.+)", "token", self._get_ref),
            ("POST", owner_repo + r"/git/refs", "token", self._create_ref),
            ("PATCH", owner_repo + r"/git/refs/(?P<ref>.+)", "token", self._update_ref),
            ("DELETE", owner_repo + r"/git/refs/(?P<ref>.+)", "token", self._delete_ref),
            ("GET", owner_repo + r"/pulls", "token", self._list_pulls),
            ("POST", owner_repo + r"/pulls", "token", self._create_pull),
            ("PATCH", owner_repo + r"/pulls/(?P<number>\d+)", "token", self._update_pull),
        ]
        self.routes += [(m, re.compile(p), a, fn) for m, p, a, fn in table]  # type: ignore[attr-defined]

    # --- helpers ---

    def _git_for(self, request: Request, level: str) -> tuple[Repo, GitRepo]:
        repo = self._repo_for_token(request, "contents", level)  # type: ignore[attr-defined]
        if repo.git_dir is None:
            raise HTTPError(409, "Git Repository is empty.")
        return repo, GitRepo(repo.git_dir)

    @staticmethod
    def _object_type(git: GitRepo, sha: str) -> str | None:
        if not SHA40.fullmatch(sha or ""):
            return None
        try:
            return git.git("cat-file", "-t", sha).strip()
        except RuntimeError:
            return None

    @staticmethod
    def _ref_sha(git: GitRepo, ref: str) -> str | None:
        try:
            return git.git("rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}").strip() or None
        except RuntimeError:
            return None

    def _api(self, repo: Repo) -> str:
        return f"{self.url}/repos/{repo.full_name}"  # type: ignore[attr-defined]

    def _git_commit_json(self, repo: Repo, git: GitRepo, sha: str) -> dict[str, Any]:
        raw = git.git("cat-file", "commit", sha)
        header, _, message = raw.partition("\n\n")
        tree, parents, people = "", [], {}
        for line in header.splitlines():
            key, _, value = line.partition(" ")
            if key == "tree":
                tree = value
            elif key == "parent":
                parents.append(value)
            elif key in ("author", "committer"):
                match = re.fullmatch(r"(.*) <(.*)> (\d+) ([+-]\d{4})", value)
                assert match is not None
                people[key] = {"name": match[1], "email": match[2], "date": iso(int(match[3]))}
        api, web = self._api(repo), f"{self.url}/{repo.full_name}"  # type: ignore[attr-defined]
        return {
            "sha": sha,
            "node_id": f"C_{sha[:20]}",
            "url": f"{api}/git/commits/{sha}",
            "html_url": f"{web}/commit/{sha}",
            "author": people["author"],
            "committer": people["committer"],
            "tree": {"sha": tree, "url": f"{api}/git/trees/{tree}"},
            "message": message[:-1] if message.endswith("\n") else message,
            "parents": [
                {"sha": p, "url": f"{api}/git/commits/{p}", "html_url": f"{web}/commit/{p}"}
                for p in parents
            ],
            "verification": {
                "verified": False,
                "reason": "unsigned",
                "signature": None,
                "payload": None,
                "verified_at": None,
            },  # fmt: skip
        }

    def _tree_json(self, repo: Repo, git: GitRepo, sha: str, *, recursive: bool) -> dict[str, Any]:
        args = ["ls-tree", "-z", "--long"] + (["-r", "-t"] if recursive else []) + [sha]
        entries = []
        api = self._api(repo)
        for line in git.git(*args).split("\0"):
            if not line:
                continue
            meta, _, path = line.partition("\t")
            mode, kind, object_sha, size = meta.split()
            entry: dict[str, Any] = {"path": path, "mode": mode, "type": kind, "sha": object_sha}
            if kind == "blob":
                entry["size"] = int(size)
            entry["url"] = f"{api}/git/{kind}s/{object_sha}"
            entries.append(entry)
        return {"sha": sha, "url": f"{api}/git/trees/{sha}", "tree": entries, "truncated": False}

    def _ref_json(self, repo: Repo, ref: str, sha: str) -> dict[str, Any]:
        api = self._api(repo)
        return {
            "ref": ref,
            "node_id": f"REF_{abs(hash((repo.full_name, ref))) % 10**12}",
            "url": f"{api}/git/{ref}",
            "object": {"type": "commit", "sha": sha, "url": f"{api}/git/commits/{sha}"},
        }

    def _branch_moved(self, repo: Repo, branch: str, sha: str | None) -> None:
        """What GitHub does when a branch moves or goes: its open pull requests follow
        it (their head, or their base), and one whose head branch was deleted closes."""
        repo.commits.add(sha) if sha else None
        for pull in repo.pulls.values():
            if pull.state != "open":
                continue
            if pull.head_repo == "" and pull.head_ref == branch:
                if sha is None:
                    pull.state = "closed"
                else:
                    pull.head_sha = sha
            if pull.base_ref == branch and sha is not None:
                pull.base_sha = sha

    # --- git's objects ---

    def _get_commit(self, request: Request) -> Response:
        repo, git = self._git_for(request, "read")
        sha = request.params["sha"]
        if self._object_type(git, sha) != "commit":
            raise HTTPError(404, "Not Found")
        return 200, self._git_commit_json(repo, git, sha), {}

    def _get_tree(self, request: Request) -> Response:
        repo, git = self._git_for(request, "read")
        sha = request.params["sha"]
        kind = self._object_type(git, sha)
        if kind == "commit":
            sha = git.git("rev-parse", f"{sha}^{{tree}}").strip()
        elif kind != "tree":
            ref = self._ref_sha(git, f"refs/heads/{sha}")
            if ref is None:
                raise HTTPError(404, "Not Found")
            sha = git.git("rev-parse", f"{ref}^{{tree}}").strip()
        # "Setting this parameter to any value returns the objects or subtrees referenced
        # by the tree specified in :tree_sha."
        recursive = request.arg("recursive") is not None
        return 200, self._tree_json(repo, git, sha, recursive=recursive), {}

    def _get_blob(self, request: Request) -> Response:
        repo, git = self._git_for(request, "read")
        sha = request.params["sha"]
        if self._object_type(git, sha) != "blob":
            raise HTTPError(404, "Not Found")
        data = self._blob_bytes(git, sha)
        return (
            200,
            {
                "sha": sha,
                "node_id": f"B_{sha[:20]}",
                "size": len(data),
                "url": f"{self._api(repo)}/git/blobs/{sha}",
                "content": base64.encodebytes(data).decode(),
                "encoding": "base64",
            },
            {},
        )

    @staticmethod
    def _blob_bytes(git: GitRepo, sha: str) -> bytes:
        import subprocess

        return subprocess.run(  # noqa: S603
            ["git", "--git-dir", str(git.git_dir), "cat-file", "blob", sha],  # noqa: S607
            capture_output=True,
            check=True,
        ).stdout

    def _create_tree(self, request: Request) -> Response:
        repo, git = self._git_for(request, "write")
        body = request.body if isinstance(request.body, dict) else {}
        base_tree = body.get("base_tree")
        entries = body.get("tree")
        if not isinstance(entries, list):
            raise HTTPError(422, 'Invalid request.\n\n"tree" wasn\'t supplied.')
        if base_tree is not None:
            kind = self._object_type(git, base_tree)
            if kind == "commit":
                base_tree = git.git("rev-parse", f"{base_tree}^{{tree}}").strip()
            elif kind != "tree":
                raise HTTPError(422, "base_tree is not a valid tree oid")
        index = Path(tempfile.mkdtemp()) / "index"
        env = {"GIT_INDEX_FILE": str(index)}
        try:
            git.git("read-tree", *([base_tree] if base_tree else ["--empty"]), env=env)
            for entry in entries:
                path, mode, kind = entry.get("path"), entry.get("mode"), entry.get("type")
                if not path or mode not in MODES or kind not in ("blob", "tree", "commit"):
                    raise HTTPError(422, "Invalid tree info")
                if kind != "blob":
                    # Tasuku writes files only; the fake does not graft trees or submodules.
                    raise HTTPError(422, "Invalid tree info (the fake writes blobs only)")
                if "content" in entry and entry.get("sha") is not None:
                    raise HTTPError(422, "Invalid tree info: both content and sha were given")
                if "content" in entry:
                    sha = git.git("hash-object", "-w", "--stdin",
                                  input=str(entry["content"]).encode()).strip()  # fmt: skip
                elif entry.get("sha") is None:
                    git.git("update-index", "--force-remove", "--", path, env=env)
                    continue
                else:
                    sha = entry["sha"]
                    if self._object_type(git, sha) != "blob":
                        raise HTTPError(422, f"Invalid tree info: {sha} is not a blob")
                git.git("update-index", "--add", "--cacheinfo", f"{mode},{sha},{path}", env=env)
            tree = git.git("write-tree", env=env).strip()
        finally:
            index.unlink(missing_ok=True)
            os.rmdir(index.parent)
        return 201, self._tree_json(repo, git, tree, recursive=False), {}

    def _create_commit(self, request: Request) -> Response:
        repo, git = self._git_for(request, "write")
        body = request.body if isinstance(request.body, dict) else {}
        message, tree = body.get("message"), body.get("tree")
        parents = body.get("parents") or []
        if not isinstance(message, str) or not isinstance(tree, str):
            raise HTTPError(422, 'Invalid request.\n\n"message" and "tree" are required.')
        if self._object_type(git, tree) != "tree":
            raise HTTPError(422, "Tree SHA does not exist")
        for parent in parents:
            if self._object_type(git, parent) != "commit":
                raise HTTPError(422, "Parent SHA does not exist or is not a commit object")
        user = self._bot_user(request)  # type: ignore[attr-defined]
        person = {
            "name": user["login"],
            "email": f"{user['id']}+{user['login']}@users.noreply.github.com",
        }
        author = {**person, **(body.get("author") or {})}
        committer = {**person, **(body.get("committer") or {})}
        now = f"{int(time.time())} +0000"
        env = {
            "GIT_AUTHOR_NAME": author["name"],
            "GIT_AUTHOR_EMAIL": author["email"],
            "GIT_AUTHOR_DATE": now,
            "GIT_COMMITTER_NAME": committer["name"],
            "GIT_COMMITTER_EMAIL": committer["email"],
            "GIT_COMMITTER_DATE": now,
        }
        args = ["commit-tree", tree, "-m", message]
        for parent in parents:
            args += ["-p", parent]
        sha = git.git(*args, env=env).strip()
        repo.commits.add(sha)
        return 201, self._git_commit_json(repo, git, sha), {}

    # --- references ---

    def _get_ref(self, request: Request) -> Response:
        repo, git = self._git_for(request, "read")
        ref = f"refs/{request.params['ref']}"
        sha = self._ref_sha(git, ref) if ref.startswith(("refs/heads/", "refs/tags/")) else None
        if sha is None:
            raise HTTPError(404, "Not Found")
        return 200, self._ref_json(repo, ref, sha), {}

    def _create_ref(self, request: Request) -> Response:
        repo, git = self._git_for(request, "write")
        body = request.body if isinstance(request.body, dict) else {}
        ref, sha = body.get("ref") or "", body.get("sha") or ""
        if not ref.startswith("refs/") or ref.count("/") < 2:
            raise HTTPError(422, "Reference name is not valid")
        if self._object_type(git, sha) is None:
            raise HTTPError(422, "Object does not exist")
        if self._ref_sha(git, ref) is not None:
            raise HTTPError(422, "Reference already exists")
        git.git("update-ref", ref, sha)
        if ref.startswith("refs/heads/"):
            self._branch_moved(repo, ref.removeprefix("refs/heads/"), sha)
        return 201, self._ref_json(repo, ref, sha), {"Location": f"{self._api(repo)}/git/{ref}"}

    def _update_ref(self, request: Request) -> Response:
        repo, git = self._git_for(request, "write")
        ref = f"refs/{request.params['ref']}"
        body = request.body if isinstance(request.body, dict) else {}
        sha = body.get("sha") or ""
        current = self._ref_sha(git, ref)
        if current is None:
            raise HTTPError(422, "Reference does not exist")
        if self._object_type(git, sha) != "commit":
            raise HTTPError(422, "Object does not exist")
        if not body.get("force"):
            try:
                git.git("merge-base", "--is-ancestor", current, sha)
            except RuntimeError:
                raise HTTPError(422, "Update is not a fast forward") from None
        git.git("update-ref", ref, sha)
        if ref.startswith("refs/heads/"):
            self._branch_moved(repo, ref.removeprefix("refs/heads/"), sha)
        return 200, self._ref_json(repo, ref, sha), {}

    def _delete_ref(self, request: Request) -> Response:
        repo, git = self._git_for(request, "write")
        ref = f"refs/{request.params['ref']}"
        # GitHub's description gives this 422 no body: "Validation failed, an attempt was
        # made to delete the default branch, or the endpoint has been spammed."
        if self._ref_sha(git, ref) is None or ref == f"refs/heads/{repo.default_branch}":
            return 422, None, {}
        git.git("update-ref", "-d", ref)
        if ref.startswith("refs/heads/"):
            self._branch_moved(repo, ref.removeprefix("refs/heads/"), None)
        return 204, None, {}

    # --- pull requests ---

    def _list_pulls(self, request: Request) -> Response:
        repo = self._repo_for_token(request, "pull_requests", "read")  # type: ignore[attr-defined]
        state = request.arg("state", "open")
        if state not in ("open", "closed", "all"):
            raise HTTPError(422, "Validation Failed", errors=[{"resource": "Issue",
                            "field": "state", "code": "invalid"}])  # fmt: skip
        head, base = request.arg("head"), request.arg("base")
        pulls = []
        for pull in sorted(repo.pulls.values(), key=lambda p: -p.number):
            if state != "all" and pull.state != state:
                continue
            if base and pull.base_ref != base:
                continue
            if head:
                owner, _, branch = head.partition(":")
                pull_owner = (
                    repo.owner if pull.head_repo == "" else (pull.head_repo or "").partition("/")[0]
                )
                if owner != pull_owner or (branch and branch != pull.head_ref):
                    continue
            # `pull-request-simple`, as merge_queue.py shapes it
            pulls.append(self._pull_simple_json(repo, pull))  # type: ignore[attr-defined]
        chunk, headers = self._paginate(request, pulls)  # type: ignore[attr-defined]
        return 200, chunk, headers

    def _create_pull(self, request: Request) -> Response:
        repo = self._repo_for_token(request, "pull_requests", "write")  # type: ignore[attr-defined]
        if repo.git_dir is None:
            raise HTTPError(422, "Validation Failed", errors=[{"resource": "PullRequest",
                            "field": "base", "code": "invalid"}])  # fmt: skip
        git = GitRepo(repo.git_dir)
        body = request.body if isinstance(request.body, dict) else {}
        title, head, base = body.get("title"), body.get("head") or "", body.get("base") or ""
        owner, _, branch = head.rpartition(":")
        if owner and owner != repo.owner:
            raise HTTPError(422, "Validation Failed", errors=[{"resource": "PullRequest",
                            "field": "head", "code": "invalid"}])  # fmt: skip
        base_sha = self._ref_sha(git, f"refs/heads/{base}") if base else None
        head_sha = self._ref_sha(git, f"refs/heads/{branch}") if branch else None
        errors = []
        if not title:
            errors.append({"resource": "PullRequest", "field": "title", "code": "missing_field"})
        if base_sha is None:
            errors.append({"resource": "PullRequest", "field": "base", "code": "invalid"})
        if head_sha is None:
            errors.append({"resource": "PullRequest", "field": "head", "code": "invalid"})
        if errors:
            raise HTTPError(422, "Validation Failed", errors=errors)
        for pull in repo.pulls.values():
            if (pull.state == "open" and pull.head_repo == "" and pull.head_ref == branch
                    and pull.base_ref == base):  # fmt: skip
                raise HTTPError(422, "Validation Failed", errors=[{"resource": "PullRequest",
                    "code": "custom",
                    "message": f"A pull request already exists for {repo.owner}:{branch}."}])  # fmt: skip
        try:
            git.git("merge-base", "--is-ancestor", head_sha, base_sha)
            raise HTTPError(422, "Validation Failed", errors=[{"resource": "PullRequest",
                "code": "custom", "message": f"No commits between {base} and {branch}"}])  # fmt: skip
        except RuntimeError:
            pass  # the head has commits the base has not
        user = self._bot_user(request)  # type: ignore[attr-defined]
        taken = set(repo.pulls) | set(getattr(self, "issues", {}).get(repo.full_name, {}))
        pull = Pull(
            number=max(taken, default=0) + 1,
            title=title,
            head_sha=head_sha,
            base_sha=base_sha,
            head_ref=branch,
            base_ref=base,
            body=body.get("body"),
            author_login=user["login"],
            author_type=user["type"],
            author_id=user["id"],
            draft=bool(body.get("draft")),
            id=self.next_id(),  # type: ignore[attr-defined]
        )
        repo.pulls[pull.number] = pull
        repo.commits.update({head_sha, base_sha})
        return 201, self._pull_json(repo, pull), {}  # type: ignore[attr-defined]

    def _update_pull(self, request: Request) -> Response:
        repo = self._repo_for_token(request, "pull_requests", "write")  # type: ignore[attr-defined]
        pull = self._pull(request, repo)  # type: ignore[attr-defined]
        body = request.body if isinstance(request.body, dict) else {}
        if "state" in body and body["state"] not in ("open", "closed"):
            raise HTTPError(422, "Validation Failed", errors=[{"resource": "PullRequest",
                            "field": "state", "code": "invalid"}])  # fmt: skip
        if body.get("state") == "open" and pull.state == "closed":
            if pull.merged:
                raise HTTPError(422, "Validation Failed", errors=[{"resource": "PullRequest",
                    "code": "custom", "message": "state cannot be changed. The pull request "
                    "cannot be reopened because it was merged."}])  # fmt: skip
            git = GitRepo(repo.git_dir) if repo.git_dir else None
            if git is not None and self._ref_sha(git, f"refs/heads/{pull.head_ref}") is None:
                raise HTTPError(422, "Validation Failed", errors=[{"resource": "PullRequest",
                    "code": "custom", "message": "state cannot be changed. The "
                    f"{pull.head_ref} branch has been deleted."}])  # fmt: skip
        if "title" in body:
            pull.title = body["title"]
        if "body" in body:
            pull.body = body["body"]
        if "state" in body:
            pull.state = body["state"]
        return 200, self._pull_json(repo, pull), {}  # type: ignore[attr-defined]

    def fix_branch_files(self, full_name: str, ref: str) -> dict[str, str]:
        """The files of a branch's tip, by path (for tests)."""
        git = GitRepo(self.repos[full_name].git_dir)  # type: ignore[attr-defined]
        out = {}
        for path in git.git("ls-tree", "-r", "--name-only", "-z", ref).split("\0"):
            if path:
                out[path] = git.git("show", f"{ref}:{path}")
        return out
