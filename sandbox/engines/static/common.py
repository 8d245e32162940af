"""What the static engine's checkers share: the changed lines of a file, a finding, and
what was not checked, and why.

File names are data: a tool is given them after `--` and as `./name`, so a name such as
`--output-file=x.py` or `-` is never read as an option or as standard input.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from sandbox.contract import ChangedFile, Finding, Severity

MAX_FILE_BYTES = 2_000_000
BINARY_PROBE = 8192


@dataclass(frozen=True)
class Skipped:
    """A changed file (or a tool's part of it) the engine did not check, and why."""

    path: str
    reason: str


def argument(path: str) -> str:
    """A relative path as a tool's argument: never an option, never `-` (stdin)."""
    return f"./{path}"


def shown(path: str) -> str:
    """A path quoted for a summary line: a quote, a backtick or a newline in the name
    cannot break the sentence it is in."""
    return json.dumps(path, ensure_ascii=False)


@dataclass(frozen=True)
class Target:
    """A changed text file of the checkout and the head-side lines the PR added."""

    path: str  # relative to the checkout
    absolute: Path
    added: frozenset[int]

    def touches(self, start: int, end: int) -> bool:
        return any(line in self.added for line in range(start, end + 1))

    @cached_property
    def data(self) -> bytes:
        return self.absolute.read_bytes()

    @cached_property
    def utf8(self) -> bool:
        try:
            self.data.decode("utf-8")
        except UnicodeDecodeError:
            return False
        return True

    @cached_property
    def text(self) -> str:
        """The file as UTF-8 (an invalid byte becomes U+FFFD), line ends as they are."""
        return self.data.decode("utf-8", errors="replace")

    @cached_property
    def lines(self) -> list[str]:
        """Lines as git and GitHub number them: split at `\\n` only (a form feed or a
        U+2028 in a line is part of it), without the `\\r` of a CRLF ending."""
        lines = self.text.split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        return [line[:-1] if line.endswith("\r") else line for line in lines]


def targets(root: Path, changed: tuple[ChangedFile, ...]) -> list[Target]:
    """Changed files that exist in the checkout as regular, reasonably sized text files."""
    return select(root, changed)[0]


def select(root: Path, changed: tuple[ChangedFile, ...]) -> tuple[list[Target], list[Skipped]]:
    """The changed files to check (regular, reasonably sized text files of the checkout
    with added lines), and those with added lines that are not checked, with why."""
    found: list[Target] = []
    skipped: list[Skipped] = []
    for file in changed:
        if file.status == "deleted" or not (file.added or file.binary):
            continue  # nothing added: nothing the author could be told about
        reason = None
        absolute = root / file.path
        try:
            if file.binary:
                reason = "binary in the diff"
            elif absolute.is_symlink():
                reason = "a symbolic link"
            elif not absolute.exists():
                reason = "not in the checkout"
            elif not absolute.is_file():
                reason = "not a regular file"
            elif absolute.stat().st_size > MAX_FILE_BYTES:
                reason = f"larger than {MAX_FILE_BYTES // 1_000_000} MB"
            else:
                with absolute.open("rb") as handle:
                    if b"\0" in handle.read(BINARY_PROBE):
                        reason = "binary (a NUL byte in its first 8 KB)"
        except OSError as exc:
            reason = f"unreadable ({exc.strerror or exc})"
        if reason is not None:
            skipped.append(Skipped(file.path, reason))
            continue
        added = frozenset(line for span in file.added for line in range(span.start, span.end + 1))
        found.append(Target(file.path, absolute, added))
    return found, skipped


@contextmanager
def utf8_copies(files: list[Target]) -> Iterator[Path]:
    """A scratch folder holding `files` at their paths as UTF-8, read as `Target.text`
    reads them: for a tool that fails on (ruff) or silently skips (detect-secrets) a
    file that is not UTF-8. Lines and their numbers are those of the checkout."""
    with tempfile.TemporaryDirectory(prefix="tasuku-utf8-") as scratch:
        for target in files:
            copy = Path(scratch) / target.path
            copy.parent.mkdir(parents=True, exist_ok=True)
            copy.write_bytes(target.text.encode("utf-8", errors="surrogateescape"))
        yield Path(scratch)


def finding(
    *,
    target: Target,
    start: int,
    end: int | None = None,
    severity: Severity,
    category: str,
    title: str,
    body: str,
    evidence: str,
    rule: str,
    suggestion: str | None = None,
    confidence: float = 0.9,
) -> Finding:
    return Finding(
        path=target.path,
        start_line=start,
        end_line=end or start,
        severity=severity,
        category=category,
        title=title[:200],
        body=body,
        evidence=evidence[:4000],
        suggestion=suggestion,
        confidence=confidence,
        blocking=severity.at_least(Severity.HIGH),
        rule=rule,
    )


def quote_line(target: Target, line: int) -> str:
    try:
        return target.lines[line - 1].strip()[:300]
    except IndexError:
        return ""
