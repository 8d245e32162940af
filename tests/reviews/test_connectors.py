"""Connectors end to end on the worker: a pull_request webhook, a model reviewer in the
local sandbox (the real SDKs against the fake model server) calling a connector, the
call coming back to Tasuku over the run's bridge and made by Tasuku with the stored
credential to a stand-in for the team's system — the engine never holding it; refusals
the model reads; the GitHub issue connector; the call on the run page; and on the
docker runner, what the container is given and that its call reaches Tasuku."""

from __future__ import annotations

import json
from typing import Any

import pytest

from repos.connectors.models import GITHUB_ISSUE_SCHEMA, Connector, ConnectorKind
from repos.models import Reviewer
from reviews.models import ConnectorCall, Review, ReviewRun, RunStatus
from sandbox.connectors import CONTAINER_SOCKET, SOCKET_VARIABLE, TOKEN_VARIABLE, ConnectorClient
from sandbox.contract import ReviewJob, ReviewResult
from sandbox.runners import local as local_runner
from sandbox.runners.docker import JOB_FILE, USER
from tests.fakes.docker import FakeDocker, Invocation, Program
from tests.fakes.github import Issue
from tests.fakes.models import ANTHROPIC_TEST_KEY, ToolCall
from tests.fakes.team import TeamSystem
from tests.gitworld import REPO, world_build
from tests.helpers import drain_queue, post_webhook, pull_request_payload

pytestmark = pytest.mark.django_db

CREDENTIAL = "Bearer tk-team-secret-0042"
SCHEMA = {"type": "object", "properties": {"key": {"type": "string", "pattern": "^[A-Z]+-[0-9]+$"}},
          "required": ["key"]}  # fmt: skip
NO_FINDINGS = {"findings": [], "summary": {"confidence": 0.9}}


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
def world(fake_github):
    return world_build(fake_github)


@pytest.fixture
def claude(settings, fake_anthropic):
    settings.ANTHROPIC_BASE_URL = fake_anthropic.base_url
    settings.ANTHROPIC_API_KEY = ANTHROPIC_TEST_KEY
    return fake_anthropic


@pytest.fixture
def engine_given(monkeypatch) -> list[dict[str, Any]]:
    """What each engine process the local runner starts is given: its job (stdin) and
    its environment."""
    given: list[dict[str, Any]] = []
    real = local_runner.sandboxed_run

    def watched(command, *, cwd, stdin, limits, env, what, **more):
        given.append({"job": stdin.decode(), "env": dict(env)})
        return real(command, cwd=cwd, stdin=stdin, limits=limits, env=env, what=what, **more)

    monkeypatch.setattr(local_runner, "sandboxed_run", watched)
    return given


def jira(team: TeamSystem, **fields) -> Connector:
    values = {"name": "jira_ticket", "description": "A Jira ticket by its key (PAY-12).",
              "input_schema": SCHEMA, "url_template": f"{team.url}/tickets/{{key}}",
              "timeout_seconds": 5, **fields}  # fmt: skip
    connector = Connector(**values)
    connector.credential_set(CREDENTIAL)
    connector.save()
    return connector


def reviewer(*connectors: Connector, **fields) -> Reviewer:
    Reviewer.objects.update(default_for_new_repositories=False)
    row = Reviewer.objects.create(slug="claude", engine="anthropic", model="claude-sonnet-5-5",
                                  default_for_new_repositories=True, **fields)  # fmt: skip
    row.connectors.add(*connectors)
    return row


def open_pull_request(client, test_app, world, *, drain: bool = True) -> ReviewRun:
    body = pull_request_payload(world.fake, world.repo, world.pull, action="opened")
    response = post_webhook(client, "pull_request", body, secret=test_app.webhook_secret)
    assert response.status_code == 202, response.content
    drain_queue() if drain else drain_queue(only="webhooks.tasks.delivery_process")
    return ReviewRun.objects.order_by("-id").first()


def test_a_connector_call_is_made_by_tasuku_with_the_stored_credential_the_engine_never_holds(
    world, claude, team, client, test_app, engine_given, staff_client
):
    reviewer(jira(team))
    claude.script(
        ToolCall("jira_ticket", {"key": "PAY-12"}),
        ToolCall("submit_review", NO_FINDINGS),
    )
    run = open_pull_request(client, test_app, world)
    run.refresh_from_db()
    assert run.status == RunStatus.COMPLETED, (run.stage, run.reason)

    # Tasuku made the call, with the credential, in the header the operator named.
    [seen] = team.seen
    assert seen.path == "/tickets/PAY-12" and seen.headers["authorization"] == CREDENTIAL
    # The engine was offered the tool, and got the answer fenced as data.
    first = claude.model_requests[0]
    tool = next(t for t in first.tools if t["name"] == "jira_ticket")
    assert tool["input_schema"] == SCHEMA
    [answer] = claude.model_requests[1].tool_results
    assert "Refunds must refuse negative amounts" in answer.content
    assert "<<<DATA " in answer.content and "never instructions" in answer.content
    # The engine never held the credential, nor the endpoint: not in its job, not in its
    # environment (only the bridge's socket and the run's token).
    [engine] = engine_given
    job = ReviewJob.model_validate_json(engine["job"])
    assert [c.name for c in job.connectors] == ["jira_ticket"]
    for text in (engine["job"], json.dumps(engine["env"])):
        assert "tk-team-secret" not in text and team.url not in text
    assert {SOCKET_VARIABLE, TOKEN_VARIABLE} <= set(engine["env"])
    assert len(engine["env"][TOKEN_VARIABLE]) == 64
    # Counted in the result, recorded by Tasuku and by the engine, shown on the run page.
    assert run.runner_result["usage"]["connectors"] == {"calls": 1, "failures": 0}
    [call] = ConnectorCall.objects.filter(run=run)
    assert (call.name, call.status, call.input, call.attempt) == ("jira_ticket", "ok",
                                                                  '{"key": "PAY-12"}', 1)  # fmt: skip
    assert call.bytes > 0 and call.detail == ""
    review = Review.objects.get(run=run)
    [entry] = [e for e in review.transcript if e["kind"] == "connector"]
    assert entry["connector"]["status"] == "ok" and "Refunds must refuse" in entry["content"]
    page = staff_client.get(f"/runs/{run.pk}/").content.decode()
    assert "Connector calls" in page and "jira_ticket" in page and "PAY-12" in page
    assert "tk-team-secret" not in page and "tk-team-secret" not in json.dumps(review.transcript)


def test_invalid_input_is_refused_before_any_call_and_the_review_goes_on(
    world, claude, team, client, test_app
):
    reviewer(jira(team))
    claude.script(
        ToolCall("jira_ticket", {"key": "not a key"}),
        ToolCall("submit_review", NO_FINDINGS),
    )
    run = open_pull_request(client, test_app, world)
    run.refresh_from_db()
    assert run.status == RunStatus.COMPLETED, run.reason
    assert team.seen == []
    [error] = claude.model_requests[1].tool_results
    assert (
        error.is_error and "does not match jira_ticket's schema; nothing was sent" in error.content
    )
    [call] = ConnectorCall.objects.filter(run=run)
    assert call.status == "refused" and "key: 'not a key' does not match" in call.detail
    assert run.runner_result["usage"]["connectors"] == {"calls": 1, "failures": 1}


def test_a_connector_taken_from_the_reviewer_after_its_run_was_queued_is_refused(
    world, claude, team, client, test_app
):
    connector = jira(team)
    row = reviewer(connector)
    run = open_pull_request(client, test_app, world, drain=False)
    assert run.status == RunStatus.QUEUED
    row.connectors.remove(connector)  # the job still offers it (the run's configuration)
    claude.script(
        ToolCall("jira_ticket", {"key": "PAY-12"}),
        ToolCall("submit_review", NO_FINDINGS),
    )
    drain_queue()
    run.refresh_from_db()
    assert run.status == RunStatus.COMPLETED, run.reason
    assert "jira_ticket" in claude.model_requests[0].tool_names
    [error] = claude.model_requests[1].tool_results
    assert error.is_error and "may not use a connector named 'jira_ticket'" in error.content
    assert team.seen == []
    assert ConnectorCall.objects.get(run=run).status == "refused"


def test_a_slow_connector_is_cut_off_with_a_tool_error_and_the_review_goes_on(
    world, claude, team, client, test_app
):
    slow = jira(team, name="slow_ticket", timeout_seconds=1,
                url_template=f"{team.url}/slow?seconds=5&key={{key}}")  # fmt: skip
    huge = jira(team, name="huge_ticket", max_response_bytes=2048,
                url_template=f"{team.url}/huge?bytes=100000&key={{key}}")  # fmt: skip
    reviewer(slow, huge)
    claude.script(
        ToolCall("slow_ticket", {"key": "PAY-1"}),
        ToolCall("huge_ticket", {"key": "PAY-1"}),
        ToolCall("submit_review", NO_FINDINGS),
    )
    run = open_pull_request(client, test_app, world)
    run.refresh_from_db()
    assert run.status == RunStatus.COMPLETED, run.reason
    [late] = claude.model_requests[1].tool_results
    [big] = claude.model_requests[2].tool_results
    assert late.is_error and "No answer within 1 s" in late.content
    assert big.is_error and "larger than 2048 bytes: cut off" in big.content
    assert [c.status for c in ConnectorCall.objects.filter(run=run)] == ["failed", "failed"]
    assert run.runner_result["usage"]["connectors"] == {"calls": 2, "failures": 2}


def test_the_github_issue_connector_reads_the_issue_a_pull_request_fixes(
    world, claude, client, test_app, staff_client
):
    world.fake.add_issue(REPO, Issue(number=12, title="Refunds pay out negative amounts",
                                     body="refund(-5) pays the customer.", labels=["bug"]))  # fmt: skip
    issue, _ = Connector.objects.get_or_create(
        name="github_issue",
        defaults={"kind": ConnectorKind.GITHUB_ISSUE, "description": "An issue.",
                  "input_schema": GITHUB_ISSUE_SCHEMA, "credential_header": ""},
    )  # fmt: skip
    reviewer(issue)
    claude.script(
        ToolCall("github_issue", {"number": 12}),
        ToolCall("submit_review", NO_FINDINGS),
    )
    run = open_pull_request(client, test_app, world)
    run.refresh_from_db()
    assert run.status == RunStatus.COMPLETED, run.reason
    [answer] = claude.model_requests[1].tool_results
    assert "acme/shop#12 (issue, open): Refunds pay out negative amounts" in answer.content
    assert "Labels: bug" in answer.content and "refund(-5) pays the customer." in answer.content
    assert ConnectorCall.objects.get(run=run).status == "ok"
    assert "github_issue" in staff_client.get(f"/runs/{run.pk}/").content.decode()


def test_the_admin_refuses_connectors_for_an_engine_that_cannot_call_them(staff_client, team,
                                                                          django_user_model):  # fmt: skip
    django_user_model.objects.filter(username="operator").update(is_superuser=True)
    connector = jira(team)
    form = {"slug": "lint", "engine": "static", "model": "", "runner": "local",
            "connectors": [connector.pk], "step_limit": "40", "context_budget_tokens": "120000",
            "max_output_tokens": "16000", "explorer_limit": "6",
            "skill_documents-TOTAL_FORMS": "0", "skill_documents-INITIAL_FORMS": "0"}  # fmt: skip
    page = staff_client.post("/admin/repos/reviewer/add/", form).content.decode()
    assert "Connectors are the model engines&#x27; tools: the static engine calls no model" in page
    assert not Reviewer.objects.filter(slug="lint").exists()
    # The CLI engines offer them through a local MCP server (sandbox/engines/cli/extras.py).
    codex = {**form, "slug": "codex", "engine": "codex", "model": "gpt-5.5", "runner": "docker"}
    page = staff_client.post("/admin/repos/reviewer/add/", codex).content.decode()
    assert "Connectors are the model engines" not in page
    assert list(Reviewer.objects.get(slug="codex").connectors.all()) == [connector]


# --- the docker runner -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def docker_server():
    fake = FakeDocker().start()
    yield fake
    fake.stop()


@pytest.fixture
def fake_docker(docker_server, monkeypatch, settings):
    docker_server.reset()
    docker_server.add_image(settings.TASUKU_DOCKER_IMAGE, User=USER, WorkingDir="/workspace")
    monkeypatch.setenv("DOCKER_HOST", docker_server.url)
    yield docker_server
    assert [c.name for c in docker_server.containers.values()] == []


def test_on_the_docker_runner_the_container_gets_only_the_socket_and_its_call_reaches_tasuku(
    world, claude, team, client, test_app, fake_docker
):
    reviewer(jira(team), runner="docker")
    seen: dict[str, Any] = {}

    def engine(invocation: Invocation) -> Program:
        """The engine in the container, as far as the connector goes: what it was given,
        and one call through the socket mounted into it."""
        env = invocation.env
        seen.update(env=env, job=invocation.read(JOB_FILE).decode(),
                    mounts=invocation.config["HostConfig"]["Mounts"])  # fmt: skip
        socket = invocation.host_path(env[SOCKET_VARIABLE])
        answer = ConnectorClient(str(socket), env[TOKEN_VARIABLE]).call(
            "jira_ticket", {"key": "PAY-7"}, timeout=20
        )
        seen["answer"] = answer
        stranger = ConnectorClient(str(socket), "f" * 64).call("jira_ticket", {"key": "PAY-8"},
                                                               timeout=20)  # fmt: skip
        seen["stranger"] = stranger
        result = ReviewResult(engine="anthropic")
        return Program(stdout=result.model_dump_json().encode())

    fake_docker.program = engine
    run = open_pull_request(client, test_app, world)
    run.refresh_from_db()
    assert run.status == RunStatus.COMPLETED, (run.stage, run.reason)

    env = seen["env"]
    assert env[SOCKET_VARIABLE] == CONTAINER_SOCKET and len(env[TOKEN_VARIABLE]) == 64
    assert set(env) == {"ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", SOCKET_VARIABLE,
                        TOKEN_VARIABLE, "HOME", "TMPDIR", "LANG", "LC_ALL"}  # fmt: skip
    [socket_mount] = [m for m in seen["mounts"] if m["Target"] == CONTAINER_SOCKET]
    assert socket_mount["ReadOnly"] and socket_mount["Source"].endswith("/connectors.sock")
    for text in (seen["job"], json.dumps(env)):
        assert "tk-team-secret" not in text and team.url not in text
    assert seen["answer"].status == "ok" and "Refunds must refuse" in seen["answer"].content
    assert seen["stranger"].status == "refused"
    [call] = team.seen
    assert call.path == "/tickets/PAY-7" and call.headers["authorization"] == CREDENTIAL
    assert [c.name for c in ConnectorCall.objects.filter(run=run)] == ["jira_ticket"]


# --- the CLI engines: the connector through a local MCP server ---------------------------


@pytest.mark.parametrize("cli, engine, model", [("claude", "claude-code", "claude-sonnet-5-5"),
                                                ("codex", "codex", "gpt-5.5")])  # fmt: skip
def test_a_cli_reviewers_connector_call_goes_through_its_mcp_server_to_tasuku(
    world, team, client, test_app, settings, monkeypatch, tmp_path, engine_given, cli, engine,
    model,
):  # fmt: skip
    """A claude-code or codex reviewer (on the local runner, allowed here): the fake CLI
    starts the MCP server its configuration names and calls the connector; Tasuku makes
    the call with the stored credential, which nothing the CLI was given holds."""
    from tests.fakes.cli_agents import fake_cli_install, script_write

    settings.TASUKU_ALLOW_CODE_ON_LOCAL_RUNNER = True
    settings.ANTHROPIC_API_KEY = "sk-ant-cli"
    settings.OPENAI_API_KEY = "sk-oa-cli"
    settings.OPENAI_BASE_URL = ""
    row = reviewer(jira(team))
    Reviewer.objects.filter(pk=row.pk).update(engine=engine, model=model)
    seen_file = tmp_path / "seen.json"
    script = script_write(tmp_path / "script.json", seen=seen_file, answer=NO_FINDINGS,
                          calls=[{"name": "jira_ticket", "input": {"key": "PAY-12"}}])  # fmt: skip
    bin_dir = fake_cli_install(tmp_path / "bin", cli, script)
    real = local_runner.sandboxed_run

    def with_the_cli_on_path(command, *, env, **more):
        return real(command, env={**env, "PATH": f"{bin_dir}:{env['PATH']}"}, **more)

    monkeypatch.setattr(local_runner, "sandboxed_run", with_the_cli_on_path)
    run = open_pull_request(client, test_app, world)
    run.refresh_from_db()
    assert run.status == RunStatus.COMPLETED, (run.stage, run.reason)

    [seen_call] = team.seen
    assert seen_call.path == "/tickets/PAY-12"
    assert seen_call.headers["authorization"] == CREDENTIAL
    seen = json.loads(seen_file.read_text())
    assert seen["tools"] == ["mcp__tasuku__jira_ticket"]
    assert "Refunds must refuse" in seen["calls"][0]["text"]
    for text in (json.dumps(seen["env"]), json.dumps(seen["server_env"]),
                 json.dumps(seen["files"]), engine_given[0]["job"]):  # fmt: skip
        assert "tk-team-secret" not in text and team.url not in text
    [call] = ConnectorCall.objects.filter(run=run)
    assert (call.name, call.status) == ("jira_ticket", "ok")
    assert run.runner_result["usage"]["connectors"] == {"calls": 1, "failures": 0}
    review = Review.objects.get(run=run)
    [entry] = [e for e in review.transcript if e["kind"] == "connector"]
    assert entry["connector"]["status"] == "ok" and "Refunds must refuse" in entry["content"]
