"""A well-formed hunk is read by Tasuku's own loop (`_hunk_read`), any other by unidiff:
the two must agree line for line on every hunk the loop accepts, and the loop must leave
to unidiff every hunk it does not read exactly as unidiff would (reviews/scope/diff.py)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from unidiff import PatchSet
from unidiff.errors import UnidiffParseError

from reviews.scope import diff as diff_module
from reviews.scope.diff import DiffError, _hunk_read, _hunks_of, diff_parse

ROOT = Path(__file__).resolve().parents[2]


def by_unidiff(text: str):
    """The hunk as unidiff reads it, or the error it raises."""
    try:
        patch = PatchSet("--- a/file\n+++ b/file\n" + text)
    except UnidiffParseError as exc:
        return exc
    return _hunks_of(patch[0] if len(patch) else None, [text])


BODY_LINE = st.one_of(
    st.sampled_from(["", " ", "+", "-", "\\ No newline at end of file", "\r", "\\ other"]),
    st.tuples(st.sampled_from([" ", "+", "-", "x", "@", "\\"]), st.text(max_size=8)).map(
        lambda pair: pair[0] + pair[1].replace("\n", "")
    ),
)


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(
    start=st.tuples(st.integers(0, 5), st.integers(0, 5)),
    lengths=st.tuples(st.none() | st.integers(0, 6), st.none() | st.integers(0, 6)),
    body=st.lists(BODY_LINE, max_size=12),
    newline=st.booleans(),
)
@example(start=(1, 1), lengths=(2, 2), body=[" a", "-b", "+c", "\\ No newline at end of file"],
         newline=True)  # fmt: skip
@example(start=(0, 1), lengths=(0, 3), body=["+a", "", "+c"], newline=True)
@example(start=(3, 3), lengths=(1, 1), body=[" a", "\\ No newline at end of file", " b"],
         newline=True)  # fmt: skip
def test_a_hunk_read_here_is_the_hunk_unidiff_reads(start, lengths, body, newline):
    def count(n):
        return "" if n is None else f",{n}"

    header = f"@@ -{start[0]}{count(lengths[0])} +{start[1]}{count(lengths[1])} @@ def f():"
    text = "\n".join([header, *body]) + ("\n" if newline else "")
    read = _hunk_read(text)
    if read is not None:
        assert by_unidiff(text) == [read]


def test_every_diff_of_this_repositorys_history_reads_the_same_either_way(monkeypatch):
    """Real diffs: the newest commits of Tasuku's own history (every kind of file it
    holds), as many as change 300 files or more (150 commits did, until a run of one-file
    commits made them 286), each read with the loop and again with unidiff alone."""
    names = subprocess.run(
        ["git", "-C", str(ROOT), "log", "-1000", "--format=%x00", "--name-only",
         "--find-renames", "HEAD"],
        capture_output=True, check=False,
    )  # fmt: skip
    commits, files = 0, 0
    for commit in names.stdout.decode("utf-8", errors="surrogateescape").split("\0")[1:]:
        commits, files = commits + 1, files + len([n for n in commit.split("\n") if n])
        if files > 300:
            break
    done = subprocess.run(
        ["git", "-C", str(ROOT), "log", f"-{commits}", "-p", "--format=", "--no-color",
         "--no-ext-diff", "--find-renames", "--unified=3", "HEAD"],
        capture_output=True, check=False,
    )  # fmt: skip
    if done.returncode != 0 or not done.stdout:
        pytest.skip("no git history here (an archive, not a clone)")
    text = done.stdout.decode("utf-8", errors="surrogateescape")
    # One `Diff` per commit's files: each file read both ways.
    ours = diff_parse(text)
    monkeypatch.setattr(diff_module, "_hunk_read", lambda text: None)
    theirs = diff_parse(text)
    assert len(ours.files) > 300
    assert ours == theirs


def test_a_malformed_hunk_is_still_refused_with_unidiffs_reason():
    text = "diff --git a/x.py b/x.py\n--- a/x.py\n+++ b/x.py\n@@ -1,2 +1,2 @@\n a\n-b\n"
    with pytest.raises(DiffError, match="shorter than expected"):
        diff_parse(text)
    junk = "diff --git a/x.py b/x.py\n--- a/x.py\n+++ b/x.py\n@@ -1 +1 @@\n?a\n"
    with pytest.raises(DiffError, match="Hunk diff line expected"):
        diff_parse(junk)
