"""Secondary repositories: other repositories a review reads as context, each mounted
read-only beside the checkout at the commit an operator pinned and approved.

The workspace holds `checkout/` (the pull request) and `secondary/<owner>/<name>/` (each
secondary), so from the checkout a secondary is `../secondary/<owner>/<name>` on every
runner (in a container: `/workspace` and `/secondary/<owner>/<name>`), and the agent's
tools read it as `secondary/<owner>/<name>/…` (`Secondary.location`, the contract).

Each is fetched with a token that can read that one repository and nothing else (git
gets it as a header through its environment, as for the checkout), at its pinned commit
only, sanitised exactly as the checkout is (`sanitise`: agent instruction files and
folders, `.git`, links leading out), and then made read-only: every file and folder
loses its write bits, and the docker runner mounts it read-only as well. With a checkout
cache, the secondary's own mirror (by its GitHub id, as if it were reviewed) holds the
pinned commit, so a commit fetched once is never fetched again.

Imports nothing from Django: the GitHub Actions runner mounts secondaries too.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

from sandbox.contract import Secondary, secondary_path
from sandbox.errors import CloneError
from sandbox.git import Git, attributes_neutralise, commit_ids, git_env
from sandbox.workspace import (
    _mirror_locked,
    _mirror_tidy,
    _MirrorBusy,
    mirror_discard,
    mirror_open,
    remove_tree,
    sanitise,
    worktrees_prune,
)

# How a secondary that is not mounted is named in a review's limitations; the worker
# and the Actions runner both write it, and a context source is never claimed for one.
UNMOUNTED = "The secondary repository {full_name} was not mounted"


@dataclass
class SecondaryMount:
    """One secondary repository of a run: mounted (`root`), or not, and why (`note`)."""

    full_name: str
    commit: str
    path: str
    root: Path | None = None
    note: str = ""
    removed: list[str] = field(default_factory=list)

    @property
    def mounted(self) -> bool:
        return self.root is not None

    def secondary(self) -> Secondary:
        return Secondary(full_name=self.full_name, commit=self.commit, path=self.path)

    def record(self) -> dict:
        """What the run's page shows of it."""
        return {
            "full_name": self.full_name,
            "commit": self.commit,
            "path": self.path,
            "mounted": self.mounted,
            "note": self.note,
            "removed": self.removed[:50],
        }


def unmounted(full_name: str, commit: str, why: str) -> SecondaryMount:
    return SecondaryMount(full_name, commit, secondary_path(full_name), note=why)


def unmounted_limitation(full_name: str, why: str) -> str:
    return f"{UNMOUNTED.format(full_name=full_name)}: {why.rstrip('.')}."


def says_unmounted(text: str, full_name: str) -> bool:
    """Whether a limitation says `full_name` was not mounted."""
    return text.startswith(UNMOUNTED.format(full_name=full_name) + ":")


def mount(
    workspace: Path,
    *,
    full_name: str,
    commit: str,
    clone_url: str,
    token: str,
    mirror: Path | None = None,
) -> SecondaryMount:
    """Fetch `full_name` at `commit` into `workspace/secondary/<owner>/<name>`, sanitise it
    and make it read-only. A CloneError says why it could not be (permanent: the App may
    not read it, it is gone, the commit is gone)."""
    secondary = Secondary(full_name=full_name, commit=commit, path=secondary_path(full_name))
    commit_ids(commit)
    root = workspace / secondary.path
    root.parent.mkdir(parents=True, exist_ok=True)
    env = git_env(token, workspace)
    broken = False
    done = False
    if mirror is not None:
        try:
            _from_mirror(mirror, root, env, clone_url, commit)
            done = True
        except _MirrorBusy:
            pass
        except (CloneError, OSError) as exc:
            if isinstance(exc, CloneError) and exc.permanent:
                raise
            broken = True
        if not done and root.exists():
            remove_tree(root)
    if not done:
        _clone_fresh(root, env, clone_url, commit)
        if broken and mirror is not None:
            mirror_discard(mirror)
    removed = sanitise(root)
    read_only(root)
    return SecondaryMount(full_name, commit, secondary.path, root=root, removed=removed)


def _clone_fresh(root: Path, env: dict[str, str], clone_url: str, commit: str) -> None:
    """The pinned commit alone: one commit's tree, no history."""
    root.mkdir()
    git = Git(root, env)
    git("init", "--quiet")
    git("remote", "add", "origin", clone_url)
    attributes_neutralise(root / ".git")
    git(
        "fetch",
        "--quiet",
        "--no-tags",
        "--depth=1",
        "origin",
        commit,
        what="fetch the secondary repository's pinned commit",
    )
    _check_out(git, commit)


def _from_mirror(
    mirror: Path, root: Path, env: dict[str, str], clone_url: str, commit: str
) -> None:
    """A worktree of the secondary's mirror at the pinned commit; the mirror fetches it
    only when it does not hold it yet (a pinned commit never changes)."""
    mirror.parent.mkdir(parents=True, exist_ok=True)
    with _mirror_locked(mirror):
        git = mirror_open(mirror, env, clone_url)
        held = git("cat-file", "-e", f"{commit}^{{commit}}", check=False, returncode=True) == "0"
        if not held:
            git(
                "fetch",
                "--quiet",
                "--no-tags",
                "--filter=blob:none",
                "origin",
                commit,
                what="fetch the secondary repository's pinned commit",
            )
        git("update-ref", f"refs/tasuku/{commit}", commit)
        worktrees_prune(git, mirror)
        git(
            "worktree",
            "add",
            "--quiet",
            "--detach",
            "--no-checkout",
            str(root),
            commit,
            what="make the secondary repository's checkout",
        )
        _check_out(Git(root, env), commit)
        _mirror_tidy(git, mirror)


def _check_out(git: Git, commit: str) -> None:
    git(
        "-c",
        "advice.detachedHead=false",
        "checkout",
        "--quiet",
        "--detach",
        commit,
        what="check out the secondary repository's pinned commit",
    )


def read_only(root: Path) -> None:
    """Take every write bit off the tree (files and folders, `root` included), never
    through a link: the engine's user can read it and cannot change it (unless it is
    root; the docker runner's read-only mount holds for root too)."""
    for directory, dirnames, filenames in os.walk(root, topdown=False, followlinks=False):
        for name in [*filenames, *dirnames]:
            _unwritable(Path(directory) / name)
    _unwritable(root)


def _unwritable(path: Path) -> None:
    mode = os.lstat(path).st_mode
    if stat.S_ISLNK(mode):
        return
    os.chmod(path, stat.S_IMODE(mode) & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))
