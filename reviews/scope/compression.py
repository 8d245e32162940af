"""Diff compression: what of a pull request's diff fits the reviewer's context budget.

Every admitted pull request is reviewed; what does not fit is *named* to the engine
(file and hunk headers), which can read it from the checkout with its tools. Nothing is
silently clipped, and the same diff and budget always give the same result.

Pure: a parsed `Diff` in, `Compressed` out. Tokens are estimated offline.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from reviews.scope import reviewability
from reviews.scope.diff import Diff, FileDiff
from reviews.scope.reviewability import SOURCE, FileClass
from sandbox.contract import OmittedPart

# Code and diffs run at about 3.6 characters a token with current model tokenizers; an
# estimate that errs on the side of more tokens keeps the prompt inside the window.
CHARS_PER_TOKEN = 3.6
# A file whose diff alone would take more than this share of the budget is reviewed
# after every smaller one (one enormous file must not crowd out the rest).
ENORMOUS_SHARE = 0.25

BUDGET = "over the context budget"
ENORMOUS = "enormous file, over the context budget"
DELETION_ONLY = "only removes lines"
DELETED = "file deleted"


def tokens(text: str) -> int:
    return math.ceil(len(text) / CHARS_PER_TOKEN)


def over_budget(reason: str) -> bool:
    """Whether a part was left out for lack of room (its class may follow the reason)."""
    return reason.startswith((BUDGET, ENORMOUS))


@dataclass(frozen=True)
class Compressed:
    text: str  # the diff the engine is shown
    tokens: int
    budget: int
    included: tuple[str, ...]  # files shown whole or in part
    omitted: tuple[OmittedPart, ...]  # what of the reviewed files is not shown
    spent: tuple[tuple[str, int], ...] = ()  # (path, tokens) of each file shown

    @property
    def complete(self) -> bool:
        return not any(over_budget(o.reason) for o in self.omitted)


def _volume(file: FileDiff) -> int:
    return file.added_count + file.removed_count


def compress(
    diff: Diff,
    paths: Iterable[str],
    budget: int,
    *,
    classify: Callable[[str], FileClass] | None = reviewability.classify,
) -> Compressed:
    """Fit the diff of `paths` into `budget` tokens.

    1. Deleted files and hunks that only remove lines are named, not shown (they cost
       budget and a reviewer can say little about code that is gone).
    2. Files are ranked by what they deserve of a review first (`classify`: source, then
       tests, then documentation, then translations, release notes and data files:
       reviews/scope/reviewability.py), then by change volume, largest first, so the riskiest
       changes are seen; within a class, enormous files go after all others; ties by
       path. `classify=None` ranks by change volume alone.
    3. Whole files are taken while they fit; a file that does not fit is shown hunk by
       hunk as far as it fits; later, smaller files may still fit.
    4. Every file or hunk left out is listed with the reason, and a file left out for
       lack of room after ranking low says how it was ranked.
    """
    files = [diff.get(path) for path in paths]
    omitted: list[OmittedPart] = []
    candidates: list[tuple[FileDiff, list]] = []
    for file in files:
        if file is None:
            continue
        if file.status == "deleted":
            omitted.append(OmittedPart(path=file.path, reason=DELETED))
            continue
        shown, deletion_only = [], []
        for hunk in file.hunks:
            (shown if hunk.added else deletion_only).append(hunk)
        if deletion_only:
            omitted.append(
                OmittedPart(
                    path=file.path,
                    reason=DELETION_ONLY,
                    hunks=tuple(h.header for h in deletion_only),
                )
            )
        if shown or (file.binary or not file.hunks):
            candidates.append((file, shown))

    def cost(file: FileDiff, hunks: list) -> int:
        return tokens(file.header) + sum(tokens(h.text) for h in hunks)

    enormous_at = budget * ENORMOUS_SHARE

    def class_of(file: FileDiff) -> FileClass:
        return classify(file.path) if classify is not None else SOURCE

    ranked = sorted(
        candidates,
        key=lambda item: (
            class_of(item[0]).rank,
            cost(*item) > enormous_at,
            -_volume(item[0]),
            item[0].path,
        ),
    )
    used = 0
    parts: list[str] = []
    included: list[str] = []
    spent: list[tuple[str, int]] = []
    for file, hunks in ranked:
        header = tokens(file.header)
        whole = cost(file, hunks)
        if used + whole <= budget:
            parts.append(file.header + "".join(h.text for h in hunks))
            included.append(file.path)
            spent.append((file.path, whole))
            used += whole
            continue
        reason = ENORMOUS if whole > enormous_at else BUDGET
        if ranked_as := class_of(file).ranked:
            reason = f"{reason} ({ranked_as})"
        taken, left = [], []
        room = budget - used - header
        for hunk in hunks:
            size = tokens(hunk.text)
            if not left and size <= room:
                taken.append(hunk)
                room -= size
            else:
                left.append(hunk)
        if taken:
            parts.append(file.header + "".join(h.text for h in taken))
            included.append(file.path)
            part = header + sum(tokens(h.text) for h in taken)
            spent.append((file.path, part))
            used += part
            omitted.append(
                OmittedPart(path=file.path, reason=reason, hunks=tuple(h.header for h in left))
            )
        else:
            omitted.append(OmittedPart(path=file.path, reason=reason))
    return Compressed(
        text="".join(parts),
        tokens=used,
        budget=budget,
        included=tuple(included),
        omitted=tuple(sorted(omitted, key=lambda o: (o.path, o.reason))),
        spent=tuple(spent),
    )
