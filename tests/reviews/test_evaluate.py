"""`manage.py evaluate`: the static reviewer replayed over a history the test builds, with
known outcomes — a comment its author addressed in the next push, one that survived to the
merge and was changed on the default branch right after, one that survived untouched;
and bug fixes put back, caught or missed, with what else was said."""

from __future__ import annotations

import io
import json
from decimal import Decimal
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from repos.models import Reviewer
from reviews.evaluation.replay import (
    ADDRESSED,
    CHANGED_AFTER_MERGE,
    SURVIVED,
    _moved,
    _touched,
    bug_fixes,
    pull_histories,
)
from reviews.models import Evaluation, EvaluationGrade, EvaluationStatus, PullRequest, ReviewRun
from tests.gitlocal import commit, git, repo_init

pytestmark = pytest.mark.django_db

LIB_FIRST = "import os\n\n\ndef g():\n    unused = 5\n    return 2\n"
LIB_FIXED = "def g():\n    unused = 5\n    return 2\n"  # `import os` gone; `unused` stays
LIB_AFTER = "def g():\n    return 2\n"  # fixed on main after the merge


@pytest.fixture
def history(tmp_path) -> dict[str, str | Path]:
    repo = tmp_path / "project"
    repo_init(repo)
    shas: dict[str, str | Path] = {"repo": repo}
    shas["base"] = commit(repo, {"app.py": "def f():\n    return 1\n"}, "base")
    git(repo, "checkout", "-q", "-b", "one")
    shas["h1"] = commit(repo, {"lib.py": LIB_FIRST}, "add lib")
    shas["h2"] = commit(repo, {"lib.py": LIB_FIXED}, "review: drop the unused import")
    git(repo, "checkout", "-q", "main")
    git(repo, "merge", "-q", "--no-ff", "-m", "Merge pull request #1 from one", "one")
    shas["m1"] = git(repo, "rev-parse", "HEAD")
    shas["fix"] = commit(repo, {"lib.py": LIB_AFTER}, "drop the unused variable")
    git(repo, "checkout", "-q", "-b", "two")
    shas["h3"] = commit(repo, {"more.py": "import sys\n\nprint(1)\n"}, "add more")
    git(repo, "checkout", "-q", "main")
    git(repo, "merge", "-q", "--no-ff", "-m", "Merge pull request #2 from two", "two")
    shas["m2"] = git(repo, "rev-parse", "HEAD")
    return shas


def evaluate(repo: Path, *args: str) -> str:
    out = io.StringIO()
    call_command("evaluate", "--repo", str(repo), *args, stdout=out)
    return out.getvalue()


def test_pull_requests_come_from_history_with_every_head_they_had(history):
    found = pull_histories(history["repo"], 10)
    assert [(h.merge, h.base, h.heads) for h in found] == [
        (history["m2"], history["fix"], [history["h3"]]),
        (history["fix"], history["m1"], [history["fix"]]),  # a commit of its own: a squash merge
        (history["m1"], history["base"], [history["h1"], history["h2"]]),
    ]
    # The first heads and the merged one, when there are more than asked for.
    assert pull_histories(history["repo"], 1, skip=2, max_heads=1)[0].heads == [history["h2"]]


def test_each_comment_is_scored_by_what_the_authors_did_next(history):
    data = json.loads(evaluate(history["repo"], "--skip", "0", "--count", "3", "--format", "json"))
    (static,) = data["reviewers"]
    outcomes = {
        (c["path"], c["rule"], c["head"]): (c["outcome"], c["decided_by"])
        for c in static["comment_list"]
    }
    assert outcomes == {
        # Addressed by the author's next push.
        ("lib.py", "ruff:F401", history["h1"]): (ADDRESSED, history["h2"]),
        # Merged as commented, then changed on main by the next commit.
        ("lib.py", "ruff:F841", history["h1"]): (CHANGED_AFTER_MERGE, history["fix"]),
        # Merged as commented, and nothing touched it since.
        ("more.py", "ruff:F401", history["h3"]): (SURVIVED, ""),
    }
    assert static["reviews"] == 4 and static["failed_reviews"] == 0
    assert static["outcomes"] == {
        ADDRESSED: 1,
        SURVIVED: 1,
        CHANGED_AFTER_MERGE: 1,
        "not scored": 0,
    }
    assert static["addressed_rate"] == pytest.approx(1 / 3, abs=0.001)
    assert static["comments_per_pull_request"] == 1.0
    assert static["coverage"] == 1.0


def test_the_text_report_shows_the_figures_and_every_comment_by_rule(history):
    out = evaluate(history["repo"], "--count", "3")
    assert "Evaluated on 3 merged pull requests" in out
    assert "ruff:F401 (2)" in out and "ruff:F841 (1)" in out
    assert f"addressed at {history['h2'][:8]}: lib.py:1 (head 1" in out
    assert "survived: more.py:1" in out


def test_nothing_is_posted_and_no_branch_of_the_user_is_touched(history):
    evaluate(history["repo"], "--count", "1")
    pulls = PullRequest.objects.all()
    assert [p.head_ref for p in pulls] == [f"evaluate/static/{history['m2'][:12]}"]
    assert pulls[0].repository.installation.account_type == "Local"
    assert ReviewRun.objects.count() == 1


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--reviewer", "nobody"], "no enabled reviewer named 'nobody'"),
        (["--count", "0"], "invalid positive int value"),
    ],
)
def test_bad_arguments_are_clear_errors(history, args, said):
    with pytest.raises((CommandError, SystemExit)) as raised:
        evaluate(history["repo"], *args)
    if raised.type is CommandError:
        assert said in str(raised.value)


def test_a_repository_without_merged_history_is_said_plainly(tmp_path):
    with pytest.raises(CommandError, match="not a directory"):
        evaluate(tmp_path / "nowhere")
    repo = tmp_path / "empty"
    repo_init(repo)
    commit(repo, {"a.py": "x = 1\n"}, "root only")
    with pytest.raises(CommandError, match="no merged pull request"):
        evaluate(repo)


def test_lines_are_followed_through_the_changes_around_them():
    # old 3..4 replaced by 2 new lines at 3; 1 line added after old 10
    hunks = [(3, 2, 3, 2), (10, 0, 11, 1)]
    assert _touched(hunks, 4, 4) and _touched(hunks, 1, 3)
    assert not _touched(hunks, 5, 9)
    assert _touched(hunks, 9, 12)  # a line added inside the range
    assert not _touched(hunks, 10, 10)  # added after it, not inside
    assert _moved([(1, 0, 2, 3)], 5) == 8  # three lines added above
    assert _moved([(2, 2, 2, 0)], 5) == 3  # two removed above


@pytest.fixture
def fixes(tmp_path) -> dict[str, str | Path]:
    """A history with two bug fixes of one line each — one whose bug the static reviewer
    can see (an undefined name), one it cannot (a wrong sign) — and commits that are no
    bug's fix: a feature, a fix of tests alone, a fix that only adds."""
    repo = tmp_path / "fixes"
    repo_init(repo)
    shas: dict[str, str | Path] = {"repo": repo}
    commit(
        repo,
        {"calc.py": "def total(xs):\n    return summ(xs)\n\n\ndef diff(a, b):\n    return a + b\n"},
        "calc",
    )
    shas["named"] = commit(
        repo,
        {"calc.py": "def total(xs):\n    return sum(xs)\n\n\ndef diff(a, b):\n    return a + b\n"},
        "Fix total: it called an undefined name",
    )
    shas["sign"] = commit(
        repo,
        {"calc.py": "def total(xs):\n    return sum(xs)\n\n\ndef diff(a, b):\n    return a - b\n"},
        "fix(diff): subtract, do not add (#12)",
    )
    commit(repo, {"tests/test_calc.py": "def test():\n    assert True\n"}, "add a test")
    commit(
        repo, {"tests/test_calc.py": "def test():\n    assert 1\n"}, "fix the test"
    )  # tests alone
    commit(repo, {"NOTES.md": "fixed things\n"}, "fix: notes")  # only adds
    commit(repo, {"more.py": "X = 1\n"}, "a feature")
    return shas


def test_fix_commits_of_one_bugs_size_are_found(fixes):
    found = bug_fixes(fixes["repo"], 10)
    assert [f.fix for f in found] == [fixes["sign"], fixes["named"]]


def test_a_put_back_bug_is_caught_or_missed_and_the_repository_is_never_written(fixes):
    repo = fixes["repo"]
    objects_before = git(repo, "count-objects", "-v")
    data = json.loads(evaluate(repo, "--bug-fixes", "5", "--format", "json"))
    (static,) = data["reviewers"]
    cases = {c["fix"]: c for c in static["cases"]}
    assert cases[fixes["named"]]["caught"]
    assert [c["rule"] for c in cases[fixes["named"]]["on_the_bug"]] == ["ruff:F821"]
    assert cases[fixes["named"]]["bug_lines"] == {"calc.py": [2]}
    assert not cases[fixes["sign"]]["caught"]  # a wrong sign is no linter's
    assert (static["bug_fixes"], static["caught"], static["catch_rate"]) == (2, 1, 0.5)
    assert static["other_comments"] == 0 and static["comments_per_caught_bug"] == 1.0
    assert git(repo, "count-objects", "-v") == objects_before


def test_the_bug_report_says_caught_and_missed(fixes):
    out = evaluate(fixes["repo"], "--bug-fixes", "5")
    assert f"caught: {fixes['named'][:8]} Fix total" in out
    assert f"missed: {fixes['sign'][:8]} fix(diff)" in out
    assert "on the bug: calc.py:2 ruff:F821" in out


def test_a_stopped_evaluation_goes_on_where_it_stopped(history, monkeypatch):
    from reviews.evaluation import replay as evaluation

    reviewed = []
    real = evaluation.review_execute

    def counting(pull_request, reviewer, base, head, forge):
        reviewed.append(head)
        if len(reviewed) == 2:
            raise KeyboardInterrupt  # the process killed between two reviews
        return real(pull_request, reviewer, base, head, forge)

    monkeypatch.setattr(evaluation, "review_execute", counting)
    with pytest.raises(KeyboardInterrupt):
        evaluate(history["repo"], "--count", "3", "--name", "trial")
    assert reviewed == [history["h3"], history["fix"]]
    record = Evaluation.objects.get(name="trial")
    assert record.status == EvaluationStatus.RUNNING and record.items.count() == 1

    monkeypatch.setattr(
        evaluation, "review_execute", lambda *a: (reviewed.append(a[3]), real(*a))[1]
    )
    data = json.loads(
        evaluate(history["repo"], "--count", "3", "--name", "trial", "--format", "json")
    )
    # The first head was not reviewed again; the rest were, once each.
    assert reviewed[2:] == [history["fix"], history["h1"], history["h2"]]
    assert data["reviewers"][0]["reviews"] == 4
    assert len(data["reviewers"][0]["comment_list"]) == 3
    assert Evaluation.objects.get(name="trial").status == EvaluationStatus.DONE

    with pytest.raises(CommandError, match="is done"):
        evaluate(history["repo"], "--count", "3", "--name", "trial")


def test_resuming_with_other_settings_is_refused(history):
    evaluate(history["repo"], "--count", "1", "--name", "one", "--time-limit", "0.000001")
    assert Evaluation.objects.get(name="one").status == EvaluationStatus.STOPPED
    with pytest.raises(CommandError, match=r"other settings \(count\)"):
        evaluate(history["repo"], "--count", "2", "--name", "one")


def test_grades_people_give_are_folded_into_the_next_report(history):
    first = json.loads(evaluate(history["repo"], "--count", "3", "--format", "json"))
    assert first["reviewers"][0]["precision"] is None
    root = str(Path(history["repo"]).resolve())
    EvaluationGrade.objects.create(repository_path=root, head=history["h1"], path="lib.py",
                                   line=1, rule="ruff:F401", grade="useful")  # fmt: skip
    EvaluationGrade.objects.create(repository_path=root, head=history["h3"], path="more.py",
                                   line=1, rule="ruff:F401", grade="noise")  # fmt: skip
    again = json.loads(evaluate(history["repo"], "--count", "3", "--format", "json"))
    static = again["reviewers"][0]
    assert static["grades"] == {"useful": 1, "noise": 1} and static["precision"] == 0.5


def test_two_reviewers_side_by_side_say_what_each_said_alone(history):
    Reviewer.objects.create(slug="static-too", engine="static")
    out = evaluate(
        history["repo"], "--count", "3", "--reviewer", "static", "--reviewer", "static-too"
    )
    assert "only static: 0 comments (0 addressed), 3 where another reviewer commented too" in out
    assert "only static-too: 0 comments" in out


def test_the_dashboard_shows_an_evaluation_lets_a_person_grade_and_exports_it(
    history, admin_client
):
    evaluate(history["repo"], "--count", "3", "--name", "shown")
    record = Evaluation.objects.get(name="shown")
    listing = admin_client.get("/evaluations/")
    assert "shown" in listing.content.decode()
    page = admin_client.get(f"/evaluations/{record.pk}/").content.decode()
    assert "Addressed rate" in page and "ruff:F841" in page and "more.py:1" in page
    answer = admin_client.post(
        f"/evaluations/{record.pk}/grade",
        {
            "head": history["h1"],
            "path": "lib.py",
            "line": "1",
            "rule": "ruff:F401",
            "grade": "useful",
        },
    )
    assert answer.status_code == 302
    grade = EvaluationGrade.objects.get()
    assert (grade.grade, grade.repository_path) == ("useful", record.repository_path)
    page = admin_client.get(f"/evaluations/{record.pk}/").content.decode()
    assert 'class="chosen" aria-pressed="true">useful' in page
    refused = admin_client.post(f"/evaluations/{record.pk}/grade", {"grade": "great", "line": "x"})
    assert refused.status_code == 302 and EvaluationGrade.objects.count() == 1
    rows = admin_client.get(f"/evaluations/{record.pk}.csv").content.decode().splitlines()
    assert rows[0].startswith("reviewer,merge,head") and len(rows) == 4
    assert any(",useful," in row for row in rows)
    data = json.loads(admin_client.get(f"/evaluations/{record.pk}.json").content)
    assert data["reviewers"][0]["precision"] == 1.0
    assert admin_client.get(f"/evaluations/{record.pk}.xml").status_code == 404


def test_evaluations_are_for_staff(history, client):
    assert client.get("/evaluations/").status_code == 302  # to the login page


def test_a_bug_replay_is_shown_and_exported(fixes, admin_client):
    evaluate(fixes["repo"], "--bug-fixes", "5", "--name", "bugs")
    record = Evaluation.objects.get(name="bugs")
    page = admin_client.get(f"/evaluations/{record.pk}/").content.decode()
    assert "Catch rate" in page and "caught</span>" in page and "missed</span>" in page
    rows = admin_client.get(f"/evaluations/{record.pk}.csv").content.decode().splitlines()
    assert rows[0].startswith("reviewer,fix,subject,caught")
    assert any("ruff:F821" in row and ",bug," in row for row in rows)


def test_a_model_reviewer_is_evaluated_through_its_sandbox_and_its_cost_counted(
    history, settings, fake_anthropic
):
    from tests.fakes.models import ANTHROPIC_TEST_KEY, ToolCall

    settings.ANTHROPIC_BASE_URL = fake_anthropic.base_url
    settings.ANTHROPIC_API_KEY = ANTHROPIC_TEST_KEY
    Reviewer.objects.create(slug="claude", engine="anthropic", model="claude-sonnet-5-5")
    finding = {
        "path": "lib.py", "start_line": 5, "end_line": 5, "severity": "medium",
        "category": "bug", "title": "`unused` is computed and never read",
        "body": "g() assigns `unused` and returns without reading it.", "confidence": 0.9,
        "blocking": False, "evidence": "lib.py line 5: `unused = 5`",
    }  # fmt: skip
    fake_anthropic.script(
        ToolCall("submit_review", {"findings": [finding]}, usage=(10_000, 300)),  # head 1
        ToolCall("submit_review", {"findings": []}, usage=(8_000, 100)),  # head 2
    )
    data = json.loads(evaluate(history["repo"], "--count", "1", "--skip", "2",
                               "--reviewer", "claude", "--format", "json"))  # fmt: skip
    (claude,) = data["reviewers"]
    assert (claude["reviews"], claude["failed_reviews"]) == (2, 0), claude["failures"]
    [comment] = claude["comment_list"]
    assert (comment["path"], comment["start_line"], comment["head"]) == ("lib.py", 5, history["h1"])
    # Moved to line 2 by the next push, merged, then changed on main right after.
    assert (comment["outcome"], comment["decided_by"]) == (CHANGED_AFTER_MERGE, history["fix"])
    assert (claude["input_tokens"], claude["output_tokens"]) == (18_000, 400)
    assert Decimal(claude["cost_usd"]) > 0


def test_a_budget_stops_a_model_evaluation_before_it_spends_more(history, settings, fake_anthropic):
    from tests.fakes.models import ANTHROPIC_TEST_KEY, ToolCall

    settings.ANTHROPIC_BASE_URL = fake_anthropic.base_url
    settings.ANTHROPIC_API_KEY = ANTHROPIC_TEST_KEY
    Reviewer.objects.create(slug="claude", engine="anthropic", model="claude-sonnet-5-5")
    fake_anthropic.script(ToolCall("submit_review", {"findings": []}, usage=(100_000, 1_000)))
    out = evaluate(history["repo"], "--count", "3", "--reviewer", "claude", "--budget-usd", "0.01")
    assert "stopped: the budget of $0.01 was spent" in out
    assert ReviewRun.objects.count() == 1  # one review, then the budget was spent


def test_a_repository_tasuku_knows_is_evaluated_by_a_worker_from_the_dashboard(
    fake_github, operator_client, staff_client, tmp_path, settings
):
    from repos.models import Installation, Repository
    from reviews.evaluation.replay import evaluations_sweep
    from tests.gitworld import INSTALLATION, REPO, REPO_ID, world_build
    from tests.helpers import drain_queue

    settings.TASUKU_WORKSPACE_ROOT = str(tmp_path)
    world = world_build(fake_github)
    first = world.git.commit({"lib.py": "import os\n\nx = 1\n"}, parent=world.base, branch="main")
    world.git.commit({"lib.py": "x = 1\n"}, parent=first, branch="main", message="fix: drop it")
    installation = Installation.objects.create(github_id=INSTALLATION, account_login="acme")
    repository = Repository.objects.create(
        installation=installation, github_id=REPO_ID, full_name=REPO, enabled=True
    )
    # The read-only role may look, not start one.
    refused = staff_client.post(
        "/evaluations/new", {"repository": repository.pk, "reviewer": "static"}
    )
    assert refused.status_code == 302 and not Evaluation.objects.exists()
    bad = operator_client.post(
        "/evaluations/new", {"repository": repository.pk, "reviewer": "nobody"}
    )
    assert bad.status_code == 302 and not Evaluation.objects.exists()

    answer = operator_client.post(
        "/evaluations/new", {"repository": repository.pk, "reviewer": "static", "kind": "history",
                             "count": "5"},
    )  # fmt: skip
    record = Evaluation.objects.get()
    assert answer["Location"] == f"/evaluations/{record.pk}/"
    assert (record.status, record.repository_path) == (EvaluationStatus.QUEUED, f"github:{REPO}")
    assert drain_queue(only="reviews.tasks.evaluation_run") == ["done"]
    record.refresh_from_db()
    assert (record.status, record.units_total, record.leased_until) == (
        EvaluationStatus.DONE,
        2,
        None,
    )
    comments = [c for item in record.items.all() for c in item.comments]
    assert [(c["path"], c["rule"], c["outcome"]) for c in comments] == [
        ("lib.py", "ruff:F401", CHANGED_AFTER_MERGE)
    ]
    # The clone was made with a token for this repository alone, and is gone.
    assert not list(tmp_path.glob("tasuku-evaluation-*"))
    # Nothing was posted to GitHub.
    assert not fake_github.requests(method="POST", path=r"/(reviews|check-runs|comments)$")
    assert evaluations_sweep() == 0  # done: nothing to ring again


def test_a_queued_evaluation_whose_worker_died_is_handed_on_and_goes_on(
    fake_github, tmp_path, settings
):
    from datetime import timedelta

    from django.utils import timezone
    from django_q.models import OrmQ

    from repos.models import Installation, Repository
    from reviews.evaluation.replay import evaluation_queue, evaluation_run, evaluations_sweep
    from tests.gitworld import INSTALLATION, REPO, REPO_ID, world_build
    from tests.helpers import drain_queue

    settings.TASUKU_WORKSPACE_ROOT = str(tmp_path)
    world = world_build(fake_github)
    world.git.commit({"lib.py": "x = 1\n"}, parent=world.base, branch="main")
    installation = Installation.objects.create(github_id=INSTALLATION, account_login="acme")
    repository = Repository.objects.create(
        installation=installation, github_id=REPO_ID, full_name=REPO, enabled=True
    )
    record = evaluation_queue(repository, "history", {"reviewers": ["static"], "count": 2})
    # A worker took it and died: its doorbell is gone, its lease ran out.
    OrmQ.objects.all().delete()
    Evaluation.objects.filter(pk=record.pk).update(
        status=EvaluationStatus.RUNNING, attempts=1,
        leased_until=timezone.now() - timedelta(minutes=1),
    )  # fmt: skip
    assert evaluation_run(record.pk) == "not claimed"  # held (as far as anyone knows)
    assert evaluations_sweep() == 1
    assert Evaluation.objects.get(pk=record.pk).status == EvaluationStatus.QUEUED
    assert drain_queue(only="reviews.tasks.evaluation_run") == ["done"]
    assert Evaluation.objects.get(pk=record.pk).status == EvaluationStatus.DONE
    assert evaluation_run(record.pk) == "not claimed"
    assert evaluations_sweep() == 0


def test_a_clone_github_refuses_is_retried_then_failed_never_a_review(
    fake_github, tmp_path, settings
):
    from repos.models import Installation, Repository
    from reviews.evaluation.replay import EVALUATIONS, evaluation_queue
    from tests.gitworld import INSTALLATION, REPO_ID, world_build
    from tests.helpers import drain_queue

    settings.TASUKU_WORKSPACE_ROOT = str(tmp_path)
    world_build(fake_github)
    installation = Installation.objects.create(github_id=INSTALLATION, account_login="acme")
    repository = Repository.objects.create(  # GitHub knows no repository of this id
        installation=installation, github_id=REPO_ID + 1, full_name="acme/gone", enabled=True
    )
    record = evaluation_queue(repository, "history", {"reviewers": ["static"], "count": 2})
    [said] = drain_queue(only="reviews.tasks.evaluation_run")
    record.refresh_from_db()
    assert record.status in (EvaluationStatus.FAILED, EvaluationStatus.QUEUED), said
    assert record.stopped_reason and not record.items.exists()
    assert record.attempts <= EVALUATIONS.max_attempts


def test_each_one_click_suggestion_is_applied_to_its_file_and_said_whether_it_breaks_it(
    history, tmp_path
):
    from reviews.evaluation.replay import suggestion_applied

    data = json.loads(evaluate(history["repo"], "--count", "3", "--format", "json"))
    (static,) = data["reviewers"]
    with_one = [c for c in static["comment_list"] if c["suggestion"]]
    assert with_one and all(c["suggestion"] == "applies" for c in with_one)
    assert static["suggestions"] == {"applies": len(with_one)}
    repo, head = history["repo"], history["h1"]
    assert suggestion_applied(repo, head, "lib.py", 5, 5, "    unused = (") == "breaks the file"
    assert suggestion_applied(repo, head, "lib.py", 5, 5, "    pass") == "applies"
    assert suggestion_applied(repo, head, "lib.py", 40, 41, "x = 1") == "does not apply"
    assert suggestion_applied(repo, head, "gone.py", 1, 1, "x = 1") == "does not apply"


def test_progress_says_the_cost_so_far_and_the_time_left(history, capsys):
    evaluate(history["repo"], "--count", "3")
    said = capsys.readouterr().err
    assert "3/3 pull requests, 3 comments, $0.00 so far, about 0 s left" in said


def test_a_window_of_days_and_a_sample_choose_the_pull_requests(history):
    repo = history["repo"]
    assert len(pull_histories(repo, 10)) == 3
    assert [h.merge for h in pull_histories(repo, 10, every=2)] == [history["m2"], history["m1"]]
    from datetime import date, timedelta

    tomorrow, yesterday = (date.today() + timedelta(days=d) for d in (1, -1))
    assert pull_histories(repo, 10, since=tomorrow.isoformat()) == []
    assert pull_histories(repo, 10, until=yesterday.isoformat()) == []
    assert len(pull_histories(repo, 10, since=yesterday.isoformat())) == 3
    with pytest.raises(CommandError, match="invalid day value"):
        evaluate(repo, "--since", "last week")
    data = json.loads(evaluate(repo, "--count", "5", "--sample-every", "2", "--format", "json"))
    assert data["pull_requests"] == 2


def test_the_csv_export_never_hands_a_spreadsheet_a_formula(history, admin_client):
    from reviews.models import EvaluationItem

    evaluate(history["repo"], "--count", "1", "--name", "csv")
    record = Evaluation.objects.get(name="csv")
    item = EvaluationItem.objects.filter(evaluation=record).exclude(comments=[]).first()
    item.comments[0]["title"] = '=HYPERLINK("http://evil.example","click")'
    item.save()
    rows = admin_client.get(f"/evaluations/{record.pk}.csv").content.decode().splitlines()
    assert any("'=HYPERLINK" in row for row in rows)
    assert not any(cell.startswith("=") for row in rows for cell in row.split(","))
