"""The checkout an engine reviews: the pull request's exact head commit, cloned with a
short-lived read-only token, then sanitised (DESIGN §5).

The token reaches git through `GIT_CONFIG_*` environment variables as an HTTP header:
never in a URL, in `.git/config`, on disk or in a log. The diff is computed locally
(never GitHub's diff endpoint, which refuses large pull requests) before `.git` is
removed. The workspace is deleted on exit, also when the review fails.
"""

from __future__ import annotations

import base64
import logging
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from sandbox.errors import CloneError

logger = logging.getLogger(__name__)

# Instructions for coding agents that a pull request could use to steer a reviewer.
AGENT_FILES = {"claude.md", "claude.local.md", "agents.md", ".mcp.json"}
AGENT_DIRS = {".claude", ".git"}
GIT_TIMEOUT = 600


@dataclass
class Checkout:
    root: Path
    head_sha: str
    base_sha: str
    merge_base: str
    diff: str
    removed: list[str] = field(default_factory=list)


class Workspace:
    """`with Workspace() as ws: checkout = ws.checkout(...)`; removed on exit."""

    def __init__(self, parent: str | None = None) -> None:
        self.parent = parent
        self.path: Path | None = None

    def __enter__(self) -> Workspace:
        self.path = Path(tempfile.mkdtemp(prefix="tasuku-ws-", dir=self.parent))
        return self

    def __exit__(self, *exc: object) -> None:
        if self.path is not None:
            _remove_tree(self.path)
            self.path = None

    def checkout(self, *, clone_url: str, token: str, head_sha: str, base_sha: str) -> Checkout:
        """Fetch `head_sha` and `base_sha` (history without blobs), diff the head against
        their merge base, check out the head, then sanitise the tree."""
        assert self.path is not None, "use Workspace as a context manager"
        root = self.path / "checkout"
        root.mkdir()
        env = _git_env(token, self.path)
        git = _Git(root, env)
        git("init", "--quiet")
        git("remote", "add", "origin", clone_url)
        git(
            "fetch", "--quiet", "--no-tags", "--filter=blob:none", "origin", head_sha, base_sha,
            what="fetch the pull request's commits",
        )  # fmt: skip
        found = git("merge-base", head_sha, base_sha, check=False)
        merge_base = found.strip() or base_sha
        diff = git(
            "-c", "core.quotePath=false", "diff", "--no-color", "--no-ext-diff",
            "--find-renames", "--unified=3", merge_base, head_sha,
            what="compute the diff",
        )  # fmt: skip
        git("-c", "advice.detachedHead=false", "checkout", "--quiet", "--detach", head_sha,
            what="check out the head commit")  # fmt: skip
        removed = sanitise(root)
        return Checkout(root, head_sha, base_sha, merge_base, diff, removed)


class _Git:
    def __init__(self, root: Path, env: dict[str, str]) -> None:
        self.root, self.env = root, env

    def __call__(self, *args: str, what: str = "", check: bool = True) -> str:
        try:
            completed = subprocess.run(  # noqa: S603
                ["git", *args],  # noqa: S607
                cwd=self.root,
                env=self.env,
                capture_output=True,
                text=True,
                timeout=GIT_TIMEOUT,
                check=False,
            )
        except subprocess.TimeoutExpired as exc:
            raise CloneError(
                f"git timed out after {GIT_TIMEOUT}s ({what or args[0]})", permanent=False
            ) from exc
        if completed.returncode != 0 and check:
            raise _clone_error(what or f"git {args[0]}", completed.stderr)
        return completed.stdout


def _clone_error(what: str, stderr: str) -> CloneError:
    text = stderr.strip().splitlines()
    detail = text[-1] if text else "no output"
    lowered = stderr.lower()
    if any(
        s in lowered for s in ("authentication failed", "403", "401", "could not read username")
    ):
        return CloneError(
            f"Could not {what}: access denied ({detail}). The App may not read this "
            "repository: grant it Contents: read.",
            permanent=True,
        )
    if (
        "not our ref" in lowered
        or "couldn't find remote ref" in lowered
        or "no such remote ref" in lowered
    ):
        return CloneError(
            f"Could not {what}: the commit is not on GitHub any more ({detail}).", permanent=True
        )
    if "repository not found" in lowered or " 404" in lowered:
        return CloneError(f"Could not {what}: repository not found ({detail}).", permanent=True)
    return CloneError(f"Could not {what}: {detail}", permanent=False)


def _git_env(token: str, home: Path) -> dict[str, str]:
    header = base64.b64encode(f"x-access-token:{token}".encode()).decode()
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),  # no user or system git configuration, no credential helpers
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_ASKPASS": "/bin/false",
        "GIT_LFS_SKIP_SMUDGE": "1",
        "LANG": "C",
        "GIT_CONFIG_COUNT": "3",
        "GIT_CONFIG_KEY_0": "http.extraHeader",
        "GIT_CONFIG_VALUE_0": f"Authorization: Basic {header}",
        "GIT_CONFIG_KEY_1": "credential.helper",
        "GIT_CONFIG_VALUE_1": "",
        "GIT_CONFIG_KEY_2": "protocol.version",
        "GIT_CONFIG_VALUE_2": "2",
    }


def sanitise(root: Path) -> list[str]:
    """Delete what could steer or leak from a reviewer: agent instruction files and
    folders at any depth, `.git`, and every symlink that resolves outside `root`.
    Returns what was removed, relative to `root`."""
    removed: list[str] = []
    real_root = Path(os.path.realpath(root))
    for directory, dirnames, filenames in os.walk(root, topdown=True, followlinks=False):
        here = Path(directory)
        for name in list(dirnames):
            path = here / name
            if path.is_symlink():
                dirnames.remove(name)
                filenames.append(name)  # handled as a link below
            elif name.lower() in AGENT_DIRS:
                dirnames.remove(name)
                _remove_tree(path)
                if name != ".git" or here != root:  # the root's .git always goes
                    removed.append(f"{path.relative_to(root)}/")
        for name in filenames:
            path = here / name
            relative = str(path.relative_to(root))
            if path.is_symlink():
                link = os.readlink(path)
                target = Path(os.path.realpath(path))
                if target != real_root and real_root not in target.parents:
                    path.unlink()
                    removed.append(f"{relative} -> {link}")
                    continue
            if name.lower() in AGENT_FILES or name.lower() == ".git":
                path.unlink()
                removed.append(relative)
    return sorted(removed)


def _remove_tree(path: Path) -> None:
    def make_writable(function, failed, excinfo):  # read-only files from git objects
        os.chmod(failed, 0o700)
        function(failed)

    shutil.rmtree(path, onerror=make_writable)
