"""Connector calls from a GitHub Actions runner: `POST /api/runner/connector` (the web
process). The runner's engine sends each call to `tasuku-runner` over its bridge
(sandbox/connectors.py), which forwards it here with a fresh OIDC token of the same
workflow run; Tasuku makes the call with the credential it holds and answers.

The token must prove the dispatched run (reviews/actions/workflow.py checks it as for the
job and the result); the run must be live: dispatched, its job fetched, no result yet.
Then each call is checked against the reviewer's connectors as they are now (a
connector an operator turned off or took away is refused at once), within the review's
call bound, made, and recorded on the run.
"""

from __future__ import annotations

from typing import Any

from repos import github
from repos.connectors.calls import CallScope, connector_call, connectors_allowed
from repos.github import RepoRef
from reviews.actions.workflow import run_for
from reviews.engines.connectors import call_record
from reviews.models import ConnectorCall, ReviewRun, RunStatus
from sandbox.connectors import refused
from sandbox.contract import ConnectorAnswer, Limits

# Actions runs have no attempt of Tasuku's worker: their calls are recorded as attempt 0.
ACTIONS_ATTEMPT = 0


def _live(run: ReviewRun) -> bool:
    return (
        run.status == RunStatus.DISPATCHED
        and run.runner_result is None
        and run.dispatch.job_fetched_at is not None
    )


def connector_call_for(claims: dict[str, Any], body: dict[str, Any]) -> ConnectorAnswer:
    """The answer to one connector call of the run the token proves to be (raises
    `Refused` when it proves none: the API answers 403)."""
    run = run_for(claims)
    name = body.get("name")
    arguments = body.get("input")
    if not isinstance(name, str) or not name:
        return refused("The call names no connector.")
    if not _live(run):
        answer = refused("The review has ended: no more connector calls are made.")
    else:
        limit = Limits.model_validate((run.dispatch.job or {}).get("limits") or {}).connector_calls
        if ConnectorCall.objects.filter(run=run).count() >= limit:
            answer = refused(f"This review's {limit} connector calls are used up.")
        else:
            answer = connector_call(name, arguments, scope=_scope(run))
    call_record(run, ACTIONS_ATTEMPT, name, arguments, answer).save()
    return answer


def _scope(run: ReviewRun) -> CallScope:
    try:
        gateway = github.gateway()
    except github.GitHubNotConfigured:
        gateway = None
    return CallScope(
        allowed=connectors_allowed(run.reviewer),
        repo=RepoRef.of(run.pull_request.repository) if gateway is not None else None,
        gateway=gateway,
    )
