"""What an engine does is told as it does it: each model call, tool call and explorer is
a progress line on the engine's stderr, relayed live to the GitHub Actions job log by
`tasuku-runner` (and left out of the failure line every runner reads)."""

from __future__ import annotations

import threading
import time

import pytest

from sandbox import actions_runner, progress
from sandbox.contract import ReviewJob
from sandbox.runners.local import Limits, engine_run, failure_from_exit
from tests.fakes.models import ANTHROPIC_TEST_KEY, Hang, ToolCall
from tests.sandbox.test_actions_runner_cli import Stub


def _job(head: str) -> ReviewJob:
    return ReviewJob(
        job_id="9", repository="acme/shop", pull_request=7, base_sha="0" * 40, head_sha=head,
        model="claude-sonnet-5-5",
    )  # fmt: skip


def test_each_call_is_relayed_while_the_engine_still_runs(tmp_path, fake_anthropic):
    (tmp_path / "app.py").write_text("print('hi')\n")
    fake_anthropic.script(
        ToolCall("read_file", {"path": "app.py"}),
        Hang(4, then=ToolCall("submit_review", {"findings": []})),
    )
    seen: list[dict] = []
    done = threading.Event()
    env = {"ANTHROPIC_API_KEY": ANTHROPIC_TEST_KEY, "ANTHROPIC_BASE_URL": fake_anthropic.base_url}

    def review() -> None:
        engine_run("anthropic", _job("a" * 40), tmp_path, limits=Limits(wall_seconds=60),
                   allow_env=env, on_progress=seen.append)  # fmt: skip
        done.set()

    worker = threading.Thread(target=review)
    worker.start()
    deadline = time.monotonic() + 30
    while not any(e.get("kind") == "tool" for e in seen) and time.monotonic() < deadline:
        time.sleep(0.05)
    # The read was told while the second model call was still hanging.
    assert not done.is_set()
    tool = next(e for e in seen if e["kind"] == "tool")
    assert (tool["name"], tool["args"], tool["error"]) == ("read_file", "app.py", False)
    assert [e["step"] for e in seen if e["kind"] == "model"] == [1]
    worker.join(timeout=60)
    assert done.is_set()
    assert [e["step"] for e in seen if e["kind"] == "model"] == [1, 2]


def test_the_actions_job_log_shows_the_tool_calls_as_they_happen(
    checkout, runner_env, monkeypatch, fake_anthropic, capfd
):
    root, head = checkout
    stub = Stub(head)
    base = stub.job()
    monkeypatch.setattr(stub, "job", lambda: {**base, "engine": "anthropic",
                                               "job": _job(head).model_dump(mode="json")})  # fmt: skip
    runner_env(stub)
    monkeypatch.setenv("ANTHROPIC_API_KEY", ANTHROPIC_TEST_KEY)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", fake_anthropic.base_url)
    fake_anthropic.script(
        ToolCall("search_code", {"pattern": "print"}),
        ToolCall("submit_review", {"findings": []}),
    )
    assert actions_runner.main(["--url", stub.url, "--checkout", str(root)]) == 0
    log = capfd.readouterr().err
    assert "tasuku-runner: model call 1:" in log
    assert "tasuku-runner: tool search_code print" in log
    assert log.index("tool search_code") < log.index("model call 2:")
    assert stub.results and stub.results[0]["result"]["engine"] == "anthropic"


def test_progress_lines_never_pass_for_the_engines_failure_line():
    stderr = (
        'tasuku:progress {"kind": "tool", "name": "read_file", "args": "x", "error": true}\n'
        '{"error": "invalid x-api-key", "stage": "provider", "permanent": true, '
        '"code": "provider-key"}\n'
        'tasuku:progress {"kind": "model", "step": 1}\n'
    )
    failure = failure_from_exit("anthropic", 4, stderr)
    assert (str(failure), failure.code) == ("invalid x-api-key", "provider-key")


@pytest.mark.parametrize(
    ("arguments", "summary"),
    [
        ({"path": "app/x.py", "start_line": 10, "end_line": 40}, "app/x.py:10-40"),
        ({"pattern": "subprocess\\.call"}, "subprocess\\.call"),
        ({"questions": [{"question": "a"}, {"question": "b"}]}, "2 questions"),
        ({"token": "x" * 500}, '{"token": "' + "x" * 108 + "…"),
    ],
)
def test_a_tool_calls_input_is_summarised_in_one_short_line(arguments, summary):
    assert progress.arguments_summary(arguments) == summary
