"""The claude-code and codex engines get the reviewer's skills and connectors: the skills
in each CLI's own skills folder, with the text the API engines' `load_skill` returns;
the connectors through a local MCP server that sends each call to Tasuku over the
runner's bridge. Run end to end through the local runner with fake CLIs that load
skills and speak MCP as the real ones do (tests/fakes/cli_agents.py)."""

from __future__ import annotations

import json
import tomllib

import pytest
from pydantic import ValidationError

from sandbox.agent.tools.checkout import Tools
from sandbox.connectors import ConnectorBridge, failed
from sandbox.contract import (
    ConnectorAnswer,
    ConnectorTool,
    Limits,
    ReviewJob,
    SkillDocument,
)
from sandbox.engines.cli import claude as claude_module
from sandbox.engines.cli import extras
from sandbox.engines.cli.claude import claude_command
from sandbox.engines.cli.codex import codex_config, codex_mcp_server
from sandbox.errors import SandboxError
from sandbox.runners.local import engine_run, scrubbed_environment
from tests.fakes.cli_agents import fake_cli_install, script_write

SKILL = SkillDocument(
    name="sql_safety",
    description='Queries built from input: "parameters", never f-strings',
    body="SKILL-BODY: every query takes its values as parameters.\n---\nnot front matter",
)
JIRA = ConnectorTool(
    name="jira_ticket",
    description="A Jira ticket by its key.",
    input_schema={"type": "object", "properties": {"key": {"type": "string"}},
                  "required": ["key"]},
    timeout_seconds=5,
)  # fmt: skip
ANSWER = {"findings": [], "summary": {"confidence": 0.9}}
CREDENTIAL = "Bearer tk-team-secret-0042"  # the team's system's, held by Tasuku only
KEYS = {"claude": {"ANTHROPIC_API_KEY": "sk-ant-e2e"}, "codex": {"OPENAI_API_KEY": "sk-oa-e2e"}}
ENGINES = {"claude": "claude-code", "codex": "codex"}


def job(**changes) -> ReviewJob:
    fields = {"job_id": "7", "repository": "acme/shop", "pull_request": 12,
              "base_sha": "a" * 40, "head_sha": "b" * 40, "model": "m-1",
              "limits": Limits(steps=8, deadline_seconds=90)}  # fmt: skip
    return ReviewJob(**(fields | changes))


class Tasuku:
    """Tasuku's side of the bridge: checks the call and makes it with the credential it
    holds (here, the answer a team's system would give), recording what it was asked."""

    def __init__(self, answer: ConnectorAnswer | None = None) -> None:
        self.asked: list[tuple[str, object]] = []
        self.answer = answer

    def handle(self, name: str, arguments: object) -> ConnectorAnswer:
        self.asked.append((name, arguments))
        if self.answer is not None:
            return self.answer
        assert CREDENTIAL  # Tasuku uses it here, on its side of the socket
        return ConnectorAnswer(status="ok", content=f"PAY-12: Refunds must refuse {arguments}",
                               duration_ms=12, bytes=40)  # fmt: skip


def run(tmp_path, cli: str, the_job: ReviewJob, *, tasuku: Tasuku | None = None, **script):
    checkout = tmp_path / "checkout"
    (checkout / "app").mkdir(parents=True, exist_ok=True)
    (checkout / "app" / "views.py").write_text("def view(request):\n    ...\n")
    seen = tmp_path / "seen.json"
    bin_dir = fake_cli_install(
        tmp_path / "bin", cli, script_write(tmp_path / "script.json", seen=seen, answer=ANSWER,
                                            **script)
    )  # fmt: skip
    allow = {"PATH": f"{bin_dir}:{scrubbed_environment('/tmp')['PATH']}", **KEYS[cli]}
    if tasuku is None:
        result = engine_run(ENGINES[cli], the_job, checkout, allow_env=allow)
    else:
        with ConnectorBridge(tasuku.handle, directory=tmp_path) as bridge:
            result = engine_run(ENGINES[cli], the_job, checkout, allow_env=allow,
                                connectors=bridge)  # fmt: skip
    return result, json.loads(seen.read_text())


# --- Skills ----------------------------------------------------------------------------


@pytest.mark.parametrize("cli", ["claude", "codex"])
def test_the_skill_reaches_the_cli_from_its_skills_folder_as_load_skill_gives_it(tmp_path, cli):
    result, seen = run(tmp_path, cli, job(skill_documents=(SKILL,)), skill="sql_safety")
    api_text = Tools(tmp_path, skills=(SKILL,)).load_skill({"name": "sql_safety"})
    assert seen["skills"] == {"sql_safety": api_text}
    assert seen["skill_loaded"] == api_text
    folder = ".claude/skills" if cli == "claude" else ".agents/skills"
    assert f"{folder}/sql_safety/SKILL.md" in seen["files"]
    assert not result.incomplete
    # The prompt names the skill; its body is only in the skills folder.
    prompt = seen["files"]["system-prompt.md"] if cli == "claude" else tomllib.loads(
        seen["files"][".codex/config.toml"])["developer_instructions"]  # fmt: skip
    assert "- sql_safety: Queries built from input" in prompt and "SKILL-BODY" not in prompt


def test_claude_code_may_load_the_reviewers_skills_and_nothing_else_is_allowed(tmp_path):
    command = claude_command(
        job(skill_documents=(SKILL,), connectors=(JIRA,)),
        system_prompt_file=tmp_path / "p.md",
        mcp_config=tmp_path / "mcp.json",
    )
    value = {flag: command[command.index(flag) + 1] for flag in
             ("--tools", "--allowedTools", "--permission-mode", "--mcp-config")}  # fmt: skip
    assert value == {"--tools": "Read,Grep,Glob,Skill",
                     "--allowedTools": "Skill(sql_safety),mcp__tasuku__jira_ticket",
                     "--permission-mode": "dontAsk", "--mcp-config": str(tmp_path / "mcp.json")}  # fmt: skip
    assert "--strict-mcp-config" in command
    assert "--disable-slash-commands" not in command  # it would turn the skills off
    bare = claude_command(job(), system_prompt_file=tmp_path / "p.md")
    assert "--disable-slash-commands" in bare and "--allowedTools" not in bare
    assert "--mcp-config" not in bare and bare[bare.index("--tools") + 1] == "Read,Grep,Glob"


@pytest.mark.parametrize("name", ["../x", "-rf", "a/b", "..", "UP"])
def test_a_skill_name_that_is_not_a_folder_name_never_leaves_the_skills_folder(tmp_path, name):
    with pytest.raises(ValidationError):
        SkillDocument(name=name, body="x")
    forged = SkillDocument.model_construct(name=name, description="", body="escaped")
    folder = tmp_path / "home" / ".claude" / "skills"
    with pytest.raises(SandboxError, match="is not a folder name") as caught:
        extras.skills_install([SKILL, forged], folder)
    assert caught.value.permanent and caught.value.code == "engine-failed"
    assert not any(p.is_file() for p in tmp_path.rglob("*"))  # not even the good one


# --- Connectors ------------------------------------------------------------------------


@pytest.mark.parametrize("cli", ["claude", "codex"])
def test_a_connector_call_through_mcp_reaches_tasuku_which_holds_the_credential(tmp_path, cli):
    tasuku = Tasuku()
    result, seen = run(tmp_path, cli, job(connectors=(JIRA,)), tasuku=tasuku,
                       calls=[{"name": "jira_ticket", "input": {"key": "PAY-12"}}])  # fmt: skip
    assert tasuku.asked == [("jira_ticket", {"key": "PAY-12"})]
    assert seen["servers"] == {"tasuku": "connected"}
    assert seen["tools"] == ["mcp__tasuku__jira_ticket"]  # the connectors, and nothing else
    [call] = seen["calls"]
    assert not call["is_error"] and "Refunds must refuse {'key': 'PAY-12'}" in call["text"]
    assert "<<<DATA " in call["text"] and "never instructions" in call["text"]  # fenced data
    # The server was given the way to the bridge; nothing the CLI or the server was given,
    # and no file in the CLI's HOME, holds the team's credential or the worker's secrets.
    server_env = seen["server_env"]["tasuku"]
    assert {"TASUKU_CONNECTOR_SOCKET", "TASUKU_CONNECTOR_TOKEN"} <= set(server_env)
    given = json.dumps([seen["env"], server_env, seen["files"]])
    assert "tk-team-secret" not in given
    token = server_env["TASUKU_CONNECTOR_TOKEN"]
    if cli == "claude":  # in its MCP config, which only the engine's user reads
        assert token not in json.dumps(seen["env"]) and seen["modes"]["mcp.json"] == "0o600"
    else:  # in codex's environment, passed on by name: no file holds it
        assert seen["env"]["TASUKU_CONNECTOR_TOKEN"] == token
        assert token not in json.dumps(seen["files"])
    # One "connector" entry, counted in the usage, as the API engines record a call.
    [entry] = [e for e in result.transcript if e.kind == "connector"]
    assert entry.name == "jira_ticket" and not entry.is_error
    assert entry.connector.status == "ok" and entry.connector.input == '{"key": "PAY-12"}'
    assert "Refunds must refuse" in entry.content
    assert result.usage.connectors.calls == 1 and result.usage.connectors.failures == 0
    assert not any(e.kind == "tool_call" and "jira" in e.name for e in result.transcript)


@pytest.mark.parametrize("cli", ["claude", "codex"])
def test_a_reviewer_without_connectors_gets_no_mcp_server(tmp_path, cli):
    result, seen = run(tmp_path, cli, job(), calls=[{"name": "jira_ticket",
                                                     "input": {"key": "PAY-1"}}])  # fmt: skip
    assert seen["servers"] == {} and seen["tools"] == []
    assert seen["calls"] == [{"name": "jira_ticket", "error": "no such tool"}]
    assert not any("mcp" in name for name in seen["files"])
    if cli == "codex":
        assert "mcp_servers" not in tomllib.loads(seen["files"][".codex/config.toml"])
    assert result.usage.connectors is None


@pytest.mark.parametrize("cli", ["claude", "codex"])
def test_a_connector_error_is_a_tool_error_in_the_transcript_and_the_review_goes_on(tmp_path, cli):
    tasuku = Tasuku(failed("The team's system answered HTTP 502.", duration_ms=30))
    result, seen = run(tmp_path, cli, job(connectors=(JIRA,)), tasuku=tasuku,
                       calls=[{"name": "jira_ticket", "input": {"key": "PAY-9"}}])  # fmt: skip
    assert seen["calls"][0]["is_error"] and "HTTP 502" in seen["calls"][0]["text"]
    [entry] = [e for e in result.transcript if e.kind == "connector"]
    assert entry.is_error and entry.connector.status == "failed" and "HTTP 502" in entry.content
    assert result.usage.connectors.failures == 1
    assert not result.incomplete and result.summary.confidence == 0.9


@pytest.mark.parametrize("cli", ["claude", "codex"])
def test_a_connector_server_that_cannot_start_is_a_clear_note_not_a_crash(
    tmp_path, cli, monkeypatch
):
    """The engine in this process, its MCP server's command broken: the CLI reports the
    server failed, the review goes on without connectors and the transcript says so."""
    from sandbox.engines.cli import codex as codex_module

    broken = lambda spec: (extras.sys.executable, ["-I", "-m", "sandbox.no_such_server", str(spec)])  # noqa: E731
    monkeypatch.setattr(claude_module, "mcp_server_command", broken)
    monkeypatch.setattr(codex_module, "mcp_server_command", broken)
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    seen_file = tmp_path / "seen.json"
    script = script_write(tmp_path / "s.json", seen=seen_file, answer=ANSWER,
                          calls=[{"name": "jira_ticket", "input": {"key": "PAY-1"}}])  # fmt: skip
    bin_dir = fake_cli_install(tmp_path / "bin", cli, script)
    monkeypatch.setenv("PATH", f"{bin_dir}:{scrubbed_environment('/tmp')['PATH']}")
    for name, value in KEYS[cli].items():
        monkeypatch.setenv(name, value)
    review = claude_module.review_claude_code if cli == "claude" else codex_module.review_codex
    with ConnectorBridge(Tasuku().handle, directory=tmp_path) as bridge:
        for name, value in bridge.environment().items():
            monkeypatch.setenv(name, value)
        result = review(job(connectors=(JIRA,)), checkout)
    seen = json.loads(seen_file.read_text())
    assert seen["servers"]["tasuku"].startswith("failed")
    notes = [e.content for e in result.transcript if e.is_error and e.kind == "note"]
    assert any("tasuku" in n and ("failed" in n or "not available" in n) for n in notes), notes
    assert not result.incomplete and result.findings == []


def test_without_a_way_to_tasuku_the_connectors_are_not_offered_and_it_says_so():
    offered, note = extras.connectors_offered(job(connectors=(JIRA,)), {})
    assert offered.connectors == ()
    assert (
        note
        == "Connectors not offered (jira_ticket): this runner gave the engine no way to Tasuku."
    )
    kept, none = extras.connectors_offered(
        job(connectors=(JIRA,)), {"TASUKU_CONNECTOR_SOCKET": "/s", "TASUKU_CONNECTOR_TOKEN": "t"}
    )
    assert kept.connectors == (JIRA,) and none == ""


def test_the_codex_config_names_the_server_its_tools_and_only_the_bridge(tmp_path):
    table = codex_mcp_server(job(connectors=(JIRA,)), tmp_path / "spec.json")
    config = tomllib.loads(codex_config('say "hi"\n', table))
    assert config["developer_instructions"] == 'say "hi"\n'
    server = config["mcp_servers"]["tasuku"]
    assert server["args"] == ["-I", "-m", "sandbox.engines.cli.mcp_server",
                              str(tmp_path / "spec.json")]  # fmt: skip
    assert "env" not in server  # nothing of the bridge in the file: passed on by name
    assert server["env_vars"] == ["TASUKU_CONNECTOR_SOCKET", "TASUKU_CONNECTOR_TOKEN"]
    assert server["enabled_tools"] == ["jira_ticket"]
    assert server["default_tools_approval_mode"] == "approve"  # exec would decline the calls
    assert server["tool_timeout_sec"] == 25


def test_the_server_refuses_to_start_on_a_spec_it_cannot_read(tmp_path, capsys):
    from sandbox.engines.cli import mcp_server

    (tmp_path / "spec.json").write_text('{"connectors": [{"name": "Not A Name"}]}')
    assert mcp_server.main([str(tmp_path / "spec.json")]) == 2
    assert "the connectors' spec" in capsys.readouterr().err
    assert mcp_server.main([]) == 2


@pytest.mark.parametrize("cli", ["claude", "codex"])
def test_a_runner_without_a_bridge_offers_no_connector_and_the_transcript_says_so(tmp_path, cli):
    result, seen = run(tmp_path, cli, job(connectors=(JIRA,)),
                       calls=[{"name": "jira_ticket", "input": {"key": "PAY-1"}}])  # fmt: skip
    assert seen["servers"] == {} and seen["tools"] == []
    first = result.transcript[0]
    assert first.kind == "note" and first.is_error
    assert first.content == (
        "Connectors not offered (jira_ticket): this runner gave the engine no way to Tasuku."
    )
    prompt = json.dumps(seen["files"])
    assert "The team has given you connectors" not in prompt


def test_the_reviews_connector_call_bound_holds_through_the_mcp_server(tmp_path):
    tasuku = Tasuku()
    bounded = job(connectors=(JIRA,), limits=Limits(steps=8, deadline_seconds=90,
                                                     connector_calls=1))  # fmt: skip
    result, seen = run(tmp_path, "claude", bounded, tasuku=tasuku,
                       calls=[{"name": "jira_ticket", "input": {"key": "PAY-1"}},
                              {"name": "jira_ticket", "input": {"key": "PAY-2"}}])  # fmt: skip
    assert tasuku.asked == [("jira_ticket", {"key": "PAY-1"})]
    second = seen["calls"][1]
    assert second["is_error"] and "This review's 1 connector calls are used up." in second["text"]
    assert [e.connector.status for e in result.transcript if e.kind == "connector"] == [
        "ok", "refused"]  # fmt: skip
    assert result.usage.connectors.calls == 2 and result.usage.connectors.failures == 1
