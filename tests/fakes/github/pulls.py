"""Routes: pull requests, their files and diff, reviews and review comments."""

from __future__ import annotations

import secrets
from typing import Any

from tests.fakes.github.state import (
    HTTPError,
    Pull,
    Repo,
    Request,
    Response,
)


class PullsRoutes:
    def _pull(self, request: Request, repo: Repo) -> Pull:
        pull = repo.pulls.get(int(request.params["number"]))
        if pull is None:
            raise HTTPError(404, "Not Found")
        return pull

    def _get_pull(self, request: Request) -> Response:
        repo = self._repo_for_token(request, "pull_requests", "read")
        return 200, self._pull_json(repo, self._pull(request, repo)), {}

    def _list_pull_files(self, request: Request) -> Response:
        repo = self._repo_for_token(request, "pull_requests", "read")
        pull = self._pull(request, repo)
        files = []
        for f in pull.files[:3000]:  # "Responses include a maximum of 3000 files."
            item: dict[str, Any] = {
                "sha": secrets.token_hex(20),
                "filename": f.filename,
                "status": f.status,
                "additions": f.additions,
                "deletions": f.deletions,
                "changes": f.additions + f.deletions,
                "blob_url": f"{self.url}/{repo.full_name}/blob/{pull.head_sha}/{f.filename}",
                "raw_url": f"{self.url}/{repo.full_name}/raw/{pull.head_sha}/{f.filename}",
                "contents_url": f"{self.url}/repos/{repo.full_name}/contents/{f.filename}?ref={pull.head_sha}",
            }
            if f.patch is not None:  # absent for binary and very large files
                item["patch"] = f.patch
            if f.previous_filename:
                item["previous_filename"] = f.previous_filename
            files.append(item)
        chunk, headers = self._paginate(request, files)
        return 200, chunk, headers
