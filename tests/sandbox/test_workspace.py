"""The workspace: the exact head commit, cloned with a token that lands nowhere,
sanitised, and removed afterwards."""

from __future__ import annotations

import os

import pytest

from repos import github
from sandbox.errors import CloneError
from sandbox.workspace import Workspace, sanitise
from tests.gitworld import REPO, REPO_ID, world_build


def test_sanitise_removes_agent_files_git_and_links_out_of_the_checkout(tmp_path):
    root = tmp_path / "checkout"
    (root / "src" / "deep" / ".claude").mkdir(parents=True)
    (root / ".codex").mkdir()
    (root / ".codex" / "config.toml").write_text("model = 'x'\n")
    (root / ".git").mkdir()
    (root / ".git" / "config").write_text("[core]\n")
    (root / "vendor" / "lib").mkdir(parents=True)
    (root / "vendor" / "lib" / ".git").write_text("gitdir: ../../.git/modules/lib\n")
    for path in ("CLAUDE.md", "src/claude.md", "src/CLAUDE.local.md", "src/deep/AGENTS.md", ".mcp.json",
                 "AGENTS.override.md",
                 "src/deep/.claude/settings.json", "README.md", "src/app.py"):  # fmt: skip
        (root / path).write_text("x\n")
    os.symlink("/etc/passwd", root / "passwd")
    os.symlink("/", root / "src" / "rootdir")
    os.symlink("/nonexistent/secret", root / "dangling")
    os.symlink("../README.md", root / "src" / "readme")
    os.symlink("src", root / "srclink")

    removed = sanitise(root)

    assert removed == sorted([
        ".codex/", ".mcp.json", "AGENTS.override.md", "CLAUDE.md", "dangling -> /nonexistent/secret",
        "passwd -> /etc/passwd",
        "src/CLAUDE.local.md", "src/claude.md", "src/deep/.claude/", "src/deep/AGENTS.md",
        "src/rootdir -> /", "vendor/lib/.git",
    ])  # fmt: skip
    assert not (root / ".git").exists()
    assert (root / "README.md").exists() and (root / "src" / "app.py").exists()
    assert (root / "src" / "readme").is_symlink()  # points inside: kept
    assert (root / "srclink").is_symlink()


def test_it_checks_out_the_exact_head_commit_and_diffs_it_against_the_merge_base(fake_github):
    world = world_build(fake_github)
    old_head = world.head
    world.push({"app/payments.py": "print('later')\n"})  # the branch moves on
    token = github.gateway().contents_token(installation_id=41, repository_id=REPO_ID)
    with Workspace() as workspace:
        checkout = workspace.checkout(
            clone_url=f"{fake_github.url}/{REPO}.git",
            token=token,
            head_sha=old_head,
            base_sha=world.base,
        )
        root = checkout.root
        assert "subprocess.call(cmd, shell=True)" in (root / "app" / "payments.py").read_text()
        assert not (root / ".git").exists()
        assert checkout.merge_base == world.base
        assert "+++ b/app/payments.py" in checkout.diff and "+++ b/deploy.sh" in checkout.diff
        assert "legacy.py" not in checkout.diff
    assert not root.exists()
    assert all(c.status == 200 for c in fake_github.requests(path=r"\.git/"))


def test_the_token_is_sent_as_a_header_not_in_the_url_or_on_disk(fake_github, monkeypatch):
    world = world_build(fake_github)
    token = github.gateway().contents_token(installation_id=41, repository_id=REPO_ID)
    with Workspace() as workspace:
        # Keep .git this time, to look inside it as well.
        monkeypatch.setattr("sandbox.workspace.sanitise", lambda root: [])
        workspace.checkout(
            clone_url=f"{fake_github.url}/{REPO}.git",
            token=token,
            head_sha=world.head,
            base_sha=world.base,
        )
        files = [p for p in workspace.path.rglob("*") if p.is_file() and not p.is_symlink()]
        assert any(".git" in p.parts for p in files)
        for path in files:
            assert token.encode() not in path.read_bytes(), path
    assert all(token not in c.path for c in fake_github.requests(path=r"\.git/"))


def test_a_token_without_access_is_a_permanent_clone_error_that_says_what_to_grant(fake_github):
    world = world_build(fake_github)
    with Workspace() as workspace, pytest.raises(CloneError) as caught:
        workspace.checkout(clone_url=f"{fake_github.url}/{REPO}.git", token="ghs_revoked",
                           head_sha=world.head, base_sha=world.base)  # fmt: skip
    assert caught.value.permanent and caught.value.code == "clone-access"
    assert "grant it Contents: read" in str(caught.value)
    assert "ghs_revoked" not in str(caught.value)


def test_a_commit_that_no_longer_exists_is_a_permanent_clone_error(fake_github):
    world = world_build(fake_github)
    token = github.gateway().contents_token(installation_id=41, repository_id=REPO_ID)
    with Workspace() as workspace, pytest.raises(CloneError) as caught:
        workspace.checkout(clone_url=f"{fake_github.url}/{REPO}.git", token=token,
                           head_sha="f" * 40, base_sha=world.base)  # fmt: skip
    assert caught.value.permanent and caught.value.code == "clone-commit-gone"


def test_the_workspace_is_removed_when_the_review_fails():
    with pytest.raises(RuntimeError), Workspace() as workspace:
        path = workspace.path
        (path / "file").write_text("x")
        raise RuntimeError("engine crashed")
    assert not path.exists()


@pytest.mark.parametrize(
    ("stderr", "denied"),
    [
        ("fatal: Authentication failed for 'https://github.com/acme/shop/'", True),
        (
            "fatal: unable to access 'https://github.com/acme/shop/': The requested URL returned error: 403",
            True,
        ),
        ("error: RPC failed; HTTP 401 curl 22 The requested URL returned error: 401", True),
        (
            "fatal: could not read Username for 'https://github.com': terminal prompts disabled",
            True,
        ),
        # A port, a commit id: the digits of a status, no refusal.
        ("error: http://127.0.0.1:40187/acme/shop.git did not send all necessary objects", False),
        ("fatal: bad object 4031c2d9e8b7a6f5e4d3c2b1a09f8e7d6c5b4a39", False),
    ],
)
def test_only_a_refusal_reads_as_access_denied(stderr, denied):
    from sandbox.git import clone_error

    error = clone_error("fetch the pull request's commits", stderr)
    assert (error.code == "clone-access") is denied
    if not denied:
        assert not error.permanent  # a broken mirror or a hiccup: tried again, or afresh
