"""Triage: is a pull request worth a deep review? (docs/reviews.md, *What a review does*)

The deterministic rule: a change is trivial when every file it touches is filtered out
(lock files, build output …), documentation, a whitespace-only change, a change to
comments only, or a version bump. Anything else is substantive. When in doubt:
substantive. Pure: the parsed diff in, a verdict out.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import PurePosixPath

from django.utils.translation import ngettext

from reviews.scope.diff import Diff, FileDiff

TRIVIAL = "trivial"
SUBSTANTIVE = "substantive"

DOC_SUFFIXES = (".md", ".markdown", ".rst", ".txt", ".adoc", ".asciidoc")
DOC_NAMES = {
    "license",
    "licence",
    "copying",
    "authors",
    "contributors",
    "changelog",
    "changes",
    "notice",
    "codeowners",
}
DOC_DIRS = {"docs", "doc", "documentation"}

COMMENT_PREFIXES: dict[str, tuple[str, ...]] = {
    "#": (".py", ".pyi", ".sh", ".bash", ".rb", ".yml", ".yaml", ".toml", ".cfg", ".ini", ".r", ".pl", ".tf", ".conf", ".dockerfile", ".ps1"),
    "//": (".js", ".jsx", ".ts", ".tsx", ".mjs", ".cjs", ".java", ".kt", ".kts", ".scala", ".go", ".rs", ".c", ".h", ".cc", ".cpp", ".hpp", ".cs", ".swift", ".php", ".dart"),
    "--": (".sql", ".lua", ".hs"),
}  # fmt: skip
# Lines of a C-style block comment: its opening, a `*` continuation, its closing alone.
BLOCK_COMMENT = re.compile(r"^(/\*.*|\*(\s.*)?|\*/)$")
VERSION_LINE = re.compile(
    r"""^\s*(
        "version"\s*:\s*"[^"]*",?                       # package.json, composer.json
      | version\s*=\s*["'][^"']*["']                    # pyproject, Cargo.toml, setup.cfg
      | __version__\s*=\s*["'][^"']*["']                # Python modules
      | VERSION\s*=\s*["'][^"']*["']
      | <version>[^<]*</version>                         # pom.xml
      | version:\s*\S+                                   # YAML charts, pubspec
      | version\s+["']?[\w.+-]+["']?                     # gemspec, build.gradle
    )\s*$""",
    re.VERBOSE,
)


@dataclass(frozen=True)
class Verdict:
    verdict: str  # trivial | substantive
    summary: str
    risk_areas: tuple[str, ...] = ()
    decided_by: str = "rule"
    reasons: dict[str, str] = field(default_factory=dict)  # path -> why it is trivial
    # A verdict by the reviewer's triage model: which, what it cost, and any note (why it
    # was not asked or its answer not taken).
    model: str = ""
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    note: str = ""

    @property
    def trivial(self) -> bool:
        return self.verdict == TRIVIAL

    def as_dict(self) -> dict[str, object]:
        return {
            "verdict": self.verdict,
            "summary": self.summary,
            "risk_areas": list(self.risk_areas),
            "decided_by": self.decided_by,
            **(
                {
                    "model": self.model,
                    "input_tokens": self.input_tokens,
                    "output_tokens": self.output_tokens,
                    "cost_usd": self.cost_usd,
                    "note": self.note,
                }
                if self.model
                else {}
            ),
        }


def _changed_lines(file: FileDiff) -> Iterator[str]:
    """Each added or removed line's text, stripped, as they come: a check that stops at
    the first line it refuses reads no further (a 9 MB generated file's first line)."""
    for hunk in file.hunks:
        for line in hunk.text.splitlines()[1:]:
            if line[:1] in ("+", "-"):
                yield line[1:].strip()


def _every(lines: Iterator[str], test) -> bool:  # type: ignore[no-untyped-def]
    """At least one line, and `test` true of each (stopping at the first it is not)."""
    seen = False
    for line in lines:
        if not test(line):
            return False
        seen = True
    return seen


def _is_docs(path: str) -> bool:
    """Documentation by its suffix; or a LICENSE/CHANGES-like name, or a file in a docs
    folder, with no suffix or a documentation one — never code (`changes.py` and
    `docs/deploy.py` are code)."""
    pure = PurePosixPath(path)
    suffix = pure.suffix.lower()
    if suffix in DOC_SUFFIXES:
        return True
    if suffix:
        return False
    if pure.stem.lower() in DOC_NAMES:
        return True
    return bool(set(p.lower() for p in pure.parts[:-1]) & DOC_DIRS)


def _comments_only(file: FileDiff) -> bool:
    suffix = PurePosixPath(file.path).suffix.lower()
    prefixes = tuple(prefix for prefix, suffixes in COMMENT_PREFIXES.items() if suffix in suffixes)
    if not prefixes:
        return False
    block = "//" in prefixes  # the languages whose comments are `//` also have `/* */`
    return _every(
        _changed_lines(file),
        lambda line: (
            not line or line.startswith(prefixes) or bool(block and BLOCK_COMMENT.match(line))
        ),
    )


def _version_bump(file: FileDiff) -> bool:
    lines = (line for line in _changed_lines(file) if line)
    return _every(lines, lambda line: bool(VERSION_LINE.match(line)))


def triage_rule(diff: Diff, reviewed: Iterable[str]) -> Verdict:
    """The deterministic verdict over the files left after filtering."""
    reviewed = list(reviewed)
    if not diff.files:
        return Verdict(TRIVIAL, "Nothing changed between the base and the head.")
    if not reviewed:
        return Verdict(
            TRIVIAL,
            "Only files that are not reviewed changed (lock files, generated or binary files).",
        )
    reasons: dict[str, str] = {}
    substantive: list[FileDiff] = []
    for path in reviewed:
        file = diff.get(path)
        if file is None:
            continue
        if _is_docs(path):
            reasons[path] = "documentation"
        elif file.whitespace_only:
            reasons[path] = "whitespace only"
        elif file.status != "deleted" and _comments_only(file):
            reasons[path] = "comments only"
        elif _version_bump(file):
            reasons[path] = "version bump"
        else:
            substantive.append(file)
    if substantive:
        risky = sorted(substantive, key=lambda f: (-(f.added_count + f.removed_count), f.path))
        return Verdict(
            SUBSTANTIVE,
            ngettext(
                "%(count)d file with code changes.",
                "%(count)d files with code changes.",
                len(substantive),
            )
            % {"count": len(substantive)},
            tuple(f.path for f in risky[:10]),
            reasons=reasons,
        )
    kinds = sorted(set(reasons.values()))
    return Verdict(TRIVIAL, "Low risk: " + ", ".join(kinds) + ".", reasons=reasons)
