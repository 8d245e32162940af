"""GitHub Actions on the fake GitHub: workflow files, `workflow_dispatch`, workflow runs,
and the OIDC tokens a run's job presents to Tasuku.

Workflows are files in the repository's real git history (`add_git_repo`): a workflow
exists when `.github/workflows/<file>` is on the default branch, and the file as it is
at the dispatched ref decides its trigger and inputs (parsed as YAML, `on:` included).
Dispatching answers as GitHub does: 404 for an unknown workflow, 422 "No ref found for:
<ref>", 422 "Workflow does not have 'workflow_dispatch' trigger", 422 for unexpected or
missing inputs and for more than 25, 403 without Actions: write; 204, or 200 with
`workflow_run_id`, `run_url` and `html_url` when `return_run_details` is true.

`actions_behave` makes it behave as other GitHubs do. `run_details="ignored"`: 204
whatever is asked. `"refused"`: GitHub Enterprise Server 3.17–3.19, whose published
descriptions (@octokit/openapi's ghes-3.17/3.18/3.19) know only `ref` and `inputs` and
answer 204; GHES 3.19 was reported refusing the new key ("\"return_run_details\" is not
a permitted key.", benc-uk/workflow-dispatch#86): 422 for it, 204 without it. `run_delay`: GitHub creates a dispatched run a few seconds after
it answers; until then the run is neither listed nor found by id, and its `created_at`
is when it was created.

Each dispatch records an `ActionsRun` that tests drive (`actions_run_start`,
`actions_run_complete`, `actions_run_rerun`: each returns the `workflow_run` webhook
payload GitHub would send). A run's job gets `actions_runner_env` (the
ACTIONS_ID_TOKEN_REQUEST_URL/TOKEN pair) and asks the fake for an OIDC token as the
Actions runner does; the tokens come from the fake's issuer (`oidc.py`).

The mixin comes before `FakeGitHubBase` in `FakeGitHub`'s bases: it adds its state in
`__init__`, its routes after the base's, and clears its state in `reset`.
"""

from __future__ import annotations

import json
import re
import secrets
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote, unquote

import yaml

from tests.fakes.github.git import GitRepo
from tests.fakes.github.state import HTTPError, Repo, Request, Response, iso

WORKFLOWS_DIR = ".github/workflows"
TASUKU_WORKFLOW = f"{WORKFLOWS_DIR}/tasuku.yml"
TASUKU_INPUT = "tasuku_run_id"
# "The maximum number of properties is 25" (inputs of a workflow dispatch)
MAX_DISPATCH_INPUTS = 25
RUN_CONCLUSIONS = (
    "action_required", "cancelled", "failure", "neutral", "skipped", "stale", "success", "timed_out",
)  # fmt: skip
# The fake's stand-in for the Actions service host that ACTIONS_ID_TOKEN_REQUEST_URL names.
ID_TOKEN_PATH = "/_apis/actions/runs/{run_id}/idtoken"
_EXPRESSION = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")


@dataclass
class Workflow:
    """A workflow file as `add_workflow` committed it."""

    id: int
    path: str
    name: str
    branch: str
    commit: str  # the commit on `branch` that wrote the file
    content: str


@dataclass
class ActionsRun:
    """One workflow run (`GET /repos/{o}/{r}/actions/runs/{id}`)."""

    id: int
    full_name: str
    workflow_id: int
    path: str  # .github/workflows/tasuku.yml
    name: str  # the workflow's `name:`
    display_title: str  # its `run-name:` rendered with the inputs, else `name`
    ref: str  # refs/heads/main
    head_branch: str
    head_sha: str
    inputs: dict[str, Any]
    run_number: int
    actor_login: str
    actor_id: int
    check_suite_id: int
    check_run_id: int  # the job's check run (the `check_run_id` claim)
    created_at: float  # when GitHub created it (listed from then on)
    event: str = "workflow_dispatch"
    actor_type: str = "Bot"  # the App's bot; "User" for a person's dispatch
    status: str = "queued"
    conclusion: str | None = None
    run_attempt: int = 1
    run_started_at: float | None = None
    updated_at: float = 0.0
    # The job's ACTIONS_ID_TOKEN_REQUEST_TOKEN; it works while the job runs.
    request_token: str = field(default_factory=lambda: secrets.token_urlsafe(32))


def workflow_yaml(
    *,
    name: str = "Tasuku",
    on_dispatch: bool = True,
    inputs: Sequence[str] | Mapping[str, Mapping[str, Any]] = (TASUKU_INPUT,),
    run_name: str | None = f"Tasuku run ${{{{ inputs.{TASUKU_INPUT} }}}}",
) -> str:
    """A workflow file like the one Tasuku asks repositories to add: `inputs` names
    required string inputs (or maps names to their full declarations)."""
    declared = (
        {k: dict(v) for k, v in inputs.items()}
        if isinstance(inputs, Mapping)
        else {n: {"description": n, "required": True, "type": "string"} for n in inputs}
    )
    trigger: Any = {"workflow_dispatch": {"inputs": declared} if declared else None}
    if not on_dispatch:
        trigger = {"push": {"branches": ["main"]}}
    document: dict[str, Any] = {"name": name}
    if run_name is not None:
        document["run-name"] = run_name
    document["on"] = trigger
    document["permissions"] = {"contents": "read", "id-token": "write"}
    document["jobs"] = {"review": {"runs-on": "ubuntu-latest", "steps": [{"run": "tasuku-runner"}]}}
    return yaml.safe_dump(document, sort_keys=False)


def _dispatch_trigger(content: str | None) -> dict[str, Any] | None:
    """The `workflow_dispatch` section of a workflow file ({} when it declares no
    inputs), or None when the file has no such trigger."""
    if content is None:
        return None
    try:
        document = yaml.safe_load(content)
    except yaml.YAMLError:
        return None
    if not isinstance(document, dict):
        return None
    # YAML 1.1 reads the key `on` as the boolean True.
    on = document.get("on", document.get(True))
    if on == "workflow_dispatch" or (isinstance(on, list) and "workflow_dispatch" in on):
        return {}
    if isinstance(on, dict) and "workflow_dispatch" in on:
        return on["workflow_dispatch"] or {}
    return None


def _workflow_name(content: str | None, path: str) -> str:
    try:
        document = yaml.safe_load(content or "")
    except yaml.YAMLError:
        document = None
    if isinstance(document, dict) and isinstance(document.get("name"), str):
        return document["name"]
    return path


def _display_title(content: str | None, name: str, inputs: dict[str, Any]) -> str:
    """`run-name:` with `inputs.X` / `github.event.inputs.X` filled in (other
    expressions become empty), else the workflow's name, as GitHub shows a dispatched
    run."""
    try:
        document = yaml.safe_load(content or "")
    except yaml.YAMLError:
        document = None
    template = document.get("run-name") if isinstance(document, dict) else None
    if not isinstance(template, str) or not template.strip():
        return name

    def fill(match: re.Match[str]) -> str:
        expression = match.group(1)
        for prefix in ("inputs.", "github.event.inputs."):
            if expression.startswith(prefix):
                return str(inputs.get(expression[len(prefix) :], ""))
        return ""

    return _EXPRESSION.sub(fill, template).strip() or name


RUN_DETAILS = ("returned", "ignored", "refused")


@dataclass
class ActionsBehaviour:
    """How the fake's dispatch answers (see `actions_behave`)."""

    run_details: str = "returned"  # RUN_DETAILS
    run_delay: float = 0.0  # seconds between the dispatch's answer and the run


class ActionsRoutes:
    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)  # type: ignore[call-arg]
        self.actions_behaviour = ActionsBehaviour()
        self.actions_runs: dict[int, ActionsRun] = {}
        self.workflow_ids: dict[tuple[str, str], int] = {}  # (repo, path) -> id
        self.disabled_workflows: set[tuple[str, str]] = set()
        owner_repo = r"/repos/(?P<owner>[^/]+)/(?P<repo>[^/]+)"
        workflow = owner_repo + r"/actions/workflows/(?P<workflow_id>[^/]+)"
        table = [
            ("GET", workflow, "token", self._get_workflow),
            ("POST", workflow + r"/dispatches", "token", self._dispatch_workflow),
            ("GET", workflow + r"/runs", "token", self._list_workflow_runs),
            ("GET", owner_repo + r"/actions/runs/(?P<id>\d+)", "token", self._get_actions_run),
            ("GET", ID_TOKEN_PATH.format(run_id=r"(?P<id>\d+)"), "none", self._oidc_id_token),
        ]
        self.routes += [(m, re.compile(p), a, fn) for m, p, a, fn in table]  # type: ignore[attr-defined]

    def reset(self) -> None:
        super().reset()  # type: ignore[misc]
        with self.lock:  # type: ignore[attr-defined]
            self.actions_behaviour = ActionsBehaviour()
            self.actions_runs.clear()
            self.workflow_ids.clear()
            self.disabled_workflows.clear()

    def actions_behave(self, *, run_details: str = "returned", run_delay: float = 0.0) -> None:
        """Dispatch as another GitHub does: `run_details` "returned" (github.com),
        "ignored" (204 whatever is asked) or "refused" (GitHub Enterprise Server
        3.17–3.19: 422 for the unknown key `return_run_details`, 204 without it); each
        dispatched run created `run_delay` seconds after the answer."""
        assert run_details in RUN_DETAILS, run_details
        with self.lock:  # type: ignore[attr-defined]
            self.actions_behaviour = ActionsBehaviour(run_details, run_delay)

    @staticmethod
    def _created(run: ActionsRun) -> bool:
        """Whether GitHub has created the dispatched run yet (it lists it from then)."""
        return time.time() >= run.created_at

    # --- workflow files (in the repository's git history) ---

    def _git(self, repo: Repo) -> GitRepo | None:
        return GitRepo(repo.git_dir) if repo.git_dir is not None else None

    def _resolve_ref(self, repo: Repo, ref: str) -> tuple[str, str] | None:
        """(full ref, commit sha) of a branch or tag name, or of a `refs/...` name."""
        git = self._git(repo)
        if git is None or not ref:
            return None
        names = [ref] if ref.startswith("refs/") else [f"refs/heads/{ref}", f"refs/tags/{ref}"]
        for name in names:
            try:
                return name, git.git("rev-parse", "--verify", "-q", f"{name}^{{commit}}").strip()
            except RuntimeError:
                continue
        return None

    def _file_at(self, repo: Repo, sha: str, path: str) -> str | None:
        git = self._git(repo)
        if git is None:
            return None
        try:
            return git.git("show", f"{sha}:{path}")
        except RuntimeError:
            return None

    def _workflow_paths(self, repo: Repo) -> list[str]:
        """The workflow files on the default branch."""
        git = self._git(repo)
        if git is None or self._resolve_ref(repo, repo.default_branch) is None:
            return []
        listed = git.git(
            "ls-tree", "--name-only", f"refs/heads/{repo.default_branch}", f"{WORKFLOWS_DIR}/"
        )
        return [p for p in listed.splitlines() if p.endswith((".yml", ".yaml"))]

    def _workflow_id(self, full_name: str, path: str) -> int:
        key = (full_name, path)
        if key not in self.workflow_ids:
            self.workflow_ids[key] = self.next_id()  # type: ignore[attr-defined]
        return self.workflow_ids[key]

    def _find_workflow(self, repo: Repo, workflow_id: str) -> tuple[int, str]:
        """(id, path) of a workflow named by its numeric id or file name; 404 when the
        default branch has no such file."""
        for path in self._workflow_paths(repo):
            number = self._workflow_id(repo.full_name, path)
            if workflow_id in (str(number), path.rsplit("/", 1)[-1]):
                return number, path
        raise HTTPError(404, "Not Found")

    def _workflow_json(self, repo: Repo, workflow_id: int, path: str) -> dict[str, Any]:
        branch = repo.default_branch
        content = self._file_at(repo, f"refs/heads/{branch}", path)
        state = (
            "disabled_manually" if (repo.full_name, path) in self.disabled_workflows else "active"
        )
        url = self.url  # type: ignore[attr-defined]
        return {
            "id": workflow_id,
            "node_id": f"W_{workflow_id}",
            "name": _workflow_name(content, path),
            "path": path,
            "state": state,
            "created_at": "2026-01-01T00:00:00.000Z",
            "updated_at": "2026-01-01T00:00:00.000Z",
            "url": f"{url}/repos/{repo.full_name}/actions/workflows/{workflow_id}",
            "html_url": f"{url}/{repo.full_name}/blob/{branch}/{path}",
            "badge_url": f"{url}/{repo.full_name}/workflows/{quote(path)}/badge.svg",
        }

    # --- routes ---

    def _get_workflow(self, request: Request) -> Response:
        repo = self._repo_for_token(request, "actions", "read")  # type: ignore[attr-defined]
        workflow_id, path = self._find_workflow(repo, unquote(request.params["workflow_id"]))
        return 200, self._workflow_json(repo, workflow_id, path), {}

    def _dispatch_workflow(self, request: Request) -> Response:
        repo = self._repo_for_token(request, "actions", "write")  # type: ignore[attr-defined]
        workflow_id, path = self._find_workflow(repo, unquote(request.params["workflow_id"]))
        body = request.body
        if not isinstance(body, dict):
            raise HTTPError(400, "Problems parsing JSON")
        behaviour = self.actions_behaviour
        if behaviour.run_details == "refused" and "return_run_details" in body:
            raise HTTPError(422, 'Invalid request.\n\n"return_run_details" is not a permitted key.')
        ref = body.get("ref")
        if not isinstance(ref, str) or not ref:
            raise HTTPError(422, 'Invalid request.\n\n"ref" wasn\'t supplied.')
        inputs = body.get("inputs") or {}
        if not isinstance(inputs, dict):
            raise HTTPError(
                422, "Invalid request.\n\nFor 'properties/inputs', it is not an object."
            )
        if len(inputs) > MAX_DISPATCH_INPUTS:
            raise HTTPError(
                422,
                f"Invalid request.\n\nFor 'properties/inputs', {len(inputs)} properties are "
                f"more than the maximum of {MAX_DISPATCH_INPUTS}.",
            )
        if (repo.full_name, path) in self.disabled_workflows:
            raise HTTPError(422, "Cannot trigger a 'workflow_dispatch' on a disabled workflow")
        resolved = self._resolve_ref(repo, ref)
        if resolved is None:
            raise HTTPError(422, f"No ref found for: {ref}")
        full_ref, sha = resolved
        content = self._file_at(repo, sha, path)
        trigger = _dispatch_trigger(content)
        if trigger is None:
            raise HTTPError(422, "Workflow does not have 'workflow_dispatch' trigger")
        declared = trigger.get("inputs") or {}
        unexpected = sorted(set(inputs) - set(declared))
        if unexpected:
            raise HTTPError(422, f"Unexpected inputs provided: {json.dumps(unexpected)}")
        values: dict[str, Any] = {}
        for name, spec in declared.items():
            spec = spec or {}
            if name in inputs:
                values[name] = inputs[name]
            elif spec.get("required") and spec.get("default") is None:
                raise HTTPError(422, f"Required input '{name}' not provided")
            elif spec.get("default") is not None:
                values[name] = spec["default"]
        bot = self._bot_user(request)  # type: ignore[attr-defined]
        run = self._actions_run_create(
            repo, workflow_id, path, full_ref, sha, content, values,
            actor=(bot["login"], bot["id"], "Bot"), delay=behaviour.run_delay,
        )  # fmt: skip
        if body.get("return_run_details") is True and behaviour.run_details == "returned":
            data = self._actions_run_json(repo, run)
            return (
                200,
                {
                    "workflow_run_id": run.id,
                    "run_url": data["url"],
                    "html_url": data["html_url"],
                },
                {},
            )
        return 204, None, {}

    def _actions_run_create(
        self,
        repo: Repo,
        workflow_id: int,
        path: str,
        full_ref: str,
        sha: str,
        content: str | None,
        values: dict[str, Any],
        *,
        actor: tuple[str, int, str],
        delay: float = 0.0,
    ) -> ActionsRun:
        name = _workflow_name(content, path)
        created = time.time() + delay
        run = ActionsRun(
            id=self.next_id(),  # type: ignore[attr-defined]
            full_name=repo.full_name,
            workflow_id=workflow_id,
            path=path,
            name=name,
            display_title=_display_title(content, name, values),
            ref=full_ref,
            head_branch=full_ref.removeprefix("refs/heads/").removeprefix("refs/tags/"),
            head_sha=sha,
            inputs=values,
            run_number=1
            + sum(1 for r in self.actions_runs.values() if r.workflow_id == workflow_id),
            actor_login=actor[0],
            actor_id=actor[1],
            actor_type=actor[2],
            check_suite_id=self.next_id(),  # type: ignore[attr-defined]
            check_run_id=self.next_id(),  # type: ignore[attr-defined]
            created_at=created,
            updated_at=created,
        )
        self.actions_runs[run.id] = run
        repo.commits.add(sha)
        return run

    def _list_workflow_runs(self, request: Request) -> Response:
        repo = self._repo_for_token(request, "actions", "read")  # type: ignore[attr-defined]
        workflow_id, _ = self._find_workflow(repo, unquote(request.params["workflow_id"]))
        status = request.arg("status")
        runs = [
            run
            for run in sorted(self.actions_runs.values(), key=lambda r: -r.id)  # newest first
            if run.full_name == repo.full_name
            and self._created(run)
            and run.workflow_id == workflow_id
            and request.arg("event") in (None, run.event)
            and request.arg("branch") in (None, run.head_branch)
            and request.arg("actor") in (None, run.actor_login)
            and request.arg("head_sha") in (None, run.head_sha)
            and status in (None, run.status, run.conclusion)
            and _created_matches(request.arg("created"), run.created_at)
        ]
        items = [self._actions_run_json(repo, run) for run in runs]
        chunk, headers = self._paginate(request, items)  # type: ignore[attr-defined]
        return 200, {"total_count": len(items), "workflow_runs": chunk}, headers

    def _get_actions_run(self, request: Request) -> Response:
        repo = self._repo_for_token(request, "actions", "read")  # type: ignore[attr-defined]
        run = self.actions_runs.get(int(request.params["id"]))
        if run is None or run.full_name != repo.full_name or not self._created(run):
            raise HTTPError(404, "Not Found")
        return 200, self._actions_run_json(repo, run), {}

    # --- JSON shapes ---

    def _actions_run_json(self, repo: Repo, run: ActionsRun) -> dict[str, Any]:
        url = self.url  # type: ignore[attr-defined]
        api = f"{url}/repos/{repo.full_name}/actions/runs/{run.id}"
        actor = self._user_json(run.actor_login, run.actor_type, run.actor_id)  # type: ignore[attr-defined]
        repository = self._repo_json(repo)  # type: ignore[attr-defined]
        return {
            "id": run.id,
            "name": run.name,
            "node_id": f"WFR_{run.id}",
            "head_branch": run.head_branch,
            "head_sha": run.head_sha,
            "path": run.path,
            "display_title": run.display_title,
            "run_number": run.run_number,
            "event": run.event,
            "status": run.status,
            "conclusion": run.conclusion,
            "workflow_id": run.workflow_id,
            "check_suite_id": run.check_suite_id,
            "check_suite_node_id": f"CS_{run.check_suite_id}",
            "url": api,
            "html_url": f"{url}/{repo.full_name}/actions/runs/{run.id}",
            "pull_requests": [],
            "created_at": iso(run.created_at),
            "updated_at": iso(run.updated_at or run.created_at),
            "actor": actor,
            "triggering_actor": actor,
            "run_attempt": run.run_attempt,
            "run_started_at": iso(run.run_started_at or run.created_at),
            "previous_attempt_url": f"{api}/attempts/{run.run_attempt - 1}"
            if run.run_attempt > 1
            else None,
            "jobs_url": f"{api}/jobs",
            "logs_url": f"{api}/logs",
            "check_suite_url": f"{url}/repos/{repo.full_name}/check-suites/{run.check_suite_id}",
            "artifacts_url": f"{api}/artifacts",
            "cancel_url": f"{api}/cancel",
            "rerun_url": f"{api}/rerun",
            "workflow_url": f"{url}/repos/{repo.full_name}/actions/workflows/{run.workflow_id}",
            "head_commit": {
                "id": run.head_sha,
                "tree_id": run.head_sha,
                "message": "change",
                "timestamp": iso(run.created_at),
                "author": {"name": "Test Author", "email": "author@example.com"},
                "committer": {"name": "Test Author", "email": "author@example.com"},
            },
            "repository": repository,
            "head_repository": repository,
        }

    # --- helpers for tests: workflows and runs ---

    def add_workflow(
        self,
        full_name: str,
        path: str = TASUKU_WORKFLOW,
        *,
        on_dispatch: bool = True,
        inputs: Sequence[str] | Mapping[str, Mapping[str, Any]] = (TASUKU_INPUT,),
        run_name: str | None = f"Tasuku run ${{{{ inputs.{TASUKU_INPUT} }}}}",
        name: str = "Tasuku",
        content: str | None = None,
        branch: str | None = None,
    ) -> Workflow:
        """Commit a workflow file to `branch` (the default branch) of a git-backed
        repository (`add_git_repo`): `content` as given, else one built by
        `workflow_yaml` from the other arguments."""
        with self.lock:  # type: ignore[attr-defined]
            repo = self.repos[full_name]  # type: ignore[attr-defined]
            git = self._git(repo)
            if git is None:
                raise ValueError(f"{full_name} has no git history: create it with add_git_repo")
            branch = branch or repo.default_branch
            if content is None:
                content = workflow_yaml(
                    name=name, on_dispatch=on_dispatch, inputs=inputs, run_name=run_name
                )
            tip = self._resolve_ref(repo, f"refs/heads/{branch}")
            sha = git.commit(
                {path: content},
                parent=tip[1] if tip else None,
                message=f"Add {path}",
                branch=branch,
            )
            repo.commits.add(sha)
            return Workflow(
                id=self._workflow_id(full_name, path),
                path=path,
                name=_workflow_name(content, path),
                branch=branch,
                commit=sha,
                content=content,
            )

    def remove_workflow(
        self, full_name: str, path: str = TASUKU_WORKFLOW, *, branch: str | None = None
    ) -> str:
        """Delete a workflow file from `branch` (the default branch); returns the commit."""
        with self.lock:  # type: ignore[attr-defined]
            repo = self.repos[full_name]  # type: ignore[attr-defined]
            git = self._git(repo)
            branch = branch or repo.default_branch
            tip = self._resolve_ref(repo, f"refs/heads/{branch}")
            assert git is not None and tip is not None, f"{full_name} has no branch {branch}"
            sha = git.commit({path: None}, parent=tip[1], message=f"Remove {path}", branch=branch)
            repo.commits.add(sha)
            return sha

    def disable_workflow(
        self, full_name: str, path: str = TASUKU_WORKFLOW, *, disabled: bool = True
    ) -> None:
        """Disable (or enable again) a workflow, as from the repository's Actions tab."""
        with self.lock:  # type: ignore[attr-defined]
            (self.disabled_workflows.add if disabled else self.disabled_workflows.discard)(
                (full_name, path)
            )

    def actions_dispatch_as(
        self,
        full_name: str,
        login: str,
        inputs: dict[str, Any],
        path: str = TASUKU_WORKFLOW,
        *,
        user_id: int = 90_001,
    ) -> ActionsRun:
        """A person (`login`, with write access) runs the workflow from the Actions tab on
        the default branch with `inputs` (as given: no checks)."""
        with self.lock:  # type: ignore[attr-defined]
            repo = self.repos[full_name]  # type: ignore[attr-defined]
            workflow_id, path = self._find_workflow(repo, path.rsplit("/", 1)[-1])
            resolved = self._resolve_ref(repo, repo.default_branch)
            assert resolved is not None, f"{full_name} has no default branch"
            full_ref, sha = resolved
            content = self._file_at(repo, sha, path)
            return self._actions_run_create(
                repo, workflow_id, path, full_ref, sha, content, dict(inputs),
                actor=(login, user_id, "User"),
            )  # fmt: skip

    def actions_runs_of(self, full_name: str) -> list[ActionsRun]:
        """Every workflow run of `full_name`, oldest first (live records; a dispatched
        run GitHub has not created yet too)."""
        with self.lock:  # type: ignore[attr-defined]
            return sorted(
                (r for r in self.actions_runs.values() if r.full_name == full_name),
                key=lambda r: r.id,
            )

    def _run_of(self, full_name: str, run_id: int) -> ActionsRun:
        run = self.actions_runs.get(run_id)
        if run is None or run.full_name != full_name:
            raise KeyError(f"no workflow run {run_id} in {full_name}")
        return run

    def _run_payload(self, run: ActionsRun, action: str) -> dict[str, Any]:
        # tests.helpers builds every webhook payload from the recorded fixtures.
        from tests.helpers import workflow_run_payload

        return workflow_run_payload(self, self.repos[run.full_name], run, action=action)  # type: ignore[arg-type, attr-defined]

    def actions_run_start(self, full_name: str, run_id: int) -> dict[str, Any]:
        """The run's job starts on a runner (status in_progress); returns the
        `workflow_run.in_progress` webhook payload."""
        with self.lock:  # type: ignore[attr-defined]
            run = self._run_of(full_name, run_id)
            if run.status == "queued":
                run.status = "in_progress"
                run.run_started_at = run.updated_at = time.time()
            return self._run_payload(run, "in_progress")

    def actions_run_complete(
        self, full_name: str, run_id: int, conclusion: str = "success"
    ) -> dict[str, Any]:
        """The run ends with `conclusion` (success, failure, cancelled, timed_out, ...);
        its job's OIDC request token stops working. Returns the `workflow_run.completed`
        webhook payload."""
        assert conclusion in RUN_CONCLUSIONS, conclusion
        with self.lock:  # type: ignore[attr-defined]
            run = self._run_of(full_name, run_id)
            run.status, run.conclusion = "completed", conclusion
            run.updated_at = time.time()
            run.run_started_at = run.run_started_at or run.updated_at
            return self._run_payload(run, "completed")

    def actions_run_rerun(self, full_name: str, run_id: int) -> dict[str, Any]:
        """Someone re-runs the run: same id, the next `run_attempt`, queued again, a new
        request token. Returns the `workflow_run.requested` webhook payload."""
        with self.lock:  # type: ignore[attr-defined]
            run = self._run_of(full_name, run_id)
            run.run_attempt += 1
            run.status, run.conclusion, run.run_started_at = "queued", None, None
            run.updated_at = time.time()
            run.request_token = secrets.token_urlsafe(32)
            return self._run_payload(run, "requested")

    def actions_runner_env(self, full_name: str, run_id: int) -> dict[str, str]:
        """The environment the run's job sees on its runner (the job starts if it was
        queued): the OIDC request URL (with a query, so a client appends
        `&audience=...`) and token, and the GITHUB_* variables about the run."""
        with self.lock:  # type: ignore[attr-defined]
            run = self._run_of(full_name, run_id)
            if run.status == "queued":
                run.status = "in_progress"
                run.run_started_at = run.updated_at = time.time()
            repo = self.repos[full_name]  # type: ignore[attr-defined]
            url = self.url  # type: ignore[attr-defined]
            return {
                "ACTIONS_ID_TOKEN_REQUEST_URL": f"{url}{ID_TOKEN_PATH.format(run_id=run.id)}?api-version=2.0",
                "ACTIONS_ID_TOKEN_REQUEST_TOKEN": run.request_token,
                "GITHUB_ACTIONS": "true",
                "CI": "true",
                "GITHUB_SERVER_URL": url,
                "GITHUB_API_URL": url,
                "GITHUB_REPOSITORY": full_name,
                "GITHUB_REPOSITORY_ID": str(repo.id),
                "GITHUB_REPOSITORY_OWNER": repo.owner,
                "GITHUB_REPOSITORY_OWNER_ID": str(repo.owner_id),
                "GITHUB_RUN_ID": str(run.id),
                "GITHUB_RUN_NUMBER": str(run.run_number),
                "GITHUB_RUN_ATTEMPT": str(run.run_attempt),
                "GITHUB_WORKFLOW": run.name,
                "GITHUB_WORKFLOW_REF": f"{full_name}/{run.path}@{run.ref}",
                "GITHUB_EVENT_NAME": run.event,
                "GITHUB_REF": run.ref,
                "GITHUB_REF_NAME": run.head_branch,
                "GITHUB_SHA": run.head_sha,
                "GITHUB_ACTOR": run.actor_login,
                "RUNNER_ENVIRONMENT": "github-hosted",
            }

    def _oidc_id_token(self, request: Request) -> Response:
        run = self.actions_runs.get(int(request.params["id"]))
        scheme, _, credential = request.headers.get("authorization", "").partition(" ")
        if (
            run is None
            or scheme.lower() != "bearer"
            or not secrets.compare_digest(credential, run.request_token)
            or run.status == "completed"
        ):
            raise HTTPError(401, "Unauthorized")
        token = self.oidc_token(run, audience=request.arg("audience"))  # type: ignore[attr-defined]
        return 200, {"value": token}, {}


def _created_matches(created: str | None, timestamp: float) -> bool:
    """GitHub's `created` filter: `>=T`, `<=T`, `>T`, `<T`, `A..B` (ISO 8601 times or
    dates), or one date."""
    if not created:
        return True

    def moment(text: str, *, end: bool = False) -> float:
        if "T" not in text:  # a whole day
            text += "T23:59:59+00:00" if end else "T00:00:00+00:00"
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
        return (parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)).timestamp()

    value = int(timestamp)  # GitHub's times have whole seconds
    for operator, test in (
        (">=", lambda t: value >= moment(t)),
        ("<=", lambda t: value <= moment(t, end=True)),
        (">", lambda t: value > moment(t, end=True)),
        ("<", lambda t: value < moment(t)),
    ):
        if created.startswith(operator):
            return test(created[len(operator) :])
    if ".." in created:
        low, high = created.split("..", 1)
        return moment(low) <= value <= moment(high, end=True)
    return moment(created) <= value <= moment(created, end=True)
