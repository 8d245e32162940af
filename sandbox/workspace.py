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
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from sandbox.errors import CloneError

logger = logging.getLogger(__name__)

# Instructions for coding agents that a pull request could use to steer a reviewer
# (Claude Code's and Codex's instruction files, settings and MCP servers).
AGENT_FILES = {"claude.md", "claude.local.md", "agents.md", "agents.override.md", ".mcp.json"}
AGENT_DIRS = {".claude", ".codex", ".git"}
GIT_TIMEOUT = 600
COMMIT_ID = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
# Every diff: names unquoted (git still quotes a name with a quote, a backslash or a
# control character: reviews/diff.py reads those), no colour, and no program or
# conversion of the pull request's choosing (external diff drivers, textconv).
DIFF = ("-c", "core.quotePath=false", "diff", "--no-color", "--no-ext-diff", "--no-textconv")
# The pull request's own `.gitattributes` must not change what the reviewer reads:
# re-encode files (`working-tree-encoding`), convert line ends (`text`, `eol`, `crlf`),
# run or skip a filter (`filter`), expand keywords (`ident`, `export-subst`) or hide
# changes from the diff (`-diff`, `binary`). `$GIT_DIR/info/attributes` takes precedence
# over every `.gitattributes` in the tree, and `!` resets an attribute to unspecified:
# what git does with no attributes at all (the commit's bytes, a text diff unless the
# content itself is binary).
NEUTRAL_ATTRIBUTES = (
    "* !text !eol !crlf !filter !ident !export-subst !export-ignore "
    "!working-tree-encoding !diff !merge !binary\n"
)


@dataclass
class Checkout:
    root: Path
    head_sha: str
    base_sha: str
    merge_base: str
    diff: str  # what is reviewed: the whole PR, or only the changes since `incremental_since`
    incremental_since: str | None = None
    pull_request_files: tuple[str, ...] = ()  # every file the whole pull request touches
    whitespace_only: frozenset[str] = frozenset()
    removed: list[str] = field(default_factory=list)
    # The diff from the previous review's head to this head (for reconciliation), when
    # that commit is available; equal to `diff` for an incremental review.
    previous_diff: str | None = None
    # An incremental review's findings anchor on the pull request's whole diff (what
    # GitHub accepts comments on), not only on the new commits.
    anchor_diff: str | None = None


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

    def checkout(
        self,
        *,
        clone_url: str,
        token: str,
        head_sha: str,
        base_sha: str,
        previous_sha: str | None = None,
    ) -> Checkout:
        """Fetch the head and base commits (history without blobs) from GitHub, then
        diff, check out the head and sanitise (see `_prepare`)."""
        assert self.path is not None, "use Workspace as a context manager"
        _commit_ids(head_sha, base_sha, previous_sha)
        root = self.path / "checkout"
        root.mkdir()
        git = _Git(root, _git_env(token, self.path))
        git("init", "--quiet")
        git("remote", "add", "origin", clone_url)
        git(
            "fetch", "--quiet", "--no-tags", "--filter=blob:none", "origin", head_sha, base_sha,
            what="fetch the pull request's commits",
        )  # fmt: skip
        if previous_sha and previous_sha not in (head_sha, base_sha):
            # After a force push the old head may be gone from GitHub: then it is no base.
            git(
                "fetch",
                "--quiet",
                "--no-tags",
                "--filter=blob:none",
                "origin",
                previous_sha,
                check=False,
            )
        return _prepare(git, root, head_sha=head_sha, base_sha=base_sha, previous_sha=previous_sha)

    def checkout_local(
        self, *, repository: Path, head_sha: str, base_sha: str, previous_sha: str | None = None
    ) -> Checkout:
        """The same from a local repository (`manage.py review`): a shared clone, so
        nothing is copied and the original is never touched."""
        assert self.path is not None, "use Workspace as a context manager"
        root = self.path / "checkout"
        env = _git_env("", self.path, authenticate=False)
        _Git(self.path, env)("clone", "--quiet", "--no-checkout", "--shared", str(repository), str(root),
                            what="copy the repository")  # fmt: skip
        return _prepare(
            _Git(root, env), root, head_sha=head_sha, base_sha=base_sha, previous_sha=previous_sha
        )


def _prepare(
    git: _Git, root: Path, *, head_sha: str, base_sha: str, previous_sha: str | None
) -> Checkout:
    """Diff and check out `head_sha`, then sanitise.

    The review's diff starts at `previous_sha` (the head of the last complete review)
    when that commit is still an ancestor of the head — only the new commits are
    reviewed. Otherwise (first review, force push, rebase) it starts at the merge base
    of the head and the pull request's base: a rebase is reviewed whole against the
    base, never as a three-dot compare that would pull in upstream changes.
    """
    _commit_ids(head_sha, base_sha, previous_sha)
    _attributes_neutralise(root)
    found = git("merge-base", head_sha, base_sha, check=False)
    merge_base = found.strip() or base_sha
    incremental = None
    if (
        previous_sha
        and previous_sha != head_sha
        and (
            git("merge-base", "--is-ancestor", previous_sha, head_sha, check=False, returncode=True)
            == "0"
        )
    ):
        incremental = previous_sha
    start = incremental or merge_base
    names = git(*DIFF, "--name-only", "-z", "--no-renames", merge_base, head_sha, "--",
                what="list the pull request's files")  # fmt: skip
    diff = git(*DIFF, "--find-renames", "--unified=3", start, head_sha, "--",
               what="compute the diff")  # fmt: skip
    numstat = git(*DIFF, "--numstat", "-z", "-w", "--no-renames", start, head_sha, "--",
                  what="find whitespace-only changes")  # fmt: skip
    whitespace_only = frozenset(
        entry.split("\t", 2)[2] for entry in numstat.split("\0") if entry.startswith("0\t0\t")
    )
    previous_diff = None
    anchor_diff = None
    if incremental:
        previous_diff = diff
        anchor_diff = git(*DIFF, "--find-renames", "--unified=3", merge_base, head_sha, "--",
                          what="compute the pull request's diff")  # fmt: skip
    elif previous_sha and previous_sha == head_sha:
        previous_diff = ""  # the same head again: nothing changed since the last review
    elif (
        previous_sha
        and previous_sha != head_sha
        and git("cat-file", "-e", f"{previous_sha}^{{commit}}", check=False, returncode=True) == "0"
    ):
        previous_diff = git(*DIFF, "--no-renames", previous_sha, head_sha, "--",
                            what="diff against the previous review")  # fmt: skip
    git("-c", "advice.detachedHead=false", "checkout", "--quiet", "--detach", head_sha,
        what="check out the head commit")  # fmt: skip
    removed = sanitise(root)
    return Checkout(
        root=root,
        head_sha=head_sha,
        base_sha=base_sha,
        merge_base=merge_base,
        diff=diff,
        incremental_since=incremental,
        pull_request_files=tuple(sorted(n for n in names.split("\0") if n)),
        whitespace_only=whitespace_only,
        removed=removed,
        previous_diff=previous_diff,
        anchor_diff=anchor_diff,
    )


def _commit_ids(*shas: str | None) -> None:
    """Commits are named by their full ids, never by something git could read as an
    option or a ref."""
    for sha in shas:
        if sha is not None and not COMMIT_ID.fullmatch(sha):
            raise CloneError(f"Not a commit id: {sha[:80]!r}.", permanent=True)


def _attributes_neutralise(root: Path) -> None:
    info = root / ".git" / "info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "attributes").write_text(NEUTRAL_ATTRIBUTES)


class _Git:
    def __init__(self, root: Path, env: dict[str, str]) -> None:
        self.root, self.env = root, env

    def __call__(
        self, *args: str, what: str = "", check: bool = True, returncode: bool = False
    ) -> str:
        try:
            completed = subprocess.run(  # noqa: S603
                ["git", *args],  # noqa: S607
                cwd=self.root,
                env=self.env,
                capture_output=True,
                timeout=GIT_TIMEOUT,
                check=False,
            )
        except subprocess.TimeoutExpired as exc:
            raise CloneError(
                f"git timed out after {GIT_TIMEOUT}s ({what or args[0]})", permanent=False
            ) from exc
        if returncode:
            return str(completed.returncode)
        if completed.returncode != 0 and check:
            raise _clone_error(what or f"git {args[0]}", _text(completed.stderr))
        return _text(completed.stdout)


def _text(output: bytes) -> str:
    """git's output as text. A file need not be UTF-8 (nor its name): an invalid byte
    becomes U+FFFD, here and in every name list, so the names of the diff and of the
    lists agree, and the review goes on — a file's own bytes are read from the checkout."""
    return output.decode("utf-8", errors="replace")


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


def _git_env(token: str, home: Path, *, authenticate: bool = True) -> dict[str, str]:
    header = base64.b64encode(f"x-access-token:{token}".encode()).decode()
    env = {
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
    if not authenticate:
        env.update(
            GIT_CONFIG_COUNT="1", GIT_CONFIG_KEY_0="protocol.version", GIT_CONFIG_VALUE_0="2"
        )
        for key in (
            "GIT_CONFIG_KEY_1",
            "GIT_CONFIG_VALUE_1",
            "GIT_CONFIG_KEY_2",
            "GIT_CONFIG_VALUE_2",
        ):
            env.pop(key)
    return env


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
