"""Routes: check runs."""

from __future__ import annotations

import time
from typing import Any

from tests.fakes.github.state import (
    CheckRun,
    HTTPError,
    Repo,
    Request,
    Response,
    iso,
)


class ChecksRoutes:
    def _check_run_fields(self, body: dict[str, Any], run: CheckRun | None) -> dict[str, Any]:
        statuses = ("queued", "in_progress", "completed")
        conclusions = (
            "action_required", "cancelled", "failure", "neutral", "success", "skipped", "stale", "timed_out",
        )  # fmt: skip
        fields: dict[str, Any] = {}
        status = body.get("status")
        if status is not None and status not in statuses:
            raise HTTPError(
                422,
                f"Invalid request.\n\nFor 'properties/status', \"{status}\" is not a member of {list(statuses)}.",
            )
        conclusion = body.get("conclusion")
        if conclusion is not None:
            if conclusion not in conclusions:
                raise HTTPError(
                    422,
                    f"Invalid request.\n\nFor 'properties/conclusion', \"{conclusion}\" is not a member of {list(conclusions)}.",
                )
            if conclusion == "stale":
                raise HTTPError(
                    422, "Invalid request.\n\nConclusion stale can only be set by GitHub."
                )
            fields["conclusion"] = conclusion
            fields["status"] = "completed"
            fields["completed_at"] = body.get("completed_at") or iso(time.time())
        elif status == "completed" or body.get("completed_at"):
            raise HTTPError(422, 'Invalid request.\n\n"conclusion" wasn\'t supplied.')
        elif status:
            fields["status"] = status
        if "output" in body:
            output = body["output"] or {}
            if not output.get("title") or not output.get("summary"):
                raise HTTPError(
                    422, 'Invalid request.\n\n"title" and "summary" are required in "output".'
                )
            for key in ("summary", "text"):
                if output.get(key) and len(output[key]) > 65535:
                    raise HTTPError(
                        422, f'Invalid request.\n\nOnly 65535 characters are allowed in "{key}".'
                    )
            annotations = output.get("annotations") or []
            if len(annotations) > 50:
                raise HTTPError(422, "Invalid request.\n\nAt most 50 annotations per request.")
            fields["output"] = {k: output.get(k) for k in ("title", "summary", "text")}
            fields["annotations"] = (run.annotations if run else []) + annotations
        if "actions" in body:
            if len(body["actions"] or []) > 3:
                raise HTTPError(422, "Invalid request.\n\nAt most 3 actions are allowed.")
            fields["actions"] = body["actions"]
        for key in ("details_url", "external_id", "name"):
            if key in body:
                fields[key] = body[key]
        return fields

    def _create_check_run(self, request: Request) -> Response:
        repo = self._repo_for_token(request, "checks", "write")
        body = request.body if isinstance(request.body, dict) else {}
        for key in ("name", "head_sha"):
            if not body.get(key):
                raise HTTPError(422, f'Invalid request.\n\n"{key}" wasn\'t supplied.')
        if body["head_sha"] not in repo.commits:
            raise HTTPError(422, f"No commit found for SHA: {body['head_sha']}")
        fields = self._check_run_fields(body, None)
        token = request.token
        assert token is not None
        run = CheckRun(
            id=self.next_id(),
            name=body["name"],
            head_sha=body["head_sha"],
            status=fields.get("status", "queued"),
            conclusion=fields.get("conclusion"),
            external_id=fields.get("external_id"),
            details_url=fields.get("details_url"),
            output=fields.get("output", {}),
            started_at=body.get("started_at") or iso(time.time()),
            completed_at=fields.get("completed_at"),
            app_id=self.installations[token.installation_id].app_id,
            actions=fields.get("actions", []),
            annotations=fields.get("annotations", []),
        )
        self.check_runs[run.id] = (repo.full_name, run)
        return 201, self._check_run_json(repo.full_name, run), {}

    def _check_run(self, request: Request, repo: Repo) -> CheckRun:
        found = self.check_runs.get(int(request.params["id"]))
        if found is None or found[0] != repo.full_name:
            raise HTTPError(404, "Not Found")
        return found[1]

    def _get_check_run(self, request: Request) -> Response:
        repo = self._repo_for_token(request, "checks", "read")
        return 200, self._check_run_json(repo.full_name, self._check_run(request, repo)), {}

    def _update_check_run(self, request: Request) -> Response:
        repo = self._repo_for_token(request, "checks", "write")
        run = self._check_run(request, repo)
        token = request.token
        assert token is not None
        if run.app_id != self.installations[token.installation_id].app_id:
            raise HTTPError(
                403,
                f"Invalid app_id `{run.app_id}` - check run can only be modified by the "
                "GitHub App that created it.",
            )
        body = request.body if isinstance(request.body, dict) else {}
        for key, value in self._check_run_fields(body, run).items():
            setattr(run, key, value)
        if body.get("status") and body["status"] != "completed" and not body.get("conclusion"):
            run.conclusion = None
            run.completed_at = None
        return 200, self._check_run_json(repo.full_name, run), {}

    def _list_check_runs(self, request: Request) -> Response:
        repo = self._repo_for_token(request, "checks", "read")
        ref = request.params["ref"]
        name = request.arg("check_name")
        runs = [
            self._check_run_json(repo.full_name, run)
            for full_name, run in sorted(self.check_runs.values(), key=lambda item: -item[1].id)
            if full_name == repo.full_name
            and run.head_sha == ref
            and (name is None or run.name == name)
        ]
        chunk, headers = self._paginate(request, runs)
        return 200, {"total_count": len(runs), "check_runs": chunk}, headers
