"""Pydantic models of what the gateway returns (never PyGithub objects)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from pydantic import BaseModel

# Refresh an installation token when less than this is left of its hour.
TOKEN_REFRESH_MARGIN = timedelta(minutes=5)


class InstallationToken(BaseModel):
    token: str
    expires_at: datetime
    permissions: dict[str, str] = {}
    repository_ids: tuple[int, ...] = ()

    def fresh(self, now: datetime | None = None) -> bool:
        return self.expires_at - (now or datetime.now(UTC)) > TOKEN_REFRESH_MARGIN

    def __repr__(self) -> str:  # never print the token itself
        return f"InstallationToken(expires_at={self.expires_at.isoformat()})"

    __str__ = __repr__


class CheckRunOutput(BaseModel):
    title: str
    summary: str
    text: str | None = None


class CheckRunInfo(BaseModel):
    id: int
    name: str
    head_sha: str
    status: str
    conclusion: str | None = None
    external_id: str | None = None
    details_url: str | None = None
    html_url: str | None = None


class PullRequestInfo(BaseModel):
    number: int
    title: str
    state: str
    draft: bool
    merged: bool
    head_sha: str
    head_ref: str
    base_sha: str
    base_ref: str
    author_login: str
    author_type: str
    changed_files: int
    html_url: str
    body: str = ""
    # The head branch's repository ("" once a fork is deleted); None: not said.
    head_repository: str | None = None


def check_run_info(run: Any) -> CheckRunInfo:
    return CheckRunInfo(
        id=run.id,
        name=run.name,
        head_sha=run.head_sha,
        status=run.status,
        conclusion=run.conclusion,
        external_id=run.external_id,
        details_url=run.details_url,
        html_url=run.html_url,
    )


class CheckRunState(BaseModel):
    """One check on a commit as its merge box shows it: a check run of any App, or a
    commit status in the same shape (`kind="status"`, its context as `name`)."""

    name: str
    status: str  # queued | in_progress | completed (Actions also: waiting, pending, requested)
    conclusion: str | None = None  # None until completed
    details_url: str | None = None
    html_url: str | None = None
    title: str | None = None
    summary: str | None = None
    text: str | None = None
    app_slug: str | None = None  # None for a commit status
    app_id: int | None = None
    completed_at: datetime | None = None
    id: int | None = None
    kind: Literal["check_run", "status"] = "check_run"


# A commit status's state as a check run's (status, conclusion).
STATUS_AS_CHECK = {
    "success": ("completed", "success"),
    "failure": ("completed", "failure"),
    "error": ("completed", "failure"),
    "pending": ("in_progress", None),
}


def check_run_state(data: dict[str, Any]) -> CheckRunState:
    output = data.get("output") or {}
    app = data.get("app") or {}
    return CheckRunState(
        name=data["name"],
        status=data["status"],
        conclusion=data.get("conclusion"),
        details_url=data.get("details_url"),
        html_url=data.get("html_url"),
        title=output.get("title"),
        summary=output.get("summary"),
        text=output.get("text"),
        app_slug=app.get("slug"),
        app_id=app.get("id"),
        completed_at=parse_time(data["completed_at"]) if data.get("completed_at") else None,
        id=data.get("id"),
    )


def status_check_state(data: dict[str, Any]) -> CheckRunState:
    status, conclusion = STATUS_AS_CHECK.get(data.get("state") or "", ("in_progress", None))
    updated = data.get("updated_at")
    return CheckRunState(
        name=data["context"],
        status=status,
        conclusion=conclusion,
        details_url=data.get("target_url"),
        # GitHub shows a status's description where it shows a check run's output title.
        title=data.get("description"),
        completed_at=parse_time(updated) if updated and status == "completed" else None,
        id=data.get("id"),
        kind="status",
    )


def latest_check_runs(runs: list[dict[str, Any]]) -> list[CheckRunState]:
    """The newest run of each name of each App (highest id), by name.

    `filter=latest` keeps the newest run only within a check suite, so a workflow run
    again by another event on the same commit still lists its old run. A run of another
    App with the same name is a different check: it never hides this one.
    """
    newest: dict[tuple[str, str], dict[str, Any]] = {}
    for run in runs:
        key = (run["name"], (run.get("app") or {}).get("slug") or "")
        if key not in newest or run["id"] > newest[key]["id"]:
            newest[key] = run
    return [check_run_state(newest[key]) for key in sorted(newest)]


def required_check_names(data: dict[str, Any]) -> list[str]:
    """The names a required-status-checks answer requires: its `contexts` (deprecated,
    still sent) and its `checks[].context`, in order, once each."""
    names = [*(data.get("contexts") or []), *(c["context"] for c in data.get("checks") or [])]
    return list(dict.fromkeys(names))


def parse_time(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def format_time(value: datetime) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class RepositoryInfo(BaseModel):
    full_name: str
    clone_url: str
    default_branch: str
    private: bool
    id: int | None = None


class ReviewInfo(BaseModel):
    id: int
    node_id: str = ""
    body: str = ""
    state: str = ""
    commit_id: str | None = None
    user_login: str = ""
    user_type: str = ""
    html_url: str = ""


class ReviewCommentInfo(BaseModel):
    id: int
    node_id: str = ""
    body: str = ""
    path: str = ""
    line: int | None = None
    review_id: int | None = None
    in_reply_to_id: int | None = None
    user_login: str = ""
    user_type: str = ""
    html_url: str = ""


def review_info(data: dict[str, Any]) -> ReviewInfo:
    return ReviewInfo(
        id=data["id"],
        node_id=data.get("node_id") or "",
        body=data.get("body") or "",
        state=data.get("state") or "",
        commit_id=data.get("commit_id"),
        user_login=(data.get("user") or {}).get("login", ""),
        user_type=(data.get("user") or {}).get("type", ""),
        html_url=data.get("html_url") or "",
    )


def review_comment_info(data: dict[str, Any]) -> ReviewCommentInfo:
    user = data.get("user") or {}
    return ReviewCommentInfo(
        id=data["id"],
        node_id=data.get("node_id") or "",
        body=data.get("body") or "",
        path=data.get("path") or "",
        line=data.get("line"),
        review_id=data.get("pull_request_review_id"),
        in_reply_to_id=data.get("in_reply_to_id"),
        user_login=user.get("login", ""),
        user_type=user.get("type", ""),
        html_url=data.get("html_url") or "",
    )


class ThreadComment(BaseModel):
    id: int  # the REST (database) id
    node_id: str = ""
    body: str = ""
    author_login: str = ""  # as GraphQL gives it: a bot's login has no "[bot]"
    author_type: str = ""


class ThreadInfo(BaseModel):
    id: str  # GraphQL node id (PRRT_…)
    is_resolved: bool
    is_outdated: bool
    path: str = ""
    line: int | None = None
    resolved_by: str | None = None
    resolved_by_type: str = ""  # User | Bot | … (GraphQL's typename of the resolver)
    comments: list[ThreadComment] = []

    @property
    def first(self) -> ThreadComment | None:
        return self.comments[0] if self.comments else None


class IssueCommentInfo(BaseModel):
    id: int
    body: str = ""
    html_url: str = ""
    user_login: str = ""
    user_type: str = ""


class IssueInfo(BaseModel):
    """An issue (or a pull request seen as one: `pull_request`), as a connector reads it."""

    number: int
    title: str
    state: str
    labels: list[str] = []
    body: str = ""
    html_url: str = ""
    pull_request: bool = False


class DispatchedRun(BaseModel):
    """The workflow run a `workflow_dispatch` started (GitHub's 200 answer to
    `return_run_details: true`, or the run found in the workflow's list)."""

    workflow_run_id: int
    run_url: str
    html_url: str


class WorkflowInfo(BaseModel):
    id: int
    name: str
    path: str
    state: str  # active, disabled_manually, disabled_inactivity, ...
    html_url: str = ""


class RunActor(BaseModel):
    login: str = ""
    type: str = ""  # "Bot" for an App's `<slug>[bot]`


class ActionsRunInfo(BaseModel):
    # GitHub's schema lets `name` and `status` be null: read as empty, never an error.
    id: int
    name: str | None = ""  # the workflow's name
    display_title: str = ""  # its `run-name`, rendered
    path: str = ""
    event: str = ""
    status: str | None = ""  # requested, queued, in_progress, waiting, pending, completed
    conclusion: str | None = None
    head_branch: str | None = None
    head_sha: str = ""
    run_number: int = 0
    run_attempt: int = 1
    url: str = ""
    html_url: str = ""
    created_at: datetime | None = None
    actor: RunActor | None = None  # who dispatched it

    def dispatched(self) -> DispatchedRun:
        return DispatchedRun(workflow_run_id=self.id, run_url=self.url, html_url=self.html_url)
