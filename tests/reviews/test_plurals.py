"""What Tasuku writes of a count reads in English for one and for many (the texts are
ngettext's, so a translation could give each language its own plural forms)."""

from __future__ import annotations

import pytest

from repos.policy import EffectiveConfig, Engine, ReviewerConfig
from reviews.intake.admission import PullRequestFacts, admission_decide
from reviews.scope.diff import diff_parse
from reviews.scope.triage import triage_rule
from reviews.text.rendering import ReviewContext, check_output, review_body
from reviews.validation.findings import GateConfig, gate
from sandbox.contract import ReviewSummary

DIFF = diff_parse(
    "diff --git a/a.py b/a.py\n--- a/a.py\n+++ b/a.py\n@@ -1 +1,4 @@\n x = 1\n+y = 2\n+z = 3\n+w = 4\n"
    "diff --git a/b.py b/b.py\n--- a/b.py\n+++ b/b.py\n@@ -1 +1,2 @@\n x = 1\n+y = 2\n"
)


ADDED = [("a.py", 2), ("a.py", 3), ("a.py", 4), ("b.py", 2)]


def findings(n: int, *, same_line: bool = False, **config):
    # On lines of their own: findings on one line are one comment (see the last test).
    raw = [
        dict(path=ADDED[0 if same_line else i][0], start_line=ADDED[0 if same_line else i][1],
             end_line=ADDED[0 if same_line else i][1], severity="low", category=f"c{i}",
             title=f"T{i}", body="B")
        for i in range(n)
    ]  # fmt: skip
    return gate(raw, DIFF, GateConfig(**config))


def context(**values) -> ReviewContext:
    base = dict(
        run_id=9, reviewer="static", base_sha="a" * 40, head_sha="b" * 40,
        dashboard_url="http://t/runs/9/",
    )  # fmt: skip
    return ReviewContext(**{**base, **values})


SPAN = "`aaaaaaa…bbbbbbb`"


@pytest.mark.parametrize(("n", "word"), [(1, "finding"), (2, "findings")])
def test_the_review_body_counts_its_findings(n, word):
    body = review_body(ReviewSummary(), findings(n), context(), inline=findings(n))
    assert f"Reviewed {SPAN}: **{n} {word}**." in body


@pytest.mark.parametrize(("n", "files"), [(1, "file"), (2, "files")])
def test_the_review_body_counts_the_files_it_could_not_read(n, files):
    missing = tuple((f"big{i}.py", "larger than 8 MB") for i in range(n))
    body = review_body(ReviewSummary(), [], context(not_reviewed=missing))
    assert f"Reviewed {SPAN}: no problems found in the files it reviewed." in body
    verb = "was" if n == 1 else "were"
    assert f"**{n} changed {files} {verb} not reviewed** (see *Not reviewed* below)" in body


@pytest.mark.parametrize(
    ("n", "said"), [(1, "1 earlier finding is"), (2, "2 earlier findings are")]
)
def test_the_review_body_counts_the_earlier_findings_still_open(n, said):
    body = review_body(ReviewSummary(), [], context(still_open=n))
    assert f"{said} still open on this pull request (see their threads)." in body


@pytest.mark.parametrize(("n", "said"), [(1, "1 more finding was"), (2, "2 more findings were")])
def test_the_review_body_counts_the_findings_kept_off_the_pull_request(n, said):
    kept = findings(n + 1, comment_limit=1)
    published = [f for f in kept if f.published]
    assert len(published) == 1
    body = review_body(ReviewSummary(), kept, context(), inline=published)
    assert (
        f"{said} kept off the pull request (below the thresholds, duplicated or past the "
        "comment limit): [see them all](http://t/runs/9/)."
    ) in body


@pytest.mark.parametrize(("n", "word"), [(1, "finding"), (2, "findings")])
def test_the_check_runs_title_counts_the_open_findings(n, word):
    title, _ = check_output(findings(n), "success", None)
    assert title == f"{n} open {word} (worst: low)"


@pytest.mark.parametrize(("n", "files"), [(1, "file"), (2, "files")])
def test_the_check_runs_title_counts_the_files_not_read(n, files):
    from reviews.scope.coverage import NOT_REVIEWED, Entry

    ledger = [Entry(f"big{i}.py", NOT_REVIEWED, reason="larger than 8 MB") for i in range(n)]
    title, _ = check_output([], "neutral", None, ledger=ledger)
    assert (
        title
        == f"No problems found in what was reviewed · {n} {files} not reviewed (larger than 8 MB)"
    )


@pytest.mark.parametrize(("paths", "said"), [(["a.py"], "1 file"), (["a.py", "b.py"], "2 files")])
def test_triage_counts_the_files_with_code_changes(paths, said):
    assert triage_rule(DIFF, paths).summary == f"{said} with code changes."


@pytest.mark.parametrize(("n", "said"), [(1, "1 reviewer queued"), (2, "2 reviewers queued")])
def test_admission_counts_the_reviewers_it_queues(n, said):
    reviewers = tuple(ReviewerConfig(slug=f"r{i}", engine=Engine.STATIC) for i in range(n))
    decision = admission_decide(
        facts=PullRequestFacts(
            action="opened", draft=False, author_login="o", author_type="User", changed_files=1
        ),
        config=EffectiveConfig(reviewers=reviewers),
        installation_active=True,
        repository_enabled=True,
        repository_accessible=lambda: True,
    )
    assert decision.reason == said


@pytest.mark.parametrize(
    ("n", "said"),
    [(1, "**2 findings** (in 1 comment).\n1 of them is listed in the comment of the same "
         "problem, not commented on again."),
     (2, "**3 findings** (in 1 comment).\n2 of them are listed in the comments of the same "
         "problem, not commented on again.")],
)  # fmt: skip
def test_the_review_body_counts_the_findings_one_comment_stands_for(n, said):
    grouped = findings(n + 1, same_line=True)
    published = [f for f in grouped if f.published]
    assert len(published) == 1
    body = review_body(ReviewSummary(), grouped, context(), inline=published)
    assert f"Reviewed {SPAN}: {said}" in body
    assert "kept off the pull request" not in body


@pytest.mark.parametrize(("reviewed", "opened", "said"), [
    (1, 1, "1 file, 1 open finding."),
    (17, 1, "17 files, 1 open finding."),
    (1, 0, "1 file, 0 open findings."),
    (2, 3, "2 files, 3 open findings."),
])  # fmt: skip
def test_the_local_reports_summary_counts_files_and_findings_in_english(reviewed, opened, said):
    """`manage.py review` ended "Reviewed …: 17 files, 1 open findings"."""
    from reviews.local.reports import report_text

    review = {"base": "a" * 40, "head": "b" * 40, "incremental": False, "coverage": [],
              "reviewed": [f"f{i}.py" for i in range(reviewed)], "filtered": [],
              "validation": ""}  # fmt: skip
    finding = {"path": "f0.py", "start_line": 1, "end_line": 1, "severity": "low",
               "blocking": False, "title": "T", "body": "", "evidence": "",
               "suggestion": None, "state": "open"}  # fmt: skip
    text = report_text(review, [dict(finding) for _ in range(opened)])
    assert f"Reviewed aaaaaaa..bbbbbbb: {said}" in text.splitlines()
