"""What the static engine's checkers share: the changed lines of a file and a finding."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from sandbox.contract import ChangedFile, Finding, Severity

MAX_FILE_BYTES = 2_000_000


@dataclass(frozen=True)
class Target:
    """A changed text file of the checkout and the head-side lines the PR added."""

    path: str  # relative to the checkout
    absolute: Path
    added: frozenset[int]

    def touches(self, start: int, end: int) -> bool:
        return any(line in self.added for line in range(start, end + 1))

    @cached_property
    def text(self) -> str:
        return self.absolute.read_text(errors="replace")

    @cached_property
    def lines(self) -> list[str]:
        return self.text.splitlines()


def targets(root: Path, changed: tuple[ChangedFile, ...]) -> list[Target]:
    """Changed files that exist in the checkout as regular, reasonably sized text files."""
    found = []
    for file in changed:
        if file.status == "deleted" or file.binary or not file.added:
            continue
        absolute = root / file.path
        try:
            if not absolute.is_file() or absolute.is_symlink():
                continue
            if absolute.stat().st_size > MAX_FILE_BYTES:
                continue
            if b"\0" in absolute.read_bytes()[:8192]:
                continue
        except OSError:
            continue
        added = frozenset(line for span in file.added for line in range(span.start, span.end + 1))
        found.append(Target(file.path, absolute, added))
    return found


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
