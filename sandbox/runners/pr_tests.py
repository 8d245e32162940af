"""The pull request's own tests in a throwaway container, and what their output says.

    outcome = tests_run("pytest -q --junitxml=$TASUKU_JUNIT", checkout, image=…, limits=…,
                        name="tasuku-tests-12-1")

The container is the docker runner's (sandbox/runners/docker.py: a timer as PID 1, an
unprivileged user (the worker's own, never root: `tests_user`) with no capabilities, a read-only root, memory, CPU and process limits, killed
and removed on the way out), with three differences an engine does not need: the command
is the repository's (run by `sh -c` at the checkout's root), the checkout is writable
(the tests build and write caches; it is this run's own copy, deleted afterwards), and a
results folder is mounted at /results where `$TASUKU_JUNIT` points. The environment holds
nothing of the worker's: no token, no key. There is no network unless `network` is given.

What the tests printed is data: it is kept bounded (the last OUTPUT_KEPT bytes) and the
failing tests are read from a JUnit XML file the command wrote, else from pytest's and
Go's summary lines; nothing in it is ever a finding.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from xml.parsers import expat  # noqa: S410 - bounded, any DTD refused (junit_read)

import docker
import requests
from docker.errors import APIError, DockerException
from docker.types import LogConfig, Mount, Ulimit

from sandbox.errors import SandboxError
from sandbox.runners.docker import (
    HOME,
    TIMER,
    TMP,
    USER,
    WORKSPACE,
    DockerLimits,
    DockerSandbox,
    docker_client,
)

RESULTS = "/results"
JUNIT = f"{RESULTS}/junit.xml"
OUTPUT_KEPT = 64 * 1024  # the end of the output, where a test runner's summary is
JUNIT_MAX_BYTES = 4 * 1024 * 1024
MAX_FAILED = 50  # failing tests named at most
PASSED, FAILED, TIMED_OUT = "passed", "failed", "timed_out"


@dataclass(frozen=True)
class TestsOutcome:
    """How the tests ended: `passed` (exit 0), `failed` (another exit, or out of memory)
    or `timed_out`; the failing tests' names where the output let them be found."""

    __test__ = False

    status: str
    exit_code: int | None
    seconds: float
    output: str = ""
    failed_tests: list[str] = field(default_factory=list)
    reason: str = ""


def tests_container_name(row_id: int, attempt: int) -> str:
    """One attempt's container: the same on every worker (a stale one is found), another
    for each attempt."""
    return f"tasuku-tests-{row_id}-{attempt}"


def tests_run(
    command: str,
    checkout: Path,
    *,
    image: str,
    limits: DockerLimits,
    name: str,
    network: str | None = None,
    client: docker.DockerClient | None = None,
) -> TestsOutcome:
    """Run `command` on `checkout` in a container of `image` and say how it ended. A
    Docker failure raises `SandboxError` (transient or permanent, as the docker runner's)."""
    owned = client is None
    client = client or docker_client()
    try:
        with TestsSandbox(client, name=name, image=image, limits=limits, network=network) as box:
            return box.run_command(command, checkout)
    finally:
        if owned:
            client.close()


class TestsSandbox(DockerSandbox):
    """The docker runner's container, running the repository's tests command."""

    def run_command(self, command: str, checkout: Path) -> TestsOutcome:
        if self._used:
            raise RuntimeError("a TestsSandbox runs one command; enter a new one")
        self._used = True
        checkout = checkout.resolve()
        if tests_user() == USER:
            _writable(checkout)  # the worker's files; the container's user is another
        results = Path(tempfile.mkdtemp(prefix="tasuku-results-", dir=checkout.parent))
        try:
            results.chmod(0o777)  # noqa: S103 - the container's user is not the worker's
            spec = self.command_spec(command, checkout, results)
            try:
                self.container = self.client.containers.create(**spec)
            except APIError as exc:
                raise self._error(exc, "create the container") from exc
            except (DockerException, requests.RequestException) as exc:
                self._maybe_created = True
                raise self._error(exc, "create the container") from exc
            started = time.monotonic()
            with self._errors("start the container"):
                self.container.start()
            try:
                code: int | None = self._wait("tests", started)
            except SandboxError as exc:
                if exc.code != "sandbox-timeout":
                    raise
                code = None
            seconds = time.monotonic() - started
            return self._tests_outcome(command, code, seconds, results)
        finally:
            shutil.rmtree(results, ignore_errors=True)

    def command_spec(self, command: str, checkout: Path, results: Path) -> dict[str, Any]:
        """The arguments of `client.containers.create` for the tests."""
        limits = self.limits
        tmpfs = f"rw,nosuid,nodev,size={limits.tmp_bytes}"
        user = tests_user()
        uid, gid = user.split(":")
        return {
            "image": self.image,
            "name": self.name,
            "command": [*TIMER, f"{limits.wall_seconds:g}", "sh", "-c", command],
            "init": False,  # PID 1 is the timer
            "user": user,
            "working_dir": WORKSPACE,
            "environment": {**self.env, "CI": "true", "TASUKU_JUNIT": JUNIT},
            "use_config_proxy": False,
            "labels": {"tasuku.sandbox": "tests"},
            "mounts": [
                Mount(WORKSPACE, str(checkout), type="bind", read_only=False),
                Mount(RESULTS, str(results), type="bind", read_only=False),
            ],
            "read_only": True,
            "tmpfs": {TMP: tmpfs, HOME: f"{tmpfs},uid={uid},gid={gid},mode=0700"},
            "mem_limit": limits.memory_bytes,
            "memswap_limit": limits.memory_bytes,
            "nano_cpus": int(limits.cpus * 1e9),
            "pids_limit": limits.pids,
            "ulimits": [Ulimit(name="core", soft=0, hard=0)],
            "cap_drop": ["ALL"],
            "security_opt": ["no-new-privileges:true"],
            "network_mode": self.network,
            "auto_remove": False,
            "log_config": LogConfig(
                type=LogConfig.types.JSON, config={"max-size": "20m", "max-file": "1"}
            ),
            "stdin_open": False,
            "tty": False,
        }

    def _tests_outcome(
        self, command: str, code: int | None, seconds: float, results: Path
    ) -> TestsOutcome:
        assert self.container is not None
        with self._errors("read the tests' output"):
            raw = self._read(_tail_kept, stdout=True, stderr=True)
        output = raw.decode("utf-8", errors="replace")
        junit = _read_bounded(results / "junit.xml")
        failed = failing_tests(junit, output)
        wall = self.limits.wall_seconds
        timer = code is None or (code in (124, 128 + signal.SIGKILL) and seconds >= wall)
        if timer and not self._oom():
            return TestsOutcome(
                TIMED_OUT, None, seconds, output, failed,
                reason=f"The tests did not finish within {wall:g}s and were stopped.",
            )  # fmt: skip
        if code == 0 and self._oom():
            reason = (
                "The tests command exited with status 0, but a process of the tests ran out "
                f"of memory (the limit is {_size(self.limits.memory_bytes)}) and was killed."
            )
            return TestsOutcome(FAILED, 0, seconds, output, failed, reason=reason)
        if code == 0:
            doubt = exit_0_doubt(command, junit)
            if doubt is None:
                return TestsOutcome(PASSED, 0, seconds, output, [])
            return TestsOutcome(FAILED, 0, seconds, output, failed, reason=doubt)
        if self._oom():
            reason = (
                f"The tests ran out of memory (the limit is {_size(self.limits.memory_bytes)})."
            )
        else:
            reason = f"The tests command exited with status {code}."
        return TestsOutcome(FAILED, code, seconds, output, failed, reason=reason)

    def _oom(self) -> bool:
        assert self.container is not None
        with self._errors("inspect the container"):
            self.container.reload()
        return bool(self.container.attrs["State"].get("OOMKilled"))


def tests_user() -> str:
    """Who the tests run as: the worker's own user and group, so that whatever they write
    in the checkout the worker can remove afterwards — never root: a worker running as
    root gives them the image's unprivileged user (10001), and the checkout is made
    writable for it (root removes anything)."""
    uid, gid = os.getuid(), os.getgid()
    return USER if uid == 0 else f"{uid}:{gid}"


def _writable(root: Path) -> None:
    """Let the container's user (not the worker's) write the checkout: this run's own.
    Never through a link."""
    for folder, folders, files in os.walk(root):
        for name in [*folders, *files]:
            path = os.path.join(folder, name)
            if not os.path.islink(path):
                with contextlib.suppress(OSError):
                    os.chmod(path, 0o777 if name in folders else 0o666)  # noqa: S103
    with contextlib.suppress(OSError):
        root.chmod(0o777)  # noqa: S103


def exit_0_doubt(command: str, junit: bytes | None) -> str | None:
    """Why an exit status of 0 does not show the tests passed, or None when it does: the
    JUnit file names failing test cases (whatever its `failures` attribute says), lists
    none at all, or — when the command names `$TASUKU_JUNIT` — was not written or cannot
    be read (the tests stopped before their report, e.g. an `os._exit(0)`). Pure."""
    read = junit_read(junit) if junit else None
    said = "The tests command exited with status 0, but"
    if read is not None and read.failed:
        count = len(read.failed)
        return f"{said} its JUnit file names {count} failing test case{'s' * (count != 1)}."
    if read is not None and read.cases == 0:
        return f"{said} its JUnit file lists no test case: no test is known to have run."
    if read is None and ("TASUKU_JUNIT" in command or JUNIT in command):
        return (
            f"{said} left no readable JUnit file at $TASUKU_JUNIT (missing, over "
            f"{JUNIT_MAX_BYTES // 1024**2} MiB or not well-formed), which it names: the tests "
            "are not known to have run to the end."
        )
    return None


def _read_bounded(path: Path) -> bytes | None:
    try:
        if path.is_symlink() or not path.is_file():
            return None
        with path.open("rb") as handle:
            return handle.read(JUNIT_MAX_BYTES + 1)
    except OSError:
        return None


def _tail_kept(chunks) -> bytes:
    """The last OUTPUT_KEPT bytes of the log, reading no more than 20 MiB of it."""
    kept, read = bytearray(), 0
    for chunk in chunks:
        kept = (kept + chunk)[-OUTPUT_KEPT:]
        read += len(chunk)
        if read > 20 * 1024 * 1024:
            break
    return bytes(kept)


def _size(count: int) -> str:
    for unit, size in (("GiB", 1024**3), ("MiB", 1024**2)):
        if count >= size:
            return f"{count / size:g} {unit}"
    return f"{count} bytes"


# --- What the output says ----------------------------------------------------------------


def failing_tests(junit: bytes | None, output: str) -> list[str]:
    """The failing tests' names: from the JUnit XML file when it names any, else from the
    summary lines of the output (pytest's `FAILED`/`ERROR`, Go's `--- FAIL:`)."""
    found = junit_failures(junit) if junit else None
    if not found:
        found = summary_failures(output)
    return found[:MAX_FAILED]


@dataclass(frozen=True)
class JUnit:
    """What a JUnit XML file says: how many test cases it lists and which failed."""

    cases: int
    failed: list[str]


class _Refused(Exception):
    pass


def junit_read(data: bytes) -> JUnit | None:
    """The test cases of a JUnit XML file and the `classname.name` (or `name`) of each
    with a `<failure>` or `<error>` (whatever the suite's `failures` attribute says); None
    when the file is not JUnit XML this can read: too large, not well-formed, or with a
    DTD — refused by the parser whatever the file's encoding, so no entity is ever
    expanded. Read as a stream: no tree is built, however deep the nesting."""
    if len(data) > JUNIT_MAX_BYTES:
        return None
    parser = expat.ParserCreate()
    cases, names = 0, []
    case: list[str] = []  # the open test case's label, and whether it failed

    def refuse(*_: object) -> None:
        raise _Refused

    def start(tag: str, attributes: dict[str, str]) -> None:
        nonlocal cases
        if tag == "testcase":
            cases += 1
            name, owner = attributes.get("name", ""), attributes.get("classname", "")
            case[:] = [f"{owner}.{name}" if owner and name else name or owner]
        elif tag in ("failure", "error") and case:
            label = _clean(case[0])
            if label and label not in names:
                names.append(label)

    def end(tag: str) -> None:
        if tag == "testcase":
            case.clear()

    parser.StartDoctypeDeclHandler = refuse
    parser.EntityDeclHandler = refuse
    parser.ExternalEntityRefHandler = refuse
    parser.StartElementHandler = start
    parser.EndElementHandler = end
    try:
        parser.Parse(data, True)
    except (expat.ExpatError, _Refused, ValueError):
        return None
    return JUnit(cases, names)


def junit_failures(data: bytes) -> list[str] | None:
    """The failing test cases a JUnit XML file names (None: unreadable, `junit_read`)."""
    read = junit_read(data)
    return None if read is None else read.failed


_PYTEST = re.compile(r"^(?:FAILED|ERROR) (\S+)(?: - .*)?$")
_GO = re.compile(r"^\s*--- FAIL: (\S+)")


def summary_failures(output: str) -> list[str]:
    """The tests pytest's short summary (`FAILED path::test - why`, `ERROR …`) or Go's
    verbose output (`--- FAIL: TestName`) names as failing."""
    names: list[str] = []
    for line in output.splitlines():
        matched = _PYTEST.match(line.rstrip()) or _GO.match(line)
        if matched and matched.group(1) not in names:
            names.append(_clean(matched.group(1)))
    return names


def _clean(name: str) -> str:
    """A test's name as data: one line, bounded, no control characters."""
    return "".join(c for c in name if c.isprintable())[:300]
