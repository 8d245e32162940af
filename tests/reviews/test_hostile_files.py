"""An honest gate, end to end (webhook → worker → fake GitHub): file names are data, the
engine sees the commit's bytes, and the review names what it did not read."""

from __future__ import annotations

import os

import pytest

from reviews.engines import boundary as engines
from reviews.models import Finding, ReviewRun, RunStatus
from tests.fakes.github import Pull
from tests.helpers import drain_queue, post_webhook, pull_request_payload

pytestmark = pytest.mark.django_db

INSTALLATION, REPO, NUMBER = 61, "acme/names", 5
SHELL_TRUE = "import subprocess\n\n\ndef run(cmd):\n    return subprocess.call(cmd, shell=True)\n"
EVAL = "def parse(text):\n    return eval(text)\n"
RM_ROOT = "#!/bin/bash\nrm -rf $BUILD_DIR/\n"


@pytest.fixture
def open_pull(fake_github, client, test_app, monkeypatch):
    """Open a pull request of the given commits (applied in order) and review it; returns
    the run and what the engine's checkout held when the engine was done."""
    seen: dict[str, set[str]] = {}
    engine_run = engines.engine_run

    def watched(*args, **kwargs):
        result = engine_run(*args, **kwargs)
        root = args[3]
        seen["checkout"] = {
            os.path.relpath(os.path.join(d, n), root) for d, _, ns in os.walk(root) for n in ns
        }
        return result

    monkeypatch.setattr(engines, "engine_run", watched)

    def send(*commits, files=None):
        fake_github.add_installation(INSTALLATION, "acme")
        repo, git = fake_github.add_git_repo(REPO, installation_id=INSTALLATION, repo_id=7401)
        head = base = git.commit({"README.md": "# Names\n"}, branch="main")
        for changes in commits:
            head = git.commit(changes, parent=head, branch="feature")
        pull = fake_github.add_pull(
            REPO, Pull(number=NUMBER, title="x", head_sha=head, base_sha=base, files=files or [])
        )
        body = pull_request_payload(fake_github, repo, pull, action="opened")
        response = post_webhook(client, "pull_request", body, secret=test_app.webhook_secret)
        assert response.status_code == 202
        drain_queue()
        run = ReviewRun.objects.get()
        assert run.status == RunStatus.COMPLETED, (run.status, run.stage, run.reason)
        return run, seen.get("checkout")

    return send


def posted(fake_github) -> tuple[set[tuple[str, int]], str, str]:
    comments = {(c["path"], c["line"]) for c in fake_github.review_comments_of(REPO, NUMBER)}
    [review] = [r for r in fake_github.reviews_of(REPO, NUMBER) if "tasuku:review" in r["body"]]
    [check] = fake_github.check_runs_of(REPO)
    return comments, review["body"], check.conclusion


def test_file_names_that_look_like_options_are_reviewed_and_nothing_is_written(
    fake_github, open_pull
):
    files = {"--output-file=zz.py": SHELL_TRUE, "-rf.py": EVAL, "--severity=error.sh": RM_ROOT}
    run, checkout = open_pull(files)
    comments, body, conclusion = posted(fake_github)
    assert {("--output-file=zz.py", 5), ("-rf.py", 2), ("--severity=error.sh", 2)} <= comments
    assert conclusion == "failure"  # shell=True and eval are high: the default threshold
    stored = set(Finding.objects.filter(review__run=run).values_list("path", "rule"))
    assert {
        ("--output-file=zz.py", "ruff:S602"),
        ("-rf.py", "ruff:S307"),
        ("--severity=error.sh", "shellcheck:SC2115"),
    } <= stored
    # Only what the static reviewer reads was written (the changed files), and no
    # `zz.py` report beside them.
    assert checkout == set(files)


def test_gitattributes_cannot_re_encode_a_file_away_from_the_reviewer(fake_github, open_pull):
    # The attributes come after the file: committed with it, git would convert it.
    run, _ = open_pull(
        {"app.py": SHELL_TRUE}, {".gitattributes": "*.py working-tree-encoding=UTF-16LE\n"}
    )
    comments, _, conclusion = posted(fake_github)
    assert ("app.py", 5) in comments
    assert conclusion == "failure"


def test_gitattributes_filters_line_ends_and_diff_drivers_change_nothing(fake_github, open_pull):
    attributes = "*.py filter=lfs diff=lfs merge=lfs -diff\n*.sh text eol=crlf ident\n"
    run, _ = open_pull({"app.py": SHELL_TRUE, "deploy.sh": RM_ROOT}, {".gitattributes": attributes})
    comments, _, conclusion = posted(fake_github)
    assert {("app.py", 5), ("deploy.sh", 2)} <= comments
    rules = set(Finding.objects.filter(review__run=run).values_list("rule", flat=True))
    assert "shellcheck:SC1017" not in rules  # no carriage returns the commit does not have
    assert conclusion == "failure"


def test_a_latin1_file_is_reviewed_and_the_run_completes(fake_github, open_pull):
    latin1 = ("# Déjà vu: naïve café\n" + SHELL_TRUE).encode("latin-1")
    run, _ = open_pull({"legacy.py": latin1})
    comments, body, conclusion = posted(fake_github)
    assert ("legacy.py", 6) in comments
    assert conclusion == "failure"
    assert "Not UTF-8" in body and "legacy.py" in body


def test_a_file_over_the_size_limit_is_named_in_the_reviews_limitations(fake_github, open_pull):
    big = "x = 1\n" * 1_500_000  # 9 MB
    run, _ = open_pull({"data/big.py": big, "app.py": "VALUE = 1\n"})
    _, body, _ = posted(fake_github)
    assert "Not checked (larger than 8 MB)" in body and "data/big.py" in body
    assert "no problems found in the files it reviewed" in body
    assert "**1 changed file was not reviewed**" in body
    [check] = fake_github.check_runs_of(REPO)
    assert check.conclusion == "neutral"  # a file nobody read: never success
    assert check.output["title"] == (
        "No problems found in what was reviewed · 1 file not reviewed (larger than 8 MB)"
    )
    assert "data/big.py" in check.output["summary"]


QUOTED_NAMES = ['q"uote.py', "tab\there.py", "new\nline.py", "back\\slash.py", "ünïcödé.py",
                "sp ace.py", "x b/y.py"]  # fmt: skip


def test_names_git_quotes_are_reviewed_and_commented_on_their_own_path(fake_github, open_pull):
    run, _ = open_pull({name: SHELL_TRUE for name in QUOTED_NAMES})
    comments, _, conclusion = posted(fake_github)
    assert {(name, 5) for name in QUOTED_NAMES} <= comments
    assert conclusion == "failure"
    stored = set(
        Finding.objects.filter(review__run=run, state="open").values_list("path", flat=True)
    )
    assert set(QUOTED_NAMES) <= stored
