"""The gateway's GitHub Actions calls: start a repository's workflow
(`workflow_dispatch`), and read its workflows and runs.

A mixin of `GitHubGateway`: every call still goes through its retry loop, with a token
scoped to the one repository and to Actions (write to dispatch, read to look).

A dispatch creates a run, so a dispatch whose answer was lost (a 5xx, a dropped
connection) must not simply be sent again. GitHub's list of runs does not show a run's
inputs; it shows the run's `display_title`, which the workflow's `run-name:` builds from
them (`run-name: Tasuku run ${{ inputs.tasuku_run_id }}`). A caller that passes the
title its inputs render to (`run_name`) gets the lost dispatch looked for among the
workflow's recent dispatched runs before it is sent again. The look-up cannot tell when
a run since the first try shows the workflow's plain name (the file has no `run-name`):
then nothing is sent again and a permanent error says so. Without `run_name` a failed
dispatch is never repeated here; the transient error is raised (a run may exist).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, TypeVar
from urllib.parse import quote

from github import Github, GithubException

from repos.github.errors import GitHubError, permissions_not_granted
from repos.github.schemas import ActionsRunInfo, DispatchedRun, WorkflowInfo, format_time

if TYPE_CHECKING:
    from repos.github.gateway import GitHubGateway

T = TypeVar("T")

ACTIONS_WRITE = {"actions": "write"}
ACTIONS_READ = {"actions": "read"}
WORKFLOWS_DIR = ".github/workflows"
# "The maximum number of properties is 25" (the dispatch's `inputs`)
MAX_DISPATCH_INPUTS = 25
# How far back a lost dispatch's run is looked for: the first try, less clock skew.
LOST_DISPATCH_WINDOW = timedelta(minutes=10)
PAGE_SIZE = 100
MAX_LOOKUP_PAGES = 10

# What Tasuku's check run shows when a dispatch is refused: the cause and its fix.
START_FAILED = "Could not start the workflow {path} in {repo}: "
REASONS = {
    "no_workflow": (
        "GitHub has no such workflow on the default branch ({ref}) — add Tasuku's workflow "
        "file there."
    ),
    "no_trigger": (
        "the workflow has no `workflow_dispatch` trigger on {ref} — add "
        "`on: workflow_dispatch` with the inputs Tasuku sends ({inputs})."
    ),
    "no_ref": "GitHub found no branch {ref} — the default branch may have been renamed.",
    "undeclared_inputs": (
        "the workflow does not declare every input Tasuku sends ({github}) — declare "
        "{inputs} under `on.workflow_dispatch.inputs`."
    ),
    "required_input": (
        "the workflow requires an input Tasuku does not send ({github}) — make it optional "
        "or remove it."
    ),
    "disabled": "the workflow is disabled — enable it in the repository's Actions tab.",
    "no_permission": (
        "the App may not run workflows there — give it the Actions permission (read and "
        "write) and accept the new permission on the installation."
    ),
    "too_many_inputs": "{count} inputs, but GitHub accepts at most {limit}.",
    "no_run_details": (
        "GitHub started it but did not say which run it is (this GitHub may not support "
        "`return_run_details`)."
    ),
    "lost_and_ambiguous": (
        "GitHub's answer was lost, and the workflow's runs cannot be told apart (the file "
        "has no `run-name` showing its inputs), so it was not sent again; a run may have "
        "started."
    ),
}
READ_FAILED = "Could not read {what} in {repo}: "


def workflow_path(workflow: str) -> str:
    """`.github/workflows/<file>` for a file name or path; a numeric id as given."""
    if workflow.isdigit() or "/" in workflow:
        return workflow
    return f"{WORKFLOWS_DIR}/{workflow}"


def _github_message(error: GitHubError) -> str:
    return str(error.data.get("message") or "") if isinstance(error.data, dict) else ""


def _no_actions_permission(error: GitHubError) -> bool:
    """A token the installation would not mint (no Actions), or one GitHub refused."""
    return permissions_not_granted(error) or (
        error.status == 403 and "not accessible by integration" in _github_message(error)
    )


class ActionsCalls:
    def workflow_dispatch(
        self: GitHubGateway,
        *,
        installation_id: int,
        repository_id: int | None,
        full_name: str,
        workflow: str,
        ref: str,
        inputs: dict[str, str],
        run_name: str | None = None,
    ) -> DispatchedRun:
        """Start `workflow` (a file name such as `tasuku.yml`, its path, or its id) on
        `ref` with `inputs`; returns the run GitHub started.

        Steps: refuse more inputs than GitHub takes; POST the dispatch with
        `return_run_details: true` (Actions: write); on a lost answer, look for the run
        whose `display_title` is `run_name` before sending it again (see the module
        docstring). Refusals GitHub explains (no workflow, no trigger, no such branch,
        undeclared or missing inputs, a disabled workflow, no Actions permission) become
        permanent errors that name the fix.
        """
        path = workflow_path(workflow)
        where = {"path": path, "repo": full_name, "ref": ref}
        if len(inputs) > MAX_DISPATCH_INPUTS:
            raise GitHubError(
                START_FAILED.format(**where)
                + REASONS["too_many_inputs"].format(count=len(inputs), limit=MAX_DISPATCH_INPUTS),
                permanent=True,
            )
        owner, name = full_name.split("/", 1)
        url = (
            f"/repos/{owner}/{name}/actions/workflows/{quote(workflow.rsplit('/', 1)[-1], safe='')}"
        )
        first_sent = datetime.now(UTC)

        def find(client: Github) -> DispatchedRun | None:
            # Reference: https://docs.github.com/rest/actions/workflow-runs#list-workflow-runs-for-a-workflow
            assert run_name is not None
            runs: list[ActionsRunInfo] = []
            for page in range(1, MAX_LOOKUP_PAGES + 1):
                _, data = client.requester.requestJsonAndCheck(
                    "GET",
                    f"{url}/runs",
                    parameters={
                        "event": "workflow_dispatch",
                        "branch": ref.removeprefix("refs/heads/").removeprefix("refs/tags/"),
                        "created": f">={format_time(first_sent - LOST_DISPATCH_WINDOW)}",
                        "per_page": PAGE_SIZE,
                        "page": page,
                    },
                )
                listed = data.get("workflow_runs") or []
                runs += [ActionsRunInfo.model_validate(r) for r in listed]
                if len(listed) < PAGE_SIZE:
                    break
            ours = sorted((r for r in runs if r.display_title == run_name), key=lambda r: r.id)
            if ours:
                return ours[0].dispatched()
            if any(r.display_title == r.name for r in runs):
                raise GitHubError(
                    START_FAILED.format(**where) + REASONS["lost_and_ambiguous"], permanent=True
                )
            return None

        def dispatch(client: Github) -> DispatchedRun:
            # Reference: https://docs.github.com/rest/actions/workflows#create-a-workflow-dispatch-event
            _, data = client.requester.requestJsonAndCheck(
                "POST",
                f"{url}/dispatches",
                input={"ref": ref, "inputs": inputs, "return_run_details": True},
            )
            if data:
                return DispatchedRun.model_validate(data)
            # 204: the run exists but its id was not returned.
            found = find(client) if run_name else None
            if found is None:
                raise GitHubError(
                    START_FAILED.format(**where) + REASONS["no_run_details"], permanent=True
                )
            return found

        try:
            return self._repo_call(
                f"start the workflow {path} in {full_name} on {ref}",
                installation_id=installation_id,
                repository_id=repository_id,
                permissions=ACTIONS_WRITE,
                fn=dispatch,
                recover=find if run_name else None,
                creates=True,
            )
        except GitHubError as error:
            raise _dispatch_error(error, where, inputs) from error

    def workflow_get(
        self: GitHubGateway,
        *,
        installation_id: int,
        repository_id: int | None,
        full_name: str,
        workflow: str,
    ) -> WorkflowInfo | None:
        """The workflow (file name, path or id) as GitHub knows it, or None when the
        repository has no such workflow."""
        owner, name = full_name.split("/", 1)
        url = (
            f"/repos/{owner}/{name}/actions/workflows/{quote(workflow.rsplit('/', 1)[-1], safe='')}"
        )

        def get(client: Github) -> WorkflowInfo | None:
            # Reference: https://docs.github.com/rest/actions/workflows#get-a-workflow
            try:
                _, data = client.requester.requestJsonAndCheck("GET", url)
            except GithubException as exc:
                if exc.status == 404:
                    return None
                raise
            return WorkflowInfo.model_validate(data)

        what = f"the workflow {workflow_path(workflow)}"
        return self._actions_read(what, installation_id, repository_id, full_name, get)

    def actions_run_get(
        self: GitHubGateway,
        *,
        installation_id: int,
        repository_id: int | None,
        full_name: str,
        run_id: int,
    ) -> ActionsRunInfo:
        """A workflow run: its status, conclusion, attempt and page."""
        owner, name = full_name.split("/", 1)

        def get(client: Github) -> ActionsRunInfo:
            # Reference: https://docs.github.com/rest/actions/workflow-runs#get-a-workflow-run
            _, data = client.requester.requestJsonAndCheck(
                "GET", f"/repos/{owner}/{name}/actions/runs/{run_id}"
            )
            return ActionsRunInfo.model_validate(data)

        what = f"workflow run {run_id}"
        return self._actions_read(what, installation_id, repository_id, full_name, get)

    def _actions_read(
        self: GitHubGateway,
        what: str,
        installation_id: int,
        repository_id: int | None,
        full_name: str,
        fn: Callable[[Github], T],
    ) -> T:
        try:
            return self._repo_call(
                f"read {what} in {full_name}",
                installation_id=installation_id,
                repository_id=repository_id,
                permissions=ACTIONS_READ,
                fn=fn,
            )
        except GitHubError as error:
            if error.permanent and _no_actions_permission(error):
                raise GitHubError(
                    READ_FAILED.format(what=what, repo=full_name) + REASONS["no_permission"],
                    permanent=True,
                    status=error.status,
                    data=error.data,
                ) from error
            raise


def _dispatch_error(
    error: GitHubError, where: dict[str, str], inputs: dict[str, str]
) -> GitHubError:
    """The error Tasuku shows for a refused dispatch: GitHub's refusals it can explain
    get the cause and the fix; anything else is returned as it is."""
    if not error.permanent:
        return error
    message = _github_message(error)
    if _no_actions_permission(error):
        reason = "no_permission"
    elif error.status == 404:
        reason = "no_workflow"
    elif error.status != 422:
        return error
    elif message.startswith("No ref found"):
        reason = "no_ref"
    elif "does not have 'workflow_dispatch' trigger" in message:
        reason = "no_trigger"
    elif message.startswith("Unexpected inputs"):
        reason = "undeclared_inputs"
    elif message.startswith("Required input"):
        reason = "required_input"
    elif "disabled workflow" in message:
        reason = "disabled"
    else:
        return error
    text = REASONS[reason].format(
        **where, github=message, inputs=", ".join(sorted(inputs)) or "none"
    )
    return GitHubError(
        START_FAILED.format(**where) + text,
        permanent=True,
        status=error.status,
        data=error.data,
    )
