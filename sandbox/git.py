"""git, run safely: a command runner with a timeout that turns git's failures into typed
`CloneError`s (by what git said), the environment every git call gets (no user or system
configuration, no prompts, the token as an HTTP header and never in a URL), commit ids
checked before they reach a command line, and the attributes that keep a pull request's
`.gitattributes` from changing what a reviewer reads. Imports nothing from Django."""

from __future__ import annotations

import base64
import os
import re
import subprocess
from pathlib import Path

from sandbox.errors import CloneError

GIT_TIMEOUT = 600
COMMIT_ID = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
# Every diff: names unquoted (git still quotes a name with a quote, a backslash or a
# control character: reviews/scope/diff.py reads those), no colour, and no program or
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


def commit_ids(*shas: str | None) -> None:
    """Commits are named by their full ids, never by something git could read as an
    option or a ref."""
    for sha in shas:
        if sha is not None and not COMMIT_ID.fullmatch(sha):
            raise CloneError(
                f"Not a commit id: {sha[:80]!r}.", permanent=True, code="clone-bad-commit"
            )


def attributes_neutralise(git_dir: Path) -> None:
    info = git_dir / "info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "attributes").write_text(NEUTRAL_ATTRIBUTES)


class Git:
    def __init__(self, root: Path, env: dict[str, str]) -> None:
        self.root, self.env = root, env

    def run(
        self, *args: str, what: str = "", input: bytes | None = None
    ) -> subprocess.CompletedProcess:
        """git with `args` (and `input` on its standard input), its output and exit
        status as they are (a timeout raises)."""
        try:
            return subprocess.run(  # noqa: S603
                ["git", *args],  # noqa: S607
                cwd=self.root,
                env=self.env,
                input=input,
                capture_output=True,
                timeout=GIT_TIMEOUT,
                check=False,
            )
        except subprocess.TimeoutExpired as exc:
            raise CloneError(
                f"git timed out after {GIT_TIMEOUT}s ({what or args[0]})",
                permanent=False,
                code="clone-timeout",
            ) from exc

    def blobs(self, names: list[str], *, limit: int, what: str = "") -> dict[str, bytes]:
        """The contents of `names` (`<commit>:<path>`), read in one `git cat-file
        --batch`; a name that is not a blob, or is larger than `limit`, is left out."""
        if not names:
            return {}
        try:
            completed = subprocess.run(  # noqa: S603
                ["git", "cat-file", "--batch"],  # noqa: S607
                cwd=self.root,
                env=self.env,
                input="".join(f"{name}\n" for name in names).encode(),
                capture_output=True,
                timeout=GIT_TIMEOUT,
                check=False,
            )
        except subprocess.TimeoutExpired as exc:
            raise CloneError(
                f"git timed out after {GIT_TIMEOUT}s ({what or 'cat-file'})",
                permanent=False,
                code="clone-timeout",
            ) from exc
        out, found, at = completed.stdout, {}, 0
        for name in names:
            end = out.find(b"\n", at)
            if end == -1:
                break
            header = out[at:end].split()
            at = end + 1
            if len(header) != 3 or header[1] != b"blob":
                continue  # "<name> missing", or not a blob
            size = int(header[2])
            if size <= limit:
                found[name] = out[at : at + size]
            at += size + 1
        return found

    def __call__(
        self, *args: str, what: str = "", check: bool = True, returncode: bool = False
    ) -> str:
        completed = self.run(*args, what=what)
        if returncode:
            return str(completed.returncode)
        if completed.returncode != 0 and check:
            raise clone_error(what or f"git {args[0]}", git_text(completed.stderr))
        return git_text(completed.stdout)


def git_text(output: bytes) -> str:
    """git's output as text. A file need not be UTF-8 (nor its name): an invalid byte
    becomes U+FFFD, here and in every name list, so the names of the diff and of the
    lists agree, and the review goes on — a file's own bytes are read from the checkout."""
    return output.decode("utf-8", errors="replace")


# How git says the server refused it: its own words, or an HTTP status it was answered
# with ("The requested URL returned error: 403", "RPC failed; HTTP 401"). Not a bare
# "403" or "401": a port (127.0.0.1:40187) or a commit id holds those digits.
_DENIED = re.compile(
    r"authentication failed|could not read username|(?:returned error|\bhttp)[: ]+40[13]\b"
)


# How git says a file of the work tree (or its index) could not be written: a full disk,
# a quota, a file-size limit. Its exit status does not always say so (`git checkout`
# exits 0 after "error: unable to write file …"), so its words are read too.
_UNWRITTEN = re.compile(
    r"unable to write|no space left|out of diskspace|disk quota|file too large|"
    r"write error|short write|failed to write|could not write",
)


def unwritten(stderr: str) -> bool:
    """Whether git's error output says it could not write something."""
    return bool(_UNWRITTEN.search(stderr.lower()))


def clone_error(what: str, stderr: str) -> CloneError:
    text = stderr.strip().splitlines()
    detail = text[-1] if text else "no output"
    lowered = stderr.lower()
    if unwritten(stderr):
        return CloneError(
            f"Could not {what}: git could not write to the workspace ({detail}). The disk "
            "of TASUKU_WORKSPACE_ROOT (or of the checkout cache) may be full.",
            permanent=False,
            code="workspace-write",
        )
    if _DENIED.search(lowered):
        return CloneError(
            f"Could not {what}: access denied ({detail}). The App may not read this "
            "repository: grant it Contents: read.",
            permanent=True,
            code="clone-access",
        )
    if (
        "not our ref" in lowered
        or "couldn't find remote ref" in lowered
        or "no such remote ref" in lowered
    ):
        return CloneError(
            f"Could not {what}: the commit is not on GitHub any more ({detail}).",
            permanent=True,
            code="clone-commit-gone",
        )
    if "repository not found" in lowered or " 404" in lowered:
        return CloneError(
            f"Could not {what}: repository not found ({detail}).",
            permanent=True,
            code="clone-not-found",
        )
    return CloneError(f"Could not {what}: {detail}", permanent=False, code="clone-failed")


def git_env(token: str, home: Path, *, authenticate: bool = True) -> dict[str, str]:
    header = base64.b64encode(f"x-access-token:{token}".encode()).decode()
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),  # no user or system git configuration, no credential helpers
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_ASKPASS": "/bin/false",
        "GIT_LFS_SKIP_SMUDGE": "1",
        # No template: a repository made here gets nothing of the host's template
        # directory (its hooks above all: a `post-checkout` an administrator put there
        # would run on checking out the pull request). Nothing copied is also quicker.
        "GIT_TEMPLATE_DIR": "",
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
