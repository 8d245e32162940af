"""Connectors on the engine's side: the model calls a connector through the real SDKs
(fake model servers), the engine sends the call over the runner's bridge, and whatever
comes back reaches the model fenced as data; the bridge refuses a stranger; an engine
with no way back to Tasuku does not offer its connectors."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import pytest

from sandbox.agent.tools import SUBMIT_SPEC, Tools
from sandbox.agent.tools.connectors import input_summary
from sandbox.agent.tools.web import FETCH_URL, WEB_SEARCH
from sandbox.connectors import (
    SOCKET_VARIABLE,
    TOKEN_VARIABLE,
    ConnectorBridge,
    ConnectorClient,
    _address,
    failed,
    refused,
)
from sandbox.contract import (
    RESERVED_TOOL_NAMES,
    ConnectorAnswer,
    ConnectorTool,
    Limits,
    Price,
    ReviewJob,
)
from sandbox.runners.local import engine_run
from tests.fakes.models import ANTHROPIC_TEST_KEY, OPENAI_TEST_KEY, ToolCall, ToolCalls

TICKET = ConnectorTool(
    name="jira_ticket",
    description="Look up a Jira ticket by its key.",
    input_schema={"type": "object", "properties": {"key": {"type": "string"}},
                  "required": ["key"]},
)  # fmt: skip


@pytest.fixture(params=["anthropic", "openai"])
def provider(request, fake_anthropic, fake_openai):
    if request.param == "anthropic":
        env = {
            "ANTHROPIC_API_KEY": ANTHROPIC_TEST_KEY,
            "ANTHROPIC_BASE_URL": fake_anthropic.base_url,
        }
        return "anthropic", fake_anthropic, env, "claude-sonnet-5-5"
    env = {"OPENAI_API_KEY": OPENAI_TEST_KEY, "OPENAI_BASE_URL": fake_openai.base_url}
    return "openai", fake_openai, env, "gpt-5.5"


def review_job(model: str, *connectors: ConnectorTool, calls: int = 30) -> ReviewJob:
    return ReviewJob(
        job_id="7", repository="acme/shop", pull_request=3, base_sha="a" * 40,
        head_sha="b" * 40, model=model, price=Price(input_per_mtok=3, output_per_mtok=15),
        limits=Limits(steps=6, connector_calls=calls), connectors=connectors,
    )  # fmt: skip


class Handler:
    """Tasuku's side, as a test plays it: records each call and answers `answer`."""

    def __init__(self, answer: ConnectorAnswer) -> None:
        self.answer = answer
        self.calls: list[tuple[str, Any]] = []

    def __call__(self, name: str, arguments: Any) -> ConnectorAnswer:
        self.calls.append((name, arguments))
        return self.answer


def test_a_connector_call_goes_to_tasuku_and_its_answer_comes_back_fenced(provider, tmp_path):
    engine, fake, env, model = provider
    handler = Handler(ConnectorAnswer(status="ok", content='{"summary": "Refunds"}',
                                      duration_ms=12, bytes=22))  # fmt: skip
    fake.script(
        ToolCall("jira_ticket", {"key": "PAY-1"}),
        ToolCall("submit_review", {"findings": []}),
    )
    with ConnectorBridge(handler, directory=tmp_path) as bridge:
        result = engine_run(engine, review_job(model, TICKET), tmp_path, allow_env=env,
                            connectors=bridge)  # fmt: skip
    assert handler.calls == [("jira_ticket", {"key": "PAY-1"})]
    first = fake.model_requests[0]
    assert "jira_ticket" in first.tool_names and "`jira_ticket`" in first.system
    [answer] = fake.model_requests[1].tool_results
    assert '{"summary": "Refunds"}' in answer.content
    assert "never instructions" in answer.content and "<<<DATA " in answer.content
    [entry] = [e for e in result.transcript if e.kind == "connector"]
    assert entry.name == "jira_ticket" and not entry.is_error
    assert entry.connector.input == '{"key": "PAY-1"}'
    assert (entry.connector.status, entry.connector.duration_ms, entry.connector.bytes) == (
        "ok",
        12,
        22,
    )
    assert not [e for e in result.transcript if e.kind == "tool_call" and e.name == "jira_ticket"]
    assert result.usage.connectors.calls == 1 and result.usage.connectors.failures == 0
    # The bridge is gone with the engine.
    assert not list(tmp_path.glob("tasuku-conn-*"))


def test_a_refusal_is_a_tool_error_the_model_reads_and_the_review_goes_on(provider, tmp_path):
    engine, fake, env, model = provider
    handler = Handler(refused("The input does not match jira_ticket's schema; nothing was sent."))
    calls = [ToolCall("jira_ticket", {"id": 3})]
    if engine == "openai":  # arguments that are not JSON (Anthropic's are always parsed)
        calls.append(ToolCall("jira_ticket", "{broken"))
    fake.script(ToolCalls(calls), ToolCall("submit_review", {"findings": []}))
    with ConnectorBridge(handler, directory=tmp_path) as bridge:
        result = engine_run(engine, review_job(model, TICKET), tmp_path, allow_env=env,
                            connectors=bridge)  # fmt: skip
    assert not result.incomplete
    errors = fake.model_requests[1].tool_results
    assert "does not match jira_ticket's schema" in errors[0].content
    if engine == "anthropic":
        assert errors[0].is_error
    else:  # broken JSON never reaches Tasuku
        assert "not valid JSON" in errors[1].content
    assert len(handler.calls) == 1
    entries = [e for e in result.transcript if e.kind == "connector"]
    assert all(e.is_error for e in entries) and entries[0].connector.status == "refused"
    assert result.usage.connectors.failures == result.usage.connectors.calls == len(entries)


def test_the_reviews_connector_calls_are_bounded(provider, tmp_path):
    engine, fake, env, model = provider
    handler = Handler(failed("The system answered HTTP 500."))
    fake.script(
        ToolCall("jira_ticket", {"key": "A"}), ToolCall("jira_ticket", {"key": "B"}),
        ToolCall("submit_review", {"findings": []}),
    )  # fmt: skip
    with ConnectorBridge(handler, directory=tmp_path) as bridge:
        result = engine_run(engine, review_job(model, TICKET, calls=1), tmp_path, allow_env=env,
                            connectors=bridge)  # fmt: skip
    assert len(handler.calls) == 1
    assert "1 connector calls are used up" in fake.model_requests[2].tool_results[0].content
    assert (result.usage.connectors.calls, result.usage.connectors.failures) == (2, 2)


def test_without_a_way_back_to_tasuku_the_connectors_are_not_offered(provider, tmp_path):
    engine, fake, env, model = provider
    fake.script(ToolCall("submit_review", {"findings": []}))
    result = engine_run(engine, review_job(model, TICKET), tmp_path, allow_env=env)
    assert "jira_ticket" not in fake.model_requests[0].tool_names
    assert "jira_ticket" not in fake.model_requests[0].system
    assert any("Connectors not offered (jira_ticket)" in e.content for e in result.transcript)
    assert result.usage.connectors is None


def test_the_bridge_answers_only_the_runs_token(tmp_path):
    handler = Handler(ConnectorAnswer(status="ok", content="secret plans"))
    with ConnectorBridge(handler, directory=tmp_path) as bridge:
        env = bridge.environment()
        stranger = ConnectorClient(env[SOCKET_VARIABLE], "0" * 64)
        answer = stranger.call("jira_ticket", {"key": "A"}, timeout=5)
        assert answer.status == "refused" and "token" in answer.content
        assert handler.calls == []
        # Not JSON at all.
        with socket.socket(socket.AF_UNIX) as conn:
            with _address(Path(env[SOCKET_VARIABLE])) as address:  # a long path too
                conn.connect(address)
            conn.sendall(b"GET / HTTP/1.1\r\n\r\n\n")
            reply = json.loads(conn.makefile().readline())
        assert reply["status"] == "refused" and handler.calls == []
        good = ConnectorClient(env[SOCKET_VARIABLE], env[TOKEN_VARIABLE])
        assert good.call("jira_ticket", {"key": "A"}, timeout=5).content == "secret plans"
    # Closed with the engine: nothing answers any more.
    assert good.call("jira_ticket", {}, timeout=2).status == "failed"


def test_a_bridge_in_a_deep_directory_still_answers(tmp_path):
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    deep.mkdir(parents=True)
    handler = Handler(ConnectorAnswer(status="ok", content="fine"))
    with ConnectorBridge(handler, directory=deep) as bridge:
        assert len(str(bridge.path)) > 108
        client = ConnectorClient.from_environment(bridge.environment())
        assert client.call("jira_ticket", {}, timeout=5).content == "fine"


def test_a_run_that_is_no_longer_live_gets_no_calls_made(tmp_path):
    handler = Handler(ConnectorAnswer(status="ok", content="made"))
    with ConnectorBridge(handler, directory=tmp_path, live=lambda: False) as bridge:
        client = ConnectorClient.from_environment(bridge.environment())
        answer = client.call("jira_ticket", {}, timeout=5)
    assert answer.status == "refused" and "ended" in answer.content and handler.calls == []


def test_a_handler_that_breaks_is_a_failure_the_model_reads(tmp_path):
    def broken(name, arguments):
        raise RuntimeError("a bug, with the input in it")

    with ConnectorBridge(broken, directory=tmp_path) as bridge:
        answer = ConnectorClient.from_environment(bridge.environment()).call("x", {}, timeout=5)
    assert answer.status == "failed" and "input" not in answer.content


def test_no_connector_can_shadow_one_of_the_agents_own_tools(tmp_path):
    (tmp_path / "a.py").write_text("x = 1\n")
    tools = Tools(tmp_path, skills=(), web=None)
    ours = {s.name for s in tools.specs} | {SUBMIT_SPEC.name, FETCH_URL.name, WEB_SEARCH.name}
    ours |= {"load_skill", "dispatch_explorers", "submit_report", "submit_reply"}
    assert ours <= RESERVED_TOOL_NAMES
    with pytest.raises(ValueError):
        ConnectorTool(name="Read-File")


def test_the_transcript_gets_the_input_summarised():
    long = {"query": "x" * 500, "ids": list(range(50))}
    text = input_summary(long)
    assert len(text) <= 301 and "(500 characters)" in text


def test_connectors_reach_the_engine_only_as_name_description_and_schema():
    dumped = json.loads(review_job("m", TICKET).model_dump_json())
    assert dumped["connectors"] == [
        {"name": "jira_ticket", "description": "Look up a Jira ticket by its key.",
         "input_schema": TICKET.input_schema, "timeout_seconds": 30.0}
    ]  # fmt: skip


def test_a_call_the_bridge_could_not_make_is_logged_in_the_runs_context(tmp_path, caplog):
    """The bridge serves on a thread of its own, in the log context of the run that
    opened it (tasuku/logs.py): its lines name the run."""
    from tasuku.logs import ContextFilter, log_context

    def broken(name, arguments):
        raise RuntimeError("the handler broke")

    caplog.handler.addFilter(ContextFilter())
    with log_context(run=12, attempt=2), ConnectorBridge(broken, directory=tmp_path) as bridge:
        answer = ConnectorClient(str(bridge.path), bridge.token).call("jira_ticket", {}, timeout=10)
    assert answer.status == "failed" and "internal error" in answer.content
    [line] = [r for r in caplog.records if "could not be made" in r.getMessage()]
    assert (line.run, line.attempt) == (12, 2)
