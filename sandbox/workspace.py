"""The checkout an engine reviews: the pull request's exact head commit, cloned with a
short-lived read-only token, then sanitised.

With a checkout cache (`TASUKU_CHECKOUT_CACHE`), each repository has a bare mirror that
is fetched incrementally — only the commits and blobs it does not hold yet — and each
review's checkout is a worktree of it: a re-review of a pull request fetches its new
commits, not the repository again. The mirror is locked while a checkout is made from it;
one that fails is set aside and the checkout cloned afresh.

The token reaches git through `GIT_CONFIG_*` environment variables as an HTTP header:
never in a URL, in `.git/config`, on disk or in a log. The diff is computed locally
(never GitHub's diff endpoint, which refuses large pull requests) before `.git` is
removed. The workspace is deleted on exit, also when the review fails.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path

from sandbox.errors import CloneError
from sandbox.git import (  # git run safely: sandbox/git.py
    DIFF,
    Git,
    attributes_neutralise,
    clone_error,
    commit_ids,
    git_env,
    git_text,
    unwritten,
)

logger = logging.getLogger(__name__)

# Instructions for coding agents that a pull request could use to steer a reviewer
# (Claude Code's and Codex's instruction files, settings, skills and MCP servers: Codex
# reads a repository's skills from `.agents/skills`).
AGENT_FILES = {"claude.md", "claude.local.md", "agents.md", "agents.override.md", ".mcp.json"}
AGENT_DIRS = {".claude", ".codex", ".agents", ".git"}
# How long a checkout waits for another run's use of the same mirror (a fetch and a
# checkout: seconds, rarely minutes) before it clones afresh instead.
MIRROR_WAIT = 300
# Packs a mirror may gather (one per fetch) before they are repacked into one.
MIRROR_PACKS = 32
# Commits a mirror keeps a ref to (the heads and bases of recent reviews).
MIRROR_REFS = 200
# What of the base's `.gitattributes` is read (GitHub's own limit on one is 100 KB).
ATTRIBUTES_MAX = 100_000


@dataclass
class Checkout:
    root: Path
    head_sha: str
    base_sha: str
    merge_base: str
    diff: str  # what is reviewed: the whole PR, or only the changes since `incremental_since`
    incremental_since: str | None = None
    removed: list[str] = field(default_factory=list)
    # The diff from the previous review's head to this head (for reconciliation), when
    # that commit is available; equal to `diff` for an incremental review.
    previous_diff: str | None = None
    # An incremental review's findings anchor on the pull request's whole diff (what
    # GitHub accepts comments on), not only on the new commits.
    anchor_diff: str | None = None
    # The secondary repositories beside the checkout (sandbox/secondaries.py): each
    # mounted, or why it is not. Filled in by the forge after the checkout is made.
    secondaries: list = field(default_factory=list)
    # Every path of the merge base's tree and of the head's (git's trees, read before
    # `.git` goes): what the base already holds decides what a name may keep out of
    # review (reviews/scope/filters.py). None: not known.
    base_paths: list[str] | None = None
    head_paths: list[str] | None = None
    # Files the change adds that are byte for byte a file the merge base already holds
    # (added path -> that base path): what the base already had is not the author's.
    copies: dict[str, str] = field(default_factory=dict)
    # The merge base's `.gitattributes` ("" when it has none): its Linguist marks are the
    # repository's word on what is generated or vendored, which the pull request's own
    # `.gitattributes` cannot change.
    base_attributes: str = ""
    # The linters' configuration files as the merge base has them (path -> text): the
    # static reviewer honours the repository's own ignores and Python versions from
    # these, never from the pull request's copies.
    base_configs: dict[str, str] = field(default_factory=dict)
    # Tasuku's own file, `.tasuku.toml`, as the base branch's head (`base_sha`) has it
    # ("" when it has none): the pull request's own copy never configures Tasuku.
    base_tasuku_config: str = ""
    # Only part of the head was written (a reviewer that reads only that part): the
    # number of the head's files written; None when every file was.
    materialised: int | None = None


@dataclass
class HeadView:
    """The head commit as git holds it, before anything of it is written: what a
    reviewer that reads only part of the head (`Materialise`) decides from. Its reads
    fetch what a partial clone lacks in one batch, never a file at a time."""

    git: Git
    head_sha: str
    blobs: dict[str, str]  # every file of the head -> its blob id
    changed: list[str]  # the head's files that the review's diffs touch
    _missing: set[str] | None = None

    def prefetch(self, paths: Iterable[str]) -> None:
        """Fetch the blobs of `paths` that this repository lacks (a partial clone has
        the history without the files), in one request."""
        if self._missing is None:
            self._missing = blobs_missing(self.git, self.head_sha)
        wanted = {self.blobs[p] for p in paths if p in self.blobs} & self._missing
        blobs_fetch(self.git, wanted, what="fetch the files the reviewer reads")
        self._missing -= wanted

    def read(self, paths: Iterable[str], *, limit: int) -> dict[str, bytes]:
        """The contents of those of `paths` the head holds (each at most `limit` bytes)."""
        paths = [p for p in paths if p in self.blobs]
        self.prefetch(paths)
        read = self.git.blobs([f"{self.head_sha}:{p}" for p in paths], limit=limit)
        prefix = len(self.head_sha) + 1
        return {name[prefix:]: data for name, data in read.items()}

    def grep(self, pattern: str, suffixes: tuple[str, ...]) -> set[str]:
        """The head's files ending in one of `suffixes` with a line matching `pattern`
        (a POSIX extended regular expression)."""
        candidates = [p for p in self.blobs if p.endswith(suffixes)]
        if not candidates:
            return set()
        self.prefetch(candidates)
        completed = self.git.run(
            "grep", "-l", "-z", "-I", "-E", "-e", pattern, self.head_sha, "--",
            *(f"*{suffix}" for suffix in suffixes), what="search the head",
        )  # fmt: skip
        if completed.returncode not in (0, 1):  # 1: nothing matched
            raise clone_error("search the head", git_text(completed.stderr))
        prefix = len(self.head_sha) + 1
        return {name[prefix:] for name in git_text(completed.stdout).split("\0") if name}


# Which of the head's files a reviewer reads, from what git holds of the head: the files
# written for it; the rest of the tree is not. None (the default) writes every file.
Materialise = Callable[[HeadView], Iterable[str]]


def blobs_fetch(git: Git, blobs: Iterable[str], *, what: str) -> None:
    """Fetch `blobs` (ids a partial clone lacks) in one request: what git runs itself to
    fill a partial clone, for these together. A failure is left to the git command that
    reads them, which fetches again what it still lacks and says why it could not."""
    wanted = sorted(blobs)
    if wanted:
        git.run(
            "-c", "fetch.negotiationAlgorithm=noop", "fetch", "--quiet", "--no-tags",
            "--no-write-fetch-head", "--recurse-submodules=no", "--filter=blob:none",
            "--stdin", "origin", what=what, input="\n".join(wanted).encode() + b"\n",
        )  # fmt: skip


def blobs_missing(git: Git, *commits: str) -> set[str]:
    """The blobs of `commits`' trees that this repository lacks (a partial clone's)."""
    listed = git(
        "rev-list", "--objects", "--missing=print", "--no-object-names",
        *(f"{commit}^{{tree}}" for commit in commits), what="list what the checkout lacks",
    )  # fmt: skip
    return {line[1:] for line in listed.split() if line.startswith("?")}


class Workspace:
    """`with Workspace() as ws: checkout = ws.checkout(...)`; removed on exit."""

    def __init__(self, parent: str | None = None) -> None:
        self.parent = parent
        self.path: Path | None = None

    def __enter__(self) -> Workspace:
        try:
            self.path = Path(tempfile.mkdtemp(prefix="tasuku-ws-", dir=self.parent))
        except OSError as exc:
            # The host's doing, not the repository's and not a bug: a root that does not
            # exist, is not writable or is full. A retry helps once the operator fixed it.
            where = self.parent or tempfile.gettempdir()
            raise CloneError(
                f"Could not make a workspace in {where} ({exc.strerror or exc}). Set "
                "TASUKU_WORKSPACE_ROOT to a folder the worker can write to (`manage.py "
                "check` says what is wrong with it). Nothing was reviewed.",
                permanent=False,
                code="workspace-root",
            ) from None
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
        since_sha: str | None = None,
        mirror: Path | None = None,
        materialise: Materialise | None = None,
        agents: bool = True,
    ) -> Checkout:
        """Fetch the head and base commits (history without blobs) from GitHub, then
        diff, check out the head and sanitise (see `_prepare`). With `mirror`, through
        that repository's checkout cache (see the module's docstring). `since_sha`: where
        the review's scope starts when it is not the previous review's head (see
        `_prepare`); `materialise`: which of the head's files to write (all when None);
        `agents`: whether an agent reads the checkout (see `sanitise`)."""
        assert self.path is not None, "use Workspace as a context manager"
        commit_ids(head_sha, base_sha, previous_sha, since_sha)
        env = git_env(token, self.path)
        root = self.path / "checkout"
        shas = {"head_sha": head_sha, "base_sha": base_sha, "previous_sha": previous_sha,
                "since_sha": since_sha, "materialise": materialise, "agents": agents}  # fmt: skip
        broken = False
        if mirror is not None:
            try:
                return _from_mirror(mirror, root, env, clone_url, **shas)
            except _MirrorBusy:
                logger.info("checkout cache %s is busy: cloning afresh", mirror)
            except (CloneError, OSError) as exc:
                if isinstance(exc, CloneError) and (exc.permanent or exc.code == WRITE_FAILED):
                    raise  # a fresh clone would be refused too, or fill the same disk
                logger.warning("checkout cache %s failed (%s): cloning afresh", mirror, exc)
                broken = True
            if root.exists():
                _remove_tree(root)
        checkout = _clone_fresh(root, env, clone_url, **shas)
        if broken and mirror is not None:
            # GitHub served the clone: the mirror, not the network, was at fault.
            mirror_discard(mirror)
        return checkout

    def checkout_local(
        self,
        *,
        repository: Path,
        head_sha: str,
        base_sha: str,
        previous_sha: str | None = None,
        since_sha: str | None = None,
        materialise: Materialise | None = None,
        agents: bool = True,
    ) -> Checkout:
        """The same from a local repository (`manage.py review`): a shared clone, so
        nothing is copied and the original is never touched."""
        assert self.path is not None, "use Workspace as a context manager"
        root = self.path / "checkout"
        env = git_env("", self.path, authenticate=False)
        Git(self.path, env)(
            "clone",
            "--quiet",
            "--no-checkout",
            "--shared",
            str(repository),
            str(root),
            what="copy the repository",
        )
        attributes_neutralise(root / ".git")
        return _prepare(
            Git(root, env),
            root,
            head_sha=head_sha,
            base_sha=base_sha,
            previous_sha=previous_sha,
            since_sha=since_sha,
            materialise=materialise,
            partial=False,
            agents=agents,
        )


def _clone_fresh(
    root: Path,
    env: dict[str, str],
    clone_url: str,
    *,
    head_sha: str,
    base_sha: str,
    previous_sha: str | None,
    since_sha: str | None = None,
    materialise: Materialise | None = None,
    agents: bool = True,
) -> Checkout:
    """A repository of the review's own, fetched from GitHub for this checkout alone."""
    root.mkdir()
    git = Git(root, env)
    git("init", "--quiet")
    git("remote", "add", "origin", clone_url)
    attributes_neutralise(root / ".git")
    _fetch(git, head_sha, base_sha, previous_sha)
    return _prepare(
        git,
        root,
        head_sha=head_sha,
        base_sha=base_sha,
        previous_sha=previous_sha,
        since_sha=since_sha,
        materialise=materialise,
        agents=agents,
    )


def _fetch(git: Git, head_sha: str, base_sha: str, previous_sha: str | None) -> list[str]:
    """Fetch the head and base commits (history without blobs) and, when it differs, the
    previous review's head — which after a force push may be gone from GitHub: then it
    is no base, not an error. One fetch for all of them; only when that fails (the
    previous head gone) the head and base alone, then the previous head apart. Returns
    the commits fetched."""
    if previous_sha and previous_sha not in (head_sha, base_sha):
        together = git(
            "fetch", "--quiet", "--no-tags", "--filter=blob:none", "origin",
            head_sha, base_sha, previous_sha,
            check=False, returncode=True,
        )  # fmt: skip
        if together == "0":
            return [head_sha, base_sha, previous_sha]
    git(
        "fetch",
        "--quiet",
        "--no-tags",
        "--filter=blob:none",
        "origin",
        head_sha,
        base_sha,
        what="fetch the pull request's commits",
    )
    fetched = [head_sha, base_sha]
    if previous_sha and previous_sha not in fetched:
        alone = git(
            "fetch", "--quiet", "--no-tags", "--filter=blob:none", "origin", previous_sha,
            check=False, returncode=True,
        )  # fmt: skip
        if alone == "0":
            fetched.append(previous_sha)
    return fetched


class _MirrorBusy(Exception):
    """Another run held the repository's mirror for longer than MIRROR_WAIT."""


def _from_mirror(
    mirror: Path,
    root: Path,
    env: dict[str, str],
    clone_url: str,
    *,
    head_sha: str,
    base_sha: str,
    previous_sha: str | None,
    since_sha: str | None = None,
    materialise: Materialise | None = None,
    agents: bool = True,
) -> Checkout:
    """The checkout as a worktree of the repository's bare mirror, fetching into the
    mirror only what it lacks. Each fetched commit is kept under `refs/tasuku/<sha>`: a
    fetch offers those as what it has, so GitHub sends only the new history (a mirror
    without refs would be sent everything again), and they keep the objects from being
    pruned. The files a review reads arrive into the mirror too (`_files_fetch`)."""
    mirror.parent.mkdir(parents=True, exist_ok=True)
    with _mirror_locked(mirror):
        git = mirror_open(mirror, env, clone_url)
        fetched = dict.fromkeys(_fetch(git, head_sha, base_sha, previous_sha))
        # One transaction for them all (each commit is there: it was fetched).
        git.run(
            "update-ref", "--stdin", what="keep the fetched commits",
            input="".join(f"update refs/tasuku/{sha} {sha}\n" for sha in fetched).encode(),
        )  # fmt: skip
        worktrees_prune(git, mirror)
        git(
            "worktree",
            "add",
            "--quiet",
            "--detach",
            "--no-checkout",
            str(root),
            head_sha,
            what="make the checkout",
        )
        admin = git_dir_of(root)  # the mirror's record of this worktree
        checkout = _prepare(
            Git(root, env),
            root,
            head_sha=head_sha,
            base_sha=base_sha,
            previous_sha=previous_sha,
            since_sha=since_sha,
            materialise=materialise,
            agents=agents,
        )
        # The checkout's `.git` is gone (sanitised): what `git worktree prune` would do
        # at the next review, done now, so that the next review need not run it.
        worktrees = mirror / "worktrees"
        if os.path.realpath(admin.parent) == os.path.realpath(worktrees):
            _remove_tree(worktrees / admin.name)
            with suppress(OSError):
                worktrees.rmdir()  # as git does when the last one goes
        _mirror_tidy(git, mirror)
    return checkout


# Where a mirror notes the URL its `origin` was last set to (its config holds it too).
MIRROR_ORIGIN = "tasuku-origin"
# Tidied under the mirror's lock (_mirror_tidy), never by a background gc: what
# `git config gc.auto 0` and `git config maintenance.auto false` write, written at once.
MIRROR_CONFIG = "[gc]\n\tauto = 0\n[maintenance]\n\tauto = false\n"


def mirror_open(mirror: Path, env: dict[str, str], clone_url: str) -> Git:
    """The mirror, made when there is none, fetching from `clone_url` (held under its
    lock by the caller)."""
    git = Git(mirror, env)
    noted = mirror / MIRROR_ORIGIN
    if not (mirror / "HEAD").is_file():
        if mirror.exists():
            _remove_tree(mirror)
        Git(mirror.parent, env)(
            "init", "--quiet", "--bare", str(mirror), what="create the checkout cache"
        )
        with open(mirror / "config", "a") as config:
            config.write(MIRROR_CONFIG)
        git("remote", "add", "origin", clone_url)
        noted.write_text(clone_url)
    elif not noted.is_file() or noted.read_text() != clone_url:
        git("remote", "set-url", "origin", clone_url)  # the repository may be renamed
        noted.write_text(clone_url)
    attributes_neutralise(mirror)  # a worktree reads its common directory's info/
    return git


def git_dir_of(root: Path) -> Path:
    """The git directory of the repository or worktree at `root`, as git finds it: `.git`
    itself, or where its `gitdir:` line points (a worktree's). Read before anything of
    the pull request is written there."""
    dot_git = root / ".git"
    if dot_git.is_dir():
        return dot_git
    pointed = Path(dot_git.read_text().removeprefix("gitdir:").strip())
    return pointed if pointed.is_absolute() else root / pointed


def worktrees_prune(git: Git, mirror: Path) -> None:
    """`git worktree prune`, when the mirror records any worktree (one a review that did
    not finish left; a finished review removes its own record)."""
    worktrees = mirror / "worktrees"
    if worktrees.is_dir() and any(worktrees.iterdir()):
        git("worktree", "prune")


@contextmanager
def _mirror_locked(mirror: Path, wait: float | None = None) -> Iterator[None]:
    lock = mirror.with_name(mirror.name + ".lock")
    with open(lock, "a") as handle:
        deadline = time.monotonic() + (MIRROR_WAIT if wait is None else wait)
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise _MirrorBusy(str(mirror)) from None
                time.sleep(0.1)
        try:
            os.utime(lock)  # when the mirror was last used (see mirrors_prune)
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _mirror_tidy(git: Git, mirror: Path) -> None:
    """Keep the MIRROR_REFS most recent commits' refs, and fold the packs fetches leave
    into one when they pile up (objects no kept ref reaches go then)."""
    if _refs_at_most(mirror) > MIRROR_REFS:
        refs = git(
            "for-each-ref", "--sort=-committerdate", "--format=%(refname)", "refs/tasuku/"
        ).split()
        for ref in refs[MIRROR_REFS:]:
            git("update-ref", "-d", ref, check=False)
    if len(list((mirror / "objects" / "pack").glob("*.pack"))) > MIRROR_PACKS:
        git("repack", "-a", "-d", "-q", check=False)


def _refs_at_most(mirror: Path) -> float:
    """At least as many as the mirror's refs under refs/tasuku/, counted without git: git
    (its `files` ref store) keeps each as a file there or a line of `packed-refs`. Any
    other store (reftable) is not counted: infinitely many."""
    if (mirror / "reftable").exists():
        return float("inf")
    loose = sum(len(files) for _, _, files in os.walk(mirror / "refs" / "tasuku"))
    packed = 0
    with suppress(FileNotFoundError), open(mirror / "packed-refs", "rb") as refs:
        packed = sum(1 for line in refs if b" refs/tasuku/" in line)
    return loose + packed


def mirror_discard(mirror: Path) -> bool:
    """Remove a mirror (it failed, or has not been used for long), unless a run is using
    it. The next review of its repository makes a new one."""
    try:
        with _mirror_locked(mirror, wait=0):
            if mirror.exists():
                _remove_tree(mirror)
            return True
    except (_MirrorBusy, OSError):
        return False


def mirrors_prune(root: Path, max_age_seconds: float) -> list[str]:
    """Remove the mirrors under `root` that no review has used for `max_age_seconds`."""
    removed: list[str] = []
    if not root.is_dir():
        return removed
    now = time.time()
    for lock in root.glob("*.git.lock"):
        mirror = lock.with_name(lock.name.removesuffix(".lock"))
        try:
            idle = now - lock.stat().st_mtime
        except OSError:
            continue
        if idle > max_age_seconds and mirror_discard(mirror):
            lock.unlink(missing_ok=True)
            removed.append(mirror.name)
    return removed


def _prepare(
    git: Git,
    root: Path,
    *,
    head_sha: str,
    base_sha: str,
    previous_sha: str | None,
    since_sha: str | None = None,
    materialise: Materialise | None = None,
    partial: bool = True,
    agents: bool = True,
) -> Checkout:
    """Diff and check out `head_sha`, then sanitise.

    The review's diff starts at `previous_sha` (the head of the last complete review)
    when that commit is still an ancestor of the head — only the new commits are
    reviewed. Otherwise (first review, force push, rebase) it starts at the merge base
    of the head and the pull request's base: a rebase is reviewed whole against the
    base, never as a three-dot compare that would pull in upstream changes. `since_sha`,
    when given, is where the scope starts instead (the same head reviewed again keeps the
    scope its last review had); `previous_diff` is always from `previous_sha`.
    With `materialise`, only the files it names are written (git's sparse checkout).
    `partial`: the repository was fetched without its files (not a local one), so what
    is read of them is fetched first, in one request (`_files_fetch`).
    `agents`: whether an agent reads the checkout (see `sanitise`).
    """
    commit_ids(head_sha, base_sha, previous_sha, since_sha)
    found = git("merge-base", head_sha, base_sha, check=False)
    merge_base = found.strip() or base_sha
    incremental = None
    start_at = since_sha or previous_sha
    if (
        start_at
        and start_at != head_sha
        and (
            git("merge-base", "--is-ancestor", start_at, head_sha, check=False, returncode=True)
            == "0"
        )
    ):
        incremental = start_at
    start = incremental or merge_base
    base_blobs = tree_blobs(git, merge_base)
    head_blobs = tree_blobs(git, head_sha)
    missing = None
    if partial:
        missing = _files_fetch(
            git, merge_base, head_sha, base_blobs, head_blobs,
            also=[base_blobs.get(".gitattributes"),
                  base_blobs.get(TASUKU_CONFIG) if base_sha == merge_base else None],
            checkout_all=materialise is None,
        )  # fmt: skip
    # One diff from where the review starts; the pull request's files and which
    # changes are whitespace only are read from the parsed diffs (reviews/scope/diff.py).
    diff, touched = diff_touched(git, start, head_sha, what="compute the diff")
    previous_diff = None
    anchor_diff = None
    if incremental:
        anchor_diff, anchor_touched = diff_touched(
            git, merge_base, head_sha, what="compute the pull request's diff"
        )
        touched = [*anchor_touched, *touched]
    if previous_sha and previous_sha == head_sha:
        previous_diff = ""  # the same head again: nothing changed since the last review
    elif incremental and incremental == previous_sha:
        previous_diff = diff
    elif (
        previous_sha
        and git("cat-file", "-e", f"{previous_sha}^{{commit}}", check=False, returncode=True) == "0"
    ):
        previous_diff = git(
            *DIFF,
            "--no-renames",
            previous_sha,
            head_sha,
            "--",
            what="diff against the previous review",
        )
    base_paths, head_paths = list(base_blobs), list(head_blobs)
    base_attributes = ""
    if ".gitattributes" in base_paths:
        base_attributes = git("cat-file", "blob", f"{merge_base}:.gitattributes", check=False)[
            :ATTRIBUTES_MAX
        ]
    # The linters' configurations (the merge base's) and Tasuku's (the base's) in one read.
    tasuku_config = f"{base_sha}:{TASUKU_CONFIG}"
    base_configs, read = linter_configs(git, merge_base, base_paths, also=[tasuku_config])
    base_tasuku_config = read.get(tasuku_config, b"").decode("utf-8", "replace")
    written = None
    if materialise is not None:
        changed = dict.fromkeys(touched)
        changed_head = [p for p in changed if p in head_blobs]
        view = HeadView(git, head_sha, head_blobs, changed_head, _missing=missing)
        written = _sparse(git, set(materialise(view)) & set(head_blobs))
    checkout_verified(git, head_sha, sparse=written is not None)
    removed = sanitise(root, agents=agents)
    return Checkout(
        root=root,
        head_sha=head_sha,
        base_sha=base_sha,
        merge_base=merge_base,
        diff=diff,
        incremental_since=incremental,
        removed=removed,
        previous_diff=previous_diff,
        anchor_diff=anchor_diff,
        base_paths=base_paths,
        head_paths=head_paths,
        copies=copies_of(base_blobs, head_blobs),
        base_attributes=base_attributes,
        base_configs=base_configs,
        base_tasuku_config=base_tasuku_config,
        materialised=written,
    )


def _files_fetch(
    git: Git,
    merge_base: str,
    head_sha: str,
    base_blobs: dict[str, str],
    head_blobs: dict[str, str],
    *,
    also: Iterable[str | None],
    checkout_all: bool,
) -> set[str]:
    """Fetch, in one request, the files of a partial clone that the review reads for
    sure: both sides of every file the pull request changes (its diff, renames found
    among them), the merge base's linters' configurations and `also`, and with
    `checkout_all` every file of the head. Left to git, the diff and the checkout each
    fetch what they lack, and `git cat-file` a request a file. Returns what the two
    trees still lack (a reviewer that reads part of the head fetches from it)."""
    wanted = {base_blobs[p] for p in linter_config_paths(base_blobs)}
    wanted.update(blob for blob in also if blob)
    for path in base_blobs.keys() | head_blobs.keys():
        before, after = base_blobs.get(path), head_blobs.get(path)
        if before != after:
            wanted.update(blob for blob in (before, after) if blob)
    if checkout_all:
        wanted.update(head_blobs.values())
    missing = blobs_missing(git, merge_base, head_sha)
    fetch = wanted & missing
    blobs_fetch(git, fetch, what="fetch the files the review reads")
    return missing - fetch


def diff_touched(git: Git, start: str, head_sha: str, *, what: str) -> tuple[str, list[str]]:
    """The diff from `start` to the head (renames found), and every path it touches
    (either side of a rename), from one git: its `--raw` list (`-z`: each name as it is,
    NUL-ended) comes first, then a NUL, then the patch, which `-z` leaves as it is."""
    completed = git.run(
        *DIFF, "--find-renames", "--unified=3", "--raw", "-z", "--patch", start, head_sha, "--",
        what=what,
    )  # fmt: skip
    if completed.returncode != 0:
        raise clone_error(what, git_text(completed.stderr))
    out, at, touched = completed.stdout, 0, []
    while out.startswith(b":", at):  # ":<modes> <ids> <status>" NUL <path> NUL [<path> NUL]
        end = out.index(b"\0", at)
        status = out[at:end].rsplit(b" ", 1)[-1]
        for _ in range(2 if status[:1] in (b"R", b"C") else 1):
            at, end = end + 1, out.index(b"\0", end + 1)
            touched.append(git_text(out[at:end]))
        at = end + 1
    if touched and out.startswith(b"\0", at):
        at += 1
    return git_text(out[at:]), touched


# What gitignore patterns (a sparse checkout's) treat as special within a name.
_SPECIAL = re.compile(r"([\\*?\[])")


def _sparse(git: Git, paths: set[str]) -> int | None:
    """Set the checkout to write only `paths` (non-cone sparse checkout: each an exact
    path). Returns how many, or None when a path cannot be said as a pattern (a line
    break in its name) and the whole tree is written instead."""
    patterns = []
    for path in sorted(paths):
        if "\n" in path or "\r" in path:
            return None
        pattern = "/" + _SPECIAL.sub(r"\\\1", path)
        stripped = pattern.rstrip(" ")
        pattern = stripped + "\\ " * (len(pattern) - len(stripped))  # trailing spaces kept
        patterns.append(pattern)
    if not patterns:
        patterns = ["!/*"]  # nothing at all (an empty pattern list is refused)
    target = git_dir_of(git.root) / "info" / "sparse-checkout"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text("\n".join(patterns) + "\n")
    return len(paths)


# Files a linter reads its configuration from (and where a project says which Python
# versions it supports).
LINTER_CONFIGS = frozenset({
    "pyproject.toml", "setup.cfg", "setup.py", "tox.ini", ".flake8", "ruff.toml",
    ".ruff.toml", ".shellcheckrc", ".python-version", ".oxlintrc.json", ".eslintrc.json",
    ".eslintrc", ".hadolint.yaml", ".hadolint.yml", "zizmor.yml", "zizmor.yaml",
})  # fmt: skip
MAX_CONFIGS = 200
TASUKU_CONFIG = ".tasuku.toml"
MAX_CONFIG_BYTES = 256_000


def linter_config_paths(paths: Iterable[str]) -> list[str]:
    """The linters' configuration files among `paths`: at most MAX_CONFIGS, the
    shallowest first."""
    return sorted(
        (p for p in paths if p.rsplit("/", 1)[-1] in LINTER_CONFIGS),
        key=lambda p: (p.count("/"), p),
    )[:MAX_CONFIGS]


def linter_configs(
    git: Git, commit: str, paths: list[str], *, also: Sequence[str] = ()
) -> tuple[dict[str, str], dict[str, bytes]]:
    """The linters' configuration files of `commit` (at most MAX_CONFIGS, the shallowest
    first; each at most MAX_CONFIG_BYTES), read from git in one batch with the blobs
    `also` names (`<commit>:<path>`, each at most MAX_CONFIG_BYTES too): those as read."""
    names = [f"{commit}:{p}" for p in linter_config_paths(paths)]
    read = git.blobs([*names, *also], limit=MAX_CONFIG_BYTES)
    prefix = len(commit) + 1
    configs = {n[prefix:]: read[n].decode("utf-8", errors="replace") for n in names if n in read}
    return configs, {name: read[name] for name in also if name in read}


def tree_blobs(git: Git, commit: str) -> dict[str, str]:
    """Every file of `commit`'s tree with its blob id (from git's tree objects: no file is
    read)."""
    listed = git("ls-tree", "-r", "-z", "--full-tree", commit, what="list the tree")
    found: dict[str, str] = {}
    for entry in listed.split("\0"):
        meta, _, path = entry.partition("\t")
        words = meta.split()
        if path and len(words) == 3 and words[1] == "blob":
            found[path] = words[2]
    return found


# The empty blob: an empty file "copies" every other empty file, and adds nothing.
EMPTY_BLOB = "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391"


def copies_of(base_blobs: dict[str, str], head_blobs: dict[str, str]) -> dict[str, str]:
    """The files a change adds that are byte for byte a file the base already holds
    (path -> the base's path of those bytes): a version folder a script regenerates, a
    template copied into place. Their content is the base's, problems included."""
    by_blob: dict[str, str] = {}
    for path, blob in base_blobs.items():
        by_blob.setdefault(blob, path)
    added = set(head_blobs) - set(base_blobs)
    found = {}
    for path in sorted(added):
        blob = head_blobs[path]
        if blob != EMPTY_BLOB and blob in by_blob:
            found[path] = by_blob[blob]
    return found


def tree_list(git: Git, commit: str) -> list[str]:
    """Every file path of `commit`'s tree (from git's tree objects: no file is read)."""
    listed = git("ls-tree", "-r", "-z", "--name-only", commit, "--", what="list the tree")
    return [path for path in listed.split("\0") if path]


# Files of the work tree named in a failed verification (the rest are counted).
WRITE_FAILED = "workspace-write"
UNWRITTEN_NAMED = 5


def checkout_verified(git: Git, head_sha: str, *, sparse: bool = False) -> None:
    """Check out `head_sha`, then verify that the work tree is that commit: what the
    reviewer reads is the commit's bytes or the review does not happen. On a full disk
    `git checkout` can leave files truncated or empty and still exit 0 (it says
    "unable to write file" on its error output); `git status` then names them. Either
    is a `workspace-write` error, which a retry may get past (never a review of what
    happened to be written). `sparse`: only what the sparse-checkout patterns name is
    written (set for this command alone: a mirror's other worktrees keep their own)."""
    partly = ("-c", "core.sparseCheckout=true", "-c", "core.sparseCheckoutCone=false")
    completed = git.run(
        *(partly if sparse else ()),
        "-c", "advice.detachedHead=false", "checkout", "--quiet", "--detach", head_sha,
        what="check out the head commit",
    )  # fmt: skip
    stderr = git_text(completed.stderr)
    if completed.returncode != 0:
        raise clone_error("check out the head commit", stderr)
    if unwritten(stderr):
        raise clone_error("check out the head commit", stderr)
    status = git.run(
        "status", "--porcelain=v1", "-z", "--untracked-files=no", "--ignore-submodules=all",
        "--no-renames", what="verify the checkout",
    )  # fmt: skip
    if status.returncode != 0:
        # Unverified is untrusted (on a full disk git status can die of SIGBUS, silently).
        said = (git_text(status.stderr).strip().splitlines() or ["no output"])[-1][:300]
        raise CloneError(
            f"Could not verify the checkout of {head_sha[:12]} (git status: exit "
            f"{_exit(status.returncode)}, {said}). The disk of the workspace "
            "(TASUKU_WORKSPACE_ROOT, or the checkout cache) may be full. Nothing was reviewed.",
            permanent=False,
            code=WRITE_FAILED,
        )
    differing = [entry[3:] for entry in git_text(status.stdout).split("\0") if entry]
    if differing:
        named = ", ".join(json.dumps(p, ensure_ascii=False) for p in differing[:UNWRITTEN_NAMED])
        more = len(differing) - UNWRITTEN_NAMED
        raise CloneError(
            f"The checkout does not match commit {head_sha[:12]}: {len(differing)} "
            f"file(s) differ from it ({named}{f' and {more} more' if more > 0 else ''}). A "
            "write to the workspace failed — its disk (TASUKU_WORKSPACE_ROOT, or the "
            "checkout cache) may be full. Nothing was reviewed.",
            permanent=False,
            code=WRITE_FAILED,
        )


def _exit(code: int) -> str:
    if code < 0:
        with suppress(ValueError):
            return signal.Signals(-code).name
    return str(code)


def sanitise(root: Path, *, agents: bool = True) -> list[str]:
    """Delete what could steer or leak from a reviewer: agent instruction files and
    folders at any depth, `.git`, and every symlink that resolves outside `root`.
    Returns what was removed, relative to `root`.

    `agents=False` keeps the instruction files, for a reviewer that runs no agent (the
    static engine's checkers): to them an `AGENTS.md` or a `.mcp.json` is text like any
    other, and a credential in one is still a credential."""
    removed: list[str] = []
    real_root = Path(os.path.realpath(root))
    for directory, dirnames, filenames in os.walk(root, topdown=True, followlinks=False):
        here = Path(directory)
        for name in list(dirnames):
            path = here / name
            if path.is_symlink():
                dirnames.remove(name)
                filenames.append(name)  # handled as a link below
            elif name.lower() in AGENT_DIRS and (agents or name.lower() == ".git"):
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
            if (agents and name.lower() in AGENT_FILES) or name.lower() == ".git":
                path.unlink()
                if name != ".git" or here != root:  # a worktree's own link always goes
                    removed.append(relative)
    return sorted(removed)


def remove_tree(path: Path) -> None:
    """Remove `path` and everything under it, however deep (Python's rmtree recurses
    and fails on a tree a pull request made 1,200 levels deep: then `rm -rf`, which
    does not), read-only files and folders included."""

    def make_writable(function, failed, excinfo):
        # Read-only files (git's objects) and read-only folders (a secondary
        # repository's tree): what holds the entry, then the entry, never through a link.
        for target in (os.path.dirname(failed), failed):
            with suppress(OSError):
                if not os.path.islink(target):
                    os.chmod(target, 0o700)
        function(failed)

    try:
        shutil.rmtree(path, onerror=make_writable)
    except RecursionError:
        subprocess.run(["chmod", "-R", "u+rwx", "--", str(path)], capture_output=True, check=False)  # noqa: S603, S607
        subprocess.run(["rm", "-rf", "--", str(path)], capture_output=True, check=False)  # noqa: S603, S607
    except FileNotFoundError:
        pass


_remove_tree = remove_tree


def workspace_root_problem(root: Path, min_free_bytes: int) -> str:
    """What keeps `root` from holding workspaces ("" when nothing): it does not exist, is
    not a folder, cannot be written, or has less than `min_free_bytes` free — a review
    checked out there would be cut short (and fail as `workspace-write`)."""
    if not root.exists():
        return f"{root} does not exist: create it, owned by the user the worker runs as"
    if not root.is_dir():
        return f"{root} is not a folder"
    try:
        probe = Path(tempfile.mkdtemp(prefix="tasuku-probe-", dir=root))
        probe.rmdir()
    except OSError as exc:
        return f"{root} cannot be written by this process ({exc.strerror or exc})"
    try:
        free = shutil.disk_usage(root).free
    except OSError as exc:
        return f"the free space of {root} cannot be read ({exc.strerror or exc})"
    if free < min_free_bytes:
        return (
            f"{root} has {free / 1_000_000:.0f} MB free, under the "
            f"{min_free_bytes / 1_000_000:.0f} MB a checkout is given "
            "(TASUKU_WORKSPACE_MIN_FREE_MB): free space there"
        )
    return ""


def _owner_alive(folder: Path) -> bool:
    """Whether a fork server's home (`tasuku-home-forkserver-*`: it lives as long as its
    worker, days) belongs to a running server: the server writes its pid in it
    (`owner.pid`, sandbox/runners/forkserver.py). An engine's home is never kept so."""
    if not folder.name.startswith("tasuku-home-forkserver-"):
        return False
    try:
        pid = int((folder / "owner.pid").read_text())
        if pid <= 0:
            return False
        os.kill(pid, 0)
    except PermissionError:
        return True  # running, as another user
    except (OSError, ValueError):
        return False
    return True


def workspaces_prune(root: Path, max_age_seconds: float) -> list[str]:
    """Remove the workspaces (`tasuku-ws-*`) and engine homes (`tasuku-home-*`) under
    `root` older than `max_age_seconds`: what a killed worker left behind (a live run
    removes its own; none lives longer than the run deadline)."""
    removed: list[str] = []
    if not root.is_dir():
        return removed
    now = time.time()
    for entry in root.iterdir():
        if not entry.name.startswith(("tasuku-ws-", "tasuku-home-")):
            continue
        try:
            if entry.is_symlink() or not entry.is_dir():
                continue
            if now - entry.stat().st_mtime <= max_age_seconds:
                continue
        except OSError:
            continue
        if _owner_alive(entry):
            continue
        remove_tree(entry)
        removed.append(entry.name)
    return removed
