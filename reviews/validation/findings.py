"""The validation gate (docs/reviews.md, *What a review does*): what an engine returned, made safe,
located, fingerprinted and sorted; every finding is kept, the ones not to publish with
the reason why.

Pure: engine output and the diff in, `Validated` findings out.
"""

from __future__ import annotations

import hashlib
import posixpath
import re
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from pydantic import ValidationError

from reviews.scope.diff import Diff, FileDiff
from sandbox.contract import (
    MAX_BODY,
    MAX_CRITICAL_WHY,
    MAX_EVIDENCE,
    MAX_PATH,
    MAX_SUGGESTION,
    MAX_TITLE,
    Finding,
    Severity,
    Side,
)

OPEN = "open"
SUPPRESSED = "suppressed"
# The static engine's safety checks (sandbox/engines/static: detect-secrets, and the
# hygiene checks for private keys and conflict markers).
SAFETY_RULES = ("detect-secrets:", "hygiene:private-key", "hygiene:conflict-marker")

# Tasuku's hidden marker in published comments; engine text must never carry one.
MARKER_RE = re.compile(r"<!--.*?(-->|$)", re.DOTALL)
MENTION_RE = re.compile(r"(?<![\w@/.])@(?=[A-Za-z0-9])")
ZERO_WIDTH_SPACE = "\u200b"


@dataclass(frozen=True)
class GateConfig:
    min_severity: Severity = Severity.LOW
    min_confidence: float = 0.5
    comment_limit: int = 25
    # path -> why it is not reviewed (excluded by default or by the policy's globs)
    filtered: dict[str, str] = field(default_factory=dict)
    # Rules whose findings stand on a filtered path too: the safety checks the static
    # engine runs on every file a change adds to (a committed key is one wherever it is).
    # Only the static engine's are trusted so (a model could name any rule).
    safety_rules: tuple[str, ...] = ()
    # Whether a suppression comment the pull request adds itself silences a finding (the
    # repository's policy; off by default, and never for a blocking finding in a review
    # pass). One the base branch already has always does.
    honour_pr_suppressions: bool = False
    strict_blocking_suppressions: bool = False
    # where a secondary repository is mounted (`secondary/<owner>/<name>`) -> its name:
    # context for the review, never under it
    secondaries: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class History:
    """What earlier reviews of the pull request decide about new findings.

    - `dismissed`: fingerprint -> who dismissed it; never posted again.
    - `earlier`: fingerprints already raised (they carry on; they are not new).
    - `since_previous`: the diff from the previous review's head to this one. A *new*
      finding on lines it does not touch was already there when the previous review
      looked: it is a nit at most, and posted only when critical (no drip-feed).
    - `positions`: fingerprint -> (path, line at this head, code digest) of the earlier
      and the dismissed findings: a finding keeps a known identity only when it is on
      the same code (or within a few lines of where that code now is), so a new problem
      of the same kind never inherits another's dismissal (or its thread).
    """

    dismissed: dict[str, str] = field(default_factory=dict)
    earlier: frozenset[str] = frozenset()
    since_previous: Diff | None = None
    positions: dict[str, tuple[str, int, str]] = field(default_factory=dict)
    # Review passes: a new finding on untouched code is still posted, as a nit (the
    # author answers every finding; hiding it would only defer it).
    untouched_as_nits: bool = False

    def untouched(self, path: str, start: int, end: int) -> bool:
        if self.since_previous is None:
            return False
        file = self.since_previous.get(path)
        return file is None or not any(file.is_added(n) for n in range(start, end + 1))


# A finding the engine returned in a shape Tasuku cannot use: kept (suppressed) under
# this category, never counted as the engine finding something again.
INVALID = "invalid"
# Why an open finding is not posted inline (`Validated.held`).
OVER_LIMIT = "over-limit"
UNANCHORABLE = "unanchorable"
# Open, and listed in the comment of the same problem (the same rule in the same file,
# or the same line): one comment per problem, not one per occurrence.
GROUPED = "grouped"


@dataclass(frozen=True)
class Validated:
    """A finding after the gate. `state` is open or suppressed (with `reason`)."""

    path: str
    side: Side
    start_line: int
    end_line: int
    severity: Severity
    category: str
    title: str
    body: str
    evidence: str
    suggestion: str | None
    confidence: float
    blocking: bool
    rule: str | None
    fingerprint: str
    state: str = OPEN
    reason: str = ""  # in words, for people
    held: str = ""  # why it is not posted inline, for code: OVER_LIMIT or UNANCHORABLE
    # What the code at the finding's first line says (a digest of it, whitespace
    # ignored): with the fingerprint, it tells one occurrence of a problem from another.
    code_digest: str = ""
    original_lines: tuple[int, int] | None = None  # where the engine pointed, if narrowed
    # How the gate narrowed it, in words (the run page shows it): "" when it did not.
    narrowed: str = ""
    suggestion_applies: bool = False  # a ```suggestion block can replace the lines
    published: bool = False  # chosen for an inline comment (within the comment limit)
    # A suppression comment for it that the pull request added itself, in words (the
    # comment in backticks, "on line 8"): the finding stays open, and says so.
    suppressed_in_pr: str = ""
    # The other occurrences its comment lists: lines of the same rule in this file, and
    # the titles of other findings on this line (GROUPED into this one).
    also_lines: tuple[int, ...] = ()
    also_here: tuple[str, ...] = ()
    grouped_with: str = ""  # GROUPED: the fingerprint of the finding whose comment lists it
    # A later review pass: why a critical finding on code unchanged since the previous
    # pass cannot wait (the engine's words, made inert); it blocks only with one.
    critical_why: str = ""
    raw: dict[str, Any] | None = field(default=None, compare=False)

    @property
    def anchored(self) -> bool:
        return self.state == OPEN or self.held == OVER_LIMIT


def clean_text(text: str | None, limit: int) -> str:
    """Engine text made inert: no HTML comments (they could imitate Tasuku's marker or
    hide content), no @mentions that would notify someone, bounded in length."""
    if not text:
        return ""
    text = MARKER_RE.sub("", str(text))
    text = MENTION_RE.sub("@" + ZERO_WIDTH_SPACE, text)
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    return text


def normalise_title(title: str) -> str:
    text = re.sub(r"[`'\"]", "", title.lower())
    text = re.sub(r"\d+", "#", text)
    return re.sub(r"\s+", " ", text).strip()


def fingerprint(path: str, category: str, title: str, occurrence: int) -> str:
    """Identity of a problem across pushes: never its line numbers, so an unrelated edit
    above it does not make it new; `occurrence` tells true repeats apart."""
    key = "\0".join((path, category.lower(), normalise_title(title), str(occurrence)))
    return hashlib.sha256(key.encode()).hexdigest()[:20]


def _safe_path(path: Any) -> str | None:
    # A backslash is an ordinary character in a POSIX name; the path must be one the
    # pull request changes anyway.
    if not isinstance(path, str) or not path or "\0" in path:
        return None
    if path.startswith("/"):
        return None
    normal = posixpath.normpath(path)
    if normal.startswith("..") or normal == ".":
        return None
    return normal


def _bounded(raw: dict[str, Any]) -> dict[str, Any]:
    data = dict(raw)
    for key, limit in (
        ("title", MAX_TITLE),
        ("body", MAX_BODY),
        ("evidence", MAX_EVIDENCE),
        ("suggestion", MAX_SUGGESTION),
        ("critical_why", MAX_CRITICAL_WHY),
    ):
        if isinstance(data.get(key), str):
            data[key] = data[key] if key == "suggestion" else clean_text(data[key], limit)
            if key == "suggestion" and len(data[key]) > limit:
                data[key] = None  # a clipped suggestion would be a wrong one
    if isinstance(data.get("category"), str):
        data["category"] = data["category"].strip().lower()[:64]
    if "end_line" not in data and "start_line" in data:
        data["end_line"] = data["start_line"]
    return data


# A line an evidence cites: "line 42", "lines 40-43", "L42", "ll. 40–41", "pay.py:42".
CITATION_RE = re.compile(
    r"(?:\b(?:lines?|ll?\.?)\s*|\bL)(\d{1,7})(?:\s*(?:-|–|—|to|through)\s*L?(\d{1,7}))?"
    r"|(?:^|[\s(`'\"])([\w./-]+):(\d{1,7})\b",
    re.IGNORECASE,
)
MAX_CITED_SPAN = 1000


def cited_lines(evidence: str, path: str) -> set[int]:
    """The line numbers `evidence` cites: `line 42`, `lines 40-43`, `L42`, or `path:42`
    when the path is the finding's own (a citation of another file says nothing of its
    lines here)."""
    found: set[int] = set()
    for match in CITATION_RE.finditer(evidence):
        if match.group(4) is not None:
            named = match.group(3).lstrip("./")
            if named and (path == named or path.endswith("/" + named)):
                found.add(int(match.group(4)))
            continue
        first = int(match.group(1))
        last = int(match.group(2)) if match.group(2) else first
        if first <= last <= first + MAX_CITED_SPAN:
            found |= set(range(first, last + 1))
        else:
            found.add(first)
    return found


def _lines(start: int, end: int) -> str:
    return f"line {start}" if start == end else f"lines {start}-{end}"


def _narrow(file: FileDiff, side: Side, start: int, end: int) -> tuple[int, int] | None:
    """The first run of consecutive changed lines inside [start, end], or None when the
    range touches no changed line."""
    if side == Side.RIGHT:
        changed = [line for line in range(start, end + 1) if file.is_added(line)]
    else:
        removed: set[int] = set()
        for hunk in file.hunks:
            removed |= hunk.removed
        changed = [line for line in range(start, end + 1) if line in removed]
    if not changed:
        return None
    first = last = changed[0]
    for line in changed[1:]:
        if line != last + 1:
            break
        last = line
    return first, last


# How much a kind of finding is worth a comment, beside its severity and confidence:
# likely bugs and real secrets first, style and guesses last.
CATEGORY_WEIGHTS = {
    "security": 1.0, "secret": 1.0, "bug": 1.0, "correctness": 1.0, "data-loss": 1.0,
    "concurrency": 0.9, "robustness": 0.8, "performance": 0.7, "maintainability": 0.5,
    "style": 0.4, "docs": 0.4, "documentation": 0.4, "naming": 0.4,
}  # fmt: skip
DEFAULT_CATEGORY_WEIGHT = 0.8


def usefulness(finding: Validated) -> float:
    """(severity rank + 1) × confidence × the category's weight: what the comment limit
    is spent on first, so it is never spent on noise while a likely bug waits."""
    weight = CATEGORY_WEIGHTS.get(finding.category.lower(), DEFAULT_CATEGORY_WEIGHT)
    return (finding.severity.rank + 1) * finding.confidence * weight


def _sort_key(finding: Validated) -> tuple:
    return (
        -round(usefulness(finding), 6),
        -finding.severity.rank,
        not finding.blocking,
        -finding.confidence,
        finding.path,
        finding.start_line,
        finding.fingerprint,
    )


def gate(
    raw_findings: Iterable[Any], diff: Diff, config: GateConfig, history: History | None = None
) -> list[Validated]:
    """Run every engine finding through the gate.

    1. Schema: each finding is parsed on its own; an invalid one is kept, suppressed
       with the validation error, so nothing an engine said disappears.
    2. Text made inert and bounded; the path must be a relative path inside the
       repository and one the pull request changes.
    3. Location narrowed to the changed lines (a range only when every line in it is
       changed), then to the lines its evidence cites among them (one line when it
       cites one), saying so (`narrowed`); a finding on no changed line cannot be
       anchored.
    4. Fingerprints (path, category, normalised title, occurrence index).
    5. Duplicates, severity below the policy's minimum, confidence under the floor, a
       finding a person dismissed, or a new non-critical one on code the previous review
       already saw (`History`): suppressed with the reason.
    6. The open findings in a deterministic order (severity, blocking, confidence,
       path, line, fingerprint); past the comment limit: suppressed.
    """
    parsed: list[tuple[Finding | None, dict[str, Any], str]] = []
    for raw in raw_findings:
        data = _bounded(raw) if isinstance(raw, dict) else {}
        try:
            finding = Finding.model_validate(data)
        except ValidationError as exc:
            errors = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or 'finding'}: {e['msg']}"
                for e in exc.errors()[:5]
            )
            parsed.append(
                (None, data if isinstance(raw, dict) else {"value": repr(raw)[:500]}, errors)
            )
            continue
        parsed.append((finding, data, ""))

    # Occurrence indexes: true repeats of one problem in one file.
    groups: dict[tuple[str, str, str], list[Finding]] = defaultdict(list)
    for finding, _, _ in parsed:
        if finding is not None:
            groups[(finding.path, finding.category, normalise_title(finding.title))].append(finding)
    occurrence: dict[int, int] = {}
    for members in groups.values():
        ordered = sorted(members, key=lambda f: (f.start_line, f.end_line, f.side))
        known = history.positions if history is not None else {}
        digests = [code_digest(diff, f.path, f.start_line) for f in ordered]
        for finding, index in zip(ordered, _occurrences(ordered, digests, known), strict=True):
            occurrence[id(finding)] = index

    results: list[Validated] = []
    seen: dict[tuple, str] = {}
    claimed: set[str] = set()
    for finding, data, error in parsed:
        if finding is None:
            results.append(_invalid(data, error))
            continue
        # A model engine says which earlier finding this is (`same_as`), however it words
        # it now: it keeps that identity, and its thread, once.
        identity = fingerprint(
            finding.path, finding.category, finding.title, occurrence[id(finding)]
        )
        if (
            history is not None
            and finding.same_as in history.earlier
            and finding.same_as not in claimed
        ):
            identity = finding.same_as
            claimed.add(identity)
        result = Validated(
            path=finding.path,
            side=finding.side,
            start_line=finding.start_line,
            end_line=finding.end_line,
            severity=finding.severity,
            category=finding.category,
            title=finding.title,
            body=finding.body,
            evidence=finding.evidence,
            suggestion=finding.suggestion,
            confidence=finding.confidence,
            # Blocking means it says how it fails; one that does not is a nit.
            blocking=finding.blocking and bool(finding.evidence.strip()),
            rule=finding.rule,
            fingerprint=identity,
            code_digest=code_digest(diff, finding.path, finding.start_line),
            critical_why=finding.critical_why.strip(),
            raw=data,
        )
        located = _locate(result, diff, config, seen)
        if finding.suppressed_by is not None:
            located = _suppressed(located, finding.suppressed_by, diff, config)
        results.append(_history(located, history) if history is not None else located)

    results = _grouped(results, history.earlier if history is not None else frozenset())
    open_findings = sorted(
        (r for r in results if r.state == OPEN and r.held not in (UNANCHORABLE, GROUPED)),
        key=_sort_key,
    )
    chosen = {id(r) for r in open_findings[: config.comment_limit]}
    final = []
    for result in results:
        if result.state == OPEN and result.held not in (UNANCHORABLE, GROUPED):
            if id(result) in chosen:
                result = replace(result, published=True)
            else:
                # Still open: it counts in the gate and is carried to later reviews; it
                # is only not posted inline (the check's summary lists it).
                result = replace(
                    result,
                    reason=f"over the comment limit ({config.comment_limit})",
                    held=OVER_LIMIT,
                )
        final.append(result)
    commented = {r.fingerprint for r in final if r.published}
    for index, result in enumerate(final):
        if result.held == GROUPED and result.grouped_with not in commented:
            # The comment that would list it is not posted: it is over the limit too.
            final[index] = replace(
                result,
                reason=f"over the comment limit ({config.comment_limit})",
                held=OVER_LIMIT,
            )
    return sorted(final, key=lambda r: (r.state != OPEN, *_sort_key(r)))


def _grouped(results: list[Validated], earlier: frozenset[str]) -> list[Validated]:
    """One comment per problem: of the new open findings of one rule in one file, and of
    those on one line, the most useful is commented and lists the others (which stay
    open, count in the gate and in the check's table, each with its own identity). A
    finding an earlier review raised keeps its own thread, and lists nothing new: a
    comment already posted is not where a new occurrence would be seen."""
    candidates = sorted(
        (
            r
            for r in results
            # one the pull request tried to silence says so in a comment of its own
            if r.state == OPEN
            and not r.held
            and not r.suppressed_in_pr
            and r.fingerprint not in earlier
        ),
        key=_sort_key,
    )
    by_rule: dict[tuple, int] = {}
    by_line: dict[tuple, int] = {}
    lines: dict[int, list[int]] = {}
    titles: dict[int, list[str]] = {}
    follows: dict[int, str] = {}
    leader_line: dict[int, int] = {}
    leader_of: dict[int, str] = {}
    leaders: dict[int, str] = {}
    for result in candidates:
        rule_key = (result.path, result.rule) if result.rule else None
        line_key = (result.path, result.side, result.start_line)
        leader = by_rule.get(rule_key) if rule_key else None
        if leader is not None:
            lines[leader].append(result.start_line)
            follows[id(result)] = f"the same problem as line {leader_line[leader]}"
            leader_of[id(result)] = leaders[leader]
            continue
        leader = by_line.get(line_key)
        if leader is not None:
            titles[leader].append(result.title)
            follows[id(result)] = f"on the same line as another finding (line {result.start_line})"
            leader_of[id(result)] = leaders[leader]
            continue
        me = id(result)
        if rule_key:
            by_rule[rule_key] = me
        by_line[line_key] = me
        lines[me], titles[me] = [], []
        leader_line[me] = result.start_line
        leaders[me] = result.fingerprint
    out = []
    for result in results:
        me = id(result)
        if me in follows:
            result = replace(
                result,
                held=GROUPED,
                reason=f"{follows[me]}: listed in its comment",
                grouped_with=leader_of[me],
            )
        elif lines.get(me) or titles.get(me):
            result = replace(
                result,
                also_lines=tuple(sorted(set(lines[me]) - {result.start_line})),
                also_here=tuple(dict.fromkeys(titles[me])),
            )
        out.append(result)
    return out


BASE, PULL_REQUEST, REWRITTEN = "base", "pull request", "rewritten"


def replaced_lines(file: FileDiff) -> dict[int, str]:
    """Head-side line -> the base line it replaces: in each run of removed lines followed
    by added ones, the n-th added line replaces the n-th removed line (an added line with
    no counterpart replaces nothing)."""
    pairs: dict[int, str] = {}
    for hunk in file.hunks:
        target = hunk.target_start
        removed: list[str] = []
        taken = 0
        for text in hunk.text.splitlines()[1:]:
            if text.startswith("-"):
                if taken:  # a new run of removals after additions
                    removed, taken = [], 0
                removed.append(text[1:])
            elif text.startswith("+"):
                if taken < len(removed):
                    pairs[target] = removed[taken]
                taken += 1
                target += 1
            elif text.startswith(" "):
                removed, taken = [], 0
                target += 1
    return pairs


def _says(line: str, pragma: str) -> bool:
    """Whether `line` carries exactly this pragma: its words, not followed by more of a
    pragma (a blanket `# noqa` is not `# noqa: E501`, nor the reverse)."""
    said = " ".join(pragma.split())
    text = " ".join(line.split())
    start = text.find(said)
    while start != -1:
        rest = text[start + len(said) :].lstrip()
        if not rest or not (
            rest[0] == ":" or text[start + len(said) : start + len(said) + 1].isalnum()
        ):
            return True
        start = text.find(said, start + 1)
    return False


def pragma_owner(diff: Diff, path: str, suppression, finding_line: int) -> str:
    """Whose a suppression is: the base's (BASE: it stands as the base branch had it),
    the pull request's own (PULL_REQUEST: it wrote the pragma), or the base's pragma over
    a line the pull request rewrote (REWRITTEN: it covered what the base said there,
    not this). A pragma on a line the pull request adds is the base's only when that line
    replaces a base line that carried the very same pragma."""
    file = diff.get(path)
    if file is None:
        return BASE
    replaced = replaced_lines(file)
    line = suppression.line
    if file.is_added(line) and not _says(replaced.get(line, ""), suppression.pragma):
        return PULL_REQUEST
    if suppression.scope in ("file", "line"):
        # The repository's word on the whole file, or on a line that kept the base's
        # pragma through the pull request's rewrite of it.
        return BASE
    # Over the next line or command: it covered that line's base version.
    return REWRITTEN if file.is_added(finding_line) else BASE


PR_SUPPRESSION_NOTE = (
    "Suppressed in this pull request by {pragma}: a pull request's own suppression does "
    "not close a finding here. It stays open until the code is fixed or someone with "
    "write access dismisses it (`dismiss <reason>` in this thread)."
)
REWRITTEN_NOTE = (
    "The base branch's {pragma} covered what this line said before; this pull request "
    "rewrote the line, so the suppression does not carry over. It stays open until the "
    "code is fixed or someone with write access dismisses it (`dismiss <reason>` in this "
    "thread)."
)


def _suppressed(result: Validated, suppression, diff: Diff, config: GateConfig) -> Validated:
    """A finding its checker would have kept quiet about, for a suppression comment: the
    base branch's suppresses it; the pull request's own — or the base's over a line the
    pull request rewrote — keeps it open and says so, unless the repository's policy
    honours those (never for a blocking finding in a review pass)."""
    if result.state != OPEN:
        return result
    pragma = f"`{' '.join(suppression.pragma.split())[:200]}` on line {suppression.line}"
    owner = pragma_owner(diff, result.path, suppression, result.start_line)
    if owner == BASE:
        return replace(
            result, state=SUPPRESSED, reason=f"suppressed by {pragma}, as in the base branch"
        )
    honoured = config.honour_pr_suppressions and not (
        config.strict_blocking_suppressions and result.blocking
    )
    if honoured:
        return replace(
            result,
            state=SUPPRESSED,
            reason=f"suppressed in this pull request by {pragma} (this repository honours "
            "a pull request's own suppressions)",
        )
    template = PR_SUPPRESSION_NOTE if owner == PULL_REQUEST else REWRITTEN_NOTE
    note = template.format(pragma=pragma)
    body = f"{result.body}\n\n{note}" if result.body else note
    return replace(result, body=body, suppressed_in_pr=pragma)


NEAR_LINES = 3  # a known finding moved by its own edit stays within this many lines


def code_digest(diff: Diff, path: str, line: int) -> str:
    """A short digest of the text of head-side `line` of `path`, if the diff shows it."""
    file = diff.get(path)
    text = file.line_text(line) if file is not None else None
    if text is None or not text.strip():
        return ""
    return hashlib.sha256(" ".join(text.split()).encode()).hexdigest()[:16]


def _occurrences(
    ordered: list[Finding], digests: list[str], known: dict[str, tuple[str, int, str]]
) -> list[int]:
    """The occurrence index of each of a file's findings of one kind (in line order).
    With no history, their order. Otherwise an identity already known (an earlier or a
    dismissed finding, at its line at this head) goes to a finding on the same code, or
    else to one within a few lines of it; the others get indexes no known identity has,
    so a new problem is never taken for a known one because it has the same kind."""
    first = ordered[0]
    candidates = {
        fingerprint(first.path, first.category, first.title, i): i
        for i in range(len(ordered) + len(known))
    }
    here = [
        (candidates[fp], line, digest)
        for fp, (path, line, digest) in known.items()
        if path == first.path and fp in candidates
    ]
    if not here:
        return list(range(len(ordered)))
    assigned: dict[int, int] = {}
    used: set[int] = set()
    pairs = []
    for position, f in enumerate(ordered):
        for index, line, digest in here:
            same = bool(digest) and digest == digests[position]
            distance = abs(f.start_line - line)
            if same or distance <= NEAR_LINES:
                pairs.append((not same, distance, position, index))
    for _, _, position, index in sorted(pairs):
        if position not in assigned and index not in used:
            assigned[position] = index
            used.add(index)
    reserved = {index for index, _, _ in here}
    free = (i for i in range(len(ordered) + len(reserved) + 1) if i not in reserved)
    return [assigned[p] if p in assigned else next(free) for p in range(len(ordered))]


def _history(result: Validated, history: History) -> Validated:
    if result.state != OPEN:
        return result
    if result.fingerprint in history.dismissed:
        return replace(
            result, state=SUPPRESSED, reason=f"dismissed by {history.dismissed[result.fingerprint]}"
        )
    if result.fingerprint in history.earlier:
        return result
    # A finding on removed lines (LEFT) counts lines of the base, which the diff between
    # two heads does not number: it is never taken for "already there".
    if result.side == Side.RIGHT and history.untouched(
        result.path, result.start_line, result.end_line
    ):
        if history.untouched_as_nits:
            # A review pass: a new blocking finding off what changed since the previous
            # pass blocks only when it is critical and says why it cannot wait (the mark
            # alone is no reason); the reason is posted with it.
            if result.blocking and result.severity == Severity.CRITICAL and result.critical_why:
                why = f"Why it cannot wait: {result.critical_why}"
                return replace(result, body=f"{result.body}\n\n{why}" if result.body else why)
            return replace(result, blocking=False)
        if result.severity == Severity.CRITICAL:
            # Posted, but it blocks nothing the previous review let through.
            return replace(result, blocking=False)
        return replace(
            result,
            state=SUPPRESSED,
            blocking=False,
            reason="already there when the previous review looked, untouched since (not raised now)",
        )
    return result


def _invalid(data: dict[str, Any], error: str) -> Validated:
    path = _safe_path(data.get("path")) or "(unknown)"
    title = clean_text(str(data.get("title") or "Malformed finding"), MAX_TITLE)
    return Validated(
        path=path[:MAX_PATH],
        side=Side.RIGHT,
        start_line=1,
        end_line=1,
        severity=Severity.INFO,
        category=INVALID,
        title=title,
        body=clean_text(str(data.get("body") or ""), MAX_BODY),
        evidence="",
        suggestion=None,
        confidence=0.0,
        blocking=False,
        rule=None,
        fingerprint=fingerprint(path, INVALID, title, 0),
        state=SUPPRESSED,
        reason=f"invalid finding from the engine: {error}"[:500],
        raw=data,
    )


def _locate(result: Validated, diff: Diff, config: GateConfig, seen: dict[tuple, str]) -> Validated:
    path = _safe_path(result.path)
    if path is None:
        return replace(result, state=SUPPRESSED, reason="path outside the repository")
    if path != result.path:
        result = replace(result, path=path)
    for prefix, full_name in config.secondaries.items():
        if path.startswith(prefix + "/"):
            return replace(
                result,
                state=SUPPRESSED,
                reason=f"in the secondary repository {full_name}: context, not under review",
            )
    file = diff.get(path)
    if file is None:
        return replace(result, state=SUPPRESSED, reason="path is not part of the pull request")
    if path in config.filtered and not (
        config.safety_rules and (result.rule or "").startswith(config.safety_rules)
    ):
        return replace(
            result, state=SUPPRESSED, reason=f"on a path not reviewed ({config.filtered[path]})"
        )

    if file.binary and not file.hunks:
        # Git shows no lines of it (a UTF-16 script, say): what a checker read in it
        # stands — open, in the review's body, never an inline comment GitHub refuses.
        return replace(
            result,
            start_line=1,
            end_line=1,
            held=UNANCHORABLE,
            reason="in a file git shows as binary: listed in the review, not inline",
        )
    narrowed = _narrow(file, result.side, result.start_line, result.end_line)
    if narrowed is None:
        return replace(
            result,
            state=SUPPRESSED,
            reason=f"not anchorable: line {result.start_line} is outside the changed lines",
            held=UNANCHORABLE,
        )
    start, end = narrowed
    why = "the changed lines"
    cited = sorted(n for n in cited_lines(result.evidence, result.path) if start <= n <= end)
    if cited:
        # The narrowest range: the lines the evidence itself points at.
        start, end = cited[0], cited[-1]
        why = "the line its evidence cites" if start == end else "the lines its evidence cites"
    if (start, end) != (result.start_line, result.end_line):
        result = replace(
            result,
            original_lines=(result.start_line, result.end_line),
            start_line=start,
            end_line=end,
            narrowed=f"narrowed from {_lines(result.start_line, result.end_line)} "
            f"to {_lines(start, end)}, {why}",
        )
    applies = (
        result.suggestion is not None
        and result.original_lines is None
        and result.side == Side.RIGHT
        and file.hunk_index(Side.RIGHT, start) is not None
        and file.hunk_index(Side.RIGHT, start) == file.hunk_index(Side.RIGHT, end)
    )
    result = replace(result, suggestion_applies=applies)

    key = (result.path, result.side, result.start_line, result.end_line, result.category,
           normalise_title(result.title))  # fmt: skip
    if key in seen:
        return replace(result, state=SUPPRESSED, reason=f"duplicate of {seen[key]}")
    seen[key] = result.fingerprint

    if not result.severity.at_least(config.min_severity):
        return replace(
            result,
            state=SUPPRESSED,
            reason=f"below the minimum severity ({config.min_severity.value})",
        )
    if result.confidence < config.min_confidence:
        return replace(
            result,
            state=SUPPRESSED,
            reason=f"confidence {result.confidence:.2f} under the floor of {config.min_confidence:.2f}",
        )
    return result
