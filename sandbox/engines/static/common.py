"""What the static engine's checkers share: the changed lines of a file, a finding, and
what was not checked, and why.

File names are data: a tool is given them after `--` and as `./name`, so a name such as
`--output-file=x.py` or `-` is never read as an option or as standard input.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from sandbox.contract import ChangedFile, Finding, Severity, Suppression

# Larger changed files are named, not checked. shellcheck reads a 3 MB script in ~4 s and
# 120 MB; every checker runs under its own memory limit and timeout besides.
MAX_FILE_BYTES = 8_000_000
BINARY_PROBE = 8192


@dataclass(frozen=True)
class Skipped:
    """A changed file (or a tool's part of it) the engine did not check, and why."""

    path: str
    reason: str
    # Set when a checker failed on this file (out of memory, timeout, crash): a sentence
    # naming the checker and why. The review is then partial, never a success.
    failure: str = ""


class CheckerFailed(Exception):  # noqa: N818 - it is an outcome, not a programming error
    """A checker could not finish (out of memory, timed out, crashed, unreadable output);
    the message is a sentence naming the checker and why."""


DEFAULT_CHECKER_MEMORY_MB = 6144  # at least this much, by default
MOST_CHECKER_MEMORY_MB = 16384  # and at most this much, by default


def default_checker_megabytes() -> int:
    """The checker limit when none is set: half the machine's memory, between 6 GB and
    16 GB. shellcheck holds about 5 GB resident (and asks for more address space) on an
    8,700-line script; a 6 GB address-space limit made such a review partial."""
    try:
        physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // (1024 * 1024)
    except (ValueError, OSError):
        return DEFAULT_CHECKER_MEMORY_MB
    return max(DEFAULT_CHECKER_MEMORY_MB, min(MOST_CHECKER_MEMORY_MB, physical // 2))


CHECKER_TIMEOUT = 300
# Run as the checker's parent: set the address-space limit, then become the checker.
# (A preexec_fn is not safe in a process with threads; the checkers run side by side.)
# util-linux's `prlimit` where it is (Debian's base system, the image): a C program that
# sets the limits and execs, 3 ms of CPU; else a Python that does the same, 12 ms.
_PRLIMIT = next((p for p in ("/usr/bin/prlimit", "/bin/prlimit") if os.access(p, os.X_OK)), None)
_LIMITED = (
    "import os, resource, sys\n"
    "n = int(sys.argv[1])\n"
    "resource.setrlimit(resource.RLIMIT_AS, (n, n))\n"
    "resource.setrlimit(resource.RLIMIT_CORE, (0, 0))\n"
    "os.execv(sys.argv[2], sys.argv[2:])\n"
)


def limited(limit: int, command: list[str], *, prlimit: str | None = _PRLIMIT) -> list[str]:
    """`command` (its program an absolute path) run with at most `limit` bytes of address
    space and no core file. `--` ends prlimit's options: nothing of `command` is read
    as one."""
    if prlimit is not None:
        return [prlimit, f"--as={limit}", "--core=0", "--", *command]
    return [sys.executable, "-I", "-S", "-c", _LIMITED, str(limit), *command]


def checker_memory_bytes() -> int:
    """Address space each checker process may use: TASUKU_STATIC_CHECKER_MEMORY_MB (the
    runner passes the setting through; unset, `default_checker_megabytes`), never above
    the limit this process has."""
    raw = os.environ.get("TASUKU_STATIC_CHECKER_MEMORY_MB", "").strip()
    megabytes = int(raw) if raw.isdigit() and int(raw) > 0 else default_checker_megabytes()
    wanted = megabytes * 1024 * 1024
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    return wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)


def run_checker(
    name: str,
    command: list[str],
    *,
    cwd: Path,
    on: str,
    ok: tuple[int, ...] = (0,),
    timeout: int | None = None,
) -> subprocess.CompletedProcess:
    """`command` under the checker memory limit and a timeout (`timeout`, else
    CHECKER_TIMEOUT). A failure raises CheckerFailed with a sentence: `shellcheck ran out
    of memory on "deploy/install.sh"`."""
    limit = checker_memory_bytes()
    timeout = timeout or CHECKER_TIMEOUT
    try:
        completed = subprocess.run(  # noqa: S603
            limited(limit, command),
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            check=False,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        raise CheckerFailed(f"{name} did not finish within {timeout}s on {on}") from None
    except OSError as exc:
        raise CheckerFailed(f"{name} could not be started on {on}: {exc}") from None
    code = completed.returncode
    if code in ok:
        return completed
    stderr = completed.stderr.decode(errors="replace")
    megabytes = limit // (1024 * 1024)
    if code == 251 or any(
        text in stderr.lower()
        for text in ("out of memory", "memory allocation of", "cannot allocate memory")
    ):
        # 251: the Haskell runtime's heap exhausted (shellcheck); Rust aborts with
        # "memory allocation of N bytes failed" (ruff).
        raise CheckerFailed(f"{name} ran out of memory on {on} (limit {megabytes} MB)")
    if code < 0:
        signame = signal.Signals(-code).name if -code in signal.valid_signals() else str(-code)
        raise CheckerFailed(
            f"{name} crashed on {on} ({signame}; the memory limit is {megabytes} MB)"
        )
    tail = (stderr.strip().splitlines() or ["no output"])[-1][:300]
    raise CheckerFailed(f"{name} failed on {on} (exit {code}: {tail})")


def parsed_json(name: str, output: bytes, on: str, empty: str):
    """A checker's JSON output; output that is not JSON is the checker's failure."""
    try:
        return json.loads(output or empty)
    except ValueError:
        raise CheckerFailed(f"{name} wrote output that is not JSON on {on}") from None


def argument(path: str) -> str:
    """A relative path as a tool's argument: never an option, never `-` (stdin)."""
    return f"./{path}"


def shown(path: str) -> str:
    """A path quoted for a summary line: a quote, a backtick or a newline in the name
    cannot break the sentence it is in."""
    return json.dumps(path, ensure_ascii=False)


@dataclass(frozen=True)
class Target:
    """A changed text file of the checkout and the head-side lines the PR added."""

    path: str  # relative to the checkout
    absolute: Path
    added: frozenset[int]
    # Outside the review's scope (vendored, generated …): only the safety checks read it.
    safety_only: bool = False
    # In a folder of tests or fixtures (the job's word, else by its path): where a
    # credential is mostly made up.
    test_data: bool = False
    # Names on the lines the change removed (ChangedFile.removed).
    removed: tuple[tuple[str, int, bool], ...] = ()

    def touches(self, start: int, end: int) -> bool:
        return any(line in self.added for line in range(start, end + 1))

    @cached_property
    def data(self) -> bytes:
        return self.absolute.read_bytes()

    @cached_property
    def utf8(self) -> bool:
        try:
            self.data.decode("utf-8")
        except UnicodeDecodeError:
            return False
        return True

    @cached_property
    def text(self) -> str:
        """The file as UTF-8 (an invalid byte becomes U+FFFD), line ends as they are; a
        file that starts with a UTF-16 byte order mark as UTF-16 (PowerShell, some
        Windows tools write it: git calls it binary, a key in it is still a key)."""
        if utf16(self.data[:2]):
            return self.data.decode("utf-16", errors="replace")
        return self.data.decode("utf-8", errors="replace")

    @cached_property
    def lines(self) -> list[str]:
        """Lines as git and GitHub number them: split at `\\n` only (a form feed or a
        U+2028 in a line is part of it), without the `\\r` of a CRLF ending."""
        lines = self.text.split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        return [line[:-1] if line.endswith("\r") else line for line in lines]


def targets(root: Path, changed: tuple[ChangedFile, ...]) -> list[Target]:
    """Changed files that exist in the checkout as regular, reasonably sized text files."""
    return select(root, changed)[0]


def select(
    root: Path, changed: tuple[ChangedFile, ...], *, safety_only: bool = False
) -> tuple[list[Target], list[Skipped]]:
    """The changed files to check (regular, reasonably sized text files of the checkout
    with added lines), and those with added lines that are not checked, with why."""
    found: list[Target] = []
    skipped: list[Skipped] = []
    for file in changed:
        if file.status == "deleted" or not (file.added or file.binary or file.removed):
            # Nothing added and nothing removed that a checker follows (a removed name a
            # kept line still uses): nothing the author could be told about.
            continue
        reason = None
        absolute = root / file.path
        every_line = False
        try:
            if file.binary and not _utf16_file(absolute):
                reason = "binary in the diff"
            elif file.binary:
                every_line = True  # git shows no lines of it: all of it is read
            elif absolute.is_symlink():
                reason = "a symbolic link"
            elif not absolute.exists():
                reason = "not in the checkout"
            elif absolute.is_dir():
                # git writes a submodule (a gitlink) as a folder: what changed is the
                # commit it names, in another repository.
                reason = "a submodule: the change is the other repository's commit it names"
            elif not absolute.is_file():
                reason = "not a regular file"
            elif absolute.stat().st_size > MAX_FILE_BYTES:
                reason = f"larger than {MAX_FILE_BYTES // 1_000_000} MB"
            else:
                with absolute.open("rb") as handle:
                    start = handle.read(BINARY_PROBE)
                    if b"\0" in start and not utf16(start[:2]):
                        reason = "binary (a NUL byte in its first 8 KB)"
        except OSError as exc:
            reason = f"unreadable ({exc.strerror or exc})"
        if reason is not None:
            skipped.append(Skipped(file.path, reason))
            continue
        added = frozenset(line for span in file.added for line in range(span.start, span.end + 1))
        test_data = file.test_data if file.test_data is not None else test_path(file.path)
        target = Target(file.path, absolute, added, safety_only, test_data, file.removed)
        if every_line:
            target = Target(
                file.path, absolute, frozenset(range(1, len(target.lines) + 1)),
                safety_only, test_data, file.removed,
            )  # fmt: skip
        found.append(target)
    return found, skipped


def utf16(start: bytes) -> bool:
    """Whether bytes start with a UTF-16 byte order mark."""
    return start in (b"\xff\xfe", b"\xfe\xff")


def _utf16_file(path: Path) -> bool:
    try:
        if path.is_symlink() or not path.is_file() or path.stat().st_size > MAX_FILE_BYTES:
            return False
        with path.open("rb") as handle:
            return utf16(handle.read(2))
    except OSError:
        return False


@contextmanager
def utf8_copies(files: list[Target]) -> Iterator[Path]:
    """A scratch folder holding `files` at their paths as UTF-8, read as `Target.text`
    reads them: for a tool that fails on (ruff) or silently skips (detect-secrets) a
    file that is not UTF-8. Lines and their numbers are those of the checkout."""
    with tempfile.TemporaryDirectory(prefix="tasuku-utf8-") as scratch:
        for target in files:
            copy = Path(scratch) / target.path
            copy.parent.mkdir(parents=True, exist_ok=True)
            copy.write_bytes(target.text.encode("utf-8", errors="surrogateescape"))
        yield Path(scratch)


def finding(
    *,
    target: Target,
    start: int,
    end: int | None = None,
    severity: Severity,
    category: str,
    title: str,
    body: str,
    evidence: str,
    rule: str,
    suggestion: str | None = None,
    confidence: float = 0.9,
    suppressed_by: Suppression | None = None,
) -> Finding:
    return Finding(
        path=target.path,
        start_line=start,
        end_line=end or start,
        severity=severity,
        category=category,
        title=title[:200],
        body=body,
        evidence=evidence[:4000],
        suggestion=suggestion,
        confidence=confidence,
        blocking=severity.at_least(Severity.HIGH),
        rule=rule,
        suppressed_by=suppressed_by,
    )


def quote_line(target: Target, line: int) -> str:
    try:
        return target.lines[line - 1].strip()[:300]
    except IndexError:
        return ""


# Programs a `#!` line runs to start the real interpreter: env, and s6-overlay's
# with-contenv (`#!/usr/bin/with-contenv bash`, the linuxserver images' scripts).
LAUNCHERS = frozenset({"env", "with-contenv"})


def interpreter(target: Target) -> str:
    """The program a `#!` line names (`bash` for `#!/usr/bin/env -S bash -e` and for
    `#!/usr/bin/with-contenv bash`), else ""."""
    first = target.lines[0] if target.lines else ""
    if not first.startswith("#!"):
        return ""
    words = first[2:].split()
    while words and Path(words[0]).name in LAUNCHERS:
        words = [w for w in words[1:] if not w.startswith("-") and "=" not in w]
    return Path(words[0]).name if words else ""


TEST_FOLDERS = {
    "test", "tests", "__tests__", "testdata", "test_data", "testing", "fixture", "fixtures",
    "__fixtures__", "spec", "specs", "example", "examples", "sample", "samples",
}  # fmt: skip


def test_path(path: str) -> bool:
    """Whether `path` is in a folder of tests, fixtures or examples (`tests/`, `spec/`,
    `testdata/`, `examples/` …), where credentials are mostly made up."""
    return test_folder(path) is not None


def test_folder(path: str) -> str | None:
    """The outermost folder of tests, fixtures or examples `path` is in, as a prefix
    (`pkg/tests/`), or None."""
    parts = Path(path).parts[:-1]
    for index, part in enumerate(parts):
        if part.lower() in TEST_FOLDERS:
            return "/".join(parts[: index + 1]) + "/"
    return None


# A tool's version by what its program is on disk (path, inode, size, time): the same
# program answers `--version` the same way. Filled in the fork server before it forks
# (sandbox/engines/static/warm.py), so that a review asks no tool it already asked;
# a program replaced since (an upgrade) is asked again.
_VERSIONS: dict[tuple[str, int, int, int], str] = {}
# A checker that does not say its version within this long is not waited for (the fork
# server asks before it forks, and every engine waits on it): its version is left out.
VERSION_TIMEOUT = 10


def version_of(name: str, program: str, cwd: Path) -> str:
    """`program --version`'s output; a failure here costs no findings."""
    try:
        stat = os.stat(program)
        key: tuple[str, int, int, int] | None = (
            program,
            stat.st_ino,
            stat.st_size,
            stat.st_mtime_ns,
        )
    except OSError:
        key = None
    if key in _VERSIONS:
        return _VERSIONS[key]  # type: ignore[index]
    try:
        text = run_checker(
            name, [program, "--version"], cwd=cwd, on="--version", timeout=VERSION_TIMEOUT
        ).stdout.decode(errors="replace")
    except CheckerFailed:
        return ""
    if key is not None and text.strip():
        _VERSIONS[key] = text
    return text
