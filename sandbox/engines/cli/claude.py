"""The `claude-code` engine: Anthropic's Claude Code CLI, headless, with only its Read,
Grep and Glob tools (and Skill, for the reviewer's skills, and the reviewer's connectors
as the tools of one MCP server), in a permission mode that refuses anything outside the
checkout."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Mapping
from pathlib import Path

from sandbox.contract import (
    ReviewJob,
    ReviewResult,
    TranscriptEntry,
    Usage,
)
from sandbox.engines import ANTHROPIC
from sandbox.engines.cli.base import CliEngine, Launch, Outcome
from sandbox.engines.cli.common import (
    API_TOKENS,
    PERMANENT_ERROR,
    SUBMISSION_SCHEMA,
    TOOL_RESULT_TEXT,
    CostWatch,
    Run,
    api_key,
    as_int,
    as_text,
    clip,
    json_line,
    note,
    usage_build,
)
from sandbox.engines.cli.extras import (
    MCP_STARTUP_SECONDS,
    SERVER_NAME,
    ConnectorCalls,
    mcp_call_timeout,
    mcp_server_command,
    mcp_server_environment,
    write_private,
)
from sandbox.errors import SandboxError
from sandbox.prompt import Prompt

# Read-only by construction: no shell, no edits, no web, no subagents.
CLAUDE_TOOLS = ("Read", "Grep", "Glob")
# Loads one of the skills in ~/.claude/skills: text, nothing run.
SKILL_TOOL = "Skill"
# What an MCP server's tool is called in Claude Code's permission rules.
MCP_PREFIX = f"mcp__{SERVER_NAME}__"
CLAUDE_DENIED = (
    "Bash", "Edit", "Write", "NotebookEdit", "WebFetch", "WebSearch", "Task", "Agent",
)  # fmt: skip


def claude_command(
    job: ReviewJob,
    *,
    system_prompt_file: Path,
    root: Path | None = None,
    mcp_config: Path | None = None,
) -> list[str]:
    """`claude -p` reading the user prompt on stdin, with only Read/Grep/Glob available,
    Skill when the reviewer has skills (installed in the throwaway HOME's
    ~/.claude/skills), and the job's connectors when `mcp_config` names the server.

    Reference: https://code.claude.com/docs/en/cli-reference (every flag below)
    Reference: https://code.claude.com/docs/en/headless (-p, stream-json, --json-schema)
    Reference: https://code.claude.com/docs/en/permission-modes (dontAsk)
    Reference: https://code.claude.com/docs/en/permissions#working-directories
    Reference: https://code.claude.com/docs/en/permissions (Skill(name), mcp__server__tool)
    Reference: https://code.claude.com/docs/en/skills (~/.claude/skills/<name>/SKILL.md)
    Reference: https://code.claude.com/docs/en/mcp (--mcp-config, stdio servers, env)
    """
    tools = [*CLAUDE_TOOLS, *([SKILL_TOOL] if job.skill_documents else [])]
    # dontAsk denies what would need a prompt: with no --allowedTools, that is any read
    # or search outside the checkout (checked on 2.1.197: an allowed bare `Read` reads
    # /etc/passwd, a denied one does not). So only these are allowed, each by name: the
    # reviewer's own skills and connectors.
    allowed = [f"{SKILL_TOOL}({s.name})" for s in job.skill_documents]
    if mcp_config is not None:
        allowed += [f"{MCP_PREFIX}{c.name}" for c in job.connectors]
    command = [
        "claude", "-p",
        # stream-json (not json): the same final result object, plus each tool call for
        # the transcript, and what was done so far when the deadline cuts the run short.
        "--output-format", "stream-json", "--verbose",
        "--tools", ",".join(tools),  # the only built-in tools the model is given
        "--disallowedTools", ",".join(CLAUDE_DENIED),
        "--permission-mode", "dontAsk",
        *(["--allowedTools", ",".join(allowed)] if allowed else []),
        # Only the server of `mcp_config`, if any: never one a settings file names.
        "--strict-mcp-config",
        *(["--mcp-config", str(mcp_config)] if mcp_config is not None else []),
        "--setting-sources", "user",  # the throwaway HOME's, never the checkout's
        # It also turns skills off: kept for a reviewer without any.
        *(["--disable-slash-commands"] if not job.skill_documents else []),
        "--no-session-persistence",  # the transcript of untrusted data stays off disk
        "--max-turns", str(job.limits.steps),
        "--append-system-prompt-file", str(system_prompt_file),
        "--json-schema", json.dumps(SUBMISSION_SCHEMA, separators=(",", ":")),
    ]  # fmt: skip
    if job.limits.cost_cap_usd is not None:
        command += ["--max-budget-usd", str(float(job.limits.cost_cap_usd))]
    if job.model:
        command += ["--model", job.model]
    if root is not None:
        # The secondary repositories beside the checkout are working directories too:
        # readable with Read/Grep/Glob, and nothing more (dontAsk still refuses edits).
        for secondary in job.secondaries:
            command += ["--add-dir", str(secondary.location(root))]
    return command


def claude_environment(home: str, environ: Mapping[str, str] = os.environ) -> dict[str, str]:
    """Reference: https://code.claude.com/docs/en/settings#environment-variables
    Reference: https://code.claude.com/docs/en/network-config (HTTPS_PROXY)
    """
    return CLAUDE_CODE.environment(home, environ)


# --- Claude Code -----------------------------------------------------------------------


def claude_mcp_config(job: ReviewJob, spec: Path, environ: Mapping[str, str] = os.environ) -> str:
    """The `--mcp-config` file: one stdio server, the connectors', given the bridge's
    socket and the run's token (Claude Code gives a server only the variables named).

    Reference: https://code.claude.com/docs/en/mcp (the mcpServers object; stdio's
        command, args and env; MCP_TIMEOUT and MCP_TOOL_TIMEOUT)
    """
    command, args = mcp_server_command(spec)
    server = {"type": "stdio", "command": command, "args": args,
              "env": mcp_server_environment(environ)}  # fmt: skip
    return json.dumps({"mcpServers": {SERVER_NAME: server}})


class ClaudeCode(CliEngine):
    name = "claude-code"
    program = "claude"
    provider = ANTHROPIC
    skills_folder = Path(".claude") / "skills"

    def credentials(self, environ: Mapping[str, str]) -> dict[str, str]:
        return {
            "ANTHROPIC_API_KEY": api_key(self.name, environ, "ANTHROPIC_API_KEY"),
            # Telemetry, error reports and the auto-updater: the sandbox reaches the model
            # API only, so these would just wait on a network that is not there.
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        }

    def launch(
        self, job: ReviewJob, root: Path, home: Path, prompt: Prompt, spec: Path | None
    ) -> Launch:
        system_prompt_file = home / "system-prompt.md"
        system_prompt_file.write_text(prompt.system, encoding="utf-8")
        if spec is None:
            return Launch(claude_command(job, system_prompt_file=system_prompt_file, root=root))
        mcp_config = write_private(home / "mcp.json", claude_mcp_config(job, spec))
        return Launch(
            claude_command(
                job, system_prompt_file=system_prompt_file, root=root, mcp_config=mcp_config
            ),
            # Claude Code's waits, in ms: for the server to start, and for one call.
            env={
                "MCP_TIMEOUT": str(MCP_STARTUP_SECONDS * 1000),
                "MCP_TOOL_TIMEOUT": str(mcp_call_timeout(job) * 1000),
            },
        )

    def watch(self, job: ReviewJob, prompt: Prompt) -> Callable[[str], str]:
        return claude_watch(job)

    def read(
        self, job: ReviewJob, run: Run, events: list[dict], calls: ConnectorCalls, last_message: str
    ) -> Outcome:
        """Reference: https://code.claude.com/docs/en/headless (output formats)
        Reference: https://code.claude.com/docs/en/agent-sdk/typescript#sdkresultmessage
        """
        result = next((event for event in reversed(events) if event.get("type") == "result"), None)
        transcript = _claude_transcript(events, calls)
        retry = next((e for e in reversed(events) if e.get("type") in ("assistant", "system")), {})
        if result is None and retry.get("subtype") == "api_retry":
            # It never got an answer from the API: the provider's failure, not a bound reached.
            message = f"{retry.get('error')} (HTTP {retry.get('error_status')}), {run.stopped}"
            raise self.refused(message, retry.get("error_status"))
        if result is None:
            if run.stopped:
                return Outcome(
                    _claude_partial_usage(job, events, run), transcript, None, run.stopped
                )
            raise self.failed(run)
        usage = _claude_usage(job, result, run)
        if denied := result.get("permission_denials") or []:
            # Reaching outside the checkout is worth seeing: it is how an injection would look.
            refused = "; ".join(
                f"{d.get('tool_name')} {json.dumps(d.get('tool_input'))}" for d in denied
            )
            transcript.append(note(f"Claude Code refused these tool calls: {refused}", error=True))
        subtype = str(result.get("subtype", ""))
        errors = "; ".join(map(str, result.get("errors") or ()))
        if subtype == "success" and result.get("is_error"):  # the API refused
            raise self.refused(str(result.get("result", "")), result.get("api_error_status"))
        if subtype == "error_during_execution":
            if PERMANENT_ERROR.search(errors) or re.search(r"rate.?limit|overloaded", errors, re.I):
                raise self.refused(errors)
            raise SandboxError(
                f"The {self.name} CLI failed: {errors or subtype}"[:2000],
                permanent=False,
                code="engine-failed",
            )
        attempt = _last_structured_output(events)
        if subtype == "error_max_structured_output_retries" and attempt is not None:
            # Claude Code refuses the whole answer for one bad finding; the gate judges each.
            gave_up = "Claude Code found this answer off the schema and stopped asking for another."
            transcript.append(note(gave_up, error=True))
            return Outcome(usage, transcript, attempt)
        if subtype != "success":
            reason = {
                "error_max_turns": f"stopped at its turn limit ({job.limits.steps}) without an "
                "answer",
                "error_max_budget_usd": f"reached its cost cap (${job.limits.cost_cap_usd}) "
                "without an answer",
                "error_max_structured_output_retries": "gave no answer matching the review "
                "schema after several attempts",
            }.get(subtype, f"stopped without an answer ({subtype}: {errors})")
            return Outcome(usage, transcript, None, reason)
        answer = result.get("structured_output")
        if not isinstance(answer, dict):
            answer = str(result.get("result", ""))
        return Outcome(usage, transcript, answer)


CLAUDE_CODE = ClaudeCode()


def review_claude_code(job: ReviewJob, root: Path) -> ReviewResult:
    return CLAUDE_CODE.review(job, root)


def claude_watch(job: ReviewJob) -> Callable[[str], str]:
    """Stops claude retrying a key the API refused (it retries a 401 for minutes), and
    before a model call that could pass the cost cap: each assistant message in the
    stream carries its call's usage (claude's own --max-budget-usd is checked only after
    a call, so it can pass the cap by one)."""
    cost = CostWatch(job)
    counted: set[str] = set()

    def watch(line: str) -> str:
        event = json_line(line) or {}
        if event.get("subtype") == "api_retry" and event.get("error_status") in (401, 403):
            return "was stopped retrying a refused key"
        message = event.get("message") or {}
        usage = message.get("usage") if event.get("type") == "assistant" else None
        # A message is printed once per content block, with the same id and usage.
        if isinstance(usage, dict) and message.get("id") not in counted:
            counted.add(message.get("id"))
            return cost.called(*(as_int(usage.get(name)) for name in API_TOKENS))
        return ""

    return watch


def claude_result(job: ReviewJob, run: Run, *, calls: ConnectorCalls | None = None) -> ReviewResult:
    """A ReviewResult from what `claude -p --output-format stream-json` (or `json`) printed,
    with the connector calls the MCP server logged (`calls`) in place of the CLI's own
    record of them."""
    return CLAUDE_CODE.result(job, run, calls=calls)


def _claude_transcript(events: list[dict], calls: ConnectorCalls) -> list[TranscriptEntry]:
    entries, tools = [], {}
    for event in events:
        kind = event.get("type")
        if kind == "system" and event.get("subtype") == "init":
            entries.append(
                note(
                    f"claude {event.get('claude_code_version', '?')}, model {event.get('model')}, "
                    f"tools: {', '.join(event.get('tools') or ()) or 'none'}, "
                    f"permission mode {event.get('permissionMode')}"
                )
            )
            entries.extend(_mcp_problems(event))
        content = (event.get("message") or {}).get("content")
        if kind not in ("assistant", "user") or not isinstance(content, list):
            continue
        for block in content:
            if not isinstance(block, dict):
                continue
            if block.get("type") == "text" and block.get("text", "").strip():
                entries.append(TranscriptEntry(kind="text", content=clip(block["text"])))
            elif block.get("type") == "tool_use":
                tools[block.get("id")] = name = str(block.get("name", ""))
                if name.startswith(MCP_PREFIX):
                    continue  # one "connector" entry, at its result
                entries.append(
                    TranscriptEntry(
                        kind="tool_call", name=name, content=clip(json.dumps(block.get("input")))
                    )
                )
            elif block.get("type") == "tool_result":
                name = tools.get(block.get("tool_use_id"), "")
                if name.startswith(MCP_PREFIX):
                    entries.append(_connector_entry(name.removeprefix(MCP_PREFIX), block, calls))
                    continue
                entries.append(
                    TranscriptEntry(
                        kind="tool_result",
                        name=tools.get(block.get("tool_use_id"), ""),
                        content=clip(as_text(block.get("content")), TOOL_RESULT_TEXT),
                        is_error=bool(block.get("is_error")),
                    )
                )
    return entries + calls.remaining()


def _mcp_problems(init: dict) -> list[TranscriptEntry]:
    """The connectors' server not running, as Claude Code's init event tells it: the
    review goes on without them, and says so."""
    problems = [
        f"The connectors' MCP server {server.get('name')} is {server.get('status')}: the "
        "connectors were not available to this review."
        for server in init.get("mcp_servers") or ()
        if isinstance(server, dict)
        and server.get("name") == SERVER_NAME
        # "pending": still starting when the run began, which -p waits for.
        and server.get("status") not in ("connected", "pending")
    ]
    return [note(problem, error=True) for problem in problems]


def _connector_entry(name: str, block: dict, calls: ConnectorCalls) -> TranscriptEntry:
    """A connector call: the server's record of it, or what the CLI showed (a call the
    server never logged: refused by the CLI, or the server gone)."""
    logged = calls.entry(name)
    if logged is not None:
        return logged
    return TranscriptEntry(
        kind="connector",
        name=name,
        content=clip(as_text(block.get("content")), TOOL_RESULT_TEXT),
        is_error=True,
    )


def _last_structured_output(events: list[dict]) -> dict | None:
    """The input of the model's last StructuredOutput call (Claude Code's --json-schema
    tool), which only stream-json shows."""
    for event in reversed(events):
        for block in reversed((event.get("message") or {}).get("content") or []):
            if isinstance(block, dict) and block.get("name") == "StructuredOutput":
                return block.get("input") if isinstance(block.get("input"), dict) else None
    return None


def _claude_usage(job: ReviewJob, result: dict, run: Run) -> Usage:
    # modelUsage sums every API call (and model); `usage` fell short of it on a budget stop.
    per_model = list((result.get("modelUsage") or {}).values())
    if per_model:
        names = ("inputTokens", "outputTokens", "cacheReadInputTokens", "cacheCreationInputTokens")
        tokens = [sum(as_int(u.get(name)) for u in per_model) for name in names]
    else:
        usage = result.get("usage") or {}
        tokens = [as_int(usage.get(name)) for name in API_TOKENS]
    reported = result.get("total_cost_usd")
    return usage_build(
        job,
        *tokens,
        steps=as_int(result.get("num_turns")),
        cost=float(reported) if isinstance(reported, int | float) and reported > 0 else None,
        model=job.model or next(iter(result.get("modelUsage") or {}), ""),
        seconds=as_int(result.get("duration_ms")) / 1000 or run.seconds,
    )


def _claude_partial_usage(job: ReviewJob, events: list[dict], run: Run) -> Usage:
    """Usage of a run cut short: each API call's, once per message (a message is printed
    once per content block). Output counts are not final until the result."""
    calls = {}
    for event in events:
        message = event.get("message") or {}
        if event.get("type") == "assistant" and isinstance(message.get("usage"), dict):
            calls[message.get("id")] = message["usage"]
    tokens = [sum(as_int(u.get(name)) for u in calls.values()) for name in API_TOKENS]
    return usage_build(job, *tokens, steps=len(calls), seconds=run.seconds)
