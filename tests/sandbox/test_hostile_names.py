"""File names are data: a file called `--output-file=zz.py`, `-rf.py`, `-` or with a
quote, a tab or a newline in its name is a file to review, never an option of a tool
the static engine runs."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from reviews.scope.diff import diff_parse
from reviews.validation.findings import GateConfig, gate
from sandbox.contract import ReviewJob, Severity, StaticOptions
from sandbox.engines.static import review, ruff, shellcheck
from sandbox.engines.static.common import Target
from sandbox.git import DIFF, Git, git_env
from sandbox.workspace import Workspace, diff_touched, tree_list
from tests.fakes.github.git import GitRepo

SHELL_TRUE = "import subprocess\n\n\ndef run(cmd):\n    return subprocess.call(cmd, shell=True)\n"
SHELL_TRUE_LINE = 5
RM_ROOT = "#!/bin/bash\nrm -rf $BUILD_DIR/\n"  # SC2115 (warning) and SC2086 (info), line 2
SECRET = 'AWS_ACCESS_KEY_ID = "AKIAZ2Q7WJ4KXN5BL3TP"\n'
HOSTILE = [
    "--output-file=zz.py", "-rf.py", '--config=x".py', 'q"uote.py', "tab\there.py",
    "new\nline.py", "back\\slash.py", "sp ace.py", "ünïcødé.py", "--=.py", "-.py",
]  # fmt: skip


def files_of(root: Path) -> set[str]:
    return {
        os.path.relpath(os.path.join(directory, name), root)
        for directory, _, names in os.walk(root)
        for name in names
    }


def target(root: Path, path: str, text: str, *lines: int) -> Target:
    (root / path).parent.mkdir(parents=True, exist_ok=True)
    (root / path).write_text(text)
    return Target(path, root / path, frozenset(lines))


# --- The property: any name, as a tool's argument ----------------------------------------

names = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\0/"),
    min_size=1,
    max_size=30,
).filter(lambda n: n.lower() not in (".git", "claude.md", "agents.md"))


@settings(max_examples=40, deadline=None)
@given(name=names)
@example(name="--output-file=zz")
@example(name="-rf")
@example(name="--severity=error")
@example(name="-")
@example(name="--")
@example(name="-x --help")
def test_a_tool_never_reads_a_file_name_as_an_option(name):
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        python = target(root, f"{name}.py", SHELL_TRUE, SHELL_TRUE_LINE)
        script = target(root, f"{name}.sh", RM_ROOT, 2)
        found, version, skipped = ruff.check(root, [python, script])
        assert version and skipped == []
        assert [(f.path, f.start_line, f.rule) for f in found] == [
            (python.path, SHELL_TRUE_LINE, "ruff:S602")
        ]
        # SC2086, an info, asked for by its code as a policy may (warnings come anyway).
        asked = StaticOptions(select=("SC2086",))
        found, version, skipped = shellcheck.check(root, [python, script], asked)
        assert version and skipped == []
        assert {(f.path, f.rule) for f in found} == {
            (script.path, "shellcheck:SC2115"),
            (script.path, "shellcheck:SC2086"),
        }
        # Nothing was written beside them (`--output-file=…` would write the report).
        assert files_of(root) == {python.path, script.path}


def test_a_script_called_dash_is_a_file_not_standard_input(tmp_path):
    python = target(tmp_path, "-", "#!/usr/bin/env python3\n" + SHELL_TRUE, SHELL_TRUE_LINE + 1)
    found, _, _ = ruff.check(tmp_path, [python])
    assert [(f.path, f.rule) for f in found] == [("-", "ruff:S602")]
    script = target(tmp_path, "-", RM_ROOT, 2)
    found, _, _ = shellcheck.check(tmp_path, [script])
    assert {f.path for f in found} == {"-"}


# --- Through the workspace: a real checkout and its diff ---------------------------------


@pytest.fixture
def hostile_checkout(tmp_path):
    git = GitRepo.init(tmp_path / "origin.git")
    base = git.commit({"README.md": "# Names\n"})
    files = {name: SHELL_TRUE for name in HOSTILE}
    files.update({
        "--severity=error.sh": RM_ROOT, "-x.sh": RM_ROOT, "dir with space/b x.py": SHELL_TRUE,
        "x b/y b/x.py": SHELL_TRUE, '--json"\n.env': SECRET,
    })  # fmt: skip
    head = git.commit(files, parent=base)
    with Workspace(str(tmp_path)) as workspace:
        checkout = workspace.checkout_local(repository=git.git_dir, head_sha=head, base_sha=base)
        yield checkout, files


def test_hostile_names_are_reviewed_like_any_file_and_anchored_on_their_paths(hostile_checkout):
    checkout, files = hostile_checkout
    diff = diff_parse(checkout.diff)
    assert sorted(diff.paths) == sorted(files)
    assert sorted(diff.touched_paths) == sorted(files)
    before = files_of(checkout.root)
    job = ReviewJob(
        job_id="1", repository="a/b", pull_request=1, base_sha=checkout.base_sha,
        head_sha=checkout.head_sha, diff=checkout.diff,
        changed_files=tuple(f.changed_file() for f in diff.files),
    )  # fmt: skip
    result = review(job, checkout.root)
    assert files_of(checkout.root) == before  # no report written into the checkout
    found = {(f["path"], f["rule"]) for f in result.findings}
    for name, text in files.items():
        if text == SHELL_TRUE:
            assert (name, "ruff:S602") in found, name
        elif text == RM_ROOT:
            assert (name, "shellcheck:SC2115") in found, name
        else:
            assert (name, "detect-secrets:AWS Access Key") in found, name
    assert not [line for line in result.summary.limitations if "Not checked" in line]
    # The validation gate anchors each one on its path and line of the diff.
    anchored = anchored_paths(result, diff)
    for name, text in files.items():
        if "\\" in name:
            continue  # see the next test
        line = SHELL_TRUE_LINE if text == SHELL_TRUE else 2 if text == RM_ROOT else 1
        assert (name, line) in anchored, name


def anchored_paths(result, diff) -> set[tuple[str, int]]:
    validated = gate(result.findings, diff, GateConfig(min_severity=Severity.LOW))
    return {(v.path, v.start_line) for v in validated if v.state == "open"}


def test_a_finding_on_a_name_with_a_backslash_is_anchored(hostile_checkout):
    checkout, _ = hostile_checkout
    diff = diff_parse(checkout.diff)
    job = ReviewJob(
        job_id="1", repository="a/b", pull_request=1, base_sha=checkout.base_sha,
        head_sha=checkout.head_sha, changed_files=(diff.get("back\\slash.py").changed_file(),),
    )  # fmt: skip
    result = review(job, checkout.root)
    assert [f["path"] for f in result.findings] == ["back\\slash.py"]
    assert anchored_paths(result, diff) == {("back\\slash.py", SHELL_TRUE_LINE)}


def test_one_git_diff_gives_the_patch_and_the_names_two_would(tmp_path):
    """`diff_touched` reads the patch and the touched paths from one `git diff`: the patch
    is the plain diff's, byte for byte, and the paths are those `git diff --name-only
    --no-renames` lists (either side of a rename), whatever the names."""
    repo = GitRepo.init(tmp_path / "r.git")
    base = repo.commit(
        {**{name: f"print({n})\n" for n, name in enumerate(HOSTILE)},
         "old name.txt": "kept\n" * 20, "b\xffad.bin": b"\0\1\2", "z.txt": "no newline"},
    )  # fmt: skip
    head = repo.commit(
        {HOSTILE[0]: None, HOSTILE[3]: "print('changed')\n", "new\nline.py": "x = 2",
         "old name.txt": None, "a renamed.txt": "kept\n" * 20 + "more\n",
         "b\xffad.bin": b"\0\1\3", "z.txt": "no newline, still"},
        parent=base,
    )  # fmt: skip
    git = Git(repo.git_dir, git_env("", tmp_path, authenticate=False))
    patch, touched = diff_touched(git, base, head, what="diff")
    plain = git(*DIFF, "--find-renames", "--unified=3", base, head, "--")
    assert patch == plain and "rename from old name.txt" in plain
    listed = git("diff", "--name-only", "-z", "--no-renames", base, head, "--")
    assert sorted(touched) == sorted(p for p in listed.split("\0") if p)
    assert len(touched) == 7
    in_head = set(tree_list(git, head))  # what a reviewer may be given, in git's order
    assert [p for p in touched if p in in_head] == [p for p in listed.split("\0") if p in in_head]
    assert diff_touched(git, head, head, what="diff") == ("", [])
