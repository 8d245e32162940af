"""The claude-code and codex engines: their command lines and environments, what they
make of every sample of the CLIs' output (tests/fixtures/cli), and each engine run end to
end through the local runner with a fake CLI first on PATH."""

from __future__ import annotations

import json
import sys
import time
import tomllib
from pathlib import Path

import pytest

from sandbox.contract import Limits, Price, ReviewJob, Submission
from sandbox.engines import cli
from sandbox.engines.cli import (
    Run,
    claude_command,
    claude_environment,
    claude_result,
    claude_watch,
    cli_run,
    cli_timeout,
    codex_command,
    codex_config,
    codex_environment,
    codex_output_schema,
    codex_result,
    codex_step_watch,
    json_object_extract,
    submission_read,
)
from sandbox.errors import ProviderError, SandboxError
from sandbox.runners.local import engine_run, scrubbed_environment

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "cli"
SCHEMA = json.dumps(Submission.model_json_schema(), separators=(",", ":"))
WORKER_SECRETS = {
    "GITHUB_TOKEN": "ghs_worker_installation_token",
    "GITHUB_PRIVATE_KEY": "-----BEGIN RSA PRIVATE KEY-----",
    "SECRET_KEY": "django-secret",
    "DATABASE_URL": "postgres://tasuku:pw@db/tasuku",
    "AWS_SECRET_ACCESS_KEY": "aws-secret",
}


def job(**changes) -> ReviewJob:
    fields = {
        "job_id": "7",
        "repository": "acme/shop",
        "pull_request": 12,
        "title": "Search by name",
        "base_sha": "a" * 40,
        "head_sha": "b" * 40,
        "model": "claude-sonnet-4-5",
        "limits": Limits(steps=12, cost_cap_usd=2.5, deadline_seconds=600),
    }
    return ReviewJob(**(fields | changes))


def sample(name: str) -> str:
    return (FIXTURES / name).read_text()


def ran(name: str, *, returncode: int | None = 0, stopped: str = "") -> Run:
    return Run(returncode=returncode, stdout=sample(name), stderr="", stopped=stopped, seconds=3.5)


# --- Command lines and environments ----------------------------------------------------


def test_claude_runs_headless_with_only_read_grep_and_glob(tmp_path):
    prompt_file = tmp_path / "system-prompt.md"
    assert claude_command(job(), system_prompt_file=prompt_file) == [
        "claude", "-p",
        "--output-format", "stream-json", "--verbose",
        "--tools", "Read,Grep,Glob",
        "--disallowedTools", "Bash,Edit,Write,NotebookEdit,WebFetch,WebSearch,Task,Agent",
        "--permission-mode", "dontAsk",
        "--strict-mcp-config",
        "--setting-sources", "user",
        "--disable-slash-commands",
        "--no-session-persistence",
        "--max-turns", "12",
        "--append-system-prompt-file", str(prompt_file),
        "--json-schema", SCHEMA,
        "--max-budget-usd", "2.5",
        "--model", "claude-sonnet-4-5",
    ]  # fmt: skip


def test_claude_gets_no_model_or_budget_flag_when_the_job_names_none(tmp_path):
    command = claude_command(
        job(model="", limits=Limits(steps=3)), system_prompt_file=tmp_path / "p.md"
    )
    assert "--model" not in command
    assert "--max-budget-usd" not in command
    assert command[command.index("--max-turns") + 1] == "3"


def test_codex_runs_exec_read_only_with_a_schema_and_no_project_instructions(tmp_path):
    schema, last = tmp_path / "schema.json", tmp_path / "last.txt"
    assert codex_command(
        job(model="gpt-5-codex"), schema_file=schema, last_message_file=last
    ) == [
        "codex", "exec", "--json",
        "--sandbox", "read-only",
        "--skip-git-repo-check",
        "--ephemeral", "--ignore-rules", "--color", "never",
        "-c", 'approval_policy="never"',
        "-c", 'web_search="disabled"',
        "-c", "agents.enabled=false",
        "-c", 'shell_environment_policy.inherit="core"',
        "-c", "project_doc_max_bytes=0",
        "--output-schema", str(schema),
        "--output-last-message", str(last),
        "--model", "gpt-5-codex",
        "-",
    ]  # fmt: skip


def test_codex_is_pointed_at_an_openai_compatible_server_by_config(tmp_path):
    command = codex_command(
        job(model=""),
        schema_file=tmp_path / "s.json",
        last_message_file=tmp_path / "l.txt",
        base_url="http://gpu-box:8000/v1",
    )
    assert command[-3:] == ["-c", 'openai_base_url="http://gpu-box:8000/v1"', "-"]
    assert "--model" not in command


def test_the_claude_cli_sees_path_home_locale_and_its_key_and_nothing_else():
    environ = WORKER_SECRETS | {
        "PATH": "/opt/bin:/usr/bin",
        "HOME": "/home/worker",
        "ANTHROPIC_API_KEY": "sk-ant-1",
        "OPENAI_API_KEY": "sk-openai",
    }
    assert claude_environment("/tmp/h", environ) == {
        "PATH": "/opt/bin:/usr/bin",
        "HOME": "/tmp/h",
        "TMPDIR": "/tmp/h",
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "ANTHROPIC_API_KEY": "sk-ant-1",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    }


def test_the_codex_cli_gets_the_openai_key_as_codex_api_key_and_its_server():
    environ = WORKER_SECRETS | {
        "ANTHROPIC_API_KEY": "sk-ant-1",
        "OPENAI_API_KEY": "sk-openai",
        "OPENAI_BASE_URL": "http://gpu-box:8000/v1",
    }
    env = codex_environment("/tmp/h", environ)
    assert env == {
        "PATH": cli.DEFAULT_PATH,
        "HOME": "/tmp/h",
        "TMPDIR": "/tmp/h",
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "CODEX_API_KEY": "sk-openai",
        "OPENAI_BASE_URL": "http://gpu-box:8000/v1",
    }


def test_the_process_environment_is_what_the_engines_read_by_default(monkeypatch):
    for name, value in WORKER_SECRETS.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-2")
    env = claude_environment("/tmp/h")
    assert env["ANTHROPIC_API_KEY"] == "sk-ant-2"
    assert not set(WORKER_SECRETS) & set(env)


def test_the_docker_runners_egress_proxy_and_a_gateway_are_passed_on():
    environ = {
        "ANTHROPIC_API_KEY": "k",
        "ANTHROPIC_BASE_URL": "https://gateway.internal",
        "HTTPS_PROXY": "http://egress:3128",
        "https_proxy": "http://egress:3128",
    }
    env = claude_environment("/tmp/h", environ)
    assert env["HTTPS_PROXY"] == env["https_proxy"] == "http://egress:3128"
    assert env["ANTHROPIC_BASE_URL"] == "https://gateway.internal"


def test_a_missing_api_key_is_a_permanent_provider_failure():
    with pytest.raises(ProviderError, match="ANTHROPIC_API_KEY") as caught:
        claude_environment("/tmp/h", {"PATH": "/usr/bin"})
    assert caught.value.permanent and caught.value.code == "provider-missing-key"
    with pytest.raises(ProviderError, match="OPENAI_API_KEY"):
        codex_environment("/tmp/h", {"ANTHROPIC_API_KEY": "k"})


def test_the_codex_schema_follows_openais_strict_rules():
    strict = codex_output_schema(Submission.model_json_schema())
    keywords = {"type", "properties", "required", "additionalProperties", "items", "enum"}
    keywords |= {"anyOf", "$ref", "$defs", "description", "const"}
    objects = []

    def check(node: dict) -> None:
        assert set(node) <= keywords, set(node) - keywords
        if "properties" in node:
            objects.append(node)
            assert node["additionalProperties"] is False
            assert node["required"] == list(node["properties"])
        children = [*node.get("properties", {}).values(), *node.get("$defs", {}).values()]
        children += node.get("anyOf", []) + ([node["items"]] if "items" in node else [])
        for child in children:
            check(child)

    check(strict)
    assert len(objects) == 4  # the submission, a finding, the summary, a ruling
    body = strict["$defs"]["Finding"]["properties"]["body"]
    assert {"type": "null"} in body["anyOf"]


def test_an_answer_to_the_strict_schema_reads_as_a_review():
    finding = {"path": "a.py", "side": None, "start_line": 2, "end_line": 2, "severity": "low",
               "category": "bug", "title": "Off by one", "body": None, "evidence": None,
               "suggestion": None, "confidence": None, "blocking": None, "rule": None,
               "same_as": None}  # fmt: skip
    reading = submission_read({"findings": [finding], "summary": None, "rulings": []})
    assert not reading.problem
    assert reading.findings[0]["body"] == ""
    assert reading.findings[0]["side"] == "RIGHT"


def test_the_codex_config_carries_any_system_prompt_as_valid_toml():
    prompt = 'Rules:\n- "quote" \\ back\tslash\x7f\x01 ünïcode 🚀\n'
    assert tomllib.loads(codex_config(prompt)) == {"developer_instructions": prompt}


def test_the_cli_deadline_leaves_the_engine_time_to_answer():
    assert cli_timeout(Limits(deadline_seconds=1800)) == 1740
    assert cli_timeout(Limits(deadline_seconds=100)) == 90
    assert cli_timeout(Limits(deadline_seconds=20)) == 15
    assert cli_timeout(Limits(deadline_seconds=3)) == 1


# --- Claude Code's output --------------------------------------------------------------


def test_a_claude_review_keeps_findings_usage_and_what_it_read():
    result = claude_result(job(), ran("claude__success.jsonl"))
    assert result.engine == "claude-code"
    assert not result.incomplete
    assert [(f["path"], f["start_line"], f["severity"]) for f in result.findings] == [
        ("app/views.py", 3, "high")
    ]
    assert result.findings[0]["side"] == "RIGHT"  # validated, defaults filled in
    assert result.summary.validation == "Read the view and its caller."
    usage = result.usage
    assert (usage.input_tokens, usage.output_tokens, usage.steps) == (2400, 300, 3)
    assert usage.cost_usd == pytest.approx(0.0117)  # the CLI's own total_cost_usd
    assert usage.model == "claude-sonnet-4-5"
    kinds = [(entry.kind, entry.name) for entry in result.transcript]
    assert kinds[0] == ("note", "")
    assert "tools: Glob, Grep, Read, StructuredOutput" in result.transcript[0].content
    assert ("tool_call", "Read") in kinds
    assert ("tool_result", "Read") in kinds
    read = next(e for e in result.transcript if e.kind == "tool_result" and e.name == "Read")
    assert "db.execute" in read.content


def test_claude_reaching_outside_the_checkout_is_refused_and_shown():
    result = claude_result(job(), ran("claude__denied_outside_checkout.jsonl"))
    assert [f["title"] for f in result.findings] == ["SQL built from request input"]
    refused = [e for e in result.transcript if e.content.startswith("Claude Code refused")]
    assert refused[0].is_error
    assert 'Glob {"pattern": "*", "path": "/etc"}' in refused[0].content
    assert 'Grep {"pattern": "root", "path": "/etc/passwd"}' in refused[0].content
    assert "/etc/host" not in " ".join(
        e.content for e in result.transcript if e.kind == "tool_result"
    )


def test_claude_stopping_at_its_turn_limit_is_an_incomplete_review():
    result = claude_result(job(limits=Limits(steps=2)), ran("claude__max_turns.jsonl"))
    assert (
        result.incomplete == "the claude-code CLI stopped at its turn limit (2) without an answer"
    )
    assert result.findings == []
    assert result.usage.steps == 3
    assert result.usage.cost_usd > 0
    assert any(e.kind == "tool_call" and e.name == "Read" for e in result.transcript)


def test_claude_reaching_its_budget_is_an_incomplete_review_with_all_calls_counted():
    result = claude_result(job(), ran("claude__max_budget.json"))
    assert result.incomplete == "the claude-code CLI reached its cost cap ($2.5) without an answer"
    assert result.usage.input_tokens == 2400  # modelUsage, not the shorter `usage`
    assert result.usage.steps == 2


def test_claude_giving_up_on_the_schema_passes_its_last_answer_to_the_gate():
    result = claude_result(job(), ran("claude__structured_output_retries.jsonl"))
    assert not result.incomplete
    assert result.findings == [{"path": "app/views.py", "start_line": 3, "end_line": 3,
                                "severity": "urgent", "category": "security", "title": "x"}]  # fmt: skip
    assert any("off the schema" in e.content for e in result.transcript)
    assert result.usage.steps == 6


def test_without_its_last_answer_a_claude_schema_failure_is_an_incomplete_review():
    result = claude_result(job(), ran("claude__structured_output_retries.json"))
    assert "no answer matching the review schema" in result.incomplete


@pytest.mark.parametrize(
    ("name", "permanent", "words", "code"),
    [
        ("claude__auth_error.json", True, "Invalid API key", "provider-key"),
        ("claude__not_logged_in.json", True, "Not logged in", "provider-key"),
        ("claude__unknown_model.json", True, "issue with the selected model", "provider-model"),
        ("claude__rate_limited.json", False, "429", "provider-unavailable"),
        ("claude__overloaded.json", False, "529 Overloaded", "provider-unavailable"),
    ],
)
def test_claude_api_refusals_are_provider_failures(name, permanent, words, code):
    with pytest.raises(ProviderError) as caught:
        claude_result(job(), ran(name, returncode=1))
    assert caught.value.permanent is permanent
    assert caught.value.stage == "provider"
    assert words in str(caught.value)
    assert caught.value.code == code


@pytest.mark.parametrize(
    "name",
    ["claude__fenced_result.json", "claude__json_in_result.json", "claude__prose_and_json.json"],
)
def test_a_claude_answer_in_text_is_read_however_it_is_wrapped(name):
    result = claude_result(job(), ran(name))
    assert not result.incomplete
    assert [f["title"] for f in result.findings] == ["SQL built from request input"]


def test_a_malformed_finding_is_passed_on_raw_for_the_gate_to_record():
    result = claude_result(job(), ran("claude__one_bad_finding.json"))
    assert not result.incomplete
    assert len(result.findings) == 2
    assert result.findings[1] == {"path": "app/views.py", "end_line": 2, "severity": "urgent",
                                  "category": "style", "title": "Odd name"}  # fmt: skip
    assert [r.id for r in result.rulings] == ["f-1"]
    assert any("malformed ruling" in e.content for e in result.transcript)


def test_an_answer_that_is_not_a_review_is_an_incomplete_review_that_shows_it():
    result = claude_result(job(), ran("claude__not_a_review.json"))
    assert result.incomplete.startswith("the claude-code CLI's answer could not be read")
    assert result.findings == []
    shown = [e for e in result.transcript if e.content.startswith("The answer began: ")]
    assert shown[0].is_error
    assert shown[0].content.endswith("I looked through the change and found nothing worth "
                                     "raising. The view reads the query parameter and passes it on.")  # fmt: skip
    assert result.usage.cost_usd > 0  # what it cost is still recorded


def test_claude_is_stopped_retrying_a_refused_key_and_the_refusal_is_permanent():
    lines = sample("claude__auth_retrying.jsonl").splitlines()
    watch = claude_watch(job())
    reasons = [watch(line) for line in lines]
    assert reasons[0] == "" and reasons[1] == "was stopped retrying a refused key"
    run = Run(None, "\n".join(lines[:2]), "", stopped=reasons[1])
    with pytest.raises(ProviderError, match="authentication_failed") as caught:
        claude_result(job(), run)
    assert caught.value.permanent


def test_a_deadline_reached_while_the_api_is_overloaded_is_a_passing_provider_failure():
    stream = sample("claude__auth_retrying.jsonl").replace(
        '"error_status":401', '"error_status":529'
    )
    run = Run(None, stream.replace("authentication_failed", "overloaded"), "",
              stopped="did not finish within 540 s")  # fmt: skip
    with pytest.raises(ProviderError, match="overloaded") as caught:
        claude_result(job(), run)
    assert not caught.value.permanent


def test_a_claude_run_cut_off_at_the_deadline_keeps_what_it_did():
    run = ran("claude__malformed.jsonl", returncode=None, stopped="did not finish within 540 s")
    result = claude_result(job(), run)
    assert result.incomplete == "the claude-code CLI did not finish within 540 s"
    assert result.usage.steps == 1
    assert result.usage.input_tokens == 1200
    assert any(e.kind == "tool_call" and e.name == "Read" for e in result.transcript)


def test_a_claude_cli_that_dies_without_a_result_is_a_sandbox_failure():
    run = Run(returncode=1, stdout="", stderr="error: unknown option '--bogus'\n")
    with pytest.raises(SandboxError, match="unknown option") as caught:
        claude_result(job(), run)
    assert caught.value.permanent and caught.value.code == "engine-failed"


def test_without_a_cost_from_the_cli_the_models_price_counts():
    result_line = json.loads(sample("claude__json_in_result.json")) | {"total_cost_usd": 0}
    run = Run(returncode=0, stdout=json.dumps(result_line), stderr="")
    priced = job(price=Price(input_per_mtok=3, output_per_mtok=15))
    assert claude_result(priced, run).usage.cost_usd == pytest.approx((3600 * 3 + 450 * 15) / 1e6)


# --- Codex's output --------------------------------------------------------------------


def test_a_codex_review_keeps_findings_usage_priced_by_the_model_and_its_commands():
    price = Price(input_per_mtok=1.25, output_per_mtok=10, cache_read_per_mtok=0.125)
    priced = job(model="gpt-5-codex", price=price)
    result = codex_result(priced, ran("codex__success.jsonl"))
    assert result.engine == "codex"
    assert not result.incomplete
    assert [f["title"] for f in result.findings] == ["SQL built from request input"]
    usage = result.usage
    assert (usage.input_tokens, usage.output_tokens) == (10240, 620)
    # 8192 of the 10240 input tokens were cached, and are priced as such.
    assert usage.cost_usd == pytest.approx((2048 * 1.25 + 620 * 10 + 8192 * 0.125) / 1e6)
    assert usage.steps == 2  # one command, one answer
    assert usage.model == "gpt-5-codex"
    kinds = [(e.kind, e.name) for e in result.transcript]
    assert ("tool_call", "shell") in kinds and ("tool_result", "shell") in kinds
    assert result.transcript[0].is_error  # the model-metadata warning, kept as a note


def test_a_codex_answer_wrapped_in_prose_is_read():
    result = codex_result(job(), ran("codex__fenced_answer.jsonl"))
    assert [f["start_line"] for f in result.findings] == [3]


def test_codex_output_with_stray_lines_is_still_read_and_the_lines_counted():
    result = codex_result(job(), ran("codex__malformed_lines.jsonl"))
    assert len(result.findings) == 1
    assert any(e.content == "3 output lines were not JSON events." for e in result.transcript)


@pytest.mark.parametrize(
    ("name", "permanent", "words", "code"),
    [
        ("codex__auth_error.jsonl", True, "Incorrect API key", "provider-key"),
        ("codex__unknown_model.jsonl", True, "does not exist", "provider-model"),
        ("codex__rate_limited.jsonl", False, "429 Too Many Requests", "provider-unavailable"),
    ],
)
def test_a_failed_codex_turn_is_a_provider_failure(name, permanent, words, code):
    with pytest.raises(ProviderError) as caught:
        codex_result(job(), ran(name, returncode=1))
    assert caught.value.permanent is permanent
    assert words in str(caught.value)
    assert caught.value.code == code


def test_codex_quota_exhaustion_is_not_retried():
    line = {"type": "turn.failed", "error": {"message": "unexpected status 429 Too Many "
            "Requests: You exceeded your current quota, please check your plan and billing"}}  # fmt: skip
    with pytest.raises(ProviderError) as caught:
        codex_result(job(), Run(returncode=1, stdout=json.dumps(line), stderr=""))
    assert caught.value.permanent and caught.value.code == "provider-billing"


def test_the_last_message_file_stands_in_for_a_missing_agent_message():
    stream = "\n".join(
        line for line in sample("codex__success.jsonl").splitlines() if "agent_message" not in line
    )
    answer = json.dumps({"findings": [], "summary": {"validation": "Nothing to raise."}})
    result = codex_result(job(), Run(0, stream, ""), last_message=answer)
    assert not result.incomplete
    assert result.summary.validation == "Nothing to raise."


def test_codex_is_stopped_past_its_step_limit():
    watch = codex_step_watch(0)
    reasons = [watch(line) for line in sample("codex__success.jsonl").splitlines()]
    assert "stopped at its step limit (0) without an answer" in reasons
    run = ran("codex__success.jsonl", returncode=None, stopped=next(r for r in reasons if r))
    result = codex_result(job(), run)
    assert result.incomplete == "the codex CLI stopped at its step limit (0) without an answer"
    assert result.findings == []


def test_a_codex_cli_that_dies_before_any_event_is_a_sandbox_failure():
    with pytest.raises(SandboxError, match="exit 2") as caught:
        codex_result(job(), Run(returncode=2, stdout="", stderr="error: unexpected argument\n"))
    assert caught.value.code == "engine-failed"


# --- Reading answers -------------------------------------------------------------------


def test_the_review_object_is_found_among_prose_and_other_braces():
    text = 'Use {curly} braces. Example: {"a": 1}. Answer: {"findings": [], "rulings": []} done'
    assert json_object_extract(text) == {"findings": [], "rulings": []}
    assert json_object_extract("no json here") is None
    assert json_object_extract('only {"a": 1}') == {"a": 1}


def test_findings_that_are_not_a_list_make_the_answer_unreadable():
    assert submission_read({"findings": "none"}).problem
    assert submission_read(["findings"]).problem


# --- Running a CLI ---------------------------------------------------------------------


def test_a_missing_cli_names_the_binary_and_the_image(tmp_path):
    with pytest.raises(SandboxError, match="claude CLI is not on PATH") as caught:
        cli_run(["claude", "-p"], cwd=tmp_path, env={"PATH": str(tmp_path)}, stdin="",
                timeout=5)  # fmt: skip
    assert caught.value.permanent and caught.value.code == "engine-cli-missing"
    assert "@anthropic-ai/claude-code" in str(caught.value)


def test_the_deadline_stops_the_cli_and_all_it_started_and_keeps_its_output(tmp_path):
    pid_file = tmp_path / "child.pid"
    script = _script(tmp_path / "bin" / "slow", f"""
import subprocess, sys, time
child = subprocess.Popen(["sleep", "60"])
open({str(pid_file)!r}, "w").write(str(child.pid))
print('{{"type": "system", "subtype": "init"}}', flush=True)
time.sleep(60)
""")  # fmt: skip
    started = time.monotonic()
    env = {"PATH": f"{script.parent}:/usr/bin:/bin"}
    run = cli_run([script.name], cwd=tmp_path, env=env, stdin="", timeout=2)
    assert time.monotonic() - started < 10
    assert run.stopped == "did not finish within 2 s"
    assert run.returncode is None
    assert '"init"' in run.stdout
    time.sleep(0.2)
    assert _gone(int(pid_file.read_text()))


def test_a_large_prompt_reaches_the_cli_whole(tmp_path):
    script = _script(tmp_path / "bin" / "count", "import sys; print(len(sys.stdin.read()))")
    env = {"PATH": str(script.parent)}
    run = cli_run([script.name], cwd=tmp_path, env=env, stdin="x" * 3_000_000, timeout=20)
    assert (run.returncode, run.stdout.strip()) == (0, "3000000")


# --- End to end through the local runner -----------------------------------------------

FAKE_CLAUDE = """
import json, os, sys
from pathlib import Path
argv, problems = sys.argv[1:], []
def value(flag):
    return argv[argv.index(flag) + 1] if flag in argv else None
if argv[0] != "-p": problems.append("not print mode")
if value("--output-format") != "stream-json": problems.append("output format")
if value("--tools") != "Read,Grep,Glob": problems.append("tools " + str(value("--tools")))
if value("--permission-mode") != "dontAsk": problems.append("permission mode")
if "--allowedTools" in argv: problems.append("reads allowed beyond the checkout")
if value("--max-turns") != "7": problems.append("max turns")
if "findings" not in json.loads(value("--json-schema"))["properties"]: problems.append("schema")
if "senior engineer" not in Path(value("--append-system-prompt-file")).read_text():
    problems.append("system prompt")
if "Repository: acme/shop, pull request #12." not in sys.stdin.read(): problems.append("prompt")
if os.environ.get("ANTHROPIC_API_KEY") != "sk-ant-e2e": problems.append("key")
for name in ("GITHUB_TOKEN", "UNRELATED_SECRET", "PYTHONHASHSEED"):
    if name in os.environ: problems.append("leaked " + name)
if not Path(os.environ["HOME"], "system-prompt.md").is_file(): problems.append("home")
if Path.cwd() != Path(CHECKOUT): problems.append("cwd " + os.getcwd())
if problems:
    sys.exit("fake claude: " + "; ".join(problems))
sys.stdout.write(Path(OUTPUT).read_text())
"""

FAKE_CODEX = """
import json, os, sys, tomllib
from pathlib import Path
argv, problems = sys.argv[1:], []
def value(flag):
    return argv[argv.index(flag) + 1] if flag in argv else None
if argv[:2] != ["exec", "--json"] or argv[-1] != "-": problems.append("not exec --json -")
if value("--sandbox") != "read-only": problems.append("sandbox")
if 'shell_environment_policy.inherit="core"' not in argv: problems.append("shell env")
if json.loads(Path(value("--output-schema")).read_text())["additionalProperties"] is not False:
    problems.append("schema not strict")
config = tomllib.loads((Path(os.environ["HOME"]) / ".codex" / "config.toml").read_text())
if "senior engineer" not in config["developer_instructions"]: problems.append("instructions")
if "Repository: acme/shop" not in sys.stdin.read(): problems.append("prompt")
if os.environ.get("CODEX_API_KEY") != "sk-openai-e2e": problems.append("key")
for name in ("OPENAI_API_KEY", "GITHUB_TOKEN", "UNRELATED_SECRET"):
    if name in os.environ: problems.append("leaked " + name)
if problems:
    sys.exit("fake codex: " + "; ".join(problems))
Path(value("--output-last-message")).write_text("ignored: the stream has the answer")
sys.stdout.write(Path(OUTPUT).read_text())
"""


def test_the_claude_code_engine_runs_the_cli_in_the_sandbox(tmp_path, monkeypatch):
    checkout = _checkout(tmp_path)
    bin_dir = _fake_cli(tmp_path, "claude", FAKE_CLAUDE, checkout, "claude__success.jsonl")
    monkeypatch.setenv("GITHUB_TOKEN", "ghs_worker")
    result = engine_run(
        "claude-code",
        job(limits=Limits(steps=7, deadline_seconds=60)),
        checkout,
        allow_env=_allow(bin_dir, ANTHROPIC_API_KEY="sk-ant-e2e"),
    )
    assert result.engine == "claude-code"
    assert [f["title"] for f in result.findings] == ["SQL built from request input"]
    assert result.usage.steps == 3


def test_the_codex_engine_runs_the_cli_in_the_sandbox(tmp_path, monkeypatch):
    checkout = _checkout(tmp_path)
    bin_dir = _fake_cli(tmp_path, "codex", FAKE_CODEX, checkout, "codex__success.jsonl")
    monkeypatch.setenv("GITHUB_TOKEN", "ghs_worker")
    result = engine_run(
        "codex",
        job(model="gpt-5-codex", limits=Limits(steps=7, deadline_seconds=60)),
        checkout,
        allow_env=_allow(bin_dir, OPENAI_API_KEY="sk-openai-e2e"),
    )
    assert result.engine == "codex"
    assert [f["severity"] for f in result.findings] == ["high"]
    assert result.usage.input_tokens == 10240


def test_a_provider_refusal_reaches_the_worker_as_a_provider_failure(tmp_path):
    checkout = _checkout(tmp_path)
    bin_dir = _fake_cli(tmp_path, "claude", FAKE_CLAUDE, checkout, "claude__auth_error.json")
    with pytest.raises(ProviderError, match="Invalid API key") as caught:
        engine_run(
            "claude-code",
            job(limits=Limits(steps=7, deadline_seconds=60)),
            checkout,
            allow_env=_allow(bin_dir, ANTHROPIC_API_KEY="sk-ant-e2e"),
        )
    assert caught.value.permanent
    assert caught.value.code == "provider-key"  # named in the engine's process, kept across


def _allow(bin_dir: Path, **keys: str) -> dict[str, str]:
    """The runner's own PATH with the fake CLI's folder first, as the image puts the real
    one on PATH, plus an unrelated variable the engine must not hand to the CLI."""
    runner_path = scrubbed_environment("/tmp")["PATH"]
    return {"PATH": f"{bin_dir}:{runner_path}", "UNRELATED_SECRET": "x", **keys}


def _checkout(tmp_path: Path) -> Path:
    checkout = tmp_path / "checkout"
    (checkout / "app").mkdir(parents=True)
    (checkout / "app" / "views.py").write_text("def view(request):\n    ...\n")
    return checkout


def _fake_cli(tmp_path: Path, name: str, body: str, checkout: Path, output: str) -> Path:
    header = f"CHECKOUT = {str(checkout.resolve())!r}\nOUTPUT = {str(FIXTURES / output)!r}\n"
    return _script(tmp_path / "bin" / name, header + body).parent


def _script(path: Path, body: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!{sys.executable}\n{body.lstrip()}")
    path.chmod(0o755)
    return path


def _gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except FileNotFoundError:
        return True


def test_the_fixtures_hold_no_path_or_host_of_the_machine_they_were_recorded_on():
    for path in FIXTURES.iterdir():
        text = path.read_text()
        assert "cli-probe" not in text and "127.0.0.1" not in text, path.name


# --- The cost cap, watched on the stream ------------------------------------------------


def _usage_lines(name: str) -> list[str]:
    return [line for line in sample(name).splitlines() if '"usage"' in line]


def test_claude_is_stopped_before_a_call_that_could_pass_the_cost_cap():
    from sandbox.contract import Price

    priced = job(
        price=Price(input_per_mtok=3, output_per_mtok=15),
        limits=Limits(steps=12, cost_cap_usd=0.03, deadline_seconds=600, max_output_tokens=2000),
    )
    watch = claude_watch(priced)
    lines = sample("claude__success.jsonl").splitlines()
    reasons = [watch(line) for line in lines]
    stopped = next((r for r in reasons if r), "")
    assert stopped.startswith("was stopped at the cost cap ($0.03): $")
    assert "next model call could cost up to $" in stopped
    # Each message's usage counted once, however many content blocks repeat it: the
    # same stream with every assistant line doubled stops at the same line.
    doubled = claude_watch(priced)
    again = []
    for line in lines:
        again.append(doubled(line))
        if '"type":"assistant"' in line.replace(" ", ""):
            again.append(doubled(line))
    assert next(r for r in again if r) == stopped
    result = claude_result(
        priced, Run(None, "\n".join(lines[: reasons.index(stopped) + 1]), "", stopped=stopped)
    )
    assert result.incomplete.startswith("the claude-code CLI was stopped at the cost cap")


def test_without_a_cap_or_a_price_nothing_is_stopped_for_cost():
    for uncapped in (job(), job(limits=Limits(steps=12, deadline_seconds=600))):
        watch = claude_watch(uncapped)
        assert not any(watch(line) for line in sample("claude__success.jsonl").splitlines())


def test_codex_is_stopped_at_the_cost_cap_by_an_estimate_from_its_actions():
    from sandbox.contract import Price
    from sandbox.engines.cli.codex import codex_watch

    priced = job(
        model="gpt-5.5",
        price=Price(input_per_mtok=1.25, output_per_mtok=10),
        limits=Limits(steps=12, cost_cap_usd=0.02, deadline_seconds=600, max_output_tokens=1000),
    )
    watch = codex_watch(priced, "p" * 20_000)  # a prompt of some 5,000 tokens
    reasons = [watch(line) for line in sample("codex__success.jsonl").splitlines()]
    stopped = next((r for r in reasons if r), "")
    assert stopped.startswith("was stopped at the cost cap ($0.02)")
    roomy = codex_watch(priced.model_copy(update={"limits": Limits(cost_cap_usd=50)}), "p")
    assert not any(roomy(line) for line in sample("codex__success.jsonl").splitlines())
