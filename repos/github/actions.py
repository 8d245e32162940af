"""The gateway's GitHub Actions calls: start a repository's workflow
(`workflow_dispatch`), and read its workflows and runs.

A mixin of `GitHubGateway`: every call still goes through its retry loop, with a token
scoped to the one repository and to Actions (write to dispatch, read to look).

Which run a dispatch started. github.com answers `return_run_details: true` with the
run's id (200). A GitHub Enterprise Server whose API predates it answers 204 with
nothing, or refuses the key (422 `"return_run_details" is not a permitted key.`: the
dispatch is then sent again without it, and this server is not offered the key again in
this process). Without the id the run is found in the workflow's list of runs: the list
does not show a run's inputs, but it shows its `display_title`, which the workflow's
`run-name:` renders from them (`run-name: Tasuku review (run ${{ inputs.tasuku_run }})`),
so a caller passes the title its inputs render to (`run_name`). A run is taken as the
dispatch's when it shows that title, was dispatched (`event`) by this App's bot on the
dispatched branch, and was created since the dispatch (less LOST_DISPATCH_WINDOW): a
person who dispatches a look-alike run is not its actor. GitHub creates a dispatched run
a few seconds after it answers, so the list is looked at several times over
TASUKU_ACTIONS_FIND_SECONDS (`look_schedule`); a run still not listed is returned as None
(the dispatch was accepted: the caller finds the run later with `workflow_run_find`).

A dispatch whose answer was lost (a 5xx, a dropped connection) must not simply be sent
again: with `run_name` the run is looked for the same way first, and the dispatch is
sent again only when none was listed. The look-up cannot tell when a run since the first
try shows the workflow's plain name (the file has no `run-name`): then nothing is sent
again and a permanent error says so. Without `run_name` a failed dispatch is never
repeated here; the transient error is raised (a run may exist).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar
from urllib.parse import quote

import requests
from django.conf import settings
from github import Github, GithubException

from repos.github.clients import cache_lock, run_details_refused
from repos.github.errors import GitHubError, permissions_not_granted
from repos.github.repo import RepoRef
from repos.github.schemas import ActionsRunInfo, DispatchedRun, WorkflowInfo, format_time
from repos.github.transport import Transport

logger = logging.getLogger(__name__)

T = TypeVar("T")

ACTIONS_WRITE = {"actions": "write"}
ACTIONS_READ = {"actions": "read"}
WORKFLOWS_DIR = ".github/workflows"
# "The maximum number of properties is 25" (the dispatch's `inputs`)
MAX_DISPATCH_INPUTS = 25
# How far back a dispatch's run is looked for: the first try, less clock skew.
LOST_DISPATCH_WINDOW = timedelta(minutes=10)
PAGE_SIZE = 100
MAX_LOOKUP_PAGES = 10
# The waits between looks for a dispatched run: from FIRST_LOOK_AFTER (or a fortieth of
# the time allowed, when that is shorter), doubling up to MAX_LOOK_INTERVAL, until
# TASUKU_ACTIONS_FIND_SECONDS are spent (20 s: 7 looks, the first after 0.5 s).
FIRST_LOOK_AFTER = 0.5
FIRST_LOOK_SHARE = 1 / 40
MAX_LOOK_INTERVAL = 5.0
DEFAULT_FIND_SECONDS = 20.0

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
    "ambiguous": (
        "GitHub started it without saying which run it is, and the workflow's runs cannot "
        "be told apart (the file has no `run-name` showing its inputs) — add the "
        "`run-name` of Tasuku's workflow file."
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


def branch_name(ref: str) -> str:
    return ref.removeprefix("refs/heads/").removeprefix("refs/tags/")


def look_schedule(total: float | None = None) -> list[float]:
    """The waits before each look for a dispatched run, `total` seconds in all."""
    if total is None:
        total = float(getattr(settings, "TASUKU_ACTIONS_FIND_SECONDS", DEFAULT_FIND_SECONDS))
    waits: list[float] = []
    wait, spent = min(FIRST_LOOK_AFTER, total * FIRST_LOOK_SHARE), 0.0
    while spent < total - 1e-9:
        step = min(wait, total - spent)
        waits.append(step)
        spent += step
        wait = min(wait * 2, MAX_LOOK_INTERVAL)
    return waits


def _github_message(error: GitHubError) -> str:
    return str(error.data.get("message") or "") if isinstance(error.data, dict) else ""


def _no_actions_permission(error: GitHubError) -> bool:
    """A token the installation would not mint (no Actions), or one GitHub refused."""
    return permissions_not_granted(error) or (
        error.status == 403 and "not accessible by integration" in _github_message(error)
    )


def _refuses_run_details(exc: GithubException) -> bool:
    """A GitHub (Enterprise Server) whose API does not know `return_run_details`."""
    data: Any = exc.data
    message = str(data.get("message") or "") if isinstance(data, dict) else str(data or "")
    return exc.status in (400, 422) and "return_run_details" in message


def _workflow_url(full_name: str, workflow: str) -> str:
    owner, name = full_name.split("/", 1)
    return f"/repos/{owner}/{name}/actions/workflows/{quote(workflow.rsplit('/', 1)[-1], safe='')}"


class ActionsCalls(Transport):
    def workflow_dispatch(
        self,
        repo: RepoRef,
        *,
        workflow: str,
        ref: str,
        inputs: dict[str, str],
        run_name: str | None = None,
    ) -> DispatchedRun | None:
        """Start `workflow` (a file name such as `tasuku.yml`, its path, or its id) on
        `ref` with `inputs`; returns the run GitHub started, or None when GitHub
        accepted the dispatch without saying which run it is and has not listed it yet.

        Steps: refuse more inputs than GitHub takes; POST the dispatch with
        `return_run_details: true` (Actions: write; without it where GitHub refuses the
        key); on a 204, look for the run whose `display_title` is `run_name` over
        TASUKU_ACTIONS_FIND_SECONDS; on a lost answer, look for it the same way before
        sending it again (see the module docstring). Refusals GitHub explains (no
        workflow, no trigger, no such branch, undeclared or missing inputs, a disabled
        workflow, no Actions permission) become permanent errors that name the fix.
        """
        path = workflow_path(workflow)
        where = {"path": path, "repo": repo.full_name, "ref": ref}
        if len(inputs) > MAX_DISPATCH_INPUTS:
            raise GitHubError(
                START_FAILED.format(**where)
                + REASONS["too_many_inputs"].format(count=len(inputs), limit=MAX_DISPATCH_INPUTS),
                permanent=True,
                code="actions-workflow",
            )
        url = _workflow_url(repo.full_name, workflow)
        since = datetime.now(UTC) - LOST_DISPATCH_WINDOW
        server = self.creds.base_url
        if run_name:
            self.app_slug()  # a run is ours when its actor is our bot: known before sending

        def find(client: Github, *, lost: bool) -> DispatchedRun | None:
            """Look for the run over the look schedule. After a 204 (`lost=False`) the
            run exists: a failed look is skipped, and None leaves it to be found later.
            After a lost answer a failed look raises (the caller must not send again
            without knowing)."""
            assert run_name is not None
            for wait in look_schedule():
                time.sleep(wait)
                try:
                    found = self._run_listed(client, url, ref, run_name, since)
                except (GithubException, requests.RequestException) as exc:
                    if lost:
                        raise
                    logger.warning("GitHub: could not list the runs of %s: %s", path, exc)
                    continue
                if found is not None:
                    return found
            return None

        def ambiguous(reason: str) -> GitHubError:
            return GitHubError(
                START_FAILED.format(**where) + REASONS[reason],
                permanent=True,
                code="actions-workflow",
            )

        def dispatch(client: Github) -> DispatchedRun | None:
            # Reference: https://docs.github.com/rest/actions/workflows#create-a-workflow-dispatch-event
            body: dict[str, Any] = {"ref": ref, "inputs": inputs}
            with cache_lock:
                if server not in run_details_refused:
                    body["return_run_details"] = True
            try:
                _, data = client.requester.requestJsonAndCheck(
                    "POST", f"{url}/dispatches", input=body
                )
            except GithubException as exc:
                if "return_run_details" not in body or not _refuses_run_details(exc):
                    raise
                # Refused before any run was created: the same dispatch without the key.
                logger.info("GitHub at %s does not take return_run_details: %s", server, exc)
                with cache_lock:
                    run_details_refused.add(server)
                del body["return_run_details"]
                _, data = client.requester.requestJsonAndCheck(
                    "POST", f"{url}/dispatches", input=body
                )
            if data:
                return DispatchedRun.model_validate(data)
            # 204: the run exists (or soon will) but its id was not returned.
            if not run_name:
                raise ambiguous("no_run_details")
            try:
                return find(client, lost=False)
            except _Ambiguous:
                raise ambiguous("ambiguous") from None

        def recover(client: Github) -> DispatchedRun | None:
            try:
                return find(client, lost=True)
            except _Ambiguous:
                raise ambiguous("lost_and_ambiguous") from None

        try:
            return self._repo_call(
                f"start the workflow {path} in {repo.full_name} on {ref}",
                repo,
                permissions=ACTIONS_WRITE,
                fn=dispatch,
                recover=recover if run_name else None,
                creates=True,
            )
        except GitHubError as error:
            raise _dispatch_error(error, where, inputs) from error

    def workflow_run_find(
        self,
        repo: RepoRef,
        *,
        workflow: str,
        ref: str,
        run_name: str,
        since: datetime,
    ) -> DispatchedRun | None:
        """The run this App dispatched of `workflow` on `ref`, created since `since`,
        whose `display_title` is `run_name` (the earliest such); None when GitHub lists
        none (one look: a dispatch GitHub answered without the run's id)."""
        url = _workflow_url(repo.full_name, workflow)

        def look(client: Github) -> DispatchedRun | None:
            try:
                return self._run_listed(client, url, ref, run_name, since)
            except _Ambiguous:
                return None

        what = f"the runs of {workflow_path(workflow)}"
        return self._actions_read(what, repo, look)

    def workflow_run_ours(
        self,
        run: ActionsRunInfo,
        *,
        run_name: str,
        ref: str,
        since: datetime,
        workflow: str | None = None,
    ) -> bool:
        """Whether `run` is the one this App dispatched (of `workflow`, when given)
        with inputs that render to `run_name`, on `ref`, since `since`."""
        if run.display_title != run_name or run.event not in ("", "workflow_dispatch"):
            return False
        if run.head_branch is not None and run.head_branch != branch_name(ref):
            return False
        if run.created_at is not None and run.created_at < since:
            return False
        if (
            workflow is not None
            and run.path
            and run.path.split("@", 1)[0] != workflow_path(workflow)
        ):
            return False
        return run.actor is None or self.posted_by_us(run.actor.model_dump())

    def _run_listed(
        self, client: Github, url: str, ref: str, run_name: str, since: datetime
    ) -> DispatchedRun | None:
        """One look at the workflow's recent dispatched runs on `ref`. _Ambiguous when
        none is ours and some show the workflow's plain name (no `run-name`)."""
        # Reference: https://docs.github.com/rest/actions/workflow-runs#list-workflow-runs-for-a-workflow
        runs: list[ActionsRunInfo] = []
        for page in range(1, MAX_LOOKUP_PAGES + 1):
            _, data = client.requester.requestJsonAndCheck(
                "GET",
                f"{url}/runs",
                parameters={
                    "event": "workflow_dispatch",
                    "branch": branch_name(ref),
                    "created": f">={format_time(since)}",
                    "per_page": PAGE_SIZE,
                    "page": page,
                },
            )
            listed = data.get("workflow_runs") or []
            runs += [ActionsRunInfo.model_validate(r) for r in listed]
            if len(listed) < PAGE_SIZE:
                break
        ours = sorted(
            (r for r in runs if self.workflow_run_ours(r, run_name=run_name, ref=ref, since=since)),
            key=lambda r: r.id,
        )
        if ours:
            return ours[0].dispatched()
        if any(r.display_title == r.name for r in runs):
            raise _Ambiguous
        return None

    def workflow_get(
        self,
        repo: RepoRef,
        *,
        workflow: str,
    ) -> WorkflowInfo | None:
        """The workflow (file name, path or id) as GitHub knows it, or None when the
        repository has no such workflow."""
        url = _workflow_url(repo.full_name, workflow)

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
        return self._actions_read(what, repo, get)

    def actions_run_get(
        self,
        repo: RepoRef,
        *,
        run_id: int,
    ) -> ActionsRunInfo:
        """A workflow run: its status, conclusion, attempt and page."""
        owner, name = repo.full_name.split("/", 1)

        def get(client: Github) -> ActionsRunInfo:
            # Reference: https://docs.github.com/rest/actions/workflow-runs#get-a-workflow-run
            _, data = client.requester.requestJsonAndCheck(
                "GET", f"/repos/{owner}/{name}/actions/runs/{run_id}"
            )
            return ActionsRunInfo.model_validate(data)

        what = f"workflow run {run_id}"
        return self._actions_read(what, repo, get)

    def _actions_read(
        self,
        what: str,
        repo: RepoRef,
        fn: Callable[[Github], T],
    ) -> T:
        try:
            return self._repo_call(
                f"read {what} in {repo.full_name}",
                repo,
                permissions=ACTIONS_READ,
                fn=fn,
            )
        except GitHubError as error:
            if error.permanent and _no_actions_permission(error):
                raise GitHubError(
                    READ_FAILED.format(what=what, repo=repo.full_name) + REASONS["no_permission"],
                    permanent=True,
                    code="actions-permission",
                    status=error.status,
                    data=error.data,
                ) from error
            raise


class _Ambiguous(Exception):
    """The workflow's runs show its plain name: which one a dispatch started cannot be
    told."""


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
        code="actions-permission" if reason == "no_permission" else "actions-workflow",
    )
