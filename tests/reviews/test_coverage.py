"""The coverage ledger: every file a change touches, reviewed (by what), excluded (by
which rule) or not reviewed (why) — from what the engine says, or, for a model engine,
from what it was shown and what it read."""

from __future__ import annotations

import json

from reviews.scope.compression import BUDGET
from reviews.scope.coverage import (
    EXCLUDED,
    NOT_REVIEWED,
    REVIEWED,
    Entry,
    carried,
    ledger,
    shortfall,
    title_part,
)
from reviews.scope.diff import diff_parse
from reviews.scope.filters import Filtered
from sandbox.contract import (
    FileCoverage,
    OmittedPart,
    ReviewJob,
    ReviewResult,
    TranscriptEntry,
)

DIFF = diff_parse(
    "diff --git a/a.py b/a.py\n--- a/a.py\n+++ b/a.py\n@@ -1 +1,2 @@\n x = 1\n+y = 2\n"
    "diff --git a/b.py b/b.py\n--- a/b.py\n+++ b/b.py\n@@ -1 +1,2 @@\n x = 1\n+y = 2\n"
    "diff --git a/c.py b/c.py\n--- a/c.py\n+++ b/c.py\n@@ -1 +1,2 @@\n x = 1\n+y = 2\n"
    "diff --git a/gone.py b/gone.py\ndeleted file mode 100644\n--- a/gone.py\n+++ /dev/null\n"
    "@@ -1 +0,0 @@\n-x = 1\n"
    "diff --git a/yarn.lock b/yarn.lock\n--- a/yarn.lock\n+++ b/yarn.lock\n@@ -1 +1,2 @@\n a\n+b\n"
)


def job(omitted=()) -> ReviewJob:
    return ReviewJob(
        job_id="1", repository="a/b", pull_request=1, base_sha="a" * 40, head_sha="b" * 40,
        changed_files=tuple(DIFF.get(p).changed_file() for p in ("a.py", "b.py", "c.py", "gone.py")),
        omitted=omitted,
    )  # fmt: skip


FILTERED = [Filtered("yarn.lock", "lock file", "yarn.lock")]


def test_a_model_engine_reviewed_what_it_was_shown_and_what_it_read_and_nothing_else():
    omitted = (
        OmittedPart(path="b.py", reason=BUDGET),
        OmittedPart(path="c.py", reason=BUDGET, hunks=("@@ -1 +1,2 @@",)),
        OmittedPart(path="gone.py", reason="file deleted"),
    )
    read = TranscriptEntry(kind="tool_call", name="read_file", content=json.dumps({"path": "b.py"}))
    result = ReviewResult(engine="anthropic", transcript=[read])
    entries = {e.path: e for e in ledger(DIFF, FILTERED, job=job(omitted), result=result)}
    assert (entries["a.py"].status, entries["a.py"].by) == (REVIEWED, ("anthropic",))
    assert (entries["b.py"].status, entries["b.py"].by) == (REVIEWED, ("anthropic",))  # read
    assert entries["c.py"].status == NOT_REVIEWED
    assert entries["c.py"].reason.startswith("1 of its hunks were not shown to the reviewer")
    assert (entries["gone.py"].status, entries["gone.py"].adds) == (REVIEWED, False)
    assert (entries["yarn.lock"].status, entries["yarn.lock"].rule) == (EXCLUDED, "yarn.lock")


def test_an_engine_that_says_what_read_each_file_is_taken_at_its_word():
    result = ReviewResult(engine="static", coverage=[
        FileCoverage(path="a.py", checkers=("ruff", "detect-secrets")),
        FileCoverage(path="b.py", checkers=("detect-secrets",), not_checked="no checker for Go"),
        FileCoverage(path="yarn.lock", checkers=("detect-secrets",)),
    ])  # fmt: skip
    entries = {e.path: e for e in ledger(DIFF, FILTERED, job=job(), result=result)}
    assert entries["a.py"].by == ("ruff", "detect-secrets")
    assert (entries["b.py"].status, entries["b.py"].reason) == (NOT_REVIEWED, "no checker for Go")
    # Given, but named by the engine in neither way: not reviewed, never assumed so.
    assert entries["c.py"].status == NOT_REVIEWED
    assert entries["yarn.lock"].by == ("detect-secrets",)  # excluded, secrets read all the same
    missing = [e for e in entries.values() if e.unreviewed]
    assert title_part(missing) == "2 files not reviewed"
    assert shortfall(missing).startswith("2 changed files were not reviewed — `b.py`: no checker")


def test_an_incremental_review_carries_what_the_last_one_did_not_review():
    earlier = [Entry("old.go", NOT_REVIEWED, reason="no checker for Go"),
               Entry("a.py", REVIEWED, by=("ruff",)), Entry("merged-away.go", NOT_REVIEWED)]  # fmt: skip
    result = ReviewResult(engine="static", coverage=[FileCoverage(path=p, checkers=("ruff",))
                                                     for p in ("a.py", "b.py", "c.py")])  # fmt: skip
    entries = ledger(DIFF, FILTERED, job=job(), result=result,
                     earlier=carried(earlier, "c" * 40),
                     pull_request_paths=["a.py", "old.go"])  # fmt: skip
    by_path = {e.path: e for e in entries}
    assert by_path["old.go"].unreviewed and by_path["old.go"].at == "c" * 40
    assert by_path["a.py"].at == ""  # reviewed again at this head
    assert "merged-away.go" not in by_path  # no longer part of the pull request
    assert title_part(entries) == "1 file not reviewed (no checker for Go)"
