"""Fake `claude` and `codex` programs that use the reviewer's skills and connectors the
way the real CLIs do, for the CLI engines' tests.

Each reads its skills from where the real CLI loads them (Claude Code:
`~/.claude/skills/<name>/SKILL.md`, unless `--disable-slash-commands`; Codex:
`$HOME/.agents/skills/<name>/SKILL.md`), strips the SKILL.md front matter as the Agent
Skills format describes, and starts each MCP server its configuration names (Claude
Code: the `--mcp-config` file's `mcpServers`, with `--strict-mcp-config`; Codex:
`[mcp_servers.<name>]` in `$HOME/.codex/config.toml`) as a stdio subprocess: the
command and args, a small default environment plus the server's `env` (and, for Codex,
the variables its `env_vars` names, from its own environment), JSON-RPC
`initialize`, `notifications/initialized`, `tools/list` and `tools/call`. A tool is
offered as `mcp__<server>__<tool>`; in Claude Code's `dontAsk` mode a call to a tool
not in `--allowedTools` is refused (a permission denial); Codex offers only a server's
`enabled_tools`, and `codex exec` declines a call that needs approval (a tool not
annotated read-only, on a server whose `default_tools_approval_mode` is not
"approve": openai/codex#16043). A server that does not start, or does not answer, is
reported "failed" (Claude Code's init event) or as an error item (Codex), and the run
goes on.

What each does is scripted by a JSON file (`SCRIPT`): the skill to load, the connector
calls to make, the answer. What it saw — the skills, the tools listed, the calls'
results, its environment and every file under its HOME, and the environment it gave
each server — is written to the script's `seen` file for the test to read.

Reference: https://code.claude.com/docs/en/skills, https://code.claude.com/docs/en/mcp
Reference: https://developers.openai.com/codex/skills, https://developers.openai.com/codex/mcp
Reference: https://modelcontextprotocol.io/specification/2025-06-18/basic/lifecycle
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

_COMMON = r'''
import json, os, subprocess, sys, threading, tomllib
from pathlib import Path

SCRIPT = json.loads(Path(SCRIPT_FILE).read_text())
SEEN = {"skills": {}, "tools": [], "calls": [], "servers": {}, "server_env": {}}
# What the MCP SDKs hand a stdio server by default, on POSIX (the rest is its `env`).
DEFAULT_ENV = ("HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER")


def skills_read(folder):
    """name -> (description, body) of each <folder>/<name>/SKILL.md."""
    found = {}
    if not folder.is_dir():
        return found
    for path in sorted(folder.glob("*/SKILL.md")):
        text = path.read_text()
        meta, body = {}, text
        if text.startswith("---\n"):
            head, _, body = text[4:].partition("\n---\n")
            for line in head.splitlines():
                key, _, value = line.partition(":")
                value = value.strip()
                meta[key.strip()] = json.loads(value) if value.startswith('"') else value
        found[meta.get("name") or path.parent.name] = (meta.get("description", ""), body)
    return found


class Server:
    """One stdio MCP server, spoken to as the CLIs' MCP clients do."""

    def __init__(self, name, command, args, env, timeout, env_vars=()):
        self.name, self.timeout, self.tools, self.next_id = name, timeout, [], 0
        passed = (*DEFAULT_ENV, *env_vars)  # Codex's `env_vars`: more of its own, by name
        given = {k: os.environ[k] for k in passed if k in os.environ} | dict(env or {})
        SEEN["server_env"][name] = given
        try:
            self.process = subprocess.Popen([command, *args], stdin=subprocess.PIPE,
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=given, text=True)
            self.request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                "clientInfo": {"name": "fake-cli", "version": "1"}})
            self.notify("notifications/initialized")
            self.tools = self.request("tools/list", {})["tools"]
            self.status = "connected"
        except Exception as exc:  # as the CLIs do: the server is failed, the run goes on
            self.status = "failed"
            SEEN["servers"][name] = f"failed: {type(exc).__name__}: {exc}"
            return
        SEEN["servers"][name] = "connected"

    def notify(self, method):
        self.process.stdin.write(json.dumps({"jsonrpc": "2.0", "method": method}) + "\n")
        self.process.stdin.flush()

    def request(self, method, params):
        self.next_id += 1
        self.process.stdin.write(json.dumps({"jsonrpc": "2.0", "id": self.next_id,
                                             "method": method, "params": params}) + "\n")
        self.process.stdin.flush()
        box = []
        reader = threading.Thread(target=lambda: box.append(self.process.stdout.readline()))
        reader.daemon = True
        reader.start()
        reader.join(self.timeout)
        if not box or not box[0]:
            raise RuntimeError("no answer: " + self.process.stderr.read()[-500:]
                               if self.process.poll() is not None else "no answer in time")
        answer = json.loads(box[0])
        if "error" in answer:
            raise RuntimeError(json.dumps(answer["error"]))
        return answer["result"]

    def call(self, tool, arguments):
        result = self.request("tools/call", {"name": tool, "arguments": arguments})
        text = "\n".join(part.get("text", "") for part in result.get("content", []))
        return text, bool(result.get("isError"))

    def close(self):
        if getattr(self, "process", None) and self.process.poll() is None:
            self.process.stdin.close()
            try:
                self.process.wait(5)
            except subprocess.TimeoutExpired:
                self.process.kill()


def home_files():
    """Every file under HOME (the MCP config, the skills, the prompt files)."""
    home = Path(os.environ["HOME"])
    out = {}
    for path in home.rglob("*"):
        if path.is_file():
            out[str(path.relative_to(home))] = path.read_text(errors="replace")
    return out


def seen_write():
    SEEN["env"] = dict(os.environ)
    SEEN["files"] = home_files()
    home = Path(os.environ["HOME"])
    SEEN["modes"] = {name: oct(home.joinpath(name).stat().st_mode & 0o777) for name in SEEN["files"]}
    Path(SCRIPT["seen"]).write_text(json.dumps(SEEN))
'''

_CLAUDE = r"""
argv = sys.argv[1:]
def value(flag):
    return argv[argv.index(flag) + 1] if flag in argv else None
sys.stdin.read()
SEEN["argv"] = argv
builtin = (value("--tools") or "").split(",")
allowed = [a for a in (value("--allowedTools") or "").split(",") if a]
events = []
skills = {}
if "Skill" in builtin and "--disable-slash-commands" not in argv:
    skills = skills_read(Path(os.environ["HOME"]) / ".claude" / "skills")
SEEN["skills"] = {name: body for name, (_, body) in skills.items()}
servers = []
if value("--mcp-config"):
    config = json.loads(Path(value("--mcp-config")).read_text())
    timeout = int(os.environ.get("MCP_TIMEOUT", "30000")) / 1000
    for name, server in config.get("mcpServers", {}).items():
        servers.append(Server(name, server["command"], server.get("args", []),
                              server.get("env"), timeout))
mcp_tools = {f"mcp__{s.name}__{t['name']}": (s, t["name"]) for s in servers for t in s.tools}
SEEN["tools"] = sorted(mcp_tools)
events.append({"type": "system", "subtype": "init", "claude_code_version": "2.1.197",
               "model": value("--model"), "permissionMode": value("--permission-mode"),
               "tools": [*builtin, *mcp_tools],
               "mcp_servers": [{"name": s.name, "status": s.status} for s in servers]})
denials, turn = [], 0


def exchange(name, tool_input, result, is_error):
    global turn
    turn += 1
    use_id = f"toolu_{turn:02d}"
    events.append({"type": "assistant", "message": {"id": f"msg_{turn:02d}", "role": "assistant",
        "content": [{"type": "tool_use", "id": use_id, "name": name, "input": tool_input}],
        "usage": {"input_tokens": 100, "output_tokens": 20}}})
    events.append({"type": "user", "message": {"role": "user", "content": [{"type": "tool_result",
        "tool_use_id": use_id, "content": [{"type": "text", "text": result}],
        "is_error": is_error}]}})


if SCRIPT.get("skill"):
    name = SCRIPT["skill"]
    if name in skills and (f"Skill({name})" in allowed or "Skill" in allowed):
        SEEN["skill_loaded"] = skills[name][1]
        exchange("Skill", {"skill": name}, skills[name][1], False)
    else:
        exchange("Skill", {"skill": name}, f"Unknown skill: {name}", True)
for call in SCRIPT.get("calls", []):
    name = "mcp__tasuku__" + call["name"]
    if name not in mcp_tools:
        exchange(name, call["input"], f"No such tool available: {name}", True)
        SEEN["calls"].append({"name": call["name"], "error": "no such tool"})
    elif name not in allowed:
        denials.append({"tool_name": name, "tool_use_id": "x", "tool_input": call["input"]})
        exchange(name, call["input"], "Permission to use " + name + " has been denied.", True)
        SEEN["calls"].append({"name": call["name"], "error": "denied"})
    else:
        server, tool = mcp_tools[name]
        try:
            text, is_error = server.call(tool, call["input"])
        except Exception as exc:
            text, is_error = f"MCP error: {exc}", True
        SEEN["calls"].append({"name": call["name"], "text": text, "is_error": is_error})
        exchange(name, call["input"], text, is_error)
for server in servers:
    server.close()
turn += 1
events.append({"type": "result", "subtype": "success", "is_error": False,
               "num_turns": turn, "duration_ms": 1200, "total_cost_usd": 0.01,
               "result": json.dumps(SCRIPT["answer"]), "structured_output": SCRIPT["answer"],
               "usage": {"input_tokens": 300, "output_tokens": 60},
               "permission_denials": denials})
seen_write()
for event in events:
    print(json.dumps(event))
"""

_CODEX = r"""
argv = sys.argv[1:]
def value(flag):
    return argv[argv.index(flag) + 1] if flag in argv else None
sys.stdin.read()
SEEN["argv"] = argv
home = Path(os.environ["HOME"])
config = tomllib.loads((home / ".codex" / "config.toml").read_text())
skills = skills_read(home / ".agents" / "skills")
SEEN["skills"] = {name: body for name, (_, body) in skills.items()}
events = [{"type": "thread.started", "thread_id": "t-1"}, {"type": "turn.started"}]
servers = []
for name, server in config.get("mcp_servers", {}).items():
    started = Server(name, server["command"], server.get("args", []), server.get("env"),
                     server.get("startup_timeout_sec", 10), server.get("env_vars", []))
    if started.status != "connected":
        events.append({"type": "item.completed", "item": {"id": "item_e", "type": "error",
            "message": f"MCP client for `{name}` failed to start: {SEEN['servers'][name]}"}})
    enabled = server.get("enabled_tools")
    started.tools = [t for t in started.tools if enabled is None or t["name"] in enabled]
    servers.append(started)
tools = {(s.name, t["name"]): s for s in servers for t in s.tools}
SEEN["tools"] = sorted(f"mcp__{s}__{t}" for s, t in tools)
item = 0
if SCRIPT.get("skill") and SCRIPT["skill"] in skills:
    path = home / ".agents" / "skills" / SCRIPT["skill"] / "SKILL.md"
    SEEN["skill_loaded"] = skills[SCRIPT["skill"]][1]
    item += 1
    events.append({"type": "item.completed", "item": {"id": f"item_{item}",
        "type": "command_execution", "command": f"cat {path}", "status": "completed",
        "exit_code": 0, "aggregated_output": path.read_text()}})
for call in SCRIPT.get("calls", []):
    item += 1
    server = tools.get(("tasuku", call["name"]))
    entry = {"id": f"item_{item}", "type": "mcp_tool_call", "server": "tasuku",
             "tool": call["name"], "arguments": call["input"]}
    approval = config.get("mcp_servers", {}).get("tasuku", {}).get("default_tools_approval_mode")
    hints = next((t.get("annotations") or {} for t in (server.tools if server else [])
                  if t["name"] == call["name"]), {})
    if server is None:
        entry |= {"status": "failed", "error": {"message": "unknown tool"}, "result": None}
        SEEN["calls"].append({"name": call["name"], "error": "no such tool"})
    elif approval != "approve" and not hints.get("readOnlyHint"):
        # exec cannot ask anyone: a call that needs approval is declined.
        entry |= {"status": "failed", "result": None,
                  "error": {"message": "user cancelled MCP tool call"}}
        SEEN["calls"].append({"name": call["name"], "error": "cancelled"})
    else:
        text, is_error = server.call(call["name"], call["input"])
        SEEN["calls"].append({"name": call["name"], "text": text, "is_error": is_error})
        entry |= {"status": "failed" if is_error else "completed", "error": None,
                  "result": {"content": [{"type": "text", "text": text}]}}
    events.append({"type": "item.completed", "item": entry})
for server in servers:
    server.close()
item += 1
events.append({"type": "item.completed", "item": {"id": f"item_{item}", "type": "agent_message",
               "text": json.dumps(SCRIPT["answer"])}})
events.append({"type": "turn.completed", "usage": {"input_tokens": 400, "cached_input_tokens": 0,
               "output_tokens": 50}})
Path(value("--output-last-message")).write_text(json.dumps(SCRIPT["answer"]))
seen_write()
for event in events:
    print(json.dumps(event))
"""


def fake_cli_install(bin_dir: Path, name: str, script_file: Path) -> Path:
    """Writes the fake `claude` or `codex` into `bin_dir`, run by this Python and driven
    by `script_file`; returns `bin_dir` (to put first on PATH)."""
    body = {"claude": _CLAUDE, "codex": _CODEX}[name]
    bin_dir.mkdir(parents=True, exist_ok=True)
    path = bin_dir / name
    path.write_text(f"#!{sys.executable}\nSCRIPT_FILE = {str(script_file)!r}\n{_COMMON}{body}")
    path.chmod(0o755)
    return bin_dir


def script_write(path: Path, *, seen: Path, answer: dict, skill: str = "", calls=()) -> Path:
    path.write_text(
        json.dumps({"seen": str(seen), "answer": answer, "skill": skill, "calls": list(calls)})
    )
    return path
