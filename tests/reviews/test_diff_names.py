"""File names are data: whatever a file is called, the diff's path is its name.

git prints a name with a quote, a backslash or a control character in C-style quotes
(and, with the default `core.quotePath`, every non-ASCII byte as an octal escape);
reviews/scope/diff.py reads the names from each file's header and unquotes them."""

from __future__ import annotations

import os
import subprocess

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from reviews.scope.diff import DiffError, diff_parse
from sandbox.git import DIFF
from sandbox.git import Git as _Git
from sandbox.git import git_env as _git_env

EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
HOSTILE = [
    '--output-file=zz.py', "-rf.py", "--severity=error.sh", "-", 'q"uote.py', "tab\there.py",
    "new\nline.py", "back\\slash.py", "sp ace.py", "trailing space.py ", "ünïcødé.py",
    "日本語.py", "x b/y b/x.py", "a\x01\x7f.py", "form\x0cfeed.py", "line\u2028sep.py",
    '"quoted".py', "cr\rname.py", "diff --git a b.py", "--- a.py", "+++ b.py", "@@ -1 +1 @@.py",
]  # fmt: skip


def hunk(*lines: str) -> str:
    return f"@@ -0,0 +1,{len(lines)} @@\n" + "".join(f"+{line}\n" for line in lines)


def test_quoted_names_are_unquoted_escapes_and_octal_bytes_alike():
    text = (
        'diff --git "a/q\\"uote\\tx.py" "b/q\\"uote\\tx.py"\n'
        "new file mode 100644\n"
        "index 0000000..1111111\n"
        "--- /dev/null\n"
        '+++ "b/q\\"uote\\tx.py"\n'
        + hunk("x = 1")
        + 'diff --git "a/caf\\303\\251 \\\\.py" "b/caf\\303\\251 \\\\.py"\n'
        "index 1111111..2222222 100644\n"
        '--- "a/caf\\303\\251 \\\\.py"\t\n'
        '+++ "b/caf\\303\\251 \\\\.py"\t\n'
        "@@ -1 +1 @@\n-a\n+b\n"
    )
    diff = diff_parse(text)
    assert [(f.path, f.status) for f in diff.files] == [
        ('q"uote\tx.py', "added"),
        ("café \\.py", "modified"),
    ]
    assert diff.get("café \\.py").added == (1,)


def test_a_name_that_looks_like_two_names_is_read_from_the_file_header():
    # unidiff reads `diff --git a/x b/y b/x b/y` as the names `x b/y b/x` and `y`.
    name = "x b/y"
    text = (
        f"diff --git a/{name} b/{name}\n"
        "new file mode 100644\n"
        "index 0000000..1111111\n"
        "--- /dev/null\n"
        f"+++ b/{name}\t\n" + hunk("one", "two")
    )
    [file] = diff_parse(text).files
    assert (file.path, file.status, file.added) == (name, "added", (1, 2))


def test_binary_files_renames_and_empty_files_have_their_names_too():
    text = (
        'diff --git "a/logo\\n.png" "b/logo\\n.png"\n'
        "new file mode 100644\n"
        "index 0000000..7777777\n"
        'Binary files /dev/null and "b/logo\\n.png" differ\n'
        "diff --git a/sp ace.txt b/sp ace.txt\n"
        "new file mode 100644\n"
        "index 0000000..e69de29\n"
        'diff --git a/old name.py "b/new\\"name.py"\n'
        "similarity index 100%\n"
        "rename from old name.py\n"
        'rename to "new\\"name.py"\n'
    )
    files = diff_parse(text).files
    assert [(f.path, f.status, f.binary, f.previous_path) for f in files] == [
        ("logo\n.png", "added", True, None),
        ("sp ace.txt", "added", False, None),
        ('new"name.py', "renamed", False, "old name.py"),
    ]


def test_a_broken_quoted_name_is_a_permanent_diff_error():
    with pytest.raises(DiffError) as caught:
        diff_parse('diff --git "a/x "b/x\nnew file mode 100644\n--- /dev/null\n+++ "b/x\n')
    assert caught.value.permanent


# --- The property: with the workspace's own diff invocation ------------------------------

names = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\0/"),
    min_size=1,
    max_size=40,
).filter(lambda n: n not in (".", "..") and n.lower() != ".git")


@pytest.fixture(scope="module")
def repo(tmp_path_factory) -> _Git:
    root = tmp_path_factory.mktemp("names")
    git = _Git(root, _git_env("", root, authenticate=False))
    git("init", "--quiet")
    return git


def blob(git: _Git, content: bytes) -> str:
    completed = subprocess.run(  # noqa: S603
        ["git", "hash-object", "-w", "--stdin"],  # noqa: S607
        cwd=git.root,
        env=git.env,
        input=content,
        capture_output=True,
        check=True,
    )
    return completed.stdout.decode().strip()


def tree(git: _Git, entries: dict[str, str]) -> str:
    listing = b"".join(
        b"100644 blob " + sha.encode() + b"\t" + os.fsencode(name) + b"\0"
        for name, sha in entries.items()
    )
    completed = subprocess.run(  # noqa: S603
        ["git", "mktree", "-z"],  # noqa: S607
        cwd=git.root,
        env=git.env,
        input=listing,
        capture_output=True,
        check=True,
    )
    return completed.stdout.decode().strip()


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(name=names)
@example(name='q"uote.py')
@example(name="new\nline.py")
@example(name="tab\there.py")
@example(name="back\\slash.py")
@example(name="--output-file=zz.py")
@example(name="x b")
@example(name=" ")
@example(name="café\u2028\x85\x0c.py")
def test_the_path_parsed_from_a_diff_of_a_file_is_its_name(repo, name):
    # Each tree made once (git's own trees of this name: one process each, per example).
    one = blob(repo, b"x = 1\n")
    two = blob(repo, b"x = 2\ny = 3\n")
    first, second = tree(repo, {name: one}), tree(repo, {name: two})
    added = repo(*DIFF, "--find-renames", "--unified=3", EMPTY_TREE, first, "--")
    [file] = diff_parse(added).files
    assert (file.path, file.status, file.added) == (name, "added", (1,))
    # The name lists the workspace takes with -z agree with the diff.
    listed = repo(*DIFF, "--name-only", "-z", EMPTY_TREE, first, "--")
    assert listed.split("\0")[:-1] == [name]

    modified = repo(*DIFF, "--unified=3", first, second, "--")
    [file] = diff_parse(modified).files
    assert (file.path, file.status, file.added) == (name, "modified", (1, 2))

    other = name + " moved"
    renamed = repo(*DIFF, "--find-renames", second, tree(repo, {other: two}), "--")
    [file] = diff_parse(renamed).files
    assert (file.path, file.status, file.previous_path) == (other, "renamed", name)


def test_every_hostile_name_of_one_diff_is_its_own_file(repo):
    content = blob(repo, b"x = 1\n")
    names_tree = tree(repo, dict.fromkeys([n.replace("/", "_") for n in HOSTILE], content))
    text = repo(*DIFF, "--find-renames", EMPTY_TREE, names_tree, "--")
    assert sorted(diff_parse(text).paths) == sorted(n.replace("/", "_") for n in HOSTILE)
