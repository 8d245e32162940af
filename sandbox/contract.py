"""The contract between Tasuku and its reviewer engines: `ReviewJob` in, `ReviewResult` out.

Versioned, pure pydantic. A runner on another machine speaks this contract too, so this
module imports nothing from Django and nothing from the rest of Tasuku. Everything an
engine returns is data to be validated (reviews/validation/findings.py), never instructions.
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic.json_schema import SkipJsonSchema

# 2: named skills, explorers, web research and the per-turn output cap in the job; the
# explorers' usage in the result. A version-1 job or result reads as one without them.
# 3: the secondary repositories mounted beside the checkout (`ReviewJob.secondaries`),
# and connectors (tools whose calls Tasuku makes) in the job with the connector calls in
# the result (`usage.connectors`, transcript entries of kind "connector"). A version-2 job
# or result reads as one with none of them; a version-2 runner ignores a job's connectors.
# 4: a review pass's brief in the job (`ReviewJob.review_pass`: its number, the task's
# title and description), and a finding's `critical_why` (why a critical finding off the
# change cannot wait). A version-3 job reads as a plain review's; a version-3 finding as
# one with no reason given, so it is held to the pass's bar (reviews/validation/findings.py).
CONTRACT_VERSION = "4"

MAX_PATH = 1024
MAX_TITLE = 200
MAX_BODY = 8000
MAX_EVIDENCE = 4000
MAX_SUGGESTION = 8000
MAX_FINDINGS = 500
MAX_TRANSCRIPT_TEXT = 4000
MAX_TRANSCRIPT = 1000
MAX_SKILLS = 20
MAX_SKILL_DESCRIPTION = 200
MAX_SKILL_BODY = 20_000
SKILL_NAME = r"^[a-z0-9][a-z0-9_-]{0,63}$"
MAX_OUTPUT_TOKENS = (256, 128_000)
# A model reviewer's short account of what the change does, for the walkthrough comment.
MAX_WALKTHROUGH = 2000
MAX_SECONDARIES = 20
# Where a secondary repository is, relative to the workspace (the checkout's parent):
# `secondary/<owner>/<name>`, beside `checkout/` (docs/reviewers.md, *Secondary
# repositories*). A GitHub name part is letters, digits, `_`, `.` and `-`; `.` and `..`
# alone are refused below, so the path never climbs.
SECONDARY_ROOT = "secondary"
REPOSITORY_NAME = r"^[A-Za-z0-9_.-]{1,100}/[A-Za-z0-9_.-]{1,100}$"
SECONDARY_PATH = r"^secondary/[A-Za-z0-9_.-]{1,100}/[A-Za-z0-9_.-]{1,100}$"
COMMIT = r"^([0-9a-f]{40}|[0-9a-f]{64})$"

# How an engine's incomplete result begins when it stopped at its deadline (the agent
# loop, sandbox/agent/loop.py): Tasuku tells a reviewer that ran out of time by it.
INCOMPLETE_AT_DEADLINE = "stopped at the deadline"

# A review pass's task: its title and description, as the author's side wrote them.
MAX_TASK_TITLE = 300
MAX_TASK_DESCRIPTION = 8000
MAX_CRITICAL_WHY = 2000

MAX_CONNECTORS = 20
MAX_CONNECTOR_DESCRIPTION = 1000
# A connector is offered to the model under its own name: a tool name every provider
# accepts, lower-case so that two connectors never differ only by case.
CONNECTOR_NAME = r"^[a-z][a-z0-9_]{0,47}$"
# The agent's own tools, which no connector may shadow (tests/sandbox/test_connectors.py
# checks the list against the tools the agent offers).
RESERVED_TOOL_NAMES = frozenset({
    "read_file", "search_code", "find_files", "list_directory", "find_symbol",
    "symbol_references", "importers", "call_trace", "load_skill", "dispatch_explorers",
    "web_search", "fetch_url", "submit_review", "submit_report", "submit_reply", "submit_triage", "submit_memory",
})  # fmt: skip
# The most a connector's answer may be (Tasuku's bound on what it reads from the system).
MAX_CONNECTOR_ANSWER = 1_000_000


class Severity(StrEnum):
    """How bad a finding is, ordered: info < low < medium < high < critical."""

    INFO = "info"
    LOW = "low"
    MEDIUM = "medium"
    HIGH = "high"
    CRITICAL = "critical"

    @property
    def rank(self) -> int:
        return _SEVERITY_RANK[self]

    def at_least(self, other: Severity) -> bool:
        return self.rank >= other.rank


_SEVERITY_RANK = {severity: rank for rank, severity in enumerate(Severity)}


class Side(StrEnum):
    """Which side of the diff a location is on: LEFT is the base (deleted lines),
    RIGHT the head (added and unchanged lines)."""

    LEFT = "LEFT"
    RIGHT = "RIGHT"


class Strictness(StrEnum):
    """What is worth raising (never what is published: the validation gate decides that)."""

    LOW = "low"
    MEDIUM = "medium"
    HIGH = "high"


class LineRange(BaseModel):
    model_config = ConfigDict(frozen=True)

    start: int = Field(ge=1)
    end: int = Field(ge=1)


MAX_REMOVED_NAMES = 2000


class ChangedFile(BaseModel):
    """A file the pull request changes, and which of its lines (on the head side) are
    added; a finding may only be raised on those."""

    model_config = ConfigDict(frozen=True)

    path: str = Field(max_length=MAX_PATH)
    status: str  # added | modified | deleted | renamed
    previous_path: str | None = None
    added: tuple[LineRange, ...] = ()
    binary: bool = False
    # Whether the file is test data by a folder the base already holds (`tests/`,
    # `fixtures/` …), where credentials are mostly made up; None: judged by its path. A
    # folder the pull request itself introduces under such a name earns no leniency.
    test_data: bool | None = None
    # Python names on the lines the change removes, each with its base-side line and
    # whether that line defined it (`def name`, `import name`, `name = …`): so a checker
    # can tell a problem the change causes on a line it did not touch — an import whose
    # last use it removed, a name it deleted that a kept line still uses. In YAML, the
    # actions removed `uses:` lines named by a tag or a branch (`uses:owner/repo`, never
    # defining): a version bump of one leaves its being unpinned the base's.
    removed: tuple[tuple[str, int, bool], ...] = Field(default=(), max_length=MAX_REMOVED_NAMES)


class OmittedPart(BaseModel):
    """Part of the pull request the engine was not shown, and why; the engine can read
    it from the checkout with its tools."""

    model_config = ConfigDict(frozen=True)

    path: str = Field(max_length=MAX_PATH)
    reason: str
    hunks: tuple[str, ...] = ()  # hunk headers (`@@ -a,b +c,d @@`); empty: the whole file


class Limits(BaseModel):
    model_config = ConfigDict(frozen=True)

    steps: int = Field(default=40, ge=1)
    cost_cap_usd: float | None = Field(default=None, ge=0)
    deadline_seconds: int = Field(default=1800, ge=1)
    # The most a model may write in one turn (`max_tokens` / `max_completion_tokens`):
    # with the cost cap, it bounds what the next call can cost.
    max_output_tokens: int = Field(default=16_000, ge=MAX_OUTPUT_TOKENS[0], le=MAX_OUTPUT_TOKENS[1])
    # Connector calls one review may make, all connectors together (Tasuku holds the
    # same bound on its side).
    connector_calls: int = Field(default=30, ge=1, le=200)


class Price(BaseModel):
    """US dollars per million tokens of one model."""

    model_config = ConfigDict(frozen=True)

    input_per_mtok: float = Field(ge=0)
    output_per_mtok: float = Field(ge=0)
    cache_read_per_mtok: float | None = Field(default=None, ge=0)  # None: as input
    cache_write_per_mtok: float | None = Field(default=None, ge=0)  # None: as input

    def cost(
        self, input_tokens: int, output_tokens: int, cache_read: int = 0, cache_write: int = 0
    ) -> float:
        """Dollars for a call; `input_tokens` excludes the cached ones counted apart."""
        read = self.input_per_mtok if self.cache_read_per_mtok is None else self.cache_read_per_mtok
        write = (
            self.input_per_mtok if self.cache_write_per_mtok is None else self.cache_write_per_mtok
        )
        return (
            input_tokens * self.input_per_mtok
            + output_tokens * self.output_per_mtok
            + cache_read * read
            + cache_write * write
        ) / 1e6


class SkillDocument(BaseModel):
    """One of a reviewer's skills: the prompt lists its name and description, and the
    model loads its `text` when it needs it — the API engines with `load_skill`, the CLI
    engines from the skills folder their CLI reads (sandbox/engines/cli/extras.py).
    Written by the operator: trusted, like the rules."""

    model_config = ConfigDict(frozen=True)

    name: str = Field(pattern=SKILL_NAME)
    description: str = Field(default="", max_length=MAX_SKILL_DESCRIPTION)
    body: str = Field(max_length=MAX_SKILL_BODY)

    @property
    def text(self) -> str:
        """What the model reads when it loads the skill, whichever engine it runs in."""
        return f"Skill {self.name}: {self.description}\n\n{self.body}"


class Explorers(BaseModel):
    """Subagents the reviewer may send to answer questions about the checkout
    (`dispatch_explorers`), on a fast model, with the read-only tools only."""

    model_config = ConfigDict(frozen=True)

    model: str
    price: Price | None = None  # None: unknown, their cost is not counted
    per_call: int = Field(default=4, ge=1, le=8)
    per_review: int = Field(default=8, ge=1, le=32)
    steps: int = Field(default=12, ge=1, le=50)  # model calls each
    report_chars: int = Field(default=4000, ge=200, le=20_000)


class WebResearch(BaseModel):
    """The reviewer may search and read the web (`web_search`, `fetch_url`). `provider`
    is the "module:Class" that does it (sandbox/agent/tools/web.py's by default);
    `search_url` a search backend's URL with `{query}` in it (empty: no `web_search`)."""

    model_config = ConfigDict(frozen=True)

    provider: str = "sandbox.agent.tools.web:HttpWeb"
    search_url: str = ""
    max_calls: int = Field(default=20, ge=1, le=200)


def secondary_path(full_name: str) -> str:
    """Where the secondary repository `full_name` is mounted, relative to the workspace
    and as the tools name it (`secondary/<owner>/<name>`)."""
    return f"{SECONDARY_ROOT}/{full_name}"


class Secondary(BaseModel):
    """A secondary repository mounted read-only beside the checkout at a pinned commit:
    context for the review, never under review. `path` is where it is, relative to the
    workspace (the checkout's parent), and the prefix the tools read it under."""

    model_config = ConfigDict(frozen=True)

    full_name: str = Field(pattern=REPOSITORY_NAME)
    commit: str = Field(pattern=COMMIT)
    path: str = Field(pattern=SECONDARY_PATH)

    @model_validator(mode="after")
    def _stays_inside(self) -> Secondary:
        if any(part in (".", "..") for part in self.path.split("/")) or any(
            part in (".", "..") for part in self.full_name.split("/")
        ):
            raise ValueError("a secondary repository's name and path never climb")
        return self

    def location(self, checkout: Path) -> Path:
        """The secondary's tree on disk, for a checkout at `checkout`: every runner lays
        the workspace out the same way (`checkout/` beside `secondary/<owner>/<name>/`;
        in a container, `/workspace` beside `/secondary/<owner>/<name>`)."""
        return checkout.parent / self.path


class ConnectorTool(BaseModel):
    """A connector the reviewer may call: a tool whose calls Tasuku makes to a system
    the team trusts (sandbox/agent/tools/connectors.py). The job carries what the model
    is shown — the name, what it is for, the JSON Schema of its input — and the seconds
    the engine waits for Tasuku's answer; never the endpoint, never the credential. The
    call goes to Tasuku through the runner (sandbox/connectors.py), which checks it
    again: this is an offer, not a permission."""

    model_config = ConfigDict(frozen=True)

    name: str = Field(pattern=CONNECTOR_NAME)
    description: str = Field(default="", max_length=MAX_CONNECTOR_DESCRIPTION)
    input_schema: dict = Field(default_factory=lambda: {"type": "object"})
    timeout_seconds: float = Field(default=30, gt=0, le=300)


class EarlierFinding(BaseModel):
    """A finding an earlier review left open, for the engine to rule on: still a
    problem at this head, or not. `id` is its fingerprint."""

    model_config = ConfigDict(frozen=True)

    id: str
    path: str = Field(max_length=MAX_PATH)
    start_line: int = Field(ge=1)
    end_line: int = Field(ge=1)
    severity: Severity
    category: str
    title: str = Field(max_length=MAX_TITLE)
    body: str = Field(default="", max_length=MAX_BODY)
    # The author's answer in a review pass ("fixed in abc1234", its reasons for not
    # fixing, a follow-up): untrusted, like the pull request's own text.
    answer: str = Field(default="", max_length=MAX_BODY)
    # What the reviewer ruled on it in the previous pass ("still open: …"): model output
    # that read untrusted text, so shown beside the answers, as data.
    ruling: str = Field(default="", max_length=MAX_BODY)


MAX_CONVERSATION_CHARS = 400_000  # about 100,000 tokens of messages, as JSON


class SavedConversation(BaseModel):
    """A model reviewer's conversation as its provider's API holds it (the messages in
    its own dialect), kept at the end of a review so that a later pass continues it.
    `boundaries`: the fences its untrusted data was sent between; a continuation keeps
    telling the model that what they fence is data. `shortened`: tool results cut to
    fit (what a file said can be read again)."""

    model_config = ConfigDict(frozen=True)

    provider: str = Field(max_length=40)
    model: str = Field(max_length=200)
    messages: list[dict] = Field(default_factory=list)
    boundaries: tuple[str, ...] = Field(default=(), max_length=50)
    shortened: int = Field(default=0, ge=0)


MAX_STATIC_CONFIGS = 200
MAX_STATIC_CONFIG = 256_000


class StaticOptions(BaseModel):
    """What the static engine is told beyond its defaults: rules the repository's policy
    adds (`select`: codes or prefixes, `B904`, `S113`) or turns off (`ignore`), and the
    linters' configuration files as the **base** commit has them (path -> text:
    `pyproject.toml`, `setup.cfg`, `.flake8`, `ruff.toml`, `.shellcheckrc` …) — the
    repository's own word, which the pull request under review cannot change."""

    select: tuple[str, ...] = Field(default=(), max_length=200)
    ignore: tuple[str, ...] = Field(default=(), max_length=200)
    configs: dict[str, str] = Field(default_factory=dict, max_length=MAX_STATIC_CONFIGS)


class PassBrief(BaseModel):
    """A review pass's job (version 4): which pass it is, and the task whose work it
    reviews. The task's title and description are the author's side's words: untrusted,
    like the pull request's."""

    model_config = ConfigDict(frozen=True)

    number: int = Field(ge=1)
    task_title: str = Field(default="", max_length=MAX_TASK_TITLE)
    task_description: str = Field(default="", max_length=MAX_TASK_DESCRIPTION)


class ReviewJob(BaseModel):
    """Everything an engine is given. The PR's title, body and diff are untrusted."""

    model_config = ConfigDict(frozen=True)

    version: str = CONTRACT_VERSION
    job_id: str
    repository: str
    pull_request: int
    title: str = ""
    body: str = ""
    base_sha: str
    head_sha: str
    diff: str = ""  # the diff shown (compressed to the reviewer's context budget)
    changed_files: tuple[ChangedFile, ...] = ()  # the files to review
    omitted: tuple[OmittedPart, ...] = ()  # what of them the diff leaves out
    filtered: tuple[OmittedPart, ...] = ()  # changed files not to review (lock files …)
    # Of those, the ones the change adds lines to: the static engine's free safety checks
    # (secrets, private keys, conflict markers) read them all the same; a model engine
    # is not shown them.
    safety_files: tuple[ChangedFile, ...] = ()
    # Incremental review: only the changes since this commit are in the diff; the whole
    # pull request touches `pull_request_files`.
    incremental_since: str | None = None
    pull_request_files: tuple[str, ...] = ()
    strictness: Strictness = Strictness.MEDIUM
    rules: str = ""
    skills: str = ""  # the reviewer's guidance, always in the prompt whole
    skill_documents: tuple[SkillDocument, ...] = Field(default=(), max_length=MAX_SKILLS)
    guidelines: tuple[str, ...] = ()
    memory: str = ""
    earlier_findings: tuple[EarlierFinding, ...] = ()
    requester_note: str = ""  # untrusted, like the title, body and diff
    # Model engines: the model and its price (None: unknown, its cost is not counted).
    # Keys and server URLs reach the engine through its environment, never the job.
    model: str = ""
    price: Price | None = None
    limits: Limits = Limits()
    explorers: Explorers | None = None  # None: no `dispatch_explorers`
    web: WebResearch | None = None  # None: no web research (the default)
    # Other repositories mounted read-only beside the checkout, as context (version 3).
    secondaries: tuple[Secondary, ...] = Field(default=(), max_length=MAX_SECONDARIES)
    connectors: tuple[ConnectorTool, ...] = Field(default=(), max_length=MAX_CONNECTORS)
    # The static engine's options (a model engine ignores them).
    static: StaticOptions = StaticOptions()
    # Review passes: the same reviewer's conversation of the previous pass, to continue
    # (an engine that cannot — another provider or model — starts fresh and says so),
    # and, when it is not continued, a summary of what that pass concluded (model text
    # that read untrusted data: fenced as data).
    resume: SavedConversation | None = None
    previous_summary: str = Field(default="", max_length=MAX_BODY)
    # A review pass's run (version 4); None: a plain review.
    review_pass: PassBrief | None = None


class Suppression(BaseModel):
    """A comment in the file that tells a checker to keep quiet about a finding (`# noqa:
    S602`, `# pragma: allowlist secret`, `# shellcheck disable=SC2086`), and its line.
    The engine reports the finding all the same; the validation gate decides whether the
    suppression counts (the base branch's does; the pull request's own, by default, not)."""

    pragma: str = Field(min_length=1, max_length=300)
    line: int = Field(ge=1)
    # What it covers: its own line ("line"), the line or command after it ("next"), or
    # the whole file ("file"). A base suppression of a line covers what the base said
    # there, not what a pull request writes in its place.
    scope: Literal["line", "next", "file"] = "line"


class Finding(BaseModel):
    """One problem an engine raises: where, how bad, what goes wrong, and the fix."""

    path: str = Field(min_length=1, max_length=MAX_PATH)
    side: Side = Side.RIGHT
    start_line: int = Field(
        ge=1,
        description="The narrowest range: the one line where it goes wrong, unless every "
        "changed line of a range is needed to show the problem.",
    )
    end_line: int = Field(ge=1, description="The same as start_line for one line.")
    severity: Severity
    category: str = Field(min_length=1, max_length=64)
    title: str = Field(min_length=1, max_length=MAX_TITLE)
    body: str = Field(default="", max_length=MAX_BODY)
    evidence: str = Field(
        default="",
        max_length=MAX_EVIDENCE,
        description="How it fails (the input, what happens), citing the lines it rests on "
        "(`line 42`): the finding is narrowed to the lines cited.",
    )
    suggestion: str | None = Field(default=None, max_length=MAX_SUGGESTION)
    confidence: float = Field(default=0.8, ge=0, le=1)
    blocking: bool = False
    rule: str | None = Field(default=None, max_length=200)
    # A suppression comment the checker found for it (the static engine reads the file
    # with every suppression ignored, then says which one would have hidden the finding).
    # Not offered to a model (absent from the submission's schema): it is the checkers'.
    suppressed_by: SkipJsonSchema[Suppression | None] = None
    # The id of the earlier finding this one is (the same problem, still there).
    same_as: str | None = Field(default=None, max_length=200)
    # A later review pass: why this critical finding, on code the author did not change
    # since the previous pass, cannot wait (version 4). Without it, it is a nit there.
    critical_why: str = Field(default="", max_length=MAX_CRITICAL_WHY)

    @model_validator(mode="after")
    def _ordered(self) -> Finding:
        if self.end_line < self.start_line:
            raise ValueError("end_line is before start_line")
        return self


class ReviewSummary(BaseModel):
    inspected_areas: list[str] = Field(default_factory=list, max_length=50)
    important_files: list[str] = Field(default_factory=list, max_length=50)
    validation: str = Field(default="", max_length=4000)
    context_sources: list[str] = Field(default_factory=list, max_length=50)
    confidence: float = Field(default=0.8, ge=0, le=1)
    limitations: list[str] = Field(default_factory=list, max_length=50)


class Ruling(BaseModel):
    """The engine's word on an earlier finding: still open at this head, or not."""

    id: str = Field(min_length=1, max_length=200)
    still_open: bool
    reason: str = Field(default="", max_length=2000)


class Submission(BaseModel):
    """What a model engine submits to finish (the `submit_review` tool's input)."""

    model_config = ConfigDict(extra="forbid")

    findings: list[Finding] = Field(default_factory=list, max_length=MAX_FINDINGS)
    summary: ReviewSummary = ReviewSummary()
    rulings: list[Ruling] = Field(default_factory=list, max_length=MAX_FINDINGS)
    # Optional: what the change does, in a few sentences, for the people reading the
    # pull request (the walkthrough shows it as the model's words, escaped and bounded).
    walkthrough: str = Field(default="", max_length=MAX_WALKTHROUGH)


class ExplorerUsage(BaseModel):
    """What the explorers of one review used, apart from the reviewer's own calls."""

    explorers: int = Field(default=0, ge=0)  # how many ran
    input_tokens: int = Field(default=0, ge=0)
    output_tokens: int = Field(default=0, ge=0)
    cost_usd: float = Field(default=0.0, ge=0)
    steps: int = Field(default=0, ge=0)  # their model calls, all together
    model: str = ""


class ConnectorUsage(BaseModel):
    """The connector calls of one review: how many the model made, and how many of those
    came back as an error (refused by Tasuku, or the system failing or too slow)."""

    calls: int = Field(default=0, ge=0)
    failures: int = Field(default=0, ge=0)


class Usage(BaseModel):
    """What the review used. Tokens and cost are the whole review's (the explorers'
    included, so budgets and caps count everything); `steps` and `model` are the
    reviewer's own; `explorers` says which part the explorers used (None: none ran, or
    a result of contract version 1); `connectors`, its connector calls (None: none
    made, or a result older than version 3)."""

    input_tokens: int = Field(default=0, ge=0)
    output_tokens: int = Field(default=0, ge=0)
    cost_usd: float = Field(default=0.0, ge=0)
    steps: int = Field(default=0, ge=0)  # model calls (turns, for the CLI engines)
    model: str = ""
    duration_seconds: float = Field(default=0.0, ge=0)
    explorers: ExplorerUsage | None = None
    connectors: ConnectorUsage | None = None


class ConnectorAnswer(BaseModel):
    """Tasuku's answer to one connector call, as the engine receives it (through the
    runner's bridge, sandbox/connectors.py). `status`: "ok" (the system answered;
    `content` is its answer), "refused" (Tasuku would not make the call: invalid input,
    a connector the reviewer may not use, a run that ended…) or "failed" (the system
    failed, was too slow or answered too much); `content` then says why, for the
    model. Either way it is data: never the credential, never the endpoint."""

    status: Literal["ok", "refused", "failed"]
    content: str = Field(default="", max_length=MAX_CONNECTOR_ANSWER + 10_000)
    duration_ms: int = Field(default=0, ge=0)
    bytes: int = Field(default=0, ge=0)  # of the system's answer, as read


class ConnectorRecord(BaseModel):
    """A connector call on the transcript: its input, summarised, and how it went."""

    input: str = Field(default="", max_length=500)
    status: str = ""  # ok | refused | failed
    duration_ms: int = Field(default=0, ge=0)
    bytes: int = Field(default=0, ge=0)


class TranscriptEntry(BaseModel):
    """One step of a model engine's work, kept for the run page: a model's text, a
    tool call and its (truncated) result, a connector call (its input summarised, how
    it went, and the start of the answer), or a note from the engine."""

    kind: str  # "text" | "tool_call" | "tool_result" | "note" | "explorer" | "connector"
    name: str = ""
    content: str = Field(default="", max_length=MAX_TRANSCRIPT_TEXT)
    is_error: bool = False
    usage: ExplorerUsage | None = None  # an explorer's own tokens and cost
    connector: ConnectorRecord | None = None  # a connector call's record


class FileCoverage(BaseModel):
    """What an engine did with one changed file: which of its checkers read it, or why
    none could (`not_checked`: no checker for its language, it does not parse, too
    large …). A file an engine names in neither way is one it did not review."""

    path: str = Field(max_length=MAX_PATH)
    checkers: tuple[str, ...] = Field(default=(), max_length=20)
    not_checked: str = Field(default="", max_length=500)


class ReviewResult(BaseModel):
    """What every engine returns. `findings` is kept as raw objects here: each one is
    validated on its own by the validation gate, so one malformed finding is recorded
    as such instead of failing the whole review."""

    version: str = CONTRACT_VERSION
    engine: str
    findings: list[dict] = Field(default_factory=list, max_length=MAX_FINDINGS)
    summary: ReviewSummary = ReviewSummary()
    usage: Usage = Usage()
    rulings: list[Ruling] = Field(default_factory=list, max_length=MAX_FINDINGS)
    # A model engine's account of what the change does (empty from the static engine,
    # and from a runner older than this field).
    walkthrough: str = Field(default="", max_length=MAX_WALKTHROUGH)
    # Set when the engine stopped at a bound (steps, cost cap, deadline) without
    # finishing its review: the review is recorded incomplete, with this reason.
    incomplete: str = ""
    # Set when the engine reviewed, but part of its review failed (one checker ran out
    # of memory, say): the findings it has are published, and the check is never
    # `success` — this says what did not run, and why.
    partial: str = Field(default="", max_length=2000)
    # What decided the findings, as a digest (the static engine: its own rules and its
    # checkers' versions; empty from a model engine, and from a runner older than this
    # field). Two reviews with the same digest apply the same rules: a finding the first
    # raised that the second does not is gone from the code, not from the rules.
    rules: str = Field(default="", max_length=100)
    # Changed files the engine could not read (too large, binary, unreadable), each with
    # why: a review never says it found nothing in a file it did not read.
    unread: list[OmittedPart] = Field(default_factory=list, max_length=1000)
    # What the engine did with each changed file it was given (the static engine's
    # checkers; None from an engine that does not say, or from a runner older than this
    # field: Tasuku then tells from the job and the transcript what the engine saw).
    coverage: list[FileCoverage] | None = Field(default=None, max_length=20_000)
    transcript: list[TranscriptEntry] = Field(default_factory=list, max_length=MAX_TRANSCRIPT)
    # The reviewer's conversation as it ended (API engines), kept so that the next pass
    # of a review pass can continue it; None when the engine keeps none, or it was too
    # large to keep.
    conversation: SavedConversation | None = None


# --- A reply job: a model reviewer answers a person in one of its threads -------------

MAX_REPLY = 2000
MAX_THREAD = 30
MAX_MESSAGE = 4000
MAX_CODE = 8000


class ThreadMessage(BaseModel):
    """One comment of a finding's thread, oldest first. People's words are untrusted."""

    model_config = ConfigDict(frozen=True)

    author: str = Field(max_length=100)
    body: str = Field(default="", max_length=MAX_MESSAGE)
    tasuku: bool = False  # written by Tasuku (the reviewer itself)


class ReplyJob(BaseModel):
    """What a reply job is given: the finding, its thread (the person's reply last), the
    code around it at the pull request's head, and its bounds. The checkout is the
    head's, read with the same read-only tools as a review."""

    model_config = ConfigDict(frozen=True)

    version: str = CONTRACT_VERSION
    job_id: str
    repository: str
    pull_request: int
    head_sha: str
    finding: EarlierFinding
    thread: tuple[ThreadMessage, ...] = Field(default=(), max_length=MAX_THREAD)
    code: str = Field(default="", max_length=MAX_CODE)  # numbered lines around the finding
    model: str = ""
    price: Price | None = None
    limits: Limits = Limits(steps=6, deadline_seconds=120)
    max_tokens: int = Field(default=60_000, ge=1)  # input and output, over the whole job


class ReplyAnswer(BaseModel):
    """The `submit_reply` tool's input: concede the finding (with why), or explain it."""

    model_config = ConfigDict(extra="forbid")

    decision: Literal["concede", "explain"]
    text: str = Field(min_length=1, max_length=MAX_REPLY)


class ReplyResult(BaseModel):
    """What a reply job returns: a decision and its text, or why there is none (the
    thread then gets the canned answer)."""

    version: str = CONTRACT_VERSION
    engine: str
    decision: str = ""  # concede | explain | "" (no answer)
    text: str = Field(default="", max_length=MAX_REPLY)
    failure: str = Field(default="", max_length=2000)
    usage: Usage = Usage()
    transcript: list[TranscriptEntry] = Field(default_factory=list, max_length=MAX_TRANSCRIPT)
