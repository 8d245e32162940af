"""Diff hygiene: what should never be merged, whatever the language — conflict markers,
a committed private key, a debugger breakpoint left in."""

from __future__ import annotations

import re
from pathlib import Path

from sandbox.contract import Finding, Severity
from sandbox.engines.static.common import Skipped, Target, finding, quote_line

CONFLICT = re.compile(r"^(<{7}( |$)|={7}$|>{7}( |$)|\|{7}( |$))")
OURS, THEIRS = re.compile(r"^<{7}( |$)"), re.compile(r"^>{7}( |$)")
PRIVATE_KEY = re.compile(
    r"-----BEGIN ((RSA|EC|DSA|OPENSSH|PGP|ENCRYPTED) )?PRIVATE KEY( BLOCK)?-----"
)
# What a key's body looks like: a run of base64 (PEM lines are 64 long; an encrypted key's
# headers come first).
KEY_BODY = re.compile(r"[A-Za-z0-9+/]{40,}")
KEY_HEADERS = ("Proc-Type:", "DEK-Info:", "Comment:", "Version:")
LOOK_AHEAD = 6

DEBUGGERS: dict[str, re.Pattern[str]] = {
    "python": re.compile(r"^\s*(breakpoint\(\)|(import (i|web|pu)?pdb\b.*;\s*)?(i|web|pu)?pdb\.set_trace\(\)|import (i|web|pu)?pdb\s*$|from (i|pu)?pdb import set_trace)"),
    "javascript": re.compile(r"^\s*debugger\s*;?\s*$"),
    "ruby": re.compile(r"^\s*(binding\.(pry|irb)|byebug|debugger)\s*$"),
    "php": re.compile(r"^\s*(xdebug_break\(\)|var_dump\(.*\);\s*die|dd\(.*\);?)\s*$"),
}  # fmt: skip
LANGUAGES = {
    ".py": "python", ".pyi": "python",
    ".js": "javascript", ".jsx": "javascript", ".ts": "javascript", ".tsx": "javascript",
    ".mjs": "javascript", ".cjs": "javascript", ".vue": "javascript", ".svelte": "javascript",
    ".rb": "ruby", ".php": "php",
}  # fmt: skip


def check(
    root: Path, files: list[Target], options: object = None
) -> tuple[list[Finding], str, list[Skipped]]:
    findings: list[Finding] = []
    for target in files:
        language = LANGUAGES.get(Path(target.path).suffix.lower())
        lines = target.lines
        markers: list[int] = []
        for number in sorted(target.added):
            if number > len(lines):
                continue
            text = lines[number - 1]
            if CONFLICT.match(text):
                markers.append(number)
            elif PRIVATE_KEY.search(text) and _key_follows(lines, number, text):
                fixture = target.test_data
                findings.append(
                    finding(
                        target=target,
                        start=number,
                        severity=Severity.MEDIUM if fixture else Severity.CRITICAL,
                        category="secret",
                        title="Private key in test data" if fixture else "Private key committed",
                        body=(
                            "A private key is committed: anyone who can read the repository, its "
                            "forks or its history can impersonate its owner. Remove it, revoke "
                            "and replace the key (it stays in git history), and load keys from a "
                            "secret store."
                        )
                        + (
                            "\n\nIt is in a test or fixture folder, where keys are mostly "
                            "made up for the tests; check it is not a real one."
                            if fixture
                            else ""
                        ),
                        evidence=f"hygiene: `{text.strip()[:80]}` on line {number}",
                        rule="hygiene:private-key",
                        confidence=0.99,
                    )
                )
            elif language and not target.safety_only and DEBUGGERS[language].match(text):
                findings.append(
                    finding(
                        target=target,
                        start=number,
                        severity=Severity.HIGH,
                        category="bug",
                        title="Debugger breakpoint left in",
                        body=(
                            "A debugger breakpoint is left in: when this line runs, the process "
                            "stops and waits for a debugger — a hung request or job in "
                            "production. Remove it."
                        ),
                        evidence=f"hygiene: `{quote_line(target, number)}` on line {number}",
                        rule="hygiene:debugger",
                        suggestion=None,
                        confidence=0.95,
                    )
                )
        markers = _conflict(lines, markers)
        if markers:
            findings.append(
                finding(
                    target=target,
                    start=markers[0],
                    end=markers[-1],
                    severity=Severity.CRITICAL,
                    category="bug",
                    title="Merge conflict markers committed",
                    body=(
                        "Merge conflict markers are committed: the file no longer parses (or, "
                        "for data, is silently wrong) until the conflict is resolved."
                    ),
                    evidence=f"hygiene: conflict markers on lines {', '.join(map(str, markers[:10]))}",
                    rule="hygiene:conflict-marker",
                    confidence=0.99,
                )
            )
    return findings, "hygiene checks", []


def _key_follows(lines: list[str], number: int, text: str) -> bool:
    """Whether a key's body follows its BEGIN line: base64 after it on the same line (a
    key in a string, `\\n`-escaped) or on the next lines. A header alone — a constant,
    a parser's test, an error message — is no key."""
    after = text[PRIVATE_KEY.search(text).end() :]
    if KEY_BODY.search(after):
        return True
    for line in lines[number : number + LOOK_AHEAD]:
        stripped = line.strip().strip("'\",").strip()
        if not stripped or stripped.startswith(KEY_HEADERS):
            continue
        return bool(KEY_BODY.search(stripped))
    return False


def _conflict(lines: list[str], added: list[int]) -> list[int]:
    """The added marker lines of real conflicts: `<<<<<<<`, then `=======`, then
    `>>>>>>>`, in that order in the file. A lone `=======` (a reStructuredText or
    Markdown underline) or `>>>>>>>` (a quoted reply) is no conflict."""
    blocks: list[list[int]] = []
    opened: list[int] | None = None
    for number, text in enumerate(lines, start=1):
        if OURS.match(text):
            opened = [number]
        elif opened is None:
            continue
        elif text == "=======" and len(opened) == 1 or text.startswith("|||||||"):
            opened.append(number)
        elif THEIRS.match(text) and any(lines[n - 1] == "=======" for n in opened):
            blocks.append([*opened, number])
            opened = None
    wanted = set(added)
    return sorted(n for block in blocks if wanted.intersection(block) for n in block if n in wanted)
