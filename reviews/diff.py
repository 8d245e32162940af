"""A pull request's diff as plain data: per file, its hunks and which lines are
added, removed or context — what GitHub lets a review comment anchor on.

Pure: parses `git diff` output with unidiff; no database, no I/O.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass, field

from unidiff import PatchSet
from unidiff.errors import UnidiffParseError

from sandbox.contract import ChangedFile, LineRange, Side


class DiffError(ValueError):
    permanent = True


@dataclass(frozen=True)
class Hunk:
    source_start: int
    source_length: int
    target_start: int
    target_length: int
    added: frozenset[int]  # head-side line numbers
    removed: frozenset[int]  # base-side line numbers
    context_target: frozenset[int]
    context_source: frozenset[int]
    text: str = field(default="", repr=False)  # the hunk as in the diff, from its @@ line

    @property
    def header(self) -> str:
        return f"@@ -{self.source_start},{self.source_length} +{self.target_start},{self.target_length} @@"

    def lines(self, side: Side) -> frozenset[int]:
        """Lines a comment may anchor on, on one side (GitHub: a line of the hunk)."""
        if side == Side.RIGHT:
            return self.added | self.context_target
        return self.removed | self.context_source


@dataclass(frozen=True)
class FileDiff:
    path: str
    status: str  # added | modified | deleted | renamed
    previous_path: str | None = None
    binary: bool = False
    hunks: tuple[Hunk, ...] = ()
    added_count: int = 0
    removed_count: int = 0
    header: str = field(default="", repr=False)  # `diff --git` … `+++` lines
    _added_sorted: tuple[int, ...] = field(default=(), repr=False)

    @property
    def added(self) -> tuple[int, ...]:
        """Head-side line numbers this diff adds, ascending."""
        return self._added_sorted

    def is_added(self, line: int) -> bool:
        index = bisect.bisect_left(self._added_sorted, line)
        return index < len(self._added_sorted) and self._added_sorted[index] == line

    def hunk_index(self, side: Side, line: int) -> int | None:
        """The index of the hunk `line` can be commented in, or None if it is outside
        every hunk (GitHub refuses such a comment with 422)."""
        for index, hunk in enumerate(self.hunks):
            if line in hunk.lines(side):
                return index
        return None

    def added_ranges(self) -> tuple[LineRange, ...]:
        ranges: list[LineRange] = []
        start = previous = None
        for line in self._added_sorted:
            if previous is not None and line == previous + 1:
                previous = line
                continue
            if start is not None:
                ranges.append(LineRange(start=start, end=previous))
            start = previous = line
        if start is not None:
            ranges.append(LineRange(start=start, end=previous))
        return tuple(ranges)

    def changed_file(self) -> ChangedFile:
        return ChangedFile(
            path=self.path,
            status=self.status,
            previous_path=self.previous_path,
            added=self.added_ranges(),
            binary=self.binary,
        )


@dataclass(frozen=True)
class Diff:
    files: tuple[FileDiff, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "_by_path", {f.path: f for f in self.files})

    def get(self, path: str) -> FileDiff | None:
        return self._by_path.get(path)  # type: ignore[attr-defined]

    @property
    def paths(self) -> tuple[str, ...]:
        return tuple(f.path for f in self.files)

    @property
    def added_lines(self) -> int:
        return sum(f.added_count for f in self.files)


def _strip_prefix(path: str | None) -> str | None:
    if path is None or path == "/dev/null":
        return None
    if path.startswith(("a/", "b/")):
        return path[2:]
    return path


FILE_START = re.compile(r"^diff --git ", re.MULTILINE)
HUNK_START = re.compile(r"^@@ ", re.MULTILINE)


def _file_texts(text: str) -> list[str]:
    starts = [m.start() for m in FILE_START.finditer(text)]
    if not starts:
        return []
    return [text[a:b] for a, b in zip(starts, [*starts[1:], len(text)], strict=True)]


def _hunk_texts(file_text: str) -> tuple[str, list[str]]:
    """(header, [hunk text, …]) of one file's part of the diff."""
    starts = [m.start() for m in HUNK_START.finditer(file_text)]
    if not starts:
        return file_text, []
    ends = [*starts[1:], len(file_text)]
    return file_text[: starts[0]], [file_text[a:b] for a, b in zip(starts, ends, strict=True)]


def diff_parse(text: str) -> Diff:
    """Parse unified diff text (as `git diff` prints it) into a `Diff`."""
    try:
        patch = PatchSet(text)
    except UnidiffParseError as exc:
        raise DiffError(f"The diff could not be parsed: {exc}") from exc
    texts = _file_texts(text)
    if len(texts) != len(patch):
        texts = [str(patched) for patched in patch]  # not `git diff` output: rebuild
    files = []
    for patched, file_text in zip(patch, texts, strict=True):
        header, hunk_texts = _hunk_texts(file_text)
        if len(hunk_texts) != len(patched):
            hunk_texts = [str(hunk) for hunk in patched]
        source = _strip_prefix(patched.source_file)
        target = _strip_prefix(patched.target_file)
        if patched.is_added_file:
            status = "added"
        elif patched.is_removed_file:
            status = "deleted"
        elif patched.is_rename or (source and target and source != target):
            status = "renamed"
        else:
            status = "modified"
        path = target or source or patched.path
        hunks = []
        added_all: list[int] = []
        removed_count = 0
        for hunk, hunk_text in zip(patched, hunk_texts, strict=True):
            added, removed, context_t, context_s = [], [], [], []
            for line in hunk:
                if line.is_added:
                    added.append(line.target_line_no)
                elif line.is_removed:
                    removed.append(line.source_line_no)
                elif line.is_context:
                    context_t.append(line.target_line_no)
                    context_s.append(line.source_line_no)
            added_all.extend(added)
            removed_count += len(removed)
            hunks.append(
                Hunk(
                    source_start=hunk.source_start,
                    source_length=hunk.source_length,
                    target_start=hunk.target_start,
                    target_length=hunk.target_length,
                    added=frozenset(added),
                    removed=frozenset(removed),
                    context_target=frozenset(context_t),
                    context_source=frozenset(context_s),
                    text=hunk_text,
                )
            )
        files.append(
            FileDiff(
                path=path,
                status=status,
                previous_path=source if status == "renamed" else None,
                binary=bool(patched.is_binary_file),
                hunks=tuple(hunks),
                added_count=len(added_all),
                removed_count=removed_count,
                header=header,
                _added_sorted=tuple(sorted(added_all)),
            )
        )
    return Diff(files=tuple(files))
