from reviews.scope.diff import diff_parse
from reviews.text.rendering import (
    ReviewContext,
    check_conclusion,
    comment_body,
    comment_payload,
    fence_for,
    markers_in,
    review_body,
    run_marker,
)
from reviews.validation.findings import GateConfig, gate
from sandbox.contract import ReviewSummary, Severity

DIFF = diff_parse(
    "diff --git a/a.py b/a.py\n--- a/a.py\n+++ b/a.py\n@@ -1 +1,4 @@\n x = 1\n+y = 2\n+z = 3\n+w = 4\n"
)


def findings(**extra):
    base = dict(
        path="a.py", start_line=2, end_line=2, severity="high", category="bug", title="T", body="B"
    )
    return gate([{**base, **extra}], DIFF, GateConfig())


def test_a_single_line_comment_has_no_start_line():
    [finding] = findings()
    payload = comment_payload(finding)
    assert (payload["path"], payload["line"], payload["side"]) == ("a.py", 2, "RIGHT")
    assert "start_line" not in payload and "position" not in payload


def test_a_range_comment_anchors_start_and_end():
    [finding] = findings(start_line=2, end_line=4)
    payload = comment_payload(finding)
    assert (payload["start_line"], payload["line"], payload["start_side"]) == (2, 4, "RIGHT")


def test_every_comment_carries_its_fingerprint_marker():
    [finding] = findings()
    assert markers_in([comment_body(finding)]) == {finding.fingerprint}


def test_a_suggestion_is_a_suggestion_block_with_a_fence_longer_than_its_backticks():
    [finding] = findings(suggestion="s = '```'")
    body = comment_body(finding)
    assert "````suggestion\ns = '```'\n````" in body
    assert fence_for("no ticks") == "```"


def test_a_suggestion_that_cannot_apply_is_shown_as_plain_code():
    [finding] = findings(start_line=1, end_line=2, suggestion="fixed")
    body = comment_body(finding)
    assert "```suggestion" not in body and "Suggested fix:" in body


def test_the_review_body_carries_the_run_marker_and_stays_under_githubs_limit():
    many = gate(
        [dict(path="a.py", start_line=2, end_line=2, severity="low", category=f"c{i}", title="x" * 150, body="y" * 7000)
         for i in range(40)],
        DIFF, GateConfig(comment_limit=100),
    )  # fmt: skip
    context = ReviewContext(
        run_id=9,
        reviewer="static",
        base_sha="a" * 40,
        head_sha="b" * 40,
        dashboard_url="http://t/runs/9/",
    )
    body = review_body(ReviewSummary(), many, context, inline=many, body_only=True)
    assert len(body.encode()) <= 65_536  # GitHub's limit, counted in bytes
    assert body.endswith(run_marker(9))


def test_the_check_fails_only_while_an_open_finding_reaches_the_threshold():
    [high] = findings(severity="high")
    [low] = findings(severity="low")
    assert check_conclusion([high], Severity.HIGH) == "failure"
    assert check_conclusion([low], Severity.HIGH) == "success"
    assert check_conclusion([high], None) == "success"
    assert check_conclusion([], Severity.INFO) == "success"


def test_bodies_and_summaries_fit_githubs_limits_in_bytes_with_multibyte_text():
    from reviews.text.rendering import MAX_SUMMARY_BYTES, check_output, clip_bytes

    text = "漢字" * 40_000  # 240,000 bytes of UTF-8 in 80,000 characters
    clipped = clip_bytes(text, 65_535)
    assert len(clipped.encode()) <= 65_535
    assert clipped.endswith("(cut to fit GitHub's limit)")
    assert clip_bytes("short", 10) == "short"
    assert len(clip_bytes("é" * 50, 60).encode()) <= 60  # cut on a character boundary
    _, summary = check_output(
        [], "neutral", "high", shortfall="not in full", limitations=["é" * 70_000]
    )
    assert len(summary.encode()) <= MAX_SUMMARY_BYTES
