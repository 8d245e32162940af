"""The coverage ledger of a review: for every file the change touches, whether it was
*reviewed* (by which checkers), *excluded* by a rule a writer set (the installation's or
repository's policy, a default family the base already holds, the base's own
`.gitattributes`), or *not reviewed*, and why (no checker for its language, it does not
parse, too large, not shown to the reviewer and never read …).

The check is `success` only when nothing the change adds lines to is *not reviewed*, and
"No problems found" is said only then (reviews/text/rendering.py). Pure: the diff, the
filters' decisions, the engine's job and result in; entries out.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any

from reviews.scope.compression import over_budget
from reviews.scope.diff import Diff
from reviews.scope.filters import Filtered
from sandbox.contract import FileCoverage, ReviewJob, ReviewResult

REVIEWED = "reviewed"
EXCLUDED = "excluded"
NOT_REVIEWED = "not reviewed"
# The static engine's checkers: a finding's rule starts with its checker's name.
STATIC_CHECKERS = ("ruff", "shellcheck", "detect-secrets", "hygiene", "yaml")
# The tools through which a model engine reads a file (the API engines' and the CLIs').
READ_TOOLS = {"read_file": "path", "Read": "file_path"}
NAMED = 20  # paths named in a summary line; the rest are counted


@dataclass(frozen=True)
class Entry:
    path: str
    status: str  # REVIEWED | EXCLUDED | NOT_REVIEWED
    by: tuple[str, ...] = ()  # what read it
    reason: str = ""  # excluded: the family or policy; not reviewed: why; reviewed: a note
    rule: str = ""  # the glob or test that excluded it
    adds: bool = True  # the change adds lines to it (else it only removes or renames)
    at: str = ""  # the head it was reviewed at, when carried from an earlier review

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["by"] = list(self.by)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Entry:
        return cls(
            path=str(data.get("path", "")),
            status=str(data.get("status", NOT_REVIEWED)),
            by=tuple(data.get("by") or ()),
            reason=str(data.get("reason", "")),
            rule=str(data.get("rule", "")),
            adds=bool(data.get("adds", True)),
            at=str(data.get("at", "")),
        )

    @property
    def unreviewed(self) -> bool:
        """Whether this entry keeps the head from being reviewed in full."""
        return self.status == NOT_REVIEWED and self.adds


def entries_of(stored: Iterable[dict[str, Any]] | None) -> list[Entry]:
    return [Entry.from_dict(item) for item in stored or () if isinstance(item, dict)]


def _read_paths(result: ReviewResult) -> set[str]:
    """Files a model engine read with its tools (as its transcript records the calls)."""
    read: set[str] = set()
    for entry in result.transcript:
        key = READ_TOOLS.get(entry.name) if entry.kind == "tool_call" else None
        if key is None:
            continue
        try:
            arguments = json.loads(entry.content)
        except ValueError:
            continue
        path = arguments.get(key) if isinstance(arguments, dict) else None
        if isinstance(path, str) and path:
            read.add(path.removeprefix("./").lstrip("/"))
    return read


def _seen_by_model(job: ReviewJob, result: ReviewResult) -> dict[str, FileCoverage]:
    """What a model engine saw of each file it was given: the whole diff, part of it,
    or nothing (over its context budget) — and, of what it was not shown, what it read
    with its tools (a path read is a path seen: the checkout holds it whole)."""
    cut = {o.path: o for o in job.omitted if over_budget(o.reason)}
    read = _read_paths(result)
    # A CLI reads by absolute path: a path read ends with the file's relative path.
    seen: dict[str, FileCoverage] = {}
    for file in job.changed_files:
        path = file.path
        was_read = path in read or any(r.endswith("/" + path) for r in read)
        omitted = cut.get(path)
        if omitted is None or was_read:
            seen[path] = FileCoverage(path=path, checkers=(result.engine,))
        elif omitted.hunks:
            seen[path] = FileCoverage(
                path=path,
                not_checked=f"{len(omitted.hunks)} of its hunks were not shown to the reviewer "
                "(over its context budget), and it did not read the file",
            )
        else:
            seen[path] = FileCoverage(
                path=path,
                not_checked="not shown to the reviewer (over its context budget), and it "
                "did not read the file",
            )
    return seen


def ledger(
    diff: Diff,
    filtered: Iterable[Filtered],
    *,
    job: ReviewJob,
    result: ReviewResult,
    notes: dict[str, str] | None = None,
    earlier: Iterable[Entry] = (),
    pull_request_paths: Iterable[str] = (),
) -> list[Entry]:
    """One entry per file the review's diff touches, and — for an incremental review —
    the entries of the earlier review for the pull request's other files (carried, with
    the head they were reviewed at: what was not reviewed then is still not reviewed).

    What read a file is the engine's word where it gives one (the static engine names its
    checkers); otherwise what the job showed the engine and what it read with its tools.
    A file the engine names in neither way was not reviewed."""
    notes = notes or {}
    kept_out = {f.path: f for f in filtered}
    if result.coverage is not None:
        said = {c.path: c for c in result.coverage}
    elif result.engine == "static":
        # A result from before engines said: the static engine read all it was given.
        said = {f.path: FileCoverage(path=f.path, checkers=("static",)) for f in job.changed_files}
    else:
        said = _seen_by_model(job, result)
    for part in result.unread:
        said[part.path] = FileCoverage(path=part.path, not_checked=part.reason)
    # What the change adds, as the engine was told: a line only re-indented where
    # indentation means nothing is not added (reviews/scope/diff.py), so a file changed only so
    # adds nothing to review.
    told_adds = {f.path: bool(f.added) or f.binary for f in (*job.changed_files, *job.safety_files)}
    entries: list[Entry] = []
    for file in diff.files:
        path = file.path
        adds = file.status != "deleted" and told_adds.get(path, bool(file.added) or file.binary)
        excluded = kept_out.get(path)
        told = said.get(path)
        if excluded is not None and told is not None and told.not_checked:
            # Out of the review by a rule, and the safety checks could not read it
            # either: nothing looked at what the change put there.
            entries.append(
                Entry(
                    path,
                    NOT_REVIEWED,
                    by=told.checkers,
                    reason=f"{excluded.reason}, and the secret checks could not read it "
                    f"({told.not_checked})",
                    rule=excluded.rule,
                    adds=adds,
                )
            )
        elif excluded is not None:
            entries.append(
                Entry(
                    path,
                    EXCLUDED,
                    by=told.checkers if told else (),
                    reason=excluded.reason,
                    rule=excluded.rule,
                    adds=adds,
                )
            )
        elif not adds:
            entries.append(Entry(path, REVIEWED, reason="nothing added", adds=False))
        elif told is None:
            entries.append(Entry(path, NOT_REVIEWED, reason="the engine did not say it read it"))
        elif told.not_checked:
            entries.append(
                Entry(path, NOT_REVIEWED, by=told.checkers, reason=told.not_checked, adds=adds)
            )
        else:
            entries.append(Entry(path, REVIEWED, by=told.checkers, reason=notes.get(path, "")))
    here = {e.path for e in entries}
    wanted = set(pull_request_paths)
    for entry in earlier:
        if entry.path in wanted and entry.path not in here:
            entries.append(entry)
            here.add(entry.path)
    return entries


def carried(entries: Iterable[Entry], head: str) -> list[Entry]:
    """The entries as a later review carries them: each says the head it was made at."""
    return [e if e.at else Entry(**{**e.as_dict(), "by": e.by, "at": head}) for e in entries]


def unreviewed(entries: Iterable[Entry]) -> list[Entry]:
    return [e for e in entries if e.unreviewed]


def _why(entry: Entry) -> str:
    return entry.reason.split(" (", 1)[0].split(";", 1)[0].strip() or "not reviewed"


def title_part(entries: list[Entry]) -> str:
    """What a check's title says of the files not reviewed: "2 files not reviewed (no
    checker for Go)" ("" when none)."""
    missing = unreviewed(entries)
    if not missing:
        return ""
    reasons = sorted({_why(e) for e in missing})
    count = len(missing)
    text = f"{count} file{'s' if count != 1 else ''} not reviewed"
    return f"{text} ({reasons[0]})" if len(reasons) == 1 else text


def shortfall(entries: list[Entry]) -> str:
    """The sentence that says which changed files were not reviewed, and why ("" when
    every file the change adds to was reviewed or excluded by a rule)."""
    missing = unreviewed(entries)
    if not missing:
        return ""
    named = "; ".join(f"`{e.path}`: {e.reason}" for e in missing[:NAMED])
    more = f"; and {len(missing) - NAMED} more" if len(missing) > NAMED else ""
    count = len(missing)
    return f"{count} changed file{'s were' if count != 1 else ' was'} not reviewed — {named}{more}."


# In `examined`: a file the change only removes lines from (nothing added there can hold
# a problem anew): whatever was found in it, what is gone is gone.
ANY = "*"


def examined(entries: Iterable[Entry]) -> dict[str, frozenset[str]]:
    """path -> what read it at this head (reviewed or, for the safety checks, excluded),
    for telling whether an earlier finding's checker looked at its file again."""
    seen = {e.path: frozenset(e.by) for e in entries if e.by and not e.at}
    for e in entries:
        if not e.at and not e.adds and e.status == REVIEWED:
            seen[e.path] = frozenset({ANY})
    return seen


def checker_of(rule: str | None, engine: str) -> str:
    """The checker a finding came from: the static engine's checker its rule names, else
    the engine itself (a model's findings are its own)."""
    prefix = (rule or "").split(":", 1)[0]
    if engine == "static" and prefix in STATIC_CHECKERS:
        return prefix
    return engine
