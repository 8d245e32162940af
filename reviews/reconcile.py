"""Reconciliation: what became of each earlier open finding after a new review (DESIGN
§3 step 13). Pure: the earlier findings, the new review's fingerprints and the diff
between the two heads in; one decision per earlier finding out.

- found again (same fingerprint) → current: the same problem, the same identity;
- not re-examined (an incremental review whose changes do not touch its lines) →
  current;
- gone, and the code it pointed at was removed (its file deleted, or its lines deleted
  without replacement) → outdated;
- gone, and its code is still there (unchanged, or changed in place) → resolved.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from reviews.diff import Diff

CURRENT = "current"
RESOLVED = "resolved"
OUTDATED = "outdated"


@dataclass(frozen=True)
class Earlier:
    fingerprint: str
    path: str
    start_line: int
    end_line: int
    side: str = "RIGHT"


@dataclass(frozen=True)
class Decision:
    state: str  # current | resolved | outdated
    reason: str


def _touched(diff: Diff, earlier: Earlier) -> tuple[bool, bool]:
    """(any of its lines changed, all of its lines removed with nothing added in their
    place) in `diff`, which goes from the earlier head to the new one."""
    file = diff.get(earlier.path)
    if file is None:
        return False, False
    lines = set(range(earlier.start_line, earlier.end_line + 1))
    changed = removed_only = False
    covered: set[int] = set()
    for hunk in file.hunks:
        hit = lines & hunk.removed
        if not hit:
            continue
        changed = True
        covered |= hit
        if not hunk.added:
            removed_only = True
        else:
            removed_only = False
            break
    return changed, removed_only and covered == lines


def reconcile(
    earlier: Iterable[Earlier],
    found_again: set[str],
    *,
    diff: Diff | None,
    deleted_files: set[str] = frozenset(),
    incremental: bool = False,
    head_sha: str = "",
) -> dict[str, Decision]:
    """One decision per earlier open finding. `diff` runs from the earlier review's head
    to the new one (None when unknown: then a finding that is gone counts as resolved);
    `deleted_files` are files gone at the new head."""
    short = head_sha[:7]
    decisions: dict[str, Decision] = {}
    for item in earlier:
        if item.fingerprint in found_again:
            decisions[item.fingerprint] = Decision(CURRENT, "found again")
            continue
        if item.path in deleted_files:
            decisions[item.fingerprint] = Decision(OUTDATED, f"the file was removed in {short}")
            continue
        changed, removed = _touched(diff, item) if diff is not None else (True, False)
        if incremental and not changed:
            decisions[item.fingerprint] = Decision(
                CURRENT, "not re-examined: the new changes do not touch it"
            )
        elif removed:
            decisions[item.fingerprint] = Decision(
                OUTDATED, f"the code it referred to was removed in {short}"
            )
        elif changed:
            decisions[item.fingerprint] = Decision(
                RESOLVED, f"the code was changed in {short} and the problem is gone"
            )
        else:
            decisions[item.fingerprint] = Decision(RESOLVED, f"no longer found in {short}")
    return decisions
