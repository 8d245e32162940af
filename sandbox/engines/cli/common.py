"""What the two CLI engines share: the environment, running a CLI under a deadline,
reading its answer into a Submission, the errors a CLI reports, and the result."""

from __future__ import annotations

import contextlib
import json
import os
import queue
import re
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import ValidationError

from sandbox.contract import (
    MAX_FINDINGS,
    MAX_TRANSCRIPT,
    MAX_TRANSCRIPT_TEXT,
    MAX_WALKTHROUGH,
    Limits,
    ReviewJob,
    ReviewResult,
    ReviewSummary,
    Ruling,
    Submission,
    TranscriptEntry,
    Usage,
)
from sandbox.errors import ProviderError, SandboxError

SUBMISSION_SCHEMA = Submission.model_json_schema()
IMAGE_HINT = (
    "the sandbox image must have Node.js with @anthropic-ai/claude-code and @openai/codex "
    "installed globally"
)
DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin"
PROXY_VARIABLES = ("HTTPS_PROXY", "https_proxy", "NO_PROXY", "no_proxy")
TOOL_RESULT_TEXT = 2000  # a file read is kept on the run page as its first lines only
ANSWER_NOTE_TEXT = 500


def cli_timeout(limits: Limits) -> int:
    """The CLI's own deadline: the job's, less a margin to parse and answer before the
    runner's wall clock stops the engine."""
    margin = min(60, max(5, limits.deadline_seconds // 10))
    return max(1, limits.deadline_seconds - margin)


def base_environment(home: str, environ: Mapping[str, str]) -> dict[str, str]:
    env = {
        "PATH": environ.get("PATH") or DEFAULT_PATH,
        "HOME": home,
        "TMPDIR": home,
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
    }
    # The docker runner reaches the model API through the operator's egress proxy.
    return env | {name: environ[name] for name in PROXY_VARIABLES if environ.get(name)}


def api_key(engine: str, environ: Mapping[str, str], name: str) -> str:
    key = environ.get(name, "")
    if not key:
        raise ProviderError(
            f"The {engine} engine needs {name}; none was given.",
            permanent=True,
            code="provider-missing-key",
        )
    return key


# --- Running a CLI ---------------------------------------------------------------------


@dataclass(frozen=True)
class Run:
    """What a CLI did: its output, and why it was stopped ("" when it exited itself)."""

    returncode: int | None
    stdout: str
    stderr: str
    stopped: str = ""
    seconds: float = 0.0


def cli_run(
    command: list[str],
    *,
    cwd: Path,
    env: dict[str, str],
    stdin: str,
    timeout: float,
    watch: Callable[[str], str] | None = None,
) -> Run:
    """Run `command` in its own process group; stop it (and all it started) when
    `timeout` passes or `watch`, shown each line of its output, names a reason."""
    binary = shutil.which(command[0], path=env.get("PATH"))
    if binary is None:
        raise SandboxError(
            f"The {command[0]} CLI is not on PATH ({env.get('PATH')}): {IMAGE_HINT}.",
            permanent=True,
            code="engine-cli-missing",
        )
    started = time.monotonic()
    try:
        process = subprocess.Popen(  # noqa: S603
            [binary, *command[1:]],
            cwd=cwd,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,  # its own process group, stopped as one
        )
    except OSError as exc:
        raise SandboxError(
            f"Could not start the {command[0]} CLI: {exc}", permanent=False, code="engine-start"
        ) from exc
    lines: queue.Queue[bytes | None] = queue.Queue()
    errors: list[bytes] = []
    pumps = [
        threading.Thread(target=_feed, args=(process.stdin, stdin.encode()), daemon=True),
        threading.Thread(target=_pump_lines, args=(process.stdout, lines), daemon=True),
        threading.Thread(target=_pump_tail, args=(process.stderr, errors), daemon=True),
    ]
    for pump in pumps:
        pump.start()
    out: list[bytes] = []
    stopped = ""
    deadline = started + timeout
    try:
        while True:
            try:
                line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                stopped = f"did not finish within {int(timeout)} s"
                break
            if line is None:
                break
            out.append(line)
            if watch and (stopped := watch(line.decode(errors="replace"))):
                break
        if not stopped:
            try:
                process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                stopped = f"did not finish within {int(timeout)} s"
    finally:
        _kill_group(process)  # also whatever it left running (a shell, a language server)
        process.wait()
        for pump in pumps:
            pump.join(timeout=5)
    while not lines.empty():  # what it printed before it was stopped
        if (line := lines.get()) is not None:
            out.append(line)
    return Run(
        returncode=None if stopped else process.returncode,
        stdout=b"".join(out).decode(errors="replace"),
        stderr=b"".join(errors).decode(errors="replace"),
        stopped=stopped,
        seconds=time.monotonic() - started,
    )


def _feed(pipe, data: bytes) -> None:
    with contextlib.suppress(BrokenPipeError, OSError):
        pipe.write(data)
        pipe.close()


def _pump_lines(pipe, lines: queue.Queue) -> None:
    for line in iter(pipe.readline, b""):
        lines.put(line)
    lines.put(None)


def _pump_tail(pipe, chunks: list[bytes], keep: int = 64 * 1024) -> None:
    for chunk in iter(lambda: pipe.read(8192), b""):
        chunks.append(chunk)
        while sum(map(len, chunks)) > keep and len(chunks) > 1:
            chunks.pop(0)


def _kill_group(process: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)


# --- Reading an answer -----------------------------------------------------------------

_FENCED = re.compile(r"```[ \t]*(?:json|JSON)?[ \t]*\n(.*?)```", re.S)
_SUBMISSION_KEYS = {"findings", "summary", "rulings"}


def json_object_extract(text: str) -> dict | None:
    """The review object in a model's answer: all of it, a ```json fenced block, or the
    outermost JSON object in prose (one with review keys preferred)."""
    for candidate in [text.strip(), *(match.group(1) for match in _FENCED.finditer(text))]:
        with contextlib.suppress(ValueError):
            value = json.loads(candidate)
            if isinstance(value, dict):
                return value
    decoder = json.JSONDecoder()
    first, position = None, text.find("{")
    while position != -1:
        try:
            value, end = decoder.raw_decode(text, position)
        except ValueError:
            position = text.find("{", position + 1)
            continue
        if isinstance(value, dict):
            if _SUBMISSION_KEYS & value.keys():
                return value
            first = first or value
        position = text.find("{", end)
    return first


@dataclass
class Reading:
    findings: list[dict] = field(default_factory=list)
    summary: ReviewSummary = field(default_factory=ReviewSummary)
    rulings: list[Ruling] = field(default_factory=list)
    walkthrough: str = ""
    notes: list[str] = field(default_factory=list)
    problem: str = ""  # set when the answer is not a review at all


def submission_read(answer: object) -> Reading:
    """The findings, summary and rulings in `answer` (a parsed object or the answer's
    text). A well-formed `Submission` is taken whole; otherwise each finding is passed on
    raw (the gate records each malformed one) and what else is readable is kept."""
    value = json_object_extract(answer) if isinstance(answer, str) else answer
    if not isinstance(value, dict) or not _SUBMISSION_KEYS & value.keys():
        return Reading(problem="it is not a JSON object with findings, a summary or rulings")
    value = _without_nulls(value)
    try:
        submission = Submission.model_validate(value)
    except ValidationError:
        pass
    else:
        return Reading(
            findings=[finding.model_dump(mode="json") for finding in submission.findings],
            summary=submission.summary,
            rulings=submission.rulings,
            walkthrough=submission.walkthrough,
        )
    reading = Reading()
    findings = value.get("findings", [])
    if not isinstance(findings, list):
        return Reading(problem="its findings are not a list")
    reading.findings = [item for item in findings if isinstance(item, dict)]
    if len(reading.findings) < len(findings):
        reading.notes.append(f"{len(findings) - len(reading.findings)} findings were not objects.")
    if len(reading.findings) > MAX_FINDINGS:
        reading.notes.append(f"{len(reading.findings) - MAX_FINDINGS} findings over the limit.")
        reading.findings = reading.findings[:MAX_FINDINGS]
    try:
        reading.summary = ReviewSummary.model_validate(value.get("summary") or {})
    except ValidationError:
        reading.notes.append("The summary was malformed and is left out.")
    for item in value.get("rulings") or []:
        try:
            reading.rulings.append(Ruling.model_validate(item))
        except ValidationError:
            reading.notes.append(f"A malformed ruling is left out: {json.dumps(item)[:200]}")
    walkthrough = value.get("walkthrough")
    if isinstance(walkthrough, str):
        reading.walkthrough = walkthrough[:MAX_WALKTHROUGH]
    return reading


def _without_nulls(value: object) -> object:
    """Codex's strict schema makes optional fields nullable; absent means default."""
    if isinstance(value, dict):
        return {key: _without_nulls(item) for key, item in value.items() if item is not None}
    if isinstance(value, list):
        return [_without_nulls(item) for item in value]
    return value


# --- Errors a CLI reports --------------------------------------------------------------

# A refusal that will happen again, in the CLIs' words, by its code (tasuku/errors.py).
_PERMANENT_CAUSES = (
    ("provider-key", r"invalid.{0,20}api.?key|incorrect api key|authenticat|unauthori[sz]ed"
                     r"|not logged in|forbidden|permission denied"),
    ("provider-billing", r"credit balance|quota|billing"),
    ("provider-model", r"does not exist|not.found|no such model|unknown model"
                       r"|issue with the selected model"),
    ("provider-rejected", r"invalid_request|too long|context.length|context window"),
)  # fmt: skip
PERMANENT_ERROR = re.compile("|".join(pattern for _, pattern in _PERMANENT_CAUSES), re.I)
_STATUS = re.compile(r"status:? (\d{3})\b")
_STATUS_CODES = {401: "provider-key", 402: "provider-billing", 403: "provider-key",
                 404: "provider-model"}  # fmt: skip


def provider_error(engine: str, message: str, status: int | None = None) -> ProviderError:
    """A provider's refusal, in the CLI's words: a bad key, an unknown model, a used-up
    quota or a malformed request will fail again; a rate limit, overload or outage may not."""
    if status is None and (match := _STATUS.search(message)):
        status = int(match.group(1))
    if status in (408, 429) or (status is not None and status >= 500):
        permanent = "quota" in message.lower()  # OpenAI's insufficient_quota is a 429
    elif status is not None:
        permanent = 400 <= status < 500
    else:
        permanent = bool(PERMANENT_ERROR.search(message))
    return ProviderError(
        f"The {engine} CLI: {message.strip()}"[:2000],
        permanent=permanent,
        code=_provider_code(message, status, permanent=permanent),
    )


def _provider_code(message: str, status: int | None, *, permanent: bool) -> str:
    """What a refusal is: by its status, else by the CLI's words."""
    if status in _STATUS_CODES:
        return _STATUS_CODES[status]
    if permanent:
        for code, pattern in _PERMANENT_CAUSES:
            if re.search(pattern, message, re.I):
                return code
        return "provider-rejected" if status is not None else "provider-error"
    return "provider-unavailable"


def cli_failure(engine: str, run: Run) -> SandboxError:
    tail = run.stderr.strip().splitlines() or run.stdout.strip().splitlines() or ["no output"]
    return SandboxError(
        f"The {engine} CLI failed (exit {run.returncode}): {tail[-1][:500]}",
        permanent=True,
        code="engine-failed",
    )


# The Messages API's usage: fresh input, output, then the cached input read and written.
API_TOKENS = (
    "input_tokens",
    "output_tokens",
    "cache_read_input_tokens",
    "cache_creation_input_tokens",
)

# --- Shared pieces ---------------------------------------------------------------------


def result_build(
    engine: str,
    job: ReviewJob,
    answer: object | None,
    usage: Usage,
    transcript: list[TranscriptEntry],
    *,
    incomplete: str = "",
) -> ReviewResult:
    reading = Reading() if answer is None else submission_read(answer)
    notes = [note(text) for text in reading.notes]
    if reading.problem:
        # Tokens were spent and the run page should show what came back, so this is an
        # incomplete review rather than a failure that would carry neither.
        incomplete = f"the {engine} CLI's answer could not be read as a review: {reading.problem}"
        shown = answer if isinstance(answer, str) else json.dumps(answer)
        notes.append(note(f"The answer began: {shown[:ANSWER_NOTE_TEXT]}", error=True))
    if incomplete:
        notes.append(note(incomplete, error=True))
    entries = transcript + notes
    if len(entries) > MAX_TRANSCRIPT:
        left_out = len(entries) - MAX_TRANSCRIPT + 1
        entries = entries[: MAX_TRANSCRIPT - 1] + [note(f"{left_out} more entries left out.")]
    return ReviewResult(
        engine=engine,
        findings=reading.findings,
        summary=reading.summary,
        rulings=reading.rulings,
        walkthrough=reading.walkthrough,
        usage=usage,
        incomplete=incomplete,
        transcript=entries,
    )


def usage_build(
    job: ReviewJob,
    fresh_in: int,
    tokens_out: int,
    cache_read: int = 0,
    cache_write: int = 0,
    *,
    steps: int,
    seconds: float,
    cost: float | None = None,
    model: str = "",
) -> Usage:
    """Input counts all input, cached or not, as the API engines count it; the cost is
    the CLI's when it reports one, else the model's price with its cache rates."""
    if cost is None:
        cost = job.price.cost(fresh_in, tokens_out, cache_read, cache_write) if job.price else 0.0
    return Usage(
        input_tokens=fresh_in + cache_read + cache_write,
        output_tokens=tokens_out,
        cost_usd=cost,
        steps=steps,
        model=model or job.model,
        duration_seconds=round(seconds, 3),
    )


def json_lines(text: str) -> list[dict]:
    events = [event for line in text.splitlines() if (event := json_line(line))]
    if not events and text.strip().startswith("{"):  # one pretty-printed object
        with contextlib.suppress(ValueError):
            value = json.loads(text)
            events = [value] if isinstance(value, dict) else []
    return events


def json_line(line: str) -> dict | None:
    try:
        value = json.loads(line)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def as_text(content: object) -> str:
    if isinstance(content, list):
        return "\n".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return str(content or "")


def as_int(value: object) -> int:
    return int(value) if isinstance(value, int | float) and value > 0 else 0


def clip(text: str, limit: int = MAX_TRANSCRIPT_TEXT) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def note(text: str, *, error: bool = False) -> TranscriptEntry:
    return TranscriptEntry(kind="note", content=clip(text), is_error=error)


# --- The cost cap ----------------------------------------------------------------------


class CostWatch:
    """Stops a CLI before a model call that could pass the job's cost cap: what it spent
    so far, plus what its next call could cost (the last call's input, which only grows,
    and the most a turn may write), at the job's price. Without a cap or a price there
    is nothing to watch."""

    def __init__(self, job: ReviewJob) -> None:
        self.cap = job.limits.cost_cap_usd
        self.price = job.price
        self.max_output = job.limits.max_output_tokens
        self.spent = 0.0
        self.last_input = 0

    @property
    def active(self) -> bool:
        return self.cap is not None and self.price is not None

    def called(self, fresh_in: int, out: int, cache_read: int = 0, cache_write: int = 0) -> str:
        """One model call's tokens; the reason to stop ("" to go on)."""
        if not self.active:
            return ""
        assert self.price is not None and self.cap is not None
        self.spent += self.price.cost(fresh_in, out, cache_read, cache_write)
        self.last_input = max(self.last_input, fresh_in + cache_read + cache_write)
        dearest = max(
            self.price.input_per_mtok,
            self.price.cache_write_per_mtok or 0.0,
            self.price.cache_read_per_mtok or 0.0,
        )
        following = (self.last_input * dearest + self.max_output * self.price.output_per_mtok) / 1e6
        if self.spent + following <= self.cap:
            return ""
        return (
            f"was stopped at the cost cap (${self.cap:.2f}): ${self.spent:.4f} spent, and its "
            f"next model call could cost up to ${following:.4f}"
        )
