"""The static engine: real tools on real files, reporting only what the PR added."""

from __future__ import annotations

from pathlib import Path

import pytest

from sandbox.contract import ChangedFile, LineRange, ReviewJob, Severity, StaticOptions
from sandbox.engines.static import review
from sandbox.runners.local import engine_run


def job(*files: ChangedFile) -> ReviewJob:
    return ReviewJob(
        job_id="1",
        repository="a/b",
        pull_request=1,
        base_sha="a" * 40,
        head_sha="b" * 40,
        changed_files=files,
    )


def added(path: str, *lines: int, status: str = "modified") -> ChangedFile:
    return ChangedFile(
        path=path, status=status, added=tuple(LineRange(start=n, end=n) for n in lines)
    )


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    return tmp_path


def write(root: Path, path: str, text: str) -> None:
    (root / path).parent.mkdir(parents=True, exist_ok=True)
    (root / path).write_text(text)


def findings(root: Path, *files: ChangedFile) -> list[dict]:
    return review(job(*files), root).findings


def test_it_reports_a_problem_on_an_added_line_and_not_one_the_base_already_had(checkout):
    write(
        checkout,
        "app.py",
        "import subprocess\n\nCMD = 'make'\nsubprocess.call(CMD, shell=True)\nsubprocess.call(CMD, shell=True)\n",
    )
    found = findings(checkout, added("app.py", 5))
    assert [(f["start_line"], f["rule"]) for f in found] == [(5, "ruff:S602")]
    assert found[0]["severity"] == "high" and found[0]["blocking"]
    assert "inject" in found[0]["body"]


def test_severities_follow_the_documented_mapping(checkout):
    write(checkout, "m.py", "import os\n\n\ndef f(x=[]):\n    return undefined_name\n")
    found = {f["rule"]: f for f in findings(checkout, added("m.py", 1, 2, 3, 4, 5))}
    assert found["ruff:F401"]["severity"] == Severity.LOW
    assert found["ruff:B006"]["severity"] == Severity.MEDIUM
    assert found["ruff:F821"]["severity"] == Severity.HIGH


def test_a_safe_fix_becomes_a_suggestion_for_exactly_its_lines(checkout):
    write(checkout, "m.py", "import os, sys\n\nprint(sys.argv)\n")
    [unused] = [f for f in findings(checkout, added("m.py", 1)) if f["rule"] == "ruff:F401"]
    assert (unused["start_line"], unused["end_line"], unused["suggestion"]) == (1, 1, "import sys")


def test_a_syntax_error_is_critical_and_reported_once(checkout):
    write(checkout, "bad.py", "def f(:\n    pass\n")
    found = findings(checkout, added("bad.py", 1, 2, status="added"))
    assert len(found) == 1
    assert (found[0]["severity"], found[0]["rule"]) == ("critical", "ruff:invalid-syntax")


def test_secrets_on_added_lines_are_critical(checkout):
    write(checkout, "settings.py", 'DEBUG = True\nAWS = "AKIAZ2Q7WJ4KXN5BL3TP"\n')
    found = [f for f in findings(checkout, added("settings.py", 2)) if f["category"] == "secret"]
    assert found[0]["title"] == "Secret committed: AWS Access Key"
    assert found[0]["severity"] == "critical"


def test_shellcheck_flags_an_unquoted_variable_and_suggests_the_quotes(checkout):
    """SC2086 is an info (off by default); a repository that asks for it by its code gets
    it, with shellcheck's fix as the suggestion."""
    write(checkout, "deploy.sh", "#!/bin/bash\ncp a $DEST\n")
    asked = job(added("deploy.sh", 2, status="added")).model_copy(
        update={"static": StaticOptions(select=("SC2086",))}
    )
    assert review(job(added("deploy.sh", 2, status="added")), checkout).findings == []
    [finding] = review(asked, checkout).findings
    assert finding["rule"] == "shellcheck:SC2086"
    assert finding["suggestion"] == 'cp a "$DEST"'


def test_a_script_without_extension_is_recognised_by_its_shebang(checkout):
    write(checkout, "bin/run", "#!/bin/sh\nrm -rf $DIR/\n")
    rules = {f["rule"] for f in findings(checkout, added("bin/run", 2, status="added"))}
    assert "shellcheck:SC2115" in rules


def test_conflict_markers_private_keys_and_breakpoints_are_caught_in_any_language(checkout):
    write(checkout, "notes.txt", "a\n<<<<<<< HEAD\nb\n=======\nc\n>>>>>>> feature\n")
    write(
        checkout,
        "id_rsa",
        "-----BEGIN OPENSSH PRIVATE KEY-----\nMIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gunVTLw7onLRnrq0\n-----END OPENSSH PRIVATE KEY-----\n",
    )
    write(checkout, "ui.js", "function f() {\n  debugger;\n}\n")
    write(checkout, "svc.py", "def f():\n    breakpoint()\n    import pdb; pdb.set_trace()\n")
    found = findings(
        checkout,
        added("notes.txt", 2, 3, 4, 5, 6),
        added("id_rsa", 1, 2, 3, status="added"),
        added("ui.js", 2),
        added("svc.py", 2, 3),
    )
    rules = sorted(
        (f["path"], f["rule"], f["start_line"]) for f in found if f["rule"].startswith("hygiene")
    )
    assert rules == [
        ("id_rsa", "hygiene:private-key", 1),
        ("notes.txt", "hygiene:conflict-marker", 2),
        ("svc.py", "hygiene:debugger", 2),
        ("svc.py", "hygiene:debugger", 3),
        ("ui.js", "hygiene:debugger", 2),
    ]


def test_deleted_binary_and_missing_files_are_skipped(checkout):
    write(checkout, "gone.py", "import os\n")
    found = findings(
        checkout,
        added("gone.py", 1, status="deleted"),
        ChangedFile(path="logo.png", status="added", binary=True),
        added("missing.py", 1),
    )
    assert found == []


def test_the_result_summary_says_what_was_checked(checkout):
    write(checkout, "a.py", "x = 1\n")
    result = review(job(added("a.py", 1)), checkout)
    assert result.engine == "static"
    assert "ruff" in result.summary.validation
    assert result.summary.limitations


def test_the_summary_names_what_checked_each_kind_of_file_not_every_tool_for_all(checkout):
    write(checkout, "a.py", "x = 1\n")
    write(checkout, "b.py", "y = 2\n")
    write(checkout, "run.sh", "#!/bin/sh\necho hi\n")
    write(checkout, "Makefile", "all:\n\techo hi\n")
    result = review(job(*(added(p, 1) for p in ("a.py", "b.py", "run.sh", "Makefile"))), checkout)
    said = result.summary.validation
    assert said.startswith(
        "Checked the added lines of 4 changed files: 2 files by ruff, detect-secrets and "
        "hygiene; 1 file by detect-secrets and hygiene only; 1 file by shellcheck, "
        "detect-secrets and hygiene (with ruff "
    ), said


def test_the_engine_runs_in_the_local_runner_and_returns_the_contract(checkout):
    write(checkout, "app.py", "import subprocess\nCMD = 'make'\nsubprocess.call(CMD, shell=True)\n")
    result = engine_run("static", job(added("app.py", 3)), checkout)
    assert [f["rule"] for f in result.findings] == ["ruff:S602"]


def test_a_suggestion_is_offered_only_where_the_module_still_compiles(tmp_path):
    from sandbox.engines.static.common import Target
    from sandbox.engines.static.ruff import still_parses

    (tmp_path / "m.py").write_text("def f():\n    import os\n    return 1\n")
    target = Target("m.py", tmp_path / "m.py", frozenset({2}))
    assert still_parses(target, 2, 2, "    pass")
    assert not still_parses(target, 2, 2, "    return (")  # would not import: no suggestion
    (tmp_path / "new.py").write_text("type Pair = tuple[int, int]\nimport os\n")
    newer = Target("new.py", tmp_path / "new.py", frozenset({2}))
    assert still_parses(newer, 2, 2, "")  # newer syntax than this Python: ruff's fix stands


def test_appears_unused_is_a_rule_a_repository_asks_for(checkout):
    """SC2034 is a warning, but wrong wherever the sourcing script reads the variable (a
    plugin's metadata): measured on real pull requests it was noise every time, so it is
    reported only when a policy asks for it."""
    write(checkout, "dnsapi/dns_x.sh", "#!/usr/bin/env sh\ndns_x_info='X DNS'\nrm -rf $DIR/\n")
    change = added("dnsapi/dns_x.sh", 1, 2, 3, status="added")
    assert {f["rule"] for f in findings(checkout, change)} == {"shellcheck:SC2115"}
    asked = job(change).model_copy(update={"static": StaticOptions(select=("SC2034",))})
    assert "shellcheck:SC2034" in {f["rule"] for f in review(asked, checkout).findings}


def test_an_alias_fixed_when_defined_is_a_rule_a_repository_asks_for(checkout):
    """SC2139 on `alias snap="${sudo}snap"`: the prefix fixed once, on purpose, as every
    alias of the file does (graded noise on a real pull request)."""
    write(
        checkout, "aliases.bash", '#!/bin/bash\nsudo_=sudo\nalias snapi="${sudo_} snap install"\n'
    )
    change = added("aliases.bash", 3)
    assert findings(checkout, change) == []
    asked = job(change).model_copy(update={"static": StaticOptions(select=("SC2139",))})
    assert "shellcheck:SC2139" in {f["rule"] for f in review(asked, checkout).findings}


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ('HEADER = "-----BEGIN RSA PRIVATE KEY-----"\n', False),
        ('if line.startswith("-----BEGIN OPENSSH PRIVATE KEY-----"):\n    pass\n', False),
        ('KEY = "-----BEGIN PRIVATE KEY-----\\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7\\n-----END PRIVATE KEY-----"\n', True),
        ("-----BEGIN RSA PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\nDEK-Info: AES-128-CBC,3F17\n\n"
         "MIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gun\n-----END RSA PRIVATE KEY-----\n", True),
    ],
    ids=["a-constant", "a-parser", "in-a-string", "encrypted-pem"],
)  # fmt: skip
def test_a_private_key_is_one_only_with_its_body(checkout, text, key):
    write(checkout, "keys.py", text)
    count = len(text.splitlines())
    rules = [f["rule"] for f in findings(checkout, added("keys.py", *range(1, count + 1)))]
    assert ("hygiene:private-key" in rules) is key


def test_a_framework_plugins_names_and_pseudo_shebang_are_not_its_bugs(checkout):
    """Measured on real plugins of a shell framework: the variables its core defines
    (SC2154), its `#! bash module` marker (SC2239) and `local a= b` (SC1007) were noise."""
    write(checkout, "themes/t.theme.sh", (
        "#! bash oh-my-bash.module\nfunction _prompt {\n  local times= n=$COLUMNS\n"
        '  echo "${_omb_prompt_green}$n$times"\n}\nFOO= bar\n'
    ))  # fmt: skip
    change = added("themes/t.theme.sh", *range(1, 7), status="added")
    assert {f["rule"] for f in findings(checkout, change)} == {"shellcheck:SC1007"}  # line 6
    asked = job(change).model_copy(update={"static": StaticOptions(select=("SC2154", "SC2239"))})
    found = {f["rule"] for f in review(asked, checkout).findings}
    assert {"shellcheck:SC2154", "shellcheck:SC2239"} <= found


def test_a_completion_reply_split_on_words_is_the_idiom_not_a_bug(checkout):
    write(checkout, "c.sh", (
        "#!/bin/bash\n_c() {\n  COMPREPLY=( $(compgen -W 'a b' -- \"$2\") )\n"
        "  words=( $(ls) )\n}\n"
    ))  # fmt: skip
    found = [(f["start_line"], f["rule"]) for f in findings(checkout, added("c.sh", 3, 4))]
    assert found == [(4, "shellcheck:SC2207")]
