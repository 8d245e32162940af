"""Routes: pull requests, their files and diff, reviews and review comments.

Reviews follow GitHub's anchoring rule: every comment's `line` (and `start_line`) must
be a line of the diff on its `side`, in one hunk, or the whole review is refused with
422 and nothing is stored; like GitHub's, the error does not say which comment was at
fault. A pending review (no `event`) is checked the same way, and its author may delete
it.
"""

from __future__ import annotations

import re
import time
from typing import Any

from tests.fakes.github import shapes
from tests.fakes.github.git import GitRepo
from tests.fakes.github.state import (
    HTTPError,
    Pull,
    PullFile,
    RawBody,
    Repo,
    Request,
    Response,
    iso,
)

HUNK_RE = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
EVENTS = {"APPROVE": "APPROVED", "REQUEST_CHANGES": "CHANGES_REQUESTED", "COMMENT": "COMMENTED"}


def commentable(patch: str | None) -> dict[str, dict[int, int]]:
    """{"RIGHT": {line: hunk index}, "LEFT": {...}} for a file's patch."""
    lines: dict[str, dict[int, int]] = {"RIGHT": {}, "LEFT": {}}
    if not patch:
        return lines
    hunk = -1
    old = new = 0
    for text in patch.splitlines():
        match = HUNK_RE.match(text)
        if match:
            hunk += 1
            old, new = int(match.group(1)), int(match.group(3))
            continue
        if hunk < 0 or text.startswith("\\"):
            continue
        if text.startswith("+"):
            lines["RIGHT"][new] = hunk
            new += 1
        elif text.startswith("-"):
            lines["LEFT"][old] = hunk
            old += 1
        else:
            lines["RIGHT"][new] = hunk
            lines["LEFT"][old] = hunk
            old += 1
            new += 1
    return lines


def position_to_line(patch: str, position: int) -> tuple[int, str] | None:
    """The legacy `position` (lines below the first @@, counting on through later hunks)."""
    old = new = 0
    for index, text in enumerate(patch.splitlines()):
        match = HUNK_RE.match(text)
        if match:
            old, new = int(match.group(1)), int(match.group(3))
            if index == position:
                return None
            continue
        if index == position:
            return (old, "LEFT") if text.startswith("-") else (new, "RIGHT")
        if text.startswith("+"):
            new += 1
        elif text.startswith("-"):
            old += 1
        elif not text.startswith("\\"):
            old += 1
            new += 1
    return None


def line_to_position(patch: str | None, line: int | None, side: str) -> int | None:
    """The legacy `position` of `line` on `side` (the inverse of `position_to_line`)."""
    if not patch or line is None:
        return None
    old = new = 0
    for index, text in enumerate(patch.splitlines()):
        match = HUNK_RE.match(text)
        if match:
            old, new = int(match.group(1)), int(match.group(3))
            continue
        if text.startswith("\\"):
            continue
        if text.startswith("+"):
            if side == "RIGHT" and new == line:
                return index
            new += 1
        elif text.startswith("-"):
            if side == "LEFT" and old == line:
                return index
            old += 1
        else:
            if (side == "RIGHT" and new == line) or (side == "LEFT" and old == line):
                return index
            old += 1
            new += 1
    return None


class PullsRoutes:
    # --- pull requests and files ---

    def _files_of(self, repo: Repo, pull: Pull) -> list[PullFile]:
        if pull.files or repo.git_dir is None:
            return pull.files
        cache = self.__dict__.setdefault("_diff_cache", {})
        key = (repo.full_name, pull.base_sha, pull.head_sha)
        if key not in cache:
            cache[key] = GitRepo(repo.git_dir).diff_files(pull.base_sha, pull.head_sha)
        return cache[key]

    def _pull(self, request: Request, repo: Repo) -> Pull:
        pull = repo.pulls.get(int(request.params["number"]))
        if pull is None:
            raise HTTPError(404, "Not Found")
        return pull

    def _get_pull(self, request: Request) -> Response:
        repo = self._repo_for_token(request, "pull_requests", "read")  # type: ignore[attr-defined]
        pull = self._pull(request, repo)
        if "diff" in request.headers.get("accept", ""):
            files = self._files_of(repo, pull)
            if len(files) > 300:
                raise HTTPError(
                    406,
                    "Sorry, the diff exceeded the maximum number of files (300). Consider using "
                    "'List pull requests files' API or locally cloning the repository instead.",
                    errors=[{"resource": "PullRequest", "field": "diff", "code": "too_large"}],
                )
            if repo.git_dir is None:
                raise HTTPError(404, "Not Found")
            text = GitRepo(repo.git_dir).diff_text(pull.base_sha, pull.head_sha)
            if text.count("\n") > 20000:
                raise HTTPError(406, "Sorry, the diff exceeded the maximum number of lines (20000)",
                                errors=[{"resource": "PullRequest", "field": "diff", "code": "too_large"}])  # fmt: skip
            return 200, RawBody(text.encode(), "text/plain; charset=utf-8"), {}
        return 200, self._pull_json(repo, pull), {}  # type: ignore[attr-defined]

    def _list_pull_files(self, request: Request) -> Response:
        repo = self._repo_for_token(request, "pull_requests", "read")  # type: ignore[attr-defined]
        pull = self._pull(request, repo)
        files = []
        for f in self._files_of(repo, pull)[:3000]:  # "Responses include a maximum of 3000 files."
            item: dict[str, Any] = {
                "sha": f"{abs(hash((pull.head_sha, f.filename))):040x}"[:40],
                "filename": f.filename,
                "status": f.status,
                "additions": f.additions,
                "deletions": f.deletions,
                "changes": f.additions + f.deletions,
                "blob_url": f"{self.url}/{repo.full_name}/blob/{pull.head_sha}/{f.filename}",  # type: ignore[attr-defined]
                "raw_url": f"{self.url}/{repo.full_name}/raw/{pull.head_sha}/{f.filename}",  # type: ignore[attr-defined]
                "contents_url": f"{self.url}/repos/{repo.full_name}/contents/{f.filename}?ref={pull.head_sha}",  # type: ignore[attr-defined]
            }
            if f.patch is not None:  # absent for binary and very large files
                item["patch"] = f.patch
            if f.previous_filename:
                item["previous_filename"] = f.previous_filename
            files.append(item)
        chunk, headers = self._paginate(request, files)  # type: ignore[attr-defined]
        return 200, chunk, headers

    # --- reviews ---

    def _bot_user(self, request: Request) -> dict[str, Any]:
        """Who the request's token posts as: its App's bot, or a person's token's user."""
        token = request.token
        assert token is not None
        if token.login is not None:
            return self._user_json(token.login, "User", token.user_id)  # type: ignore[attr-defined]
        app = self.apps[self.installations[token.installation_id].app_id]  # type: ignore[attr-defined]
        return self._user_json(f"{app.slug}[bot]", "Bot", 40_000_000 + app.id)  # type: ignore[attr-defined]

    def _review_json(self, repo: Repo, review: dict[str, Any]) -> dict[str, Any]:
        url = self.url  # type: ignore[attr-defined]
        number = review["_number"]
        return {
            # (a pending review has not been submitted: GitHub sends no `submitted_at`)
            **{
                k: v
                for k, v in review.items()
                if not k.startswith("_") and not (k == "submitted_at" and v is None)
            },
            "html_url": f"{url}/{repo.full_name}/pull/{number}#pullrequestreview-{review['id']}",
            "pull_request_url": f"{url}/repos/{repo.full_name}/pulls/{number}",
            "_links": shapes.review_links(url, repo.full_name, number, review["id"]),
        }

    def _comment_json(self, repo: Repo, comment: dict[str, Any]) -> dict[str, Any]:
        url = self.url  # type: ignore[attr-defined]
        number = comment["_number"]
        if "original_position" not in comment:
            # The legacy diff position, as GitHub records it when the comment is made.
            pull = repo.pulls[number]
            files = {f.filename: f for f in self._files_of(repo, pull)}
            file = files.get(comment.get("path") or "")
            position = line_to_position(
                file.patch if file else None, comment.get("line"), comment.get("side") or "RIGHT"
            )
            # (1 for a comment a test placed off the diff, which GitHub would have refused)
            comment["original_position"] = comment["position"] = position or 1
        return {
            **{k: v for k, v in comment.items() if not k.startswith("_")},
            "html_url": f"{url}/{repo.full_name}/pull/{number}#discussion_r{comment['id']}",
            "url": f"{url}/repos/{repo.full_name}/pulls/comments/{comment['id']}",
            "pull_request_url": f"{url}/repos/{repo.full_name}/pulls/{number}",
            "_links": shapes.review_comment_links(url, repo.full_name, number, comment["id"]),
            "reactions": shapes.reactions(
                f"{url}/repos/{repo.full_name}/pulls/comments/{comment['id']}/reactions"
            ),
        }

    def outside_diff(self, full_name: str, path: str, line: int) -> None:
        """Test helper: GitHub does not count `line` of `path` (RIGHT) as part of the
        pull request's diff, whatever git says: a review comment there is refused as
        GitHub refuses one outside the diff."""
        with self.lock:  # type: ignore[attr-defined]
            self.repos[full_name].outside_diff.add((path, line))  # type: ignore[attr-defined]

    def _anchor(
        self, files: dict[str, PullFile], comment: dict[str, Any], repo: Repo | None = None
    ) -> dict[str, Any]:
        """Check one review comment against the diff; GitHub's 422 messages when it fails."""

        def refuse(message: str) -> HTTPError:
            return HTTPError(422, "Unprocessable Entity", errors=[message])

        path = comment.get("path")
        if not comment.get("body"):
            raise refuse("Pull request review thread body can't be blank")
        file = files.get(path or "")
        if file is None:
            raise refuse("Pull request review thread path is invalid")
        lines = commentable(file.patch)
        side = comment.get("side") or "RIGHT"
        line = comment.get("line")
        if line is None and comment.get("position") is not None:
            found = position_to_line(file.patch or "", int(comment["position"]))
            if found is None:
                raise refuse("Pull request review thread position is invalid")
            line, side = found
        outside = repo.outside_diff if repo is not None else set()
        if (
            line is None
            or side not in lines
            or int(line) not in lines[side]
            or (side == "RIGHT" and (path, int(line)) in outside)
        ):
            raise refuse("Pull request review thread line must be part of the diff")
        anchored = {
            "path": path,
            "line": int(line),
            "side": side,
            "start_line": None,
            "start_side": None,
        }
        if comment.get("start_line") is not None:
            start, start_side = int(comment["start_line"]), comment.get("start_side") or side
            if start >= int(line):
                raise refuse("Pull request review thread start line must precede the end line.")
            if start not in lines.get(start_side, {}):
                raise refuse("Pull request review thread start line must be part of the diff")
            if lines[start_side][start] != lines[side][int(line)]:
                raise refuse(
                    "Pull request review thread start line must be part of the same hunk as the line."
                )
            anchored.update(start_line=start, start_side=start_side)
        return anchored

    def _create_review(self, request: Request) -> Response:
        repo = self._repo_for_token(request, "pull_requests", "write")  # type: ignore[attr-defined]
        pull = self._pull(request, repo)
        body = request.body if isinstance(request.body, dict) else {}
        event = body.get("event")
        if event is not None and event not in EVENTS:
            raise HTTPError(422, "Unprocessable Entity", errors=[f"Event {event} is not valid"])
        text = body.get("body") or ""
        if event in ("COMMENT", "REQUEST_CHANGES") and not text and not body.get("comments"):
            raise HTTPError(422, "Unprocessable Entity", errors=[f"Body is required for {event}"])
        if len(text) > 65536:
            raise HTTPError(
                422, "Validation Failed", errors=["Body is too long (maximum is 65536 characters)"]
            )
        commit = body.get("commit_id") or pull.head_sha
        if commit not in repo.commits and not self._is_commit(repo, commit):
            raise HTTPError(
                422, "Unprocessable Entity", errors=["Commit is not part of the pull request"]
            )
        user = self._bot_user(request)
        if event in ("APPROVE", "REQUEST_CHANGES") and pull.author_login == user["login"]:
            verb = "approve" if event == "APPROVE" else "request changes on"
            raise HTTPError(
                422, "Unprocessable Entity", errors=[f"Can not {verb} your own pull request"]
            )
        if event is None and any(
            r["_number"] == pull.number
            and r["state"] == "PENDING"
            and r["user"]["login"] == user["login"]
            for r in repo.reviews.values()
        ):
            raise HTTPError(
                422,
                "Unprocessable Entity",
                errors=["User can only have one pending review per pull request"],
            )
        files = {f.filename: f for f in self._files_of(repo, pull)}
        anchored = [
            self._anchor(files, c, repo) for c in body.get("comments") or []
        ]  # all or nothing
        for c in body.get("comments") or []:
            if len(c.get("body") or "") > 65536:
                raise HTTPError(
                    422,
                    "Validation Failed",
                    errors=["Body is too long (maximum is 65536 characters)"],
                )

        review_id = self.next_id()  # type: ignore[attr-defined]
        now = iso(time.time())
        review = {
            "id": review_id,
            "node_id": f"PRR_{review_id}",
            "user": user,
            "body": text,
            "state": EVENTS.get(event, "PENDING"),
            "commit_id": commit,
            "submitted_at": None if event is None else now,
            "author_association": "NONE",
            "_number": pull.number,
        }
        repo.reviews[review_id] = review
        for raw, where in zip(body.get("comments") or [], anchored, strict=True):
            comment_id = self.next_id()  # type: ignore[attr-defined]
            repo.threads[f"PRRT_{comment_id}"] = {
                "id": f"PRRT_{comment_id}", "first": comment_id, "isResolved": False, "resolvedBy": None,
            }  # fmt: skip
            repo.review_comments[comment_id] = {
                "id": comment_id,
                "node_id": f"PRRC_{comment_id}",
                "pull_request_review_id": review_id,
                "user": user,
                "body": raw["body"],
                "commit_id": commit,
                "original_commit_id": commit,
                "line": where["line"],
                "original_line": where["line"],
                "side": where["side"],
                "start_line": where["start_line"],
                "original_start_line": where["start_line"],
                "start_side": where["start_side"],
                "path": where["path"],
                "subject_type": "line",
                "diff_hunk": "",
                "author_association": "NONE",
                "created_at": now,
                "updated_at": now,
                "_number": pull.number,
            }
        return 200, self._review_json(repo, review), {}

    def _is_commit(self, repo: Repo, sha: str) -> bool:
        if repo.git_dir is None or not re.fullmatch(r"[0-9a-f]{40}", sha):
            return False
        try:
            GitRepo(repo.git_dir).git("cat-file", "-e", f"{sha}^{{commit}}")
        except RuntimeError:
            return False
        return True

    def _list_reviews(self, request: Request) -> Response:
        repo = self._repo_for_token(request, "pull_requests", "read")  # type: ignore[attr-defined]
        pull = self._pull(request, repo)
        items = [self._review_json(repo, r) for r in sorted(repo.reviews.values(), key=lambda r: r["id"])
                 if r["_number"] == pull.number]  # fmt: skip
        chunk, headers = self._paginate(request, items)  # type: ignore[attr-defined]
        return 200, chunk, headers

    def _review(self, request: Request, repo: Repo, pull: Pull) -> dict[str, Any]:
        review = repo.reviews.get(int(request.params["id"]))
        if review is None or review["_number"] != pull.number:
            raise HTTPError(404, "Not Found")
        return review

    def _get_review(self, request: Request) -> Response:
        repo = self._repo_for_token(request, "pull_requests", "read")  # type: ignore[attr-defined]
        pull = self._pull(request, repo)
        return 200, self._review_json(repo, self._review(request, repo, pull)), {}

    def _update_review(self, request: Request) -> Response:
        """`PUT .../reviews/{id}`: the body of a review, by its author only (GitHub
        answers someone else 403); its state and comments stay."""
        repo = self._repo_for_token(request, "pull_requests", "write")  # type: ignore[attr-defined]
        pull = self._pull(request, repo)
        review = self._review(request, repo, pull)
        body = request.body if isinstance(request.body, dict) else {}
        text = body.get("body")
        if not isinstance(text, str) or not text:
            raise HTTPError(422, "Unprocessable Entity", errors=["Body can't be blank"])
        if len(text) > 65536:
            raise HTTPError(
                422, "Validation Failed", errors=["Body is too long (maximum is 65536 characters)"]
            )
        if review["user"]["login"] != self._bot_user(request)["login"]:
            raise HTTPError(403, "Resource not accessible by integration")
        review["body"] = text
        return 200, self._review_json(repo, review), {}

    def _delete_review(self, request: Request) -> Response:
        """`DELETE .../reviews/{id}`: a pending review, by its author ("Submitted reviews
        cannot be deleted"; another's pending review is not theirs to see), with its
        comments."""
        repo = self._repo_for_token(request, "pull_requests", "write")  # type: ignore[attr-defined]
        pull = self._pull(request, repo)
        review = self._review(request, repo, pull)
        if review["user"]["login"] != self._bot_user(request)["login"]:
            raise HTTPError(404, "Not Found")
        if review["state"] != "PENDING":
            raise HTTPError(
                422, "Unprocessable Entity", errors=["Submitted reviews cannot be deleted."]
            )
        del repo.reviews[review["id"]]
        for comment_id in [
            i
            for i, c in repo.review_comments.items()
            if c["pull_request_review_id"] == review["id"]
        ]:
            del repo.review_comments[comment_id]
            repo.threads.pop(f"PRRT_{comment_id}", None)
        return 200, self._review_json(repo, review), {}

    def _list_review_comments_of(self, request: Request) -> Response:
        repo = self._repo_for_token(request, "pull_requests", "read")  # type: ignore[attr-defined]
        pull = self._pull(request, repo)
        review = self._review(request, repo, pull)
        items = [self._comment_json(repo, c) for c in sorted(repo.review_comments.values(), key=lambda c: c["id"])
                 if c["pull_request_review_id"] == review["id"]]  # fmt: skip
        chunk, headers = self._paginate(request, items)  # type: ignore[attr-defined]
        return 200, chunk, headers

    def _list_review_comments(self, request: Request) -> Response:
        repo = self._repo_for_token(request, "pull_requests", "read")  # type: ignore[attr-defined]
        pull = self._pull(request, repo)
        published = {r["id"] for r in repo.reviews.values() if r["state"] != "PENDING"}
        items = [self._comment_json(repo, c) for c in sorted(repo.review_comments.values(), key=lambda c: c["id"])
                 if c["_number"] == pull.number and c["pull_request_review_id"] in published]  # fmt: skip
        chunk, headers = self._paginate(request, items)  # type: ignore[attr-defined]
        return 200, chunk, headers

    def reviews_of(self, full_name: str, number: int) -> list[dict[str, Any]]:
        """Test helper: the reviews posted on a pull request, oldest first."""
        with self.lock:  # type: ignore[attr-defined]
            repo = self.repos[full_name]  # type: ignore[attr-defined]
            return [
                r
                for r in sorted(repo.reviews.values(), key=lambda r: r["id"])
                if r["_number"] == number
            ]

    def review_comments_of(self, full_name: str, number: int) -> list[dict[str, Any]]:
        """Test helper: the review comments on a pull request, oldest first."""
        with self.lock:  # type: ignore[attr-defined]
            repo = self.repos[full_name]  # type: ignore[attr-defined]
            return [
                c
                for c in sorted(repo.review_comments.values(), key=lambda c: c["id"])
                if c["_number"] == number
            ]
