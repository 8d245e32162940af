"""The `static` engine: the offline default reviewer.

Deterministic and network-free: ruff (pyflakes, bugbear, bandit-derived rules, syntax
errors), detect-secrets, shellcheck, and diff-hygiene checks of its own. Only problems
on lines the pull request added are reported: what the base already had is not the
author's. Severity mapping: README, "The static reviewer".
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from sandbox.contract import MAX_FINDINGS, ReviewJob, ReviewResult, ReviewSummary
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
    # The checkers are independent (two are external programs): run them side by side.
    with ThreadPoolExecutor(max_workers=len(CHECKERS)) as pool:
        outcomes = list(pool.map(lambda checker: checker[1](root, files), CHECKERS))
    for (area, _), (found, version) in zip(CHECKERS, outcomes, strict=True):
        if version:
            areas.append(area)
            versions.append(version)
        findings.extend(found)
    dropped = 0
    if len(findings) > MAX_FINDINGS:
        # Keep the most severe; the contract bounds what one review may return.
        findings.sort(key=lambda f: (-f.severity.rank, f.path, f.start_line))
        dropped = len(findings) - MAX_FINDINGS
        findings = findings[:MAX_FINDINGS]
    important = sorted({f.path for f in findings})
    checked = len(files)
    limitations = [
        "Static analysis only: logic, design and intent are not reviewed.",
    ]
    skipped = [f.path for f in job.changed_files if f.status == "deleted" or f.binary]
    if skipped:
        limitations.append(f"{len(skipped)} deleted or binary files were not checked.")
    if dropped:
        limitations.append(
            f"{dropped} more findings of lower severity were left out (at most {MAX_FINDINGS} per review)."
        )
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
