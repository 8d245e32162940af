"""What the CLI engines are given beside their CLI's read-only tools: the reviewer's
skills, installed where each CLI loads skills from, and the reviewer's connectors,
offered by a local MCP server (`mcp_server.py`) that sends each call to Tasuku over the
runner's bridge (sandbox/connectors.py) — the same skills and connectors, with the same
text and the same checks, as the API engines' `load_skill` and connector tools.

Everything here is written into the engine's throwaway HOME: skill text comes from the
reviewer's configuration (the job's `skill_documents`), never from the pull request (the
checkout's own skill folders are sanitised away, sandbox/workspace.py); the MCP
configuration names Python and this package's server, and gives the server the bridge's
socket and the run's token — never a connector's endpoint or credential, which Tasuku
keeps.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from sandbox.connectors import SOCKET_VARIABLE, TOKEN_VARIABLE, ConnectorClient
from sandbox.contract import (
    ConnectorRecord,
    ConnectorUsage,
    ReviewJob,
    SkillDocument,
    TranscriptEntry,
)
from sandbox.errors import SandboxError

# The connectors' MCP server's name: its tools are `mcp__tasuku__<connector>` to the CLIs.
SERVER_NAME = "tasuku"

# A skill's folder name: the contract's SKILL_NAME, matched whole here too, so that a
# job built around the contract's checks still never names a folder outside the skills'.
_FOLDER = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")
SPEC_FILE = "connectors.json"
LOG_FILE = "connector-calls.jsonl"
# Seconds the CLI waits for the server to start (Python and the MCP SDK: about one).
MCP_STARTUP_SECONDS = 30
# Past a connector's own timeout: Tasuku's checks and, from a runner, the round trip.
MCP_CALL_MARGIN = 20


# --- Skills ----------------------------------------------------------------------------


def skill_markdown(skill: SkillDocument) -> str:
    """A skill as the Agent Skills format's SKILL.md: YAML front matter naming and
    describing it, then the text the API engines' `load_skill` returns, unchanged. The
    description is a JSON string, which is also a YAML double-quoted scalar.

    Reference: https://agentskills.io/specification (SKILL.md, name, description)
    """
    description = skill.description or f"The reviewer's skill {skill.name}."
    return f"---\nname: {skill.name}\ndescription: {json.dumps(description)}\n---\n{skill.text}"


def skills_install(skills: Sequence[SkillDocument], folder: Path) -> list[Path]:
    """Each skill as `folder/<name>/SKILL.md`. A name that is not one plain folder name
    (`../x`, `-rf`, `a/b`) is refused before anything is written: the job's contract
    refuses such names already, and a forged job gets a clear error, not a file
    elsewhere."""
    for skill in skills:
        if not _FOLDER.fullmatch(skill.name):
            raise SandboxError(
                f"The skill name {skill.name[:80]!r} is not a folder name (lower-case letters, "
                "digits, '_' and '-'): no skill was installed.",
                permanent=True,
                code="engine-failed",
            )
    folder.mkdir(parents=True, exist_ok=True)
    root = folder.resolve()
    written = []
    for skill in skills:
        home = root / skill.name
        if home.resolve().parent != root:  # never, after the check above
            raise SandboxError(
                f"The skill {skill.name!r} would leave {root}.",
                permanent=True,
                code="engine-failed",
            )
        home.mkdir(exist_ok=True)
        path = home / "SKILL.md"
        path.write_text(skill_markdown(skill), encoding="utf-8")
        written.append(path)
    return written


# --- Connectors ------------------------------------------------------------------------


def connectors_offered(
    job: ReviewJob, environ: Mapping[str, str] = os.environ
) -> tuple[ReviewJob, str]:
    """The job with the connectors the CLI can be offered, and a note on any it cannot:
    none when the runner gave the engine no way back to Tasuku."""
    if not job.connectors or ConnectorClient.from_environment(environ) is not None:
        return job, ""
    names = ", ".join(c.name for c in job.connectors)
    note = f"Connectors not offered ({names}): this runner gave the engine no way to Tasuku."
    return job.model_copy(update={"connectors": ()}), note


def connectors_spec_write(job: ReviewJob, home: Path, boundary: str) -> Path:
    """The server's spec (the connectors as the job offers them, the prompt's data
    boundary, the review's call bound, where to log each call) in `home`."""
    spec = home / SPEC_FILE
    spec.write_text(
        json.dumps(
            {
                "connectors": [c.model_dump(mode="json") for c in job.connectors],
                "boundary": boundary,
                "max_calls": job.limits.connector_calls,
                "log": str(home / LOG_FILE),
            }
        ),
        encoding="utf-8",
    )
    return spec


def mcp_server_command(spec: Path) -> tuple[str, list[str]]:
    """How the CLI starts the server: this Python, isolated, on the spec."""
    return sys.executable, ["-I", "-m", "sandbox.engines.cli.mcp_server", str(spec)]


def mcp_server_environment(environ: Mapping[str, str] = os.environ) -> dict[str, str]:
    """The server's way to Tasuku: the bridge's socket and the run's token, and no more."""
    return {name: environ[name] for name in (SOCKET_VARIABLE, TOKEN_VARIABLE) if name in environ}


def mcp_call_timeout(job: ReviewJob) -> int:
    """Seconds the CLI waits for one connector call."""
    longest = max((c.timeout_seconds for c in job.connectors), default=30)
    return int(longest) + MCP_CALL_MARGIN


def write_private(path: Path, text: str) -> Path:
    """A file only the engine's user reads: it holds the run's token."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.write(text)
    return path


class ConnectorCalls:
    """The calls the server made, read from its log after the CLI ended: each becomes
    the transcript's "connector" entry, in the order the CLI's output shows them.
    `notes`: what the transcript should say first about the connectors (none offered,
    the server's own failure)."""

    def __init__(self, home: Path | None, notes: Sequence[str] = ()) -> None:
        self.calls: list[dict] = []
        self.notes: list[str] = [text for text in notes if text]
        self._next = 0
        path = home / LOG_FILE if home is not None else None
        if path is None or not path.exists():
            return
        for line in path.read_text("utf-8", errors="replace").splitlines():
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            if isinstance(entry, dict) and entry.get("error"):
                self.notes.append(f"The connectors' MCP server: {entry['error']}")
            elif isinstance(entry, dict) and isinstance(entry.get("name"), str):
                self.calls.append(entry)

    def entry(self, name: str) -> TranscriptEntry | None:
        """The next logged call to `name`, as a transcript entry (None: none logged)."""
        for index in range(self._next, len(self.calls)):
            call = self.calls[index]
            if call["name"] == name:
                self._next = index + 1
                return self._as_entry(call)
        return None

    def remaining(self) -> list[TranscriptEntry]:
        """The logged calls the CLI's output did not show (it was cut short)."""
        rest = self.calls[self._next :]
        self._next = len(self.calls)
        return [self._as_entry(call) for call in rest]

    @staticmethod
    def _as_entry(call: dict) -> TranscriptEntry:
        try:
            record = ConnectorRecord.model_validate(call.get("record") or {})
        except ValueError:
            record = ConnectorRecord()
        return TranscriptEntry(
            kind="connector",
            name=call["name"][:100],
            content=str(call.get("content", ""))[:3999],
            is_error=bool(call.get("is_error")),
            connector=record,
        )

    @property
    def usage(self) -> ConnectorUsage | None:
        if not self.calls:
            return None
        failures = sum(1 for call in self.calls if call.get("is_error"))
        return ConnectorUsage(calls=len(self.calls), failures=failures)


__all__ = [
    "LOG_FILE",
    "SERVER_NAME",
    "ConnectorCalls",
    "connectors_offered",
    "connectors_spec_write",
    "mcp_call_timeout",
    "mcp_server_command",
    "mcp_server_environment",
    "skill_markdown",
    "skills_install",
    "write_private",
]
