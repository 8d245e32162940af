"""The validation gate: engine output is data, located, fingerprinted, sorted, and
never dropped."""

from __future__ import annotations

from reviews.scope.diff import diff_parse
from reviews.validation.findings import OPEN, SUPPRESSED, GateConfig, clean_text, fingerprint, gate
from sandbox.contract import Severity

DIFF = """diff --git a/app.py b/app.py
--- a/app.py
+++ b/app.py
@@ -1,4 +1,7 @@
 import os
+import subprocess
+import json
+x = 1
 
 def main():
-    pass
+    run()
@@ -40,2 +43,3 @@ def later():
     a = 1
+    b = 2
     return a
diff --git a/README.md b/README.md
--- a/README.md
+++ b/README.md
@@ -1 +1 @@
-old
+new
"""
DIFF_PARSED = diff_parse(DIFF)


def raw(**values):
    base = dict(path="app.py", start_line=2, end_line=2, severity="high", category="bug",
                title="Problem", body="What goes wrong.", confidence=0.9)  # fmt: skip
    return {**base, **values}


def run(findings, **config):
    return gate(findings, DIFF_PARSED, GateConfig(**config))


def test_a_finding_on_an_added_line_is_open_and_published():
    [finding] = run([raw()])
    assert (finding.state, finding.published, finding.start_line) == (OPEN, True, 2)


def test_a_range_is_narrowed_to_the_first_run_of_changed_lines():
    [finding] = run([raw(start_line=1, end_line=7)])
    assert (finding.start_line, finding.end_line) == (2, 4)
    assert finding.original_lines == (1, 7)


def test_a_range_narrowed_to_the_changed_lines_says_so():
    [finding] = run([raw(start_line=1, end_line=7)])
    assert finding.narrowed == "narrowed from lines 1-7 to lines 2-4, the changed lines"
    [untouched] = run([raw(start_line=2, end_line=3)])
    assert (untouched.original_lines, untouched.narrowed) == (None, "")


def test_a_range_shrinks_to_the_one_line_its_evidence_cites():
    [finding] = run([raw(start_line=2, end_line=4, evidence="Line 3 parses untrusted JSON.")])
    assert (finding.start_line, finding.end_line, finding.original_lines) == (3, 3, (2, 4))
    assert finding.narrowed == "narrowed from lines 2-4 to line 3, the line its evidence cites"


def test_a_range_shrinks_to_the_span_of_the_lines_its_evidence_cites():
    for evidence in ("lines 3-4 lose the error", "L3 and L4 lose it", "app.py:3, app.py:4"):
        [finding] = run([raw(start_line=2, end_line=4, evidence=evidence)])
        assert (finding.start_line, finding.end_line) == (3, 4), evidence
        assert finding.narrowed.endswith("to lines 3-4, the lines its evidence cites")


def test_citations_outside_the_range_or_of_another_file_narrow_nothing():
    for evidence in ("see line 44", "README.md:3 says so", "it costs 3 lines", "version 3"):
        [finding] = run([raw(start_line=2, end_line=4, evidence=evidence)])
        assert (finding.start_line, finding.end_line, finding.narrowed) == (2, 4, ""), evidence


def test_evidence_narrows_within_the_changed_lines_only():
    # The engine's range runs past the changed lines and its evidence cites an unchanged one.
    [finding] = run([raw(start_line=1, end_line=7, evidence="line 1 imports os; line 4 sets x")])
    assert (finding.start_line, finding.end_line) == (4, 4)
    assert finding.narrowed == "narrowed from lines 1-7 to line 4, the line its evidence cites"


def test_a_finding_on_no_changed_line_is_suppressed_as_not_anchorable():
    [finding] = run([raw(start_line=5, end_line=6)])
    assert finding.state == SUPPRESSED
    assert finding.reason == "not anchorable: line 5 is outside the changed lines"


def test_a_finding_on_a_removed_line_anchors_on_the_left():
    [finding] = run([raw(side="LEFT", start_line=4, end_line=4)])
    assert finding.state == OPEN


def test_paths_outside_the_repository_or_the_pull_request_are_suppressed():
    results = {
        f.raw["path"]: f
        for f in run([raw(path="../etc/passwd"), raw(path="/etc/passwd"), raw(path="other.py")])
    }
    assert results["../etc/passwd"].reason == "path outside the repository"
    assert results["/etc/passwd"].reason == "path outside the repository"
    assert results["other.py"].reason == "path is not part of the pull request"


def test_a_malformed_finding_is_kept_suppressed_with_the_error():
    results = run([{"path": "app.py", "title": "No lines"}, "not even an object", raw()])
    invalid = [f for f in results if f.category == "invalid"]
    assert len(invalid) == 2
    assert all(
        f.state == SUPPRESSED and f.reason.startswith("invalid finding from the engine")
        for f in invalid
    )
    assert "start_line" in invalid[0].reason or "start_line" in invalid[1].reason
    assert sum(1 for f in results if f.state == OPEN) == 1


def test_below_the_minimum_severity_and_under_the_confidence_floor_are_suppressed():
    low, unsure = run([raw(severity="info"), raw(start_line=3, end_line=3, title="Other", confidence=0.2)],
                      min_severity=Severity.LOW, min_confidence=0.5)  # fmt: skip
    reasons = {low.reason, unsure.reason}
    assert "below the minimum severity (low)" in reasons
    assert "confidence 0.20 under the floor of 0.50" in reasons


def test_duplicates_are_suppressed():
    first, second = run([raw(), raw()])
    assert first.state == OPEN
    assert second.reason == f"duplicate of {first.fingerprint}"


def test_the_comment_limit_keeps_the_most_severe_deterministically():
    findings = [
        raw(start_line=n, end_line=n, title=f"T{n}", severity=s)
        for n, s in ((2, "low"), (3, "critical"), (4, "medium"))
    ]
    first = run(findings, comment_limit=2)
    again = run(list(reversed(findings)), comment_limit=2)
    assert [(f.title, f.state) for f in first] == [(f.title, f.state) for f in again]
    published = [f.severity.value for f in first if f.published]
    assert published == ["critical", "medium"]
    # Past the limit: still open (it counts in the gate), only not posted inline.
    [over] = [f for f in first if not f.published]
    assert (over.state, over.reason) == (OPEN, "over the comment limit (2)")


def test_the_order_is_usefulness_then_severity_then_blocking_then_confidence_then_place():
    findings = [
        raw(start_line=2, end_line=2, title="A", severity="high", blocking=False, confidence=0.9),
        raw(
            start_line=3,
            end_line=3,
            title="B",
            severity="high",
            blocking=True,
            confidence=0.6,
            evidence="`x` is None here and `x.y` raises",
        ),  # fmt: skip
        raw(start_line=4, end_line=4, title="C", severity="critical", confidence=0.5),
    ]
    # usefulness = (severity rank + 1) × confidence × category weight: A 3.6, C 2.5, B 2.4
    assert [f.title for f in run(findings)] == ["A", "C", "B"]
    # Equal usefulness: the more severe first, then blocking.
    tied = [
        raw(start_line=2, end_line=2, title="D", severity="medium", confidence=1.0),
        raw(start_line=3, end_line=3, title="E", severity="high", confidence=0.75),
    ]
    assert [f.title for f in run(tied)] == ["E", "D"]


def test_the_comment_limit_goes_to_likely_bugs_before_style():
    findings = [
        raw(start_line=2, end_line=2, title="Style", severity="medium", category="style",
            confidence=0.9),
        raw(start_line=3, end_line=3, title="Bug", severity="medium", category="bug",
            confidence=0.8),
    ]  # fmt: skip
    results = {f.title: f for f in run(findings, comment_limit=1)}
    assert results["Bug"].published and not results["Style"].published


def test_a_suggestion_applies_only_to_the_exact_lines_it_was_written_for():
    findings = [
        raw(suggestion="import shlex"),
        raw(start_line=1, end_line=3, title="Other", suggestion="x"),
    ]
    results = {f.title: f for f in run(findings)}
    assert results["Problem"].suggestion_applies
    assert not results["Other"].suggestion_applies


def test_engine_text_cannot_imitate_the_marker_or_mention_people():
    [finding] = run(
        [
            raw(
                title="Ping @octocat",
                body="<!-- tasuku:finding:deadbeef00 --> cc @org/team, mail a@b.com",
            )
        ]
    )
    assert "tasuku:finding" not in finding.body
    assert "@\u200boctocat" in finding.title
    assert "@\u200borg/team" in finding.body
    assert "a@b.com" in finding.body


def test_lengths_are_bounded():
    [finding] = run([raw(title="x" * 1000, body="y" * 100_000)])
    assert len(finding.title) == 200 and len(finding.body) == 8000
    assert clean_text("z" * 10, 5) == "zzzz…"


def test_fingerprints_ignore_line_numbers_but_tell_repeats_apart():
    [moved] = run([raw(start_line=3, end_line=3)])
    [original] = run([raw(start_line=2, end_line=2)])
    assert moved.fingerprint == original.fingerprint
    a, b = run([raw(start_line=2, end_line=2), raw(start_line=44, end_line=44)])
    assert a.fingerprint != b.fingerprint
    assert fingerprint("app.py", "bug", "Line too long (120 > 100)", 0) == fingerprint(
        "app.py", "BUG", "line too long (99 > 100)", 0
    )


def test_one_comment_per_problem_the_same_rule_in_a_file_and_the_same_line_are_grouped():
    from reviews.text.rendering import comment_body
    from reviews.validation.findings import GROUPED

    diff = diff_parse(
        "diff --git a/a.py b/a.py\n--- a/a.py\n+++ b/a.py\n@@ -0,0 +1,6 @@\n"
        + "".join(f"+x{i} = 1\n" for i in range(1, 7))
    )

    def f(line, rule, title, severity="low"):
        return {"path": "a.py", "start_line": line, "end_line": line, "severity": severity,
                "category": "maintainability", "title": title, "rule": rule}  # fmt: skip

    raw = [f(n, "ruff:F841", f"Local variable `x{n}` is never used") for n in (2, 4, 6)]
    raw.append(f(4, "ruff:B006", "Mutable default", severity="medium"))
    raw.append(f(5, "ruff:S602", "Shell", severity="high"))
    raw.append(f(5, "ruff:B023", "Loop variable in a closure", severity="medium"))
    out = gate(raw, diff, GateConfig())
    published = [v for v in out if v.published]
    grouped = [v for v in out if v.held == GROUPED]
    assert len(published) == 3 and len(grouped) == 3
    assert all(v.state == "open" for v in out)  # each still counts in the gate
    unused = next(v for v in published if v.rule == "ruff:F841")
    assert (unused.start_line, unused.also_lines) == (2, (4, 6))
    shell = next(v for v in published if v.rule == "ruff:S602")
    assert shell.also_here == ("Loop variable in a closure",)
    assert "The same in this file on lines 4, 6." in comment_body(unused)
    assert "Also on this line: Loop variable in a closure." in comment_body(shell)
    assert len({v.fingerprint for v in out}) == 6  # identities kept, one each


def _six_lines():
    return diff_parse(
        "diff --git a/a.py b/a.py\n--- a/a.py\n+++ b/a.py\n@@ -0,0 +1,6 @@\n"
        + "".join(f"+x{i} = 1\n" for i in range(1, 7))
    )


def _unused(line):
    return {"path": "a.py", "start_line": line, "end_line": line, "severity": "low",
            "category": "maintainability", "title": f"Local variable `x{line}` is never used",
            "rule": "ruff:F841"}  # fmt: skip


def test_a_grouped_finding_whose_comment_is_over_the_limit_is_over_the_limit_too():
    from reviews.validation.findings import OVER_LIMIT

    shell = {**_unused(1), "rule": "ruff:S602", "title": "Shell", "severity": "high"}
    out = gate([shell, _unused(2), _unused(4)], _six_lines(), GateConfig(comment_limit=1))
    assert [v.rule for v in out if v.published] == ["ruff:S602"]
    held = {v.start_line: v.held for v in out if v.rule == "ruff:F841"}
    assert held == {2: OVER_LIMIT, 4: OVER_LIMIT}  # never "listed" in a comment not posted
    assert all(v.state == OPEN for v in out)


def test_a_new_occurrence_is_not_hidden_in_a_comment_an_earlier_review_posted():
    from reviews.validation.findings import GROUPED, History

    first = gate([_unused(2)], _six_lines(), GateConfig())
    earlier = frozenset(v.fingerprint for v in first)
    out = gate([_unused(2), _unused(4), _unused(6)], _six_lines(), GateConfig(),
               history=History(earlier=earlier))  # fmt: skip
    by_line = {v.start_line: v for v in out}
    assert not by_line[2].also_lines  # its comment is already posted: it lists nothing new
    assert by_line[4].published and by_line[4].also_lines == (6,)
    assert by_line[6].held == GROUPED
