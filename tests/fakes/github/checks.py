"""Routes: check runs, commit statuses, and the required status checks of protected
branches.

Check runs of other Apps (GitHub Actions, a CI service) are recorded with `ci_check_run`
and listed next to the test App's own. Reading branch protection needs Administration:
read on the token, as on GitHub; an unprotected branch answers 404 "Branch not
protected", a protected one without required checks 404 "Required status checks not
enabled".
"""

from __future__ import annotations

import time
from typing import Any
from urllib.parse import unquote

from tests.fakes.github.state import (
    App,
    CheckRun,
    HTTPError,
    Repo,
    Request,
    Response,
    iso,
)

# Real App ids, so payloads and lists look like GitHub's.
KNOWN_APPS = {"github-actions": (15368, "GitHub Actions")}
STATUS_STATES = ("error", "failure", "pending", "success")
# "there is a limit of 1000 statuses per sha and context within a repository"
MAX_STATUSES_PER_CONTEXT = 1000


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
        # Any commit of the repository, a pull request's head or not (a merge group's).
        if body["head_sha"] not in repo.commits and not self._is_commit(repo, body["head_sha"]):
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
        status = request.arg("status")
        app_id = request.arg("app_id")
        which = request.arg("filter", "latest")
        if which not in ("latest", "all"):
            raise HTTPError(
                422,
                f"Invalid request.\n\nFor 'filter', \"{which}\" is not a member of ['latest', 'all'].",
            )
        runs = [
            run
            for full_name, run in sorted(self.check_runs.values(), key=lambda item: -item[1].id)
            if full_name == repo.full_name
            and run.head_sha == ref
            and (name is None or run.name == name)
            and (status is None or run.status == status)
            and (app_id is None or str(run.app_id) == app_id)
        ]
        if which == "latest":
            # GitHub keeps the newest run of each name within a check suite; the fake has
            # one suite per App and commit, as GitHub creates them by default.
            seen: set[tuple[int, str]] = set()
            newest = []
            for run in runs:
                if (run.app_id, run.name) not in seen:
                    seen.add((run.app_id, run.name))
                    newest.append(run)
            runs = newest
        items = [self._check_run_json(repo.full_name, run) for run in runs]
        chunk, headers = self._paginate(request, items)
        return 200, {"total_count": len(items), "check_runs": chunk}, headers

    # --- commit statuses ---

    def _status_json(self, repo: Repo, status: dict[str, Any]) -> dict[str, Any]:
        return {
            **{k: v for k, v in status.items() if not k.startswith("_")},
            "url": f"{self.url}/repos/{repo.full_name}/statuses/{status['_sha']}",
        }

    def _create_status(self, request: Request) -> Response:
        repo = self._repo_for_token(request, "statuses", "write")
        sha = request.params["sha"]
        body = request.body if isinstance(request.body, dict) else {}
        state = body.get("state")
        if state not in STATUS_STATES:
            raise HTTPError(
                422,
                "Validation Failed",
                errors=[
                    {
                        "resource": "Status",
                        "field": "state",
                        "code": "custom",
                        "message": "state is not included in the list",
                    }
                ],
            )
        if sha not in repo.commits and not self._is_commit(repo, sha):
            raise HTTPError(422, f"No commit found for SHA: {sha}")
        context = body.get("context") or "default"
        same = [s for s in repo.statuses if s["_sha"] == sha and s["context"] == context]
        if len(same) >= MAX_STATUSES_PER_CONTEXT:
            raise HTTPError(
                422,
                "Validation Failed",
                errors=[
                    {
                        "resource": "Status",
                        "code": "custom",
                        "message": "This SHA and context has reached the maximum number of statuses.",
                    }
                ],
            )
        status = self._status_add(
            repo,
            sha,
            context,
            state=state,
            description=body.get("description"),
            target_url=body.get("target_url"),
            creator=self._bot_user(request),
        )
        return 201, self._status_json(repo, status), {}

    def _status_add(
        self,
        repo: Repo,
        sha: str,
        context: str,
        *,
        state: str,
        description: str | None,
        target_url: str | None,
        creator: dict[str, Any],
    ) -> dict[str, Any]:
        status_id = self.next_id()
        now = iso(time.time())
        status = {
            "id": status_id,
            "node_id": f"SC_{status_id}",
            "state": state,
            "description": description,
            "target_url": target_url,
            "context": context,
            "avatar_url": None,
            "created_at": now,
            "updated_at": now,
            "creator": creator,
            "_sha": sha,
        }
        repo.statuses.append(status)
        return status

    def _combined_status(self, request: Request) -> Response:
        repo = self._repo_for_token(request, "statuses", "read")
        ref = request.params["ref"]
        latest: dict[str, dict[str, Any]] = {}
        for status in repo.statuses:  # oldest first: a later status replaces its context's
            if status["_sha"] == ref:
                latest[status["context"]] = status
        states = {s["state"] for s in latest.values()}
        if states & {"error", "failure"}:
            combined = "failure"
        elif not states or "pending" in states:
            combined = "pending"
        else:
            combined = "success"
        # The combined view lists each context's latest status, without its creator.
        items = [
            {k: v for k, v in self._status_json(repo, s).items() if k != "creator"}
            for s in sorted(latest.values(), key=lambda s: s["id"])
        ]
        chunk, headers = self._paginate(request, items)
        return (
            200,
            {
                "state": combined,
                "statuses": chunk,
                "sha": ref,
                "total_count": len(items),
                "repository": self._repo_json(repo),
                "commit_url": f"{self.url}/repos/{repo.full_name}/commits/{ref}",
                "url": f"{self.url}/repos/{repo.full_name}/commits/{ref}/status",
            },
            headers,
        )

    # --- branch protection ---

    def _required_status_checks(self, request: Request) -> Response:
        repo = self._repo_for_token(request, "administration", "read")
        branch = unquote(request.params["branch"])
        if branch not in repo.protection:
            raise HTTPError(404, "Branch not protected")
        names = repo.protection[branch]
        if not names:
            raise HTTPError(404, "Required status checks not enabled")
        url = (
            f"{self.url}/repos/{repo.full_name}/branches/{branch}/protection/required_status_checks"
        )
        return (
            200,
            {
                "url": url,
                "strict": False,
                "contexts": list(names),
                "contexts_url": f"{url}/contexts",
                # app_id null: any App (or a commit status) may satisfy the check
                "checks": [{"context": name, "app_id": None} for name in names],
            },
            {},
        )

    # --- helpers for tests: what other Apps and people do on GitHub ---

    def protect(self, full_name: str, branch: str, *, checks: list[str]) -> None:
        """Protect `branch`, requiring the named status checks (none: protected, but no
        checks required)."""
        with self.lock:
            self.repos[full_name].protection[branch] = list(checks)

    def _app_for_slug(self, slug: str) -> App:
        for app in self.apps.values():
            if app.slug == slug:
                return app
        app_id, name = KNOWN_APPS.get(slug, (self.next_id(), slug))
        app = App(id=app_id, slug=slug, public_key="", name=name)
        self.apps[app_id] = app
        return app

    def ci_check_run(
        self,
        full_name: str,
        head_sha: str,
        name: str,
        *,
        status: str = "completed",
        conclusion: str | None = "success",
        title: str | None = None,
        summary: str | None = None,
        text: str | None = None,
        app_slug: str = "github-actions",
        details_url: str | None = None,
    ) -> CheckRun:
        """Another App (GitHub Actions by default) records a check run on `head_sha`; it
        lists with the test App's runs. `conclusion` applies only to a completed run."""
        with self.lock:
            repo = self.repos[full_name]
            repo.commits.add(head_sha)
            app = self._app_for_slug(app_slug)
            run_id = self.next_id()
            now = iso(time.time())
            done = status == "completed"
            run = CheckRun(
                id=run_id,
                name=name,
                head_sha=head_sha,
                status=status,
                conclusion=conclusion if done else None,
                external_id="",
                details_url=details_url or f"{self.url}/{full_name}/actions/runs/{run_id}",
                output={"title": title, "summary": summary, "text": text},
                started_at=now,
                completed_at=now if done else None,
                app_id=app.id,
            )
            self.check_runs[run.id] = (full_name, run)
            return run

    def ci_status(
        self,
        full_name: str,
        sha: str,
        context: str,
        *,
        state: str = "success",
        description: str | None = None,
        target_url: str | None = None,
        creator: str = "ci-bot",
    ) -> dict[str, Any]:
        """A CI service posts a commit status (as `POST /repos/{o}/{r}/statuses/{sha}`
        would record it); returns its JSON."""
        assert state in STATUS_STATES, state
        with self.lock:
            repo = self.repos[full_name]
            repo.commits.add(sha)
            status = self._status_add(
                repo,
                sha,
                context,
                state=state,
                description=description,
                target_url=target_url,
                creator=self._user_json(creator, "User", abs(hash(creator)) % 10**6),
            )
            return self._status_json(repo, status)

    def statuses_of(self, full_name: str, sha: str) -> list[dict[str, Any]]:
        """Test helper: every status posted on `sha`, oldest first."""
        with self.lock:
            repo = self.repos[full_name]
            return [self._status_json(repo, s) for s in repo.statuses if s["_sha"] == sha]
