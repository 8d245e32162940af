"""The review's core, shared by GitHub runs and `manage.py review`: from a checkout to
validated findings (docs/architecture.md, *One review, end to end*).

filters → guideline packs → triage → budget gate → compression → engine → validation.

No GitHub and no rows here: the caller brings the checkout, the effective config and
the budget, and stores or publishes what comes out.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from repos.policy import EffectiveConfig, Engine, ReviewerConfig
from reviews.scope import guidelines
from reviews.scope.budget import Budget
from reviews.scope.compression import Compressed, compress
from reviews.scope.diff import Diff, diff_parse
from reviews.scope.filters import BINARY_RULE, Filtered, paths_filter
from reviews.scope.triage import Verdict, triage_rule
from reviews.validation.findings import SAFETY_RULES, GateConfig, History, Validated, gate
from sandbox.contract import (
    ChangedFile,
    ConnectorTool,
    EarlierFinding,
    Explorers,
    Limits,
    OmittedPart,
    PassBrief,
    Price,
    ReviewJob,
    ReviewResult,
    SavedConversation,
    StaticOptions,
    WebResearch,
)
from sandbox.engines.static.common import test_folder
from sandbox.engines.static.reads import reads as static_reads
from sandbox.workspace import Checkout, HeadView, Materialise

HEAD_BYTES = 4096
TREE_LIMIT = 50_000


@dataclass
class Core:
    diff: Diff
    reviewed: list[str]
    filtered: list[Filtered]
    packs: list[str]
    verdict: Verdict | None = None
    compressed: Compressed | None = None
    job: ReviewJob | None = None
    result: ReviewResult | None = None
    validated: list[Validated] = field(default_factory=list)
    # Why the engine did not run, when it did not: "trivial" or "budget".
    stopped: str = ""
    # Where findings may be anchored: the pull request's whole diff when the review
    # diff is incremental (None: the review diff itself).
    anchors: Diff | None = None
    # Why a path under a filtered family's name is reviewed all the same (the pull
    # request itself put it there).
    notes: dict[str, str] = field(default_factory=dict)

    @property
    def safety(self) -> list[str]:
        """Filtered paths the change adds lines to: kept out of the review, not out of
        the free safety checks (secrets, private keys, conflict markers), which read
        every file a change adds to."""
        return [
            f.path
            for f in self.filtered
            if (file := self.diff.get(f.path)) is not None
            and file.status != "deleted"
            # A file git calls binary by its content, not its name, may be text it cannot
            # read (UTF-16): the engine looks, and says so if it cannot read it either.
            and (file.changed_file().added if not file.binary else f.rule == BINARY_RULE)
        ]


def head_reader(root: Path) -> Callable[[str], str | None]:
    """Reads the start of a file of the checkout (never following a link out of it:
    those were removed when the checkout was sanitised)."""

    def read(path: str) -> str | None:
        target = root / path
        try:
            if not target.is_file():
                return None
            with target.open("rb") as handle:
                return handle.read(HEAD_BYTES).decode(errors="replace")
        except OSError:
            return None

    return read


def added_text(diff: Diff, path: str) -> str:
    """The lines the diff adds to `path`, without their `+`."""
    file = diff.get(path)
    if file is None:
        return ""
    return "\n".join(
        line[1:]
        for hunk in file.hunks
        for line in hunk.text.splitlines()[1:]
        if line.startswith("+")
    )


# Folders whose files say nothing of the project's own languages and frameworks.
NOT_THE_PROJECT = ("node_modules", ".venv", "vendor")


def tree_paths(root: Path, listed: list[str] | None = None) -> list[str]:
    """The head's paths (at most TREE_LIMIT), outside dependency folders: from git's
    tree when the checkout listed it, else by walking the checkout."""
    if listed is not None:
        return [path for path in listed if not NOT_THE_PROJECT_PART.search(path)][:TREE_LIMIT]
    found: list[str] = []
    for directory, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d not in NOT_THE_PROJECT]
        relative = os.path.relpath(directory, root)
        for name in filenames:
            found.append(name if relative == "." else f"{relative}/{name}")
            if len(found) >= TREE_LIMIT:
                return found
    return found


NOT_THE_PROJECT_PART = re.compile(r"(?:^|/)(?:node_modules|\.venv|vendor)/")


def materialise_for(reviewer: ReviewerConfig | None) -> Materialise | None:
    """Which of the head's files the reviewer's checkout writes: for the static engine,
    what its checkers read and what the review's own stages read of the head (the
    changed files; the manifests the guideline packs look in); every file (None) for a
    reviewer that explores the repository."""
    if reviewer is None or reviewer.engine != Engine.STATIC:
        return None
    return _static_reads


def _static_reads(head: HeadView) -> set[str]:
    return static_reads(head) | guidelines.manifests(head.blobs)


def runs_agent(reviewer: ReviewerConfig | None) -> bool:
    """Whether an agent reads the reviewer's checkout, which instruction files in it
    could steer (every engine but `static`: its checkers read them as text)."""
    return reviewer is None or reviewer.engine != Engine.STATIC


def paid(reviewer: ReviewerConfig | None) -> bool:
    """Whether the reviewer's engine costs money to run (every engine but `static`)."""
    return reviewer is None or reviewer.engine != Engine.STATIC


def prepare(
    checkout: Checkout, config: EffectiveConfig, reviewer: ReviewerConfig | None = None
) -> Core:
    """Filters, guideline packs and triage over a checkout. Triage gates spend, not
    safety: a trivial verdict stops only an engine that costs money; the free static
    engine reviews every change, documentation and comments included (a secret in a
    README or a `#` comment is still a secret)."""
    diff = diff_parse(checkout.diff)
    anchors = diff_parse(checkout.anchor_diff) if checkout.anchor_diff is not None else None
    # What the pull request wrote is what its whole diff adds, not this push alone: a
    # marker it wrote one push earlier is still its own.
    whole = anchors or diff
    read = head_reader(checkout.root)
    tree = tree_paths(checkout.root, checkout.head_paths)
    notes: dict[str, str] = {}
    reviewed, filtered = paths_filter(
        diff.paths,
        policy_globs=config.excluded_paths,
        installation_globs=config.installation_excluded_paths,
        binary=[f.path for f in diff.files if f.binary],
        head=read,
        added=lambda path: added_text(whole, path),
        tree=tree,
        base_paths=checkout.base_paths,
        renamed_from={f.path: f.previous_path for f in diff.files if f.previous_path},
        notes=notes,
        base_attributes=checkout.base_attributes,
        copies=checkout.copies,
    )
    changed = [p for p in reviewed if diff.get(p) and diff.get(p).status != "deleted"]
    packs = guidelines.detect(changed, tree, read) if changed else []
    core = Core(diff=diff, reviewed=reviewed, filtered=filtered, packs=packs, notes=notes)
    core.anchors = anchors
    if config.triage_enabled:
        core.verdict = triage_rule(diff, reviewed)
        if core.verdict.trivial and paid(reviewer):
            core.stopped = "trivial"
    return core


def budget_gate(
    core: Core,
    budget: Budget | None,
    config: EffectiveConfig,
    reviewer: ReviewerConfig | None = None,
) -> bool:
    """Past the installation's monthly cap with degrade on, an engine that costs money
    does not run (the static engine costs nothing: it always runs)."""
    if not paid(reviewer):
        return False
    if budget is not None and budget.exhausted and config.degrade_over_budget and not core.stopped:
        core.stopped = "budget"
        return True
    return False


# What of the pull request's own words an engine is shown (a description can be 65,536
# characters; the diff deserves the context more).
JOB_BODY_MAX = 12_000
JOB_NOTE_MAX = 2_000


def _bounded(text: str, limit: int, what: str) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n… ({what} goes on for {len(text) - limit} more characters, not shown)"


def job_build(
    core: Core,
    *,
    checkout: Checkout,
    reviewer: ReviewerConfig,
    config: EffectiveConfig,
    job_id: str,
    repository: str,
    number: int,
    title: str,
    deadline_seconds: int,
    body: str = "",
    requester_note: str = "",
    resume: SavedConversation | None = None,
    previous_summary: str = "",
    memory: str = "",
    price: Price | None = None,
    earlier: tuple[EarlierFinding, ...] = (),
    explorers: Explorers | None = None,
    web: WebResearch | None = None,
    connectors: tuple[ConnectorTool, ...] = (),
    brief: PassBrief | None = None,
) -> ReviewJob:
    core.compressed = compress(core.diff, core.reviewed, reviewer.context_budget_tokens)
    core.job = ReviewJob(
        job_id=job_id,
        repository=repository,
        pull_request=number,
        title=title,
        body=_bounded(body, JOB_BODY_MAX, "the description"),
        requester_note=_bounded(requester_note, JOB_NOTE_MAX, "the note"),
        resume=resume,
        previous_summary=previous_summary,
        base_sha=checkout.base_sha,
        head_sha=checkout.head_sha,
        diff=core.compressed.text,
        changed_files=tuple(
            _as_test_data(core.diff.get(p).changed_file(), checkout.base_paths)
            for p in core.reviewed
        ),
        omitted=core.compressed.omitted,
        filtered=tuple(OmittedPart(path=f.path, reason=f.reason) for f in core.filtered),
        safety_files=tuple(
            _as_test_data(core.diff.get(p).changed_file(), checkout.base_paths) for p in core.safety
        ),
        incremental_since=checkout.incremental_since,
        pull_request_files=(core.anchors or core.diff).touched_paths,
        strictness=config.strictness,
        rules=reviewer.rules,
        skills=reviewer.skills,
        skill_documents=reviewer.skill_documents,
        guidelines=tuple(guidelines.pack_text(p) for p in core.packs),
        memory=memory,
        earlier_findings=earlier,
        model=reviewer.model,
        price=price,
        limits=Limits(
            steps=reviewer.step_limit,
            cost_cap_usd=float(reviewer.cost_cap_usd)
            if reviewer.cost_cap_usd is not None
            else None,
            deadline_seconds=deadline_seconds,
            max_output_tokens=reviewer.max_output_tokens,
        ),
        explorers=explorers,
        web=web,
        secondaries=tuple(m.secondary() for m in checkout.secondaries if m.mounted),
        connectors=connectors,
        review_pass=brief,
        static=StaticOptions(
            select=tuple(r for r in config.static_rules if not r.startswith("-")),
            ignore=tuple(r[1:] for r in config.static_rules if r.startswith("-")),
            configs=checkout.base_configs,
        ),
    )
    return core.job


def _as_test_data(file: ChangedFile, base_paths: list[str] | None) -> ChangedFile:
    """The file, saying whether it is test data by a folder the base already holds: a
    pull request that adds `fixtures/setup.py` to a repository with no `fixtures/` earns
    its key no "mostly made up" leniency."""
    folder = test_folder(file.path)
    if folder is None or base_paths is None:
        return file
    held = any(path.startswith(folder) for path in base_paths)
    return file.model_copy(update={"test_data": held})


def validate(
    core: Core,
    result: ReviewResult,
    config: EffectiveConfig,
    history: History | None = None,
    *,
    strict_suppressions: bool = False,
) -> list[Validated]:
    core.result = result
    core.validated = gate(
        result.findings,
        core.anchors if core.anchors is not None else core.diff,
        GateConfig(
            min_severity=config.min_severity,
            min_confidence=config.min_confidence,
            comment_limit=config.comment_limit,
            filtered={f.path: f.reason for f in core.filtered},
            safety_rules=SAFETY_RULES if result.engine == "static" else (),
            honour_pr_suppressions=config.honour_pr_suppressions,
            strict_blocking_suppressions=strict_suppressions,
            secondaries={s.path: s.full_name for s in core.job.secondaries} if core.job else {},
        ),
        history,
    )
    return core.validated
