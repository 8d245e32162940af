"""The checkout cache: one bare mirror per repository, fetched incrementally; each
review's checkout is a worktree of it, exactly what a fresh clone gives."""

from __future__ import annotations

import fcntl
import os
import subprocess
import threading
import time
from pathlib import Path

import pytest

from repos import github
from repos.github import RepoRef
from sandbox import workspace as workspace_module
from sandbox.errors import CloneError
from sandbox.git import git_env
from sandbox.workspace import Workspace, mirror_discard, mirror_open, mirrors_prune
from tests.gitworld import REPO, REPO_ID, world_build


def _objects(mirror: Path) -> int:
    out = subprocess.run(
        ["git", "count-objects", "-v"], cwd=mirror, capture_output=True, text=True, check=True
    ).stdout
    counts = dict(line.split(": ") for line in out.splitlines())
    return int(counts["count"]) + int(counts["in-pack"])


def _checkout(fake, tmp_path, head, base, previous=None, *, mirror=None):
    token = github.gateway().contents_token(RepoRef(41, REPO_ID, REPO))
    with Workspace(str(tmp_path)) as ws:
        checkout = ws.checkout(
            clone_url=f"{fake.url}/{REPO}.git", token=token, head_sha=head, base_sha=base,
            previous_sha=previous, mirror=mirror,
        )  # fmt: skip
        files = {
            str(p.relative_to(checkout.root)): p.read_bytes()
            for p in sorted(checkout.root.rglob("*"))
            if p.is_file()
        }
        facts = (checkout.diff,
                 checkout.incremental_since, checkout.previous_diff, checkout.anchor_diff,
                 checkout.merge_base, checkout.removed)  # fmt: skip
    return facts, files


@pytest.fixture
def history(fake_github):
    """A pull request on a repository with some history (so that a fetch of everything
    and a fetch of one new commit differ plainly)."""
    world = world_build(fake_github)
    for n in range(12):
        world.base = world.git.commit(
            {f"lib/mod{n}.py": f"VALUE = {n}\n" * 20}, parent=world.base, branch="main"
        )
    world.pull.base_sha = world.base
    world.head = world.push({"app/payments.py": "print('rebased')\n"})
    return world


def test_a_checkout_from_the_mirror_is_the_checkout_a_fresh_clone_gives(
    fake_github, history, tmp_path
):
    mirror = tmp_path / "mirrors" / "9001.git"
    first = history.head
    assert _checkout(fake_github, tmp_path, first, history.base, mirror=mirror) == _checkout(
        fake_github, tmp_path, first, history.base
    )
    second = history.push({"app/payments.py": "print('second')\n", "notes.txt": "x\n"})
    # An incremental review of the new commit, from the warm mirror and afresh.
    assert _checkout(fake_github, tmp_path, second, history.base, first, mirror=mirror) == (
        _checkout(fake_github, tmp_path, second, history.base, first)
    )
    assert not (tmp_path / "checkout").exists()
    assert {p.name for p in tmp_path.iterdir()} == {"mirrors"}  # workspaces are gone


def test_a_re_review_fetches_only_what_the_mirror_lacks(fake_github, history, tmp_path):
    mirror = tmp_path / "mirrors" / "9001.git"
    _checkout(fake_github, tmp_path, history.head, history.base, mirror=mirror)
    cold = _objects(mirror)
    second = history.push({"app/payments.py": "print('second')\n"})
    _checkout(fake_github, tmp_path, second, history.base, history.head, mirror=mirror)
    # one commit, its root and app/ trees, the changed blob
    assert 0 < _objects(mirror) - cold <= 5
    assert cold > 40  # what a fresh clone fetches every time
    # The same head again fetches nothing.
    before = _objects(mirror)
    _checkout(fake_github, tmp_path, second, history.base, second, mirror=mirror)
    assert _objects(mirror) == before
    worktrees = mirror / "worktrees"
    assert not worktrees.exists() or len(list(worktrees.iterdir())) <= 1


def test_the_pull_requests_attributes_do_not_change_the_checkout_from_the_mirror(
    fake_github, tmp_path
):
    world = world_build(
        fake_github,
        head_files={".gitattributes": "*.txt text eol=crlf\n", "a.txt": "one\ntwo\n"},
    )
    _, files = _checkout(fake_github, tmp_path, world.head, world.base,
                         mirror=tmp_path / "m" / "1.git")  # fmt: skip
    assert files["a.txt"] == b"one\ntwo\n"
    assert ".git" not in files  # the worktree's link to the mirror is gone, unreported


def test_the_token_lands_nowhere_in_the_mirror(fake_github, history, tmp_path):
    mirror = tmp_path / "mirrors" / "9001.git"
    _checkout(fake_github, tmp_path, history.head, history.base, mirror=mirror)
    token = github.gateway().contents_token(RepoRef(41, REPO_ID, REPO))
    for path in mirror.rglob("*"):
        if path.is_file():
            assert token.encode() not in path.read_bytes(), path
    assert "x-access-token" not in (mirror / "config").read_text()


def test_a_broken_mirror_is_set_aside_and_the_review_cloned_afresh(fake_github, history, tmp_path):
    mirror = tmp_path / "mirrors" / "9001.git"
    expected = _checkout(fake_github, tmp_path, history.head, history.base)
    _checkout(fake_github, tmp_path, history.head, history.base, mirror=mirror)
    for pack in (mirror / "objects" / "pack").iterdir():
        pack.write_bytes(b"garbage")  # a disk fault
    assert _checkout(fake_github, tmp_path, history.head, history.base, mirror=mirror) == expected
    assert not mirror.exists()  # discarded; the next review makes a new one
    assert _checkout(fake_github, tmp_path, history.head, history.base, mirror=mirror) == expected
    assert (mirror / "HEAD").is_file()


def test_a_busy_mirror_does_not_hold_a_review_up_nor_is_it_discarded(
    fake_github, history, tmp_path, monkeypatch
):
    mirror = tmp_path / "mirrors" / "9001.git"
    _checkout(fake_github, tmp_path, history.head, history.base, mirror=mirror)
    monkeypatch.setattr(workspace_module, "MIRROR_WAIT", 0.3)
    with open(mirror.with_name("9001.git.lock"), "a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # another worker is fetching
        facts, files = _checkout(fake_github, tmp_path, history.head, history.base, mirror=mirror)
    assert b"rebased" in files["app/payments.py"]
    assert (mirror / "HEAD").is_file()


def test_a_commit_gone_from_github_is_still_a_permanent_error_with_a_mirror(
    fake_github, history, tmp_path
):
    mirror = tmp_path / "mirrors" / "9001.git"
    with pytest.raises(CloneError) as caught:
        _checkout(fake_github, tmp_path, "f" * 40, history.base, mirror=mirror)
    assert caught.value.permanent


def test_reviews_of_one_repository_at_once_share_its_mirror(fake_github, history, tmp_path):
    mirror = tmp_path / "mirrors" / "9001.git"
    second = history.push({"app/payments.py": "print('second')\n"})
    results: dict[str, bytes] = {}
    errors: list[BaseException] = []

    def review(head: str) -> None:
        try:
            _, files = _checkout(fake_github, tmp_path, head, history.base, mirror=mirror)
            results[head] = files["app/payments.py"]
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=review, args=(h,)) for h in (history.head, second)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert results == {history.head: b"print('rebased')\n", second: b"print('second')\n"}


def test_idle_mirrors_are_pruned_and_busy_or_recent_ones_kept(tmp_path):
    root = tmp_path / "mirrors"
    for name in ("1.git", "2.git", "3.git"):
        (root / name).mkdir(parents=True)
        (root / name / "HEAD").write_text("ref: refs/heads/main\n")
        (root / f"{name}.lock").touch()
    old = time.time() - 30 * 86400
    os.utime(root / "1.git.lock", (old, old))
    os.utime(root / "2.git.lock", (old, old))
    with open(root / "2.git.lock", "a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # in use right now
        assert mirrors_prune(root, 14 * 86400) == ["1.git"]
    assert not (root / "1.git").exists() and not (root / "1.git.lock").exists()
    assert (root / "2.git").exists() and (root / "3.git").exists()
    assert mirrors_prune(tmp_path / "none", 1) == []
    assert mirror_discard(root / "3.git") and not (root / "3.git").exists()


def _git(where: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=where, capture_output=True, text=True, check=True
    ).stdout


def test_a_mirror_is_tidied_by_tasuku_alone_and_follows_a_renamed_repository(tmp_path):
    mirror = tmp_path / "mirrors" / "9001.git"
    mirror.parent.mkdir()
    env = git_env("", tmp_path, authenticate=False)
    mirror_open(mirror, env, "https://github.example/acme/shop.git")
    assert _git(mirror, "config", "gc.auto") == "0\n"
    assert _git(mirror, "config", "maintenance.auto") == "false\n"
    assert _git(mirror, "config", "--get-all", "remote.origin.fetch") == (
        "+refs/heads/*:refs/remotes/origin/*\n"
    )
    mirror_open(mirror, env, "https://github.example/acme/store.git")
    assert _git(mirror, "config", "--get-all", "remote.origin.url") == (
        "https://github.example/acme/store.git\n"
    )
    # A mirror made before Tasuku noted its URL beside it has it set all the same.
    (mirror / "tasuku-origin").unlink()
    _git(mirror, "remote", "set-url", "origin", "https://github.example/old/name.git")
    mirror_open(mirror, env, "https://github.example/acme/store.git")
    assert _git(mirror, "config", "remote.origin.url") == "https://github.example/acme/store.git\n"


def test_a_mirror_holds_nothing_of_the_hosts_git_template(tmp_path):
    """git copies its template directory (sample hooks, and whatever hook an
    administrator put there) into every repository it makes; the repositories a review
    makes get none: a hook there would run on checking out the pull request."""
    mirror = tmp_path / "mirrors" / "9001.git"
    mirror.parent.mkdir()
    mirror_open(mirror, git_env("", tmp_path, authenticate=False), "https://github.example/a/b.git")
    assert (mirror / "HEAD").is_file()
    assert not (mirror / "hooks").exists()


def test_a_review_leaves_no_worktree_record_and_one_a_failed_review_left_is_pruned(
    fake_github, history, tmp_path
):
    mirror = tmp_path / "mirrors" / "9001.git"
    _checkout(fake_github, tmp_path, history.head, history.base, mirror=mirror)
    assert not (mirror / "worktrees").exists()
    # A review that died with its checkout made: its workspace went, its record stayed.
    _git(mirror, "worktree", "add", "--detach", "--no-checkout", str(tmp_path / "gone"),
         history.head)  # fmt: skip
    workspace_module.remove_tree(tmp_path / "gone")
    assert [p.name for p in (mirror / "worktrees").iterdir()] == ["gone"]
    second = history.push({"app/payments.py": "print('second')\n"})
    facts, files = _checkout(fake_github, tmp_path, second, history.base, mirror=mirror)
    assert files["app/payments.py"] == b"print('second')\n"
    assert not (mirror / "worktrees").exists()


def test_the_mirror_keeps_the_newest_commits_refs_loose_or_packed(
    fake_github, history, tmp_path, monkeypatch
):
    mirror = tmp_path / "mirrors" / "9001.git"
    monkeypatch.setattr(workspace_module, "MIRROR_REFS", 3)
    _checkout(fake_github, tmp_path, history.head, history.base, mirror=mirror)
    second = history.push({"app/payments.py": "print('second')\n"})
    _checkout(fake_github, tmp_path, second, history.base, history.head, mirror=mirror)
    refs = lambda: _git(mirror, "for-each-ref", "--format=%(objectname)", "refs/tasuku/").split()  # noqa: E731
    assert sorted(refs()) == sorted([history.base, history.head, second])
    _git(mirror, "pack-refs", "--all")  # git's own gc packs them
    third = history.push({"app/payments.py": "print('third')\n"})
    _checkout(fake_github, tmp_path, third, history.base, second, mirror=mirror)
    # The newest by their commits' dates: the base (committed before the heads) went.
    assert sorted(refs()) == sorted([history.head, second, third])


def test_a_previous_head_gone_from_github_keeps_the_head_and_base_in_the_mirror(
    fake_github, history, tmp_path
):
    mirror = tmp_path / "mirrors" / "9001.git"
    facts, _ = _checkout(fake_github, tmp_path, history.head, history.base, "e" * 40,
                         mirror=mirror)  # fmt: skip
    assert facts[2] is None  # no previous diff: that commit is nowhere
    kept = _git(mirror, "for-each-ref", "--format=%(objectname)", "refs/tasuku/").split()
    assert sorted(kept) == sorted([history.head, history.base])


def test_a_first_review_fetches_the_files_it_reads_in_one_request_whatever_their_number(
    fake_github, tmp_path
):
    """A partial clone lacks every file: what the diff, the linters' configurations, the
    base's `.gitattributes` and `.tasuku.toml`, and the checkout read of them comes in
    one request after the history, not one request a file (GitHub answers each fetch
    after a round trip: a monorepo's fifty `pyproject.toml` were fifty of them)."""
    world = world_build(fake_github)
    configs = {f"packages/p{n}/pyproject.toml": f'[project]\nname = "p{n}"\n' for n in range(8)}
    configs |= {"setup.cfg": "[flake8]\nmax-line-length = 99\n", "tox.ini": "[tox]\n",
                ".gitattributes": "gen/** linguist-generated\n",
                ".tasuku.toml": "[review]\n", "web/.oxlintrc.json": "{}\n",
                "lib/old_name.py": "VALUE = 1\n" * 30}  # fmt: skip
    base = world.git.commit(configs, parent=world.base, branch="main")
    head = world.git.commit(
        {"app/payments.py": "print('changed')\n", "lib/old_name.py": None,
         "lib/new_name.py": "VALUE = 1\n" * 29 + "VALUE = 2\n"},
        parent=base, branch="feature",
    )  # fmt: skip
    world.repo.commits.add(head)
    before = len(fake_github.requests(method="POST", path=r"git-upload-pack$"))
    token = github.gateway().contents_token(RepoRef(41, REPO_ID, REPO))
    with Workspace(str(tmp_path)) as ws:
        checkout = ws.checkout(
            clone_url=f"{fake_github.url}/{REPO}.git", token=token, head_sha=head,
            base_sha=base, mirror=tmp_path / "mirrors" / "1.git",
        )  # fmt: skip
        assert (checkout.root / "lib" / "new_name.py").read_text().endswith("VALUE = 2\n")
        assert "rename from lib/old_name.py" in checkout.diff
    posts = fake_github.requests(method="POST", path=r"git-upload-pack$")[before:]
    assert len(posts) == 2, len(posts)  # the history, then every file read
    assert set(checkout.base_configs) == {*(p for p in configs if p.endswith((".toml", ".cfg",
                                          ".ini", ".json")) and p != ".tasuku.toml")}  # fmt: skip
    assert checkout.base_configs["setup.cfg"] == configs["setup.cfg"]
    assert checkout.base_attributes == configs[".gitattributes"]
    assert checkout.base_tasuku_config == "[review]\n"


def test_a_failed_fetch_of_the_files_is_made_good_by_the_commands_that_read_them(
    fake_github, history, tmp_path
):
    """GitHub answers the fetch of the files with a 502: the diff and the checkout fetch
    what they still lack, and the checkout is the one a fetch that worked gives."""
    expected = _checkout(fake_github, tmp_path, history.head, history.base)
    failed = fake_github.inject(1, status=502, method="POST", path=r"git-upload-pack$", skip=1)
    got = _checkout(fake_github, tmp_path, history.head, history.base,
                    mirror=tmp_path / "mirrors" / "1.git")  # fmt: skip
    assert failed.count == 0  # the 502 was answered
    assert got == expected
