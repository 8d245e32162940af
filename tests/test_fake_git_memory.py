"""The fake GitHub's repositories built from memory (`_Built` in tests/fakes/github/git.py)
are the repositories git builds: the same commits, every object there, the branch where
`git update-ref` puts it, and clones that check out the same files."""

from __future__ import annotations

import subprocess

import pytest

from tests.fakes.github.git import GitRepo, Symlink, _built

FILES = {
    "README.md": "# Shop\n",
    "app/run.sh": "#!/bin/sh\necho hi\n",
    "app/data.bin": b"\0\1\2",
    "link": Symlink("README.md"),
}


def _world(git_dir):
    repo = GitRepo.init(git_dir)
    base = repo.commit(FILES, message="base", branch="main")
    head = repo.commit(
        {"app/new.py": "x = 1\n", "README.md": None}, parent=base, message="head", branch="feature"
    )
    return repo, base, head


def _git(git_dir, *args):
    return subprocess.run(
        ["git", "--git-dir", str(git_dir), *args], capture_output=True, text=True, check=True
    ).stdout


def test_a_world_built_again_from_memory_is_the_same_repository(tmp_path):
    first, base, head = _world(tmp_path / "first.git")
    again, base_again, head_again = _world(tmp_path / "again.git")
    assert (base_again, head_again) == (base, head)
    # Every object there (fsck reads them all), the refs where git puts them.
    assert _git(again.git_dir, "fsck", "--strict", "--no-dangling") == ""
    assert _git(again.git_dir, "rev-parse", "main", "feature").split() == [base, head]
    assert _git(again.git_dir, "for-each-ref") == _git(first.git_dir, "for-each-ref")
    assert _git(again.git_dir, "config", "uploadpack.allowAnySHA1InWant") == "true\n"
    for repo in (first, again):
        checkout = tmp_path / f"checkout-{repo.git_dir.stem}"
        subprocess.run(["git", "clone", "-q", "-b", "feature", str(repo.git_dir), str(checkout)],
                       check=True)  # fmt: skip
        assert sorted(p.name for p in checkout.iterdir() if p.name != ".git") == [
            "app", "link",
        ]  # fmt: skip
        assert (checkout / "app" / "run.sh").stat().st_mode & 0o111
        assert (checkout / "link").is_symlink()
    # The next commit (from memory or not) goes on from the same clock.
    assert first.commit({"a": "1"}, parent=head) == again.commit({"a": "1"}, parent=head)


def test_a_commit_differing_in_anything_is_built_by_git(tmp_path):
    repo, base, head = _world(tmp_path / "one.git")
    other = GitRepo.init(tmp_path / "other.git")
    other_base = other.commit({**FILES, "README.md": "# Shop!\n"}, message="base", branch="main")
    assert other_base != base
    later = GitRepo.init(tmp_path / "later.git")
    later._clock += 1  # another clock: another commit
    assert later.commit(FILES, message="base", branch="main") != base
    renamed = GitRepo.init(tmp_path / "renamed.git")
    assert renamed.commit(FILES, message="base!", branch="main") != base


def test_a_parent_the_repository_lacks_fails_as_git_fails(tmp_path):
    _, base, _ = _world(tmp_path / "one.git")
    empty = GitRepo.init(tmp_path / "empty.git")
    with pytest.raises(RuntimeError, match="read-tree"):
        empty.commit({"app/new.py": "x = 1\n", "README.md": None}, parent=base, message="head")


def test_memory_is_used(tmp_path, monkeypatch):
    """The second world runs no git at all (what makes it worth having)."""
    _world(tmp_path / "one.git")
    assert _built.commits
    ran = []
    real = subprocess.run
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: ran.append(a) or real(*a, **k))
    _world(tmp_path / "two.git")
    assert ran == []
