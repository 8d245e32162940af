"""One-click suggestions applied to a file's text, as GitHub applies a ```suggestion
block: the block's text replaces the whole lines the comment is on (an empty block
deletes them). Pure: text in, text out (reviews/publication/fixes.py reads and writes the files).

Several fixes in one file are applied from the bottom up, so each one's lines are the
lines it was written for; a fix whose lines overlap one already taken is left out, with
why, as is one past the end of the file.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class LineFix:
    key: str  # the finding's fingerprint
    start_line: int  # 1-based, inclusive
    end_line: int
    text: str  # the suggestion: the new text of those lines ("" deletes them)


@dataclass(frozen=True)
class Patched:
    text: str
    applied: tuple[LineFix, ...]
    left_out: tuple[tuple[LineFix, str], ...]  # each with why, in words


def _lines_word(start: int, end: int) -> str:
    return f"line {start}" if start == end else f"lines {start}–{end}"


def fixes_apply(text: str, fixes: list[LineFix]) -> Patched:
    """`text` with `fixes` applied: each replaces lines `start_line`..`end_line`. A
    replacement takes the newline of the first line it replaces (a file's CRLFs stay
    CRLFs), and the last line of a file without a final newline stays without one."""
    lines = text.splitlines(keepends=True)
    taken: list[LineFix] = []
    left_out: list[tuple[LineFix, str]] = []
    for fix in sorted(fixes, key=lambda f: (f.start_line, f.end_line, f.key)):
        if fix.start_line < 1 or fix.end_line < fix.start_line:
            left_out.append((fix, f"{_lines_word(fix.start_line, fix.end_line)}: not lines"))
            continue
        if fix.end_line > len(lines):
            left_out.append((fix, f"line {fix.end_line} is past the end of the file "
                                  f"({len(lines)} lines)"))  # fmt: skip
            continue
        clash = next(
            (t for t in taken if t.start_line <= fix.end_line and fix.start_line <= t.end_line),
            None,
        )
        if clash is not None:
            left_out.append(
                (
                    fix,
                    f"its lines overlap the fix of {_lines_word(clash.start_line, clash.end_line)}, "
                    "applied instead",
                )  # fmt: skip
            )
            continue
        taken.append(fix)
    for fix in sorted(taken, key=lambda f: f.start_line, reverse=True):
        first, last = lines[fix.start_line - 1], lines[fix.end_line - 1]
        newline = _ending(first) or _ending(lines[0]) or "\n"
        if fix.text == "":
            replacement: list[str] = []
        else:
            body = fix.text[:-1] if fix.text.endswith("\n") else fix.text
            replacement = [part + newline for part in body.split("\n")]
            if not _ending(last):
                replacement[-1] = replacement[-1][: -len(newline)]
        lines[fix.start_line - 1 : fix.end_line] = replacement
    if taken and lines and not _ending(lines[-1]) and text.endswith(("\n", "\r")):
        # The file's last lines were deleted: what is now last keeps the file's ending.
        lines[-1] += _ending(text.splitlines(keepends=True)[-1])
    return Patched("".join(lines), tuple(taken), tuple(left_out))


def _ending(line: str) -> str:
    if line.endswith("\r\n"):
        return "\r\n"
    if line.endswith(("\n", "\r")):
        return line[-1]
    return ""
