"""The `static` engine: the offline default reviewer.

Deterministic and network-free: ruff (pyflakes, bugbear, bandit-derived rules, syntax
errors), detect-secrets, shellcheck, and diff-hygiene checks of its own. Only problems
on lines the pull request added are reported: what the base already had is not the
author's. Severity mapping: README, "The static reviewer".
"""

from __future__ import annotations

from pathlib import Path

from sandbox.contract import ReviewJob, ReviewResult, ReviewSummary
from sandbox.engines.static import hygiene, ruff, secrets, shellcheck
from sandbox.engines.static.common import targets

CHECKERS = (
    ("Python (ruff: pyflakes, bugbear, bandit rules, syntax)", ruff.check),
    ("Shell scripts (shellcheck)", shellcheck.check),
    ("Secrets (detect-secrets)", secrets.check),
    ("Diff hygiene (conflict markers, private keys, debugger breakpoints)", hygiene.check),
)


def review(job: ReviewJob, root: Path) -> ReviewResult:
    files = targets(root, job.changed_files)
    findings = []
    areas, versions = [], []
    for area, check in CHECKERS:
        found, version = check(root, files)
        if version:
            areas.append(area)
            versions.append(version)
        findings.extend(found)
    important = sorted({f.path for f in findings})
    checked = len(files)
    limitations = [
        "Static analysis only: logic, design and intent are not reviewed.",
    ]
    skipped = [f.path for f in job.changed_files if f.status == "deleted" or f.binary]
    if skipped:
        limitations.append(f"{len(skipped)} deleted or binary files were not checked.")
    return ReviewResult(
        engine="static",
        findings=[f.model_dump(mode="json") for f in findings],
        summary=ReviewSummary(
            inspected_areas=areas,
            important_files=important[:20],
            validation=(
                f"Checked the added lines of {checked} changed files with "
                + ", ".join(versions)
                + "."
            ),
            context_sources=["the checkout at the pull request's head"],
            confidence=0.9,
            limitations=limitations,
        ),
    )
