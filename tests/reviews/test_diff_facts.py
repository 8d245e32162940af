"""The pull request's files and its whitespace-only changes are read from the one diff
a checkout computes (reviews/scope/diff.py), not from more `git diff` runs. Checked against
what git prints on real repositories — `--name-only --no-renames`, and `--numstat
--ignore-space-at-eol --no-renames`, which leaves out a file whose only change is
whitespace at line ends — : the names are the same, and a change is never called
whitespace-only where git sees more than that. Indentation and spaces inside a line
are changes (Python, YAML, strings)."""

from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from reviews.scope.diff import diff_parse
from reviews.scope.triage import SUBSTANTIVE, TRIVIAL, triage_rule
from sandbox.git import DIFF

ENV = {
    **os.environ,
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.com",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.com",
}


def git(root: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=root, env=ENV, check=True, capture_output=True, text=True
    ).stdout


def write(root: Path, files: dict[str, str | bytes | None]) -> None:
    for name, content in files.items():
        path = root / name
        if content is None:
            path.unlink(missing_ok=True)
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, newline="")


def two_commits(
    root: Path,
    before: dict[str, str | bytes | None],
    after: dict[str, str | bytes | None],
    *,
    renames: dict[str, str] | None = None,
    executable: tuple[str, ...] = (),
) -> tuple[str, str]:
    git(root, "init", "--quiet")
    write(root, before)
    git(root, "add", "-A")
    git(root, "commit", "--quiet", "--allow-empty", "-m", "base")
    base = git(root, "rev-parse", "HEAD").strip()
    for old, new in (renames or {}).items():
        git(root, "mv", old, new)
    write(root, after)
    for name in executable:
        (root / name).chmod(0o755)
    git(root, "add", "-A")
    git(root, "commit", "--quiet", "--allow-empty", "-m", "head")
    return base, git(root, "rev-parse", "HEAD").strip()


def facts(root: Path, base: str, head: str) -> tuple[tuple[str, ...], set[str], set[str]]:
    """What the checkout's one diff tells (paths, whitespace-only) and what git's two
    other runs print (whitespace-only)."""
    diff = diff_parse(git(root, *DIFF, "--find-renames", "--unified=3", base, head, "--"))
    names = git(root, *DIFF, "--name-only", "-z", "--no-renames", base, head, "--")
    assert diff.touched_paths == tuple(sorted(n for n in names.split("\0") if n))
    numstat = git(
        root, *DIFF, "--numstat", "-z", "--ignore-space-at-eol", "--no-renames", base, head, "--"
    )
    changed = {e.split("\t", 2)[2] for e in numstat.split("\0") if e and not e.startswith("0\t0\t")}
    by_git = set(diff.touched_paths) - changed
    derived = {f.path for f in diff.files if f.whitespace_only}
    return diff.touched_paths, derived, by_git


def test_each_kind_of_change_as_git_tells_it(tmp_path):
    body = "def f(x):\n    return x\n\n\nclass A:\n    pass\n"
    before = {
        "indent.py": body,
        "spaces.py": body,
        "inside.py": body,
        "code.py": body,
        "crlf.txt": "one\ntwo\n",
        "blank.py": body,
        "moved.py": body * 3,
        "moved_edited.py": body * 3,
        "gone.py": body,
        "empty_gone.txt": "",
        "mode.sh": "echo hi\n",
        "eof.txt": "last",
        "image.bin": b"\x00\x01\x02",
    }
    after = {
        "indent.py": body.replace("    return x", "\treturn x"),  # meaning, in Python
        "spaces.py": body.replace("    pass", "    pass  \t"),
        "inside.py": body.replace("return x", "return  x"),
        "code.py": body.replace("return x", "return -x"),
        "crlf.txt": "one\r\ntwo\r\n",
        "blank.py": body + "\n",  # a blank line added is a change to -w
        "moved_edited2.py": (body * 3).replace("pass", "  pass"),
        "gone.py": None,
        "empty_gone.txt": None,
        "new.py": "x = 1\n",
        "empty_new.txt": "",
        "eof.txt": "last\n",
        "image.bin": b"\x00\x01\x03",
        "moved_edited.py": None,
    }
    base, head = two_commits(
        tmp_path, before, after, renames={"moved.py": "moved2.py"}, executable=("mode.sh",)
    )
    paths, derived, by_git = facts(tmp_path, base, head)
    assert "moved.py" in paths and "moved2.py" in paths  # a rename's two names
    assert derived == {"spaces.py", "crlf.txt", "mode.sh", "eof.txt"}
    # git pairs the two empty files as a rename: a rename is always reviewed.
    assert by_git == derived | {"empty_gone.txt", "empty_new.txt"}


def test_a_whitespace_only_file_is_trivial_and_a_real_edit_is_not(tmp_path):
    base, head = two_commits(
        tmp_path,
        {"app.py": "x=1\ny=2\n", "lib.py": "x=1\n"},
        {"app.py": "x=1  \r\ny=2\t\n", "lib.py": "x = 1\n"},
    )
    diff = diff_parse(git(tmp_path, *DIFF, "--find-renames", base, head, "--"))
    assert triage_rule(diff, ["app.py"]).verdict == TRIVIAL
    assert triage_rule(diff, ["app.py", "lib.py"]).verdict == SUBSTANTIVE


LINES = st.sampled_from(["a", " a", "a ", "\ta", "", "b", " b", "a\r", "c c", "cc"])
TEXT = st.lists(LINES, max_size=8).map(lambda lines: "".join(f"{line}\n" for line in lines))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.dictionaries(st.sampled_from(["a.py", "b.py", "c/d.txt"]), TEXT, min_size=1),
    st.dictionaries(st.sampled_from(["a.py", "b.py", "c/d.txt", "e.py"]), TEXT | st.none()),
    st.booleans(),
)
@example({"a.py": "a\na \nb\n"}, {"a.py": "a \nb\na\n"}, False)  # edits git aligns its own way
def test_the_diff_never_calls_a_real_change_whitespace(before, after, rename):
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        renames = {"a.py": "moved.py"} if rename and "a.py" in before else None
        if renames:
            after = {name: text for name, text in after.items() if name != "a.py"}
        base, head = two_commits(root, before, after, renames=renames)
        _, derived, by_git = facts(root, base, head)
        assert derived <= by_git
