"""The `codex` engine: OpenAI's Codex CLI, `codex exec` in its read-only sandbox, with
the key kept from the commands it runs and the repository's instruction files ignored;
the reviewer's skills in the throwaway HOME's skills folder, and its connectors as the
tools of one MCP server."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from pathlib import Path

from sandbox.connectors import SOCKET_VARIABLE, TOKEN_VARIABLE
from sandbox.contract import (
    ReviewJob,
    ReviewResult,
    TranscriptEntry,
)
from sandbox.engines import OPENAI
from sandbox.engines.cli.base import CliEngine, Launch, Outcome
from sandbox.engines.cli.common import (
    SUBMISSION_SCHEMA,
    TOOL_RESULT_TEXT,
    CostWatch,
    Run,
    api_key,
    as_int,
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
from sandbox.prompt import Prompt

# Where Codex reads a user's skills, under HOME (the throwaway one).
CODEX_SKILLS = Path(".agents") / "skills"
# Where it writes its last message (`--output-last-message`), under HOME.
LAST_MESSAGE = "last-message.txt"


def codex_command(
    job: ReviewJob, *, schema_file: Path, last_message_file: Path, base_url: str = ""
) -> list[str]:
    """`codex exec` reading the prompt on stdin, its shell sandboxed read-only.

    Reference: https://developers.openai.com/codex/noninteractive (exec, --json,
        --output-schema, -o, --skip-git-repo-check, --ephemeral, --ignore-rules)
    Reference: https://developers.openai.com/codex/config-reference (the -c keys)
    Reference: https://developers.openai.com/codex/agent-approvals-security (read-only)
    """
    command = [
        "codex", "exec", "--json",
        "--sandbox", "read-only",  # commands run, but cannot write or reach the network
        "--skip-git-repo-check",  # the sanitised checkout has no .git
        "--ephemeral", "--ignore-rules", "--color", "never",
        "-c", 'approval_policy="never"',
        "-c", 'web_search="disabled"',
        "-c", "agents.enabled=false",
        # Checked on 0.171.0: by default the model's commands inherit CODEX_API_KEY
        # (`env` printed it); "core" keeps only PATH, HOME and the like.
        "-c", 'shell_environment_policy.inherit="core"',
        # AGENTS.override.md is read as instructions and survives the checkout's
        # sanitising; 0 bytes of project docs reads none.
        "-c", "project_doc_max_bytes=0",
        "--output-schema", str(schema_file),
        "--output-last-message", str(last_message_file),
    ]  # fmt: skip
    if job.model:
        command += ["--model", job.model]
    if base_url:
        command += ["-c", f"openai_base_url={toml_string(base_url)}"]
    return [*command, "-"]


def codex_environment(home: str, environ: Mapping[str, str] = os.environ) -> dict[str, str]:
    """Reference: https://developers.openai.com/codex/noninteractive#use-api-key-auth"""
    return CODEX.environment(home, environ)


def codex_config(system_prompt: str, mcp_server: str = "") -> str:
    """The throwaway HOME's ~/.codex/config.toml: the system prompt as developer
    instructions, in a file because it can outgrow one command-line argument (128 KiB),
    and the connectors' MCP server (`codex_mcp_server`), if any."""
    return f"developer_instructions = {toml_string(system_prompt)}\n" + mcp_server


def codex_mcp_server(job: ReviewJob, spec: Path) -> str:
    """The `[mcp_servers.tasuku]` table: the connectors' stdio server, offering the job's
    connectors and no other tool. The bridge's socket and the run's token reach it from
    Codex's own environment, by name (`env_vars`): not in a file the commands Codex runs
    could read, and not in those commands' environment (`shell_environment_policy`).

    Reference: https://developers.openai.com/codex/mcp (stdio servers: command, args,
        env_vars, startup_timeout_sec, tool_timeout_sec, enabled_tools,
        default_tools_approval_mode)
    Reference: https://developers.openai.com/codex/config-reference (mcp_servers.<id>.*)
    """
    command, args = mcp_server_command(spec)
    variables = ", ".join(toml_string(name) for name in (SOCKET_VARIABLE, TOKEN_VARIABLE))
    tools = ", ".join(toml_string(c.name) for c in job.connectors)
    return (
        f"\n[mcp_servers.{SERVER_NAME}]\n"
        f"command = {toml_string(command)}\n"
        f"args = [{', '.join(toml_string(arg) for arg in args)}]\n"
        f"env_vars = [{variables}]\n"
        f"enabled_tools = [{tools}]\n"
        # `codex exec` has no one to ask, and declines a call that would need approval
        # (openai/codex#16043, #24135): the reviewer's connectors are approved, as the API
        # engines call them, and Tasuku checks each call on its side.
        'default_tools_approval_mode = "approve"\n'
        f"startup_timeout_sec = {MCP_STARTUP_SECONDS}\n"
        f"tool_timeout_sec = {mcp_call_timeout(job)}\n"
    )


def codex_output_schema(schema: Mapping) -> dict:
    """`schema` as OpenAI's strict structured outputs accept it: every property required
    (the optional ones nullable), no other properties, and only the keywords every
    OpenAI-compatible server knows. Bounds are dropped: the validation gate checks them.

    Reference: https://platform.openai.com/docs/guides/structured-outputs#supported-schemas
    """
    kept = {"type", "properties", "required", "additionalProperties", "items", "enum"}
    kept |= {"anyOf", "$ref", "$defs", "description", "const"}

    def strict(node: object) -> object:
        if isinstance(node, list):
            return [strict(item) for item in node]
        if not isinstance(node, Mapping):
            return node
        out = {key: strict(value) for key, value in node.items() if key in kept}
        if "$defs" in node:
            out["$defs"] = {name: strict(sub) for name, sub in node["$defs"].items()}
        if "properties" in node:
            required = set(node.get("required", ()))
            out["properties"] = {
                name: strict(sub) if name in required else _nullable(strict(sub))
                for name, sub in node["properties"].items()
            }
            out["required"] = list(node["properties"])
            out["additionalProperties"] = False
        return out

    return strict(dict(schema))  # type: ignore[return-value]


def _nullable(node: object) -> object:
    if not isinstance(node, dict):
        return node
    if any(option.get("type") == "null" for option in node.get("anyOf", ())):
        return node
    description = node.pop("description", None)
    wrapped: dict = {"anyOf": [node, {"type": "null"}]}
    if description:
        wrapped["description"] = description
    return wrapped


def toml_string(text: str) -> str:
    """`text` as a TOML basic string (TOML forbids raw control characters and DEL)."""
    escapes = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\t": "\\t", "\r": "\\r"}
    out = []
    for char in text:
        if char in escapes:
            out.append(escapes[char])
        elif ord(char) < 0x20 or ord(char) == 0x7F:
            out.append(f"\\u{ord(char):04X}")
        else:
            out.append(char)
    return '"' + "".join(out) + '"'


# --- Codex -----------------------------------------------------------------------------

CODEX_ACTIONS = {"command_execution", "mcp_tool_call", "web_search", "file_change"}


class Codex(CliEngine):
    """Reference: https://developers.openai.com/codex/skills (a user's skills:
    $HOME/.agents/skills/<name>/SKILL.md, loaded by Codex when a task matches)"""

    name = "codex"
    program = "codex"
    provider = OPENAI
    skills_folder = CODEX_SKILLS

    def credentials(self, environ: Mapping[str, str]) -> dict[str, str]:
        # codex exec authenticates with CODEX_API_KEY (0.171.0 ignores OPENAI_API_KEY
        # there); OPENAI_BASE_URL, passed on too, is read by older releases (newer ones
        # take -c).
        key = environ.get("CODEX_API_KEY") or api_key(self.name, environ, "OPENAI_API_KEY")
        return {"CODEX_API_KEY": key}

    def launch(
        self, job: ReviewJob, root: Path, home: Path, prompt: Prompt, spec: Path | None
    ) -> Launch:
        (home / ".codex").mkdir()
        server = codex_mcp_server(job, spec) if spec is not None else ""
        write_private(home / ".codex" / "config.toml", codex_config(prompt.system, server))
        schema_file = home / "submission.schema.json"
        schema_file.write_text(json.dumps(codex_output_schema(SUBMISSION_SCHEMA)), "utf-8")
        command = codex_command(
            job,
            schema_file=schema_file,
            last_message_file=home / LAST_MESSAGE,
            base_url=os.environ.get("OPENAI_BASE_URL", ""),  # an OpenAI-compatible server
        )
        return Launch(command, env=mcp_server_environment() if spec is not None else {})

    def watch(self, job: ReviewJob, prompt: Prompt) -> Callable[[str], str]:
        return codex_watch(job, prompt.system + prompt.user)

    def last_message(self, home: Path) -> str:
        path = home / LAST_MESSAGE
        return path.read_text("utf-8") if path.exists() else ""

    def read(
        self, job: ReviewJob, run: Run, events: list[dict], calls: ConnectorCalls, last_message: str
    ) -> Outcome:
        """Reference: https://developers.openai.com/codex/noninteractive#make-output-machine-readable
        Reference: https://github.com/openai/codex/blob/main/codex-rs/exec/src/exec_events.rs
        """
        transcript: list[TranscriptEntry] = []
        answers, actions = [], 0
        tokens = {"input_tokens": 0, "output_tokens": 0, "cached_input_tokens": 0}
        tokens["cache_write_input_tokens"] = 0
        completed, failure, last_error = False, "", ""
        for event in events:
            kind, item = event.get("type"), event.get("item") or {}
            if kind == "turn.completed":
                completed = True
                for name in tokens:
                    tokens[name] += as_int((event.get("usage") or {}).get(name))
            elif kind == "turn.failed":
                failure = str((event.get("error") or {}).get("message", "")) or "the turn failed"
            elif kind == "error":
                last_error = str(event.get("message", ""))
            elif kind == "item.completed":
                actions += item.get("type") in CODEX_ACTIONS
                if item.get("type") == "agent_message":
                    answers.append(str(item.get("text", "")))
                transcript.extend(_codex_entries(item, calls))
        transcript.extend(calls.remaining())
        skipped = sum(1 for line in run.stdout.splitlines() if line.strip()) - len(events)
        if skipped:
            transcript.append(note(f"{skipped} output lines were not JSON events.", error=True))
        cached = tokens["cached_input_tokens"] + tokens["cache_write_input_tokens"]
        usage = usage_build(
            job,
            max(0, tokens["input_tokens"] - cached),  # OpenAI's input_tokens include the cached
            tokens["output_tokens"],
            tokens["cached_input_tokens"],
            tokens["cache_write_input_tokens"],
            steps=actions + bool(answers),
            seconds=run.seconds,
        )
        if failure:
            raise self.refused(failure)
        if run.stopped:
            return Outcome(usage, transcript, None, run.stopped)
        answer = answers[-1] if answers else last_message
        if not completed and not answer:
            if last_error:
                raise self.refused(last_error)
            if run.returncode:
                raise self.failed(run)
            return Outcome(usage, transcript, None, "ended without finishing its turn")
        return Outcome(usage, transcript, answer)


CODEX = Codex()


def review_codex(job: ReviewJob, root: Path) -> ReviewResult:
    return CODEX.review(job, root)


def codex_watch(job: ReviewJob, prompt: str) -> Callable[[str], str]:
    """Its step limit, and the cost cap: codex reports usage only when its turn ends, so
    each action is counted as one model call whose input is the prompt and everything
    the actions returned so far (about four characters a token), an estimate that errs
    high; it stops before the call that could pass the cap."""
    steps = codex_step_watch(job.limits.steps)
    cost = CostWatch(job)
    context = len(prompt)

    def watch(line: str) -> str:
        nonlocal context
        if stopped := steps(line):
            return stopped
        event = json_line(line)
        item = (event or {}).get("item") or {}
        if not event or event.get("type") != "item.completed":
            return ""
        context += len(json.dumps(item, ensure_ascii=False))
        if item.get("type") not in CODEX_ACTIONS:
            return ""
        return cost.called(context // 4, min(job.limits.max_output_tokens, 1_000))

    return watch


def codex_step_watch(steps: int) -> Callable[[str], str]:
    """Stops codex after `steps` actions: it has no turn limit of its own."""
    taken = 0

    def watch(line: str) -> str:
        nonlocal taken
        event = json_line(line)
        item = (event or {}).get("item") or {}
        if event and event.get("type") == "item.completed" and item.get("type") in CODEX_ACTIONS:
            taken += 1
        return f"stopped at its step limit ({steps}) without an answer" if taken > steps else ""

    return watch


def codex_result(
    job: ReviewJob, run: Run, *, last_message: str = "", calls: ConnectorCalls | None = None
) -> ReviewResult:
    """A ReviewResult from the JSONL events of `codex exec --json`, with the connector
    calls the MCP server logged (`calls`) in place of Codex's own record of them."""
    return CODEX.result(job, run, calls=calls, last_message=last_message)


def _codex_entries(item: dict, calls: ConnectorCalls) -> list[TranscriptEntry]:
    kind = item.get("type")
    if kind == "mcp_tool_call" and item.get("server") == SERVER_NAME:
        # One "connector" entry: the server's record of the call, or what Codex showed.
        logged = calls.entry(str(item.get("tool", "")))
        if logged is not None:
            return [logged]
        detail = json.dumps({k: v for k, v in item.items() if k not in ("id", "type")})
        return [TranscriptEntry(kind="connector", name=str(item.get("tool", ""))[:100],
                                content=clip(detail), is_error=True)]  # fmt: skip
    if kind in ("agent_message", "reasoning") and str(item.get("text", "")).strip():
        return [
            TranscriptEntry(
                kind="text",
                name="" if kind == "agent_message" else kind,
                content=clip(str(item["text"])),
            )
        ]
    if kind == "command_execution":
        failed = item.get("status") != "completed" or item.get("exit_code") not in (0, None)
        return [
            TranscriptEntry(kind="tool_call", name="shell", content=clip(str(item.get("command")))),
            TranscriptEntry(
                kind="tool_result",
                name="shell",
                is_error=failed,
                content=clip(str(item.get("aggregated_output", "")), TOOL_RESULT_TEXT),
            ),
        ]
    if kind in ("mcp_tool_call", "web_search", "file_change"):
        name = f"{item.get('server')}.{item.get('tool')}" if kind == "mcp_tool_call" else kind
        detail = {k: v for k, v in item.items() if k not in ("id", "type")}
        return [
            TranscriptEntry(
                kind="tool_call",
                name=name,
                content=clip(json.dumps(detail)),
                is_error=kind == "file_change",
            )
        ]
    if kind == "error":
        return [note(str(item.get("message", "")), error=True)]
    return []
