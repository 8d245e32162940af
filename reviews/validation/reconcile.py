"""Reconciliation: what became of each earlier open finding after a new review (docs/reviews.md,
*Across pushes*). Pure: the earlier findings, the new review's fingerprints and the diff
between the two heads in; one decision per earlier finding out.

- found again (same fingerprint) → current: the same problem, the same identity;
- not re-examined (an incremental review whose changes do not touch its lines) →
  current;
- gone, and the code it pointed at was removed (its file deleted, or its lines deleted
  without replacement together with the code around them) → outdated;
- gone, and its code is still there (changed in place, or only the offending lines
  deleted) or untouched (fixed elsewhere) → resolved.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from reviews.scope.diff import Diff

CURRENT = "current"
RESOLVED = "resolved"
OUTDATED = "outdated"
# A review pass: the reviewer accepted the author's reasons for not changing the code.
ACCEPTED = "accepted"


@dataclass(frozen=True)
class Earlier:
    fingerprint: str
    path: str
    start_line: int
    end_line: int
    side: str = "RIGHT"
    # What raised it (a static checker's name, or the engine), and whether that checker
    # is deterministic: run again on the same code it says the same.
    checker: str = ""
    deterministic: bool = False


@dataclass(frozen=True)
class Decision:
    state: str  # current | resolved | outdated | accepted
    reason: str
    code_changed: bool = True  # its lines changed between the two heads (or unknown)


def _removed_lines(text: str) -> list[tuple[int, str]]:
    """(base-side line number, text) of each removed line of a hunk."""
    match = re.match(r"@@ -(\d+)", text)
    if match is None:
        return []
    number = int(match.group(1))
    removed = []
    for line in text.splitlines()[1:]:
        if line.startswith("-"):
            removed.append((number, line[1:]))
            number += 1
        elif line.startswith(" "):
            number += 1
    return removed


def _touched(diff: Diff, earlier: Earlier) -> tuple[bool, bool, bool]:
    """(its lines changed, its lines deleted with nothing in their place, the deletion
    took the code around them too) in `diff`, from the earlier head to the new one."""
    file = diff.get(earlier.path)
    if file is None:
        return False, False, False
    lines = set(range(earlier.start_line, earlier.end_line + 1))
    changed = False
    removed_only = True
    wider = False
    covered: set[int] = set()
    for hunk in file.hunks:
        hit = lines & hunk.removed
        if not hit:
            continue
        changed = True
        covered |= hit
        if hunk.added:
            removed_only = False
        elif any(text.strip() for number, text in _removed_lines(hunk.text) if number not in lines):
            wider = True  # code around it went too (blank lines do not count)
    deleted = changed and removed_only and covered == lines
    return changed, deleted, deleted and wider


def reconcile(
    earlier: Iterable[Earlier],
    found_again: set[str],
    *,
    diff: Diff | None,
    deleted_files: set[str] = frozenset(),
    incremental: bool = False,
    head_sha: str = "",
    examined: dict[str, frozenset[str]] | None = None,
    ruled_fixed: set[str] = frozenset(),
    in_pull=None,
    base_ref: str = "",
    rules_changed: bool = False,
    rules_unrecorded: bool = False,
) -> dict[str, Decision]:
    """One decision per earlier open finding. `diff` runs from the earlier review's head
    to the new one (None when unknown: then a finding that is gone counts as resolved);
    `deleted_files` are files gone at the new head.

    A finding closes only by a fix: "gone" needs its checker to have read its file at
    the new head (`examined`: path -> what read it; None: not known, as before there was
    a ledger), and its code to have changed — its lines, or for a deterministic checker
    its file — unless the engine ruled it fixed (`ruled_fixed`: a model reviewer's word
    on an earlier finding). Otherwise it stays open, saying why.

    `in_pull(path, start, end)`, after a retarget: whether those lines are still in the
    pull request's diff against its new base. A finding whose lines are not is outdated:
    the new base has that code as it is, so it is no longer this pull request's.

    `rules_changed`: the engine's rules differ from those of the review that raised the
    findings (a Tasuku or checker upgrade between the two); `rules_unrecorded`: that
    review kept no record of its rules (a Tasuku older than the record), so they may
    differ. A deterministic checker's silence then proves no fix: such a finding is
    outdated, saying so, never "fixed"."""
    short = head_sha[:7]
    decisions: dict[str, Decision] = {}
    for item in earlier:
        if item.fingerprint in found_again:
            decisions[item.fingerprint] = Decision(CURRENT, "found again")
            continue
        if item.path in deleted_files:
            decisions[item.fingerprint] = Decision(OUTDATED, f"the file was removed in {short}")
            continue
        if (
            in_pull is not None
            and item.side == "RIGHT"
            and not in_pull(item.path, item.start_line, item.end_line)
        ):
            onto = f"`{base_ref}`" if base_ref else "the new base"
            decisions[item.fingerprint] = Decision(
                OUTDATED,
                f"`{item.path}:{item.start_line}` is no longer part of this pull request: "
                f"its base is now {onto}, which has that code as it is",
                code_changed=False,
            )
            continue
        if item.side != "RIGHT":
            # On removed lines: numbered on the base, not on either head, so the diff
            # between the heads cannot say whether it was touched. Only a full review
            # that no longer finds it settles it.
            if incremental:
                reason = "not re-examined: it is on removed lines"
                decisions[item.fingerprint] = Decision(CURRENT, reason)
                continue
            changed, deleted, gone = True, False, False
        elif diff is None:
            changed, deleted, gone = True, False, False
        else:
            changed, deleted, gone = _touched(diff, item)
        where = f"{item.path}:{item.start_line}"
        seen = examined.get(item.path) if examined is not None else None
        looked = examined is None or (
            seen is not None
            and (item.checker in seen or "static" in seen or "*" in seen or not item.checker)
        )
        if incremental and not changed:
            reason = "not re-examined: the new changes do not touch it"
            decisions[item.fingerprint] = Decision(CURRENT, reason)
        elif not looked:
            # Its lines may be gone, but the problem may stand elsewhere in a file its
            # checker did not read: nothing says it is fixed.
            who = item.checker or "its checker"
            reason = f"not re-examined: {who} did not review {item.path} at {short}"
            decisions[item.fingerprint] = Decision(CURRENT, reason)
        elif gone:
            decisions[item.fingerprint] = Decision(OUTDATED, f"the code around {where} was removed")
        elif deleted:
            reason = f"{where} was removed and the problem is gone"
            decisions[item.fingerprint] = Decision(RESOLVED, reason)
        elif changed:
            reason = f"{where} was changed and the problem is gone"
            decisions[item.fingerprint] = Decision(RESOLVED, reason)
        elif item.fingerprint in ruled_fixed:
            decisions[item.fingerprint] = Decision(
                RESOLVED, f"the reviewer ruled it fixed ({where} itself is unchanged)",
                code_changed=False,
            )  # fmt: skip
        elif (
            item.deterministic
            and (diff is None or diff.get(item.path) is not None)
            and (rules_changed or rules_unrecorded)
        ):
            # Where its file changed, the same rules' silence would be a fix; other rules'
            # proves none. (An untouched file keeps it open below, whatever the rules.)
            since = (
                "the static reviewer's rules changed since it was raised"
                if rules_changed
                else "the rules it was raised under were not recorded (an earlier Tasuku)"
            )
            decisions[item.fingerprint] = Decision(
                OUTDATED,
                f"{item.checker} no longer reports it, and {since} ({where} itself is "
                "unchanged): it was not verified fixed",
                code_changed=False,
            )
        elif item.deterministic and (diff is None or diff.get(item.path) is not None):
            # Its checker says the same of the same code: no longer found after its file
            # changed, the change fixed it (an import added above a use, say).
            decisions[item.fingerprint] = Decision(
                RESOLVED, f"{item.checker} no longer finds it after {item.path} changed",
                code_changed=False,
            )  # fmt: skip
        else:
            decisions[item.fingerprint] = Decision(
                CURRENT,
                f"not found again, but the code at {where} did not change: it stays open "
                "until it is fixed or dismissed",
            )
    return decisions


def line_moved(diff: Diff | None, path: str, line: int) -> int:
    """Where head-side `line` of `path` at the earlier head is at the new head, given the
    diff between the two: shifted by the lines added and removed above it. A line the
    diff changed, or an unknown diff, stays where it was (a finding carried unexamined
    is on lines the diff did not touch)."""
    file = diff.get(path) if diff is not None else None
    if file is None:
        return line
    shift = 0
    for hunk in file.hunks:
        if hunk.source_length == 0:
            before = hunk.source_start < line  # lines inserted after `source_start`
        else:
            before = hunk.source_start + hunk.source_length - 1 < line
        if before:
            shift += hunk.target_length - hunk.source_length
            continue
        if hunk.source_start <= line and line in hunk.context_source:
            # A context line of this hunk: count what the hunk changed above it.
            above = sum(1 for n in hunk.removed if n < line)
            added_above = 0
            target = hunk.target_start
            source = hunk.source_start
            for text in hunk.text.splitlines()[1:]:
                if text.startswith("+"):
                    added_above += 1
                    target += 1
                elif text.startswith("-"):
                    source += 1
                elif text.startswith(" "):
                    if source == line:
                        return target
                    source += 1
                    target += 1
            return line + shift + added_above - above
        break
    return max(1, line + shift)


# A line named in a finding's words: `path:12`, `path:12-14`, "line 12", "lines 12-14".
_NAMED_LINE = re.compile(
    r"(?P<lead>\blines? |:)(?P<start>\d+)(?:(?P<dash>-|–| to )(?P<end>\d+))?\b"
)


def text_moved(text: str, path: str, start: int, end: int, shift: int) -> str:
    """A carried finding's words with the lines it names moved as its lines moved:
    `app.py:11` becomes `app.py:12` when the finding moved from line 11 to 12. Only
    numbers of the finding's own lines (`start`..`end` before the move) are moved —
    `path:N` when the path is the finding's, "line N" anywhere — so the words never
    point at a line the finding no longer is on."""
    if not shift or not text:
        return text

    def moved(number: str) -> str:
        value = int(number)
        return str(value + shift) if start <= value <= end else number

    def replace(match: re.Match[str]) -> str:
        lead = match.group("lead")
        if lead == ":" and not text[: match.start()].endswith(path):
            return match.group(0)
        out = lead + moved(match.group("start"))
        if match.group("end"):
            out += match.group("dash") + moved(match.group("end"))
        return out

    return _NAMED_LINE.sub(replace, text)
