"""Connectors on the `actions` runner: `tasuku-runner` (a real subprocess) runs a model
engine whose connector calls come back to it over the bridge and go on to Tasuku's
`POST /api/runner/connector` with the workflow run's OIDC token; Tasuku makes them with
the credential it holds. The endpoint answers only the dispatched run's token, only
while the run waits for its result, and only for the reviewer's connectors."""

from __future__ import annotations

import json
import os
import subprocess

import pytest
from django.test import Client

from repos.connectors.models import GITHUB_ISSUE_SCHEMA, Connector, ConnectorKind
from repos.models import Reviewer
from reviews.actions import oidc
from reviews.models import ActionsDispatch, ConnectorCall, ReviewRun, RunStatus
from tests.fakes.github import Issue
from tests.fakes.models import ANTHROPIC_TEST_KEY, ToolCall
from tests.fakes.team import TeamSystem
from tests.gitworld import REPO, World, world_build
from tests.helpers import drain_queue, post_webhook, pull_request_payload
from tests.reviews.test_actions_runner import RUNNER, TEMPLATE, WORKFLOW, bearer

CREDENTIAL = "Bearer tk-team-secret-0042"
SCHEMA = {"type": "object", "properties": {"key": {"type": "string"}}, "required": ["key"]}
AUD = "https://tasuku.example.test"


@pytest.fixture(autouse=True)
def quick_looks(settings):
    settings.TASUKU_ACTIONS_FIND_SECONDS = 1.0


@pytest.fixture(scope="module")
def team_server():
    system = TeamSystem().start()
    yield system
    system.stop()


@pytest.fixture
def team(team_server):
    team_server.reset()
    return team_server


@pytest.fixture
def actions_world(fake_github, settings, team):
    """A pull request whose model reviewer runs on GitHub Actions with a connector to the
    team's system (and GitHub's issues), Tasuku's workflow on the default branch."""
    world = world_build(fake_github)
    fake_github.add_workflow(REPO, WORKFLOW, content=TEMPLATE.read_text())
    settings.TASUKU_ACTIONS_OIDC_ISSUER = fake_github.oidc_issuer
    settings.TASUKU_ACTIONS_AUDIENCE = AUD
    oidc.KEYS.clear()
    Reviewer.objects.update(default_for_new_repositories=False)
    reviewer = Reviewer.objects.create(
        slug="claude", engine="anthropic", model="claude-sonnet-5-5", runner="actions",
        default_for_new_repositories=True,
    )  # fmt: skip
    jira = Connector(name="jira_ticket", description="A Jira ticket.", input_schema=SCHEMA,
                     url_template=f"{team.url}/tickets/{{key}}", timeout_seconds=5)  # fmt: skip
    jira.credential_set(CREDENTIAL)
    jira.save()
    issue, _ = Connector.objects.get_or_create(
        name="github_issue",
        defaults={"kind": ConnectorKind.GITHUB_ISSUE, "description": "An issue.",
                  "input_schema": GITHUB_ISSUE_SCHEMA, "credential_header": ""},
    )  # fmt: skip
    Connector.objects.create(name="deploy", description="Deploys.", url_template=f"{team.url}/x")
    reviewer.connectors.add(jira, issue)
    yield world
    oidc.KEYS.clear()


def dispatched(world: World, client, test_app) -> ReviewRun:
    body = pull_request_payload(world.fake, world.repo, world.pull, action="opened")
    assert (
        post_webhook(client, "pull_request", body, secret=test_app.webhook_secret).status_code
        == 202
    )
    drain_queue()
    run = ReviewRun.objects.get(reviewer__slug="claude")
    assert run.status == RunStatus.DISPATCHED, run.reason
    return run


def connector(client: Client, token: str, body: dict):
    return client.post("/api/runner/connector", data=json.dumps(body),
                       content_type="application/json", **bearer(token))  # fmt: skip


@pytest.mark.django_db(transaction=True)
def test_the_runners_engine_calls_a_connector_through_tasuku_with_its_oidc_token(
    actions_world, client, test_app, live_server, settings, tmp_path, fake_anthropic, team
):
    settings.TASUKU_ACTIONS_AUDIENCE = live_server.url
    actions_world.fake.add_issue(REPO, Issue(number=12, title="Negative refunds", body="Fix it."))
    fake_anthropic.script(
        ToolCall("jira_ticket", {"key": "PAY-12"}),
        ToolCall("github_issue", {"number": 12}),
        ToolCall("submit_review", {"findings": []}),
    )
    run = dispatched(actions_world, client, test_app)
    # The job the runner fetches names the connectors; no credential, no endpoint.
    assert [c["name"] for c in run.dispatch.job["connectors"]] == ["github_issue", "jira_ticket"]
    assert "tk-team-secret" not in json.dumps(run.dispatch.job) and team.url not in json.dumps(
        run.dispatch.job
    )
    [actions_run] = actions_world.fake.actions_runs_of(REPO)
    checkout = tmp_path / "checkout"
    subprocess.run(
        ["git", "clone", "--quiet", str(actions_world.git.git_dir), str(checkout)], check=True
    )
    subprocess.run(["git", "-C", str(checkout), "checkout", "--quiet", actions_run.inputs["head_sha"]],
                   check=True)  # fmt: skip
    env = {
        "PATH": os.environ["PATH"], "HOME": str(tmp_path), "TASUKU_URL": live_server.url,
        "ANTHROPIC_API_KEY": ANTHROPIC_TEST_KEY, "ANTHROPIC_BASE_URL": fake_anthropic.base_url,
        **actions_world.fake.actions_runner_env(REPO, actions_run.id),
    }  # fmt: skip
    done = subprocess.run([str(RUNNER), "--checkout", str(checkout)], env=env,
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "result accepted for run" in done.stderr

    # Tasuku made the call with the credential; the model read both answers.
    [seen] = team.seen
    assert seen.path == "/tickets/PAY-12" and seen.headers["authorization"] == CREDENTIAL
    answers = [r.tool_results[0].content for r in fake_anthropic.model_requests[1:3]]
    assert "Refunds must refuse negative amounts" in answers[0]
    assert "acme/shop#12 (issue, open): Negative refunds" in answers[1]
    calls = ConnectorCall.objects.filter(run=run).order_by("pk")
    assert [(c.name, c.status, c.attempt) for c in calls] == [
        ("jira_ticket", "ok", 0), ("github_issue", "ok", 0)
    ]  # fmt: skip
    run.refresh_from_db()
    assert run.runner_result["usage"]["connectors"] == {"calls": 2, "failures": 0}
    # Once the result is in, the run is no longer live: a late call is refused.
    token = actions_world.fake.oidc_token(actions_run, audience=live_server.url)
    late = connector(Client(), token, {"name": "jira_ticket", "input": {"key": "PAY-1"}})
    assert late.status_code == 200 and late.json()["status"] == "refused"
    assert "review has ended" in late.json()["content"]


@pytest.mark.django_db
def test_the_endpoint_makes_calls_only_for_the_live_dispatched_run_and_its_reviewer(
    actions_world, client, test_app, team
):
    run = dispatched(actions_world, client, test_app)
    [actions_run] = actions_world.fake.actions_runs_of(REPO)
    token = actions_world.fake.oidc_token(actions_run, audience=AUD)
    call = {"name": "jira_ticket", "input": {"key": "PAY-3"}}

    # Before the runner fetched its job, the run is not under way.
    early = connector(client, token, call).json()
    assert early["status"] == "refused" and team.seen == []
    assert client.post("/api/runner/job", **bearer(token)).status_code == 200

    made = connector(client, token, call)
    assert made.status_code == 200 and made.json()["status"] == "ok"
    assert team.seen[-1].headers["authorization"] == CREDENTIAL
    assert "tk-team-secret" not in made.content.decode()
    # A connector that exists but is not the reviewer's, invalid input: refused, nothing sent.
    other = connector(client, token, {"name": "deploy", "input": {}}).json()
    assert (
        other["status"] == "refused"
        and "may not use a connector named 'deploy'" in other["content"]
    )
    invalid = connector(client, token, {"name": "jira_ticket", "input": {"key": 7}}).json()
    assert invalid["status"] == "refused" and "nothing was sent" in invalid["content"]
    assert len(team.seen) == 1
    # A token that is not the dispatched run's gets nothing, and no call is made.
    forged = actions_world.fake.oidc_token(actions_run, audience=AUD, repository="acme/other")
    assert connector(client, forged, call).status_code == 403
    assert connector(client, "not-a-jwt", call).status_code == 403
    assert len(team.seen) == 1
    statuses = list(ConnectorCall.objects.filter(run=run).values_list("name", "status"))
    assert statuses == [("jira_ticket", "refused"), ("jira_ticket", "ok"), ("deploy", "refused"),
                        ("jira_ticket", "refused")]  # fmt: skip


@pytest.mark.django_db
def test_tasuku_holds_the_reviews_call_bound_on_the_runners_calls(
    actions_world, client, test_app, team
):
    run = dispatched(actions_world, client, test_app)
    ActionsDispatch.objects.filter(run=run).update(
        job={**run.dispatch.job, "limits": {**run.dispatch.job["limits"], "connector_calls": 1}}
    )
    [actions_run] = actions_world.fake.actions_runs_of(REPO)
    token = actions_world.fake.oidc_token(actions_run, audience=AUD)
    assert client.post("/api/runner/job", **bearer(token)).status_code == 200
    call = {"name": "jira_ticket", "input": {"key": "PAY-3"}}
    assert connector(client, token, call).json()["status"] == "ok"
    second = connector(client, token, call).json()
    assert second["status"] == "refused" and "1 connector calls are used up" in second["content"]
    assert len(team.seen) == 1
