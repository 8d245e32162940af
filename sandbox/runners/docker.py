"""The `docker` runner: the engine in a throwaway container on a Docker host.

    with DockerSandbox(client, name=container_name(run.id, attempt), image=…, limits=…) as box:
        result = box.run("static", job, checkout)

The container is named after the run and its attempt, so a container a killed worker
left behind is found and removed (forced) before its name is reused. PID 1 is
`timeout -s KILL <wall>`: the container destroys itself at the deadline even when the
worker that started it is gone. The checkout is bind-mounted read-only at /workspace,
each secondary repository read-only at /secondary/<owner>/<name> beside it; the job is
a read-only file beside them (writing a container's stdin through the API is
fragile: it needs a hijacked connection half-closed at the right moment, which TLS and
ssh transports cannot do). The root filesystem is read-only; /tmp and HOME are small
tmpfs; the user is 10001, with no capabilities and no way to gain privileges; memory
(without swap), CPU and process count are capped; there is no network unless the
operator names one (for the model API), and the environment holds only what the
engine is allowed. A reviewer with connectors gets the run's connector socket (and only
that file) mounted at /run/tasuku/connectors.sock: its one way back to Tasuku, with no
network (sandbox/connectors.py). On exit — success, failure or timeout — the container is killed
and removed; it is not auto-removed before then, so its logs and OOM flag can be read.
"""

from __future__ import annotations

import contextlib
import logging
import re
import shutil
import signal
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from types import TracebackType
from typing import Any

import docker
import requests
from docker.errors import APIError, DockerException, ImageNotFound, NotFound
from docker.models.containers import Container
from docker.types import LogConfig, Mount, Ulimit

from sandbox.connectors import CONTAINER_SOCKET, ConnectorBridge
from sandbox.contract import ReviewJob, ReviewResult
from sandbox.errors import SandboxError
from sandbox.runners.local import MAX_OUTPUT, failure_from_exit, result_parse

logger = logging.getLogger(__name__)

USER = "10001:10001"  # the image's `engine` user (sandbox/images/Dockerfile)
HOME = "/home/engine"
TMP = "/tmp"  # noqa: S108  (the container's own tmpfs)
WORKSPACE = "/workspace"
JOB_FILE = "/job/job.json"
# PID 1: `timeout` is coreutils, in every Debian-based image; it needs no shell to parse
# anything, and as PID 1 it survives its own SIGKILL to the process group, so it reports
# the kill (exit 137) instead of vanishing. Isolated mode: nothing in /workspace (a
# `sandbox/` package, a `sitecustomize.py`) is imported in place of Tasuku's code.
TIMER = ("timeout", "-s", "KILL")
ENGINE = ("python", "-I", "-m", "sandbox.run_engine")
LABEL = "tasuku.sandbox"
STDERR_KEPT = 64 * 1024  # enough for the engine's last lines, where its reason is
# The json-file log holds stdout and stderr escaped as JSON (a quote takes two bytes):
# room for the largest result an engine may return, and the log cannot fill the disk.
LOG_MAX_SIZE = f"{3 * MAX_OUTPUT // 1024**2}m"
# Docker's own rule for container names.
NAME = re.compile(r"[a-zA-Z0-9][a-zA-Z0-9_.-]+")
# An engine never gets a GitHub credential (docs/reviewers.md, *Runners*), whatever the caller passes.
GITHUB_NAME = re.compile(r"(GITHUB|GH)_", re.IGNORECASE)
GITHUB_VALUE = re.compile(r"(gh[pousr]_|github_pat_|-----BEGIN)")


@dataclass(frozen=True)
class DockerLimits:
    wall_seconds: float = 1800  # the self-destruct timer (PID 1)
    grace_seconds: float = 60  # past the timer, for start-up and exit, before the runner kills
    memory_bytes: int = 4 * 1024**3  # RAM, with no swap; the tmpfs count against it
    cpus: float = 2.0
    pids: int = 512  # processes and threads (ruff and ripgrep start one per host core)
    tmp_bytes: int = 256 * 1024**2  # each of /tmp and HOME


def container_name(run_id: int | str, attempt: int) -> str:
    """The container of one attempt of one run: the same on every worker, so a stale one
    is found, and different per attempt, so a retry never removes a live attempt's."""
    return f"tasuku-run-{run_id}-{attempt}"


def docker_client(base_url: str | None = None, *, timeout: int = 60) -> docker.DockerClient:
    """A client of the Docker daemon at `base_url`, else the one DOCKER_HOST (with
    DOCKER_TLS_VERIFY, DOCKER_CERT_PATH) names, else the local socket. The API version is
    negotiated: a pinned one is refused by daemons too old or, since Engine 29, too new."""
    try:
        if base_url:
            return docker.DockerClient(base_url=base_url, timeout=timeout)
        return docker.from_env(timeout=timeout)
    except DockerException as exc:
        raise SandboxError(
            f"The Docker daemon is unreachable: {exc}", permanent=False, code="docker-unreachable"
        ) from exc


def engine_stop(name: str, client: docker.DockerClient | None = None) -> bool:
    """Kill the container of a run's attempt (it is removed by the run that made it).
    Returns whether one was running."""
    owned = client is None
    client = client or docker_client(timeout=20)
    try:
        client.api.kill(name)
        return True
    except (NotFound, DockerException, requests.RequestException):
        return False
    finally:
        if owned:
            client.close()


def engine_run(
    engine: str,
    job: ReviewJob,
    checkout: Path,
    *,
    limits: DockerLimits,
    image: str,
    name: str,
    allow_env: dict[str, str] | None = None,
    network: str | None = None,
    proxy: str | None = None,
    client: docker.DockerClient | None = None,
    connectors: ConnectorBridge | None = None,
) -> ReviewResult:
    """Run `engine` on `checkout` in a container of `image` and return its validated
    `ReviewResult`. `network` (with `proxy`, its HTTPS proxy) is for engines that call a
    model API; without it the container has no network at all. `client`: a Docker client
    (default: `docker_client()`, closed afterwards). `connectors`: the run's open
    connector bridge, whose socket the container is given."""
    owned = client is None
    client = client or docker_client()
    env = dict(allow_env or {})
    if connectors is not None:
        env.update(connectors.environment(CONTAINER_SOCKET))
    try:
        sandbox = DockerSandbox(
            client,
            name=name,
            image=image,
            limits=limits,
            network=network,
            env=env,
            proxy=proxy,
            connector_socket=connectors.path if connectors is not None else None,
        )
        with sandbox as box:
            return box.run(engine, job, checkout)
    finally:
        if owned:
            client.close()


class DockerSandbox:
    """One container for one engine run; see the module docstring.

    Entering checks the image is there and removes a stale container of the same name;
    `run` creates, starts and waits for the container and reads its result; leaving
    kills and removes it, whatever happened.
    """

    def __init__(
        self,
        client: docker.DockerClient,
        *,
        name: str,
        image: str,
        limits: DockerLimits,
        network: str | None = None,
        env: Mapping[str, str] | None = None,
        proxy: str | None = None,
        connector_socket: Path | None = None,
    ) -> None:
        if not NAME.fullmatch(name):
            raise ValueError(f"{name!r} is not a valid container name")
        self.client = client
        self.name = name
        self.image = image
        self.limits = limits
        self.network = _network_mode(network, proxy)
        self.env = _environment(env or {}, proxy)
        # Beside the checkout, like the job file: the daemon sees it at the same path.
        self.connector_socket = connector_socket
        self.container: Container | None = None
        self._used = self._maybe_created = False

    def __enter__(self) -> DockerSandbox:
        with self._errors("find the engine image"):
            self.client.images.get(self.image)
        with self._errors("remove the stale container"), contextlib.suppress(NotFound):
            self.client.api.remove_container(self.name, force=True, v=True)
            logger.warning("Removed a stale sandbox container %s", self.name)
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        # A create whose answer was lost may still have made the container: by name.
        ref = self.container.id if self.container else self.name if self._maybe_created else None
        if ref is None:
            return
        try:
            # Forced: a running container is killed (SIGKILL) before it is removed.
            self.client.api.remove_container(ref, force=True, v=True)
        except NotFound:
            pass
        except (DockerException, requests.RequestException):
            # Never hides the run's own outcome; the next attempt has another name, so
            # the operator's prune (by the `tasuku.sandbox` label) finds this one.
            logger.exception("Could not remove sandbox container %s", self.name)
        self.container, self._maybe_created = None, False

    def run(self, engine: str, job: ReviewJob, checkout: Path) -> ReviewResult:
        """Write the job file, create and start the container, wait for it (killing it at
        the deadline), then read its result: an OOM kill, the timeout or a failed exit
        as a typed error, else its stdout as a `ReviewResult`."""
        if self._used:
            raise RuntimeError("a DockerSandbox runs one engine; enter a new one")
        self._used = True
        # Beside the checkout: a daemon that can see the checkout can see this file too.
        job_dir = Path(tempfile.mkdtemp(prefix="tasuku-job-", dir=checkout.resolve().parent))
        try:
            job_file = job_dir / "job.json"
            job_file.write_text(job.model_dump_json(), encoding="utf-8")
            job_file.chmod(0o644)  # the engine's user is not the worker's
            spec = self.spec(engine, job, checkout.resolve(), job_file)
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
            code = self._wait(engine, started)
            return self._outcome(engine, code, time.monotonic() - started)
        finally:
            shutil.rmtree(job_dir, ignore_errors=True)

    def spec(self, engine: str, job: ReviewJob, checkout: Path, job_file: Path) -> dict[str, Any]:
        """The arguments of `client.containers.create` for this run."""
        limits = self.limits
        timer = [*TIMER, f"{limits.wall_seconds:g}"]
        tmpfs = f"rw,nosuid,nodev,noexec,size={limits.tmp_bytes}"
        return {
            "image": self.image,
            "name": self.name,
            "command": [*timer, *ENGINE, engine, "--job-file", JOB_FILE],
            "init": False,  # PID 1 is the timer, even if the daemon adds an init by default
            "user": USER,
            "working_dir": WORKSPACE,
            "environment": self.env,
            # The operator's ~/.docker/config.json proxies are not the engine's business.
            "use_config_proxy": False,
            "labels": {LABEL: "engine", "tasuku.engine": engine, "tasuku.job": job.job_id},
            "mounts": [
                Mount(WORKSPACE, str(checkout), type="bind", read_only=True),
                Mount(JOB_FILE, str(job_file), type="bind", read_only=True),
                *secondary_mounts(job, checkout),
                # Read-only still connects: a socket is not written through its mount.
                *(
                    [
                        Mount(
                            CONTAINER_SOCKET,
                            str(self.connector_socket),
                            type="bind",
                            read_only=True,
                        )
                    ]
                    if self.connector_socket is not None
                    else []
                ),
            ],
            "read_only": True,
            "tmpfs": {
                TMP: tmpfs,
                HOME: f"{tmpfs},uid={USER.split(':')[0]},gid={USER.split(':')[1]},mode=0700",
            },
            "mem_limit": limits.memory_bytes,
            "memswap_limit": limits.memory_bytes,  # equal to the memory: no swap
            "nano_cpus": int(limits.cpus * 1e9),
            "pids_limit": limits.pids,
            "ulimits": [Ulimit(name="core", soft=0, hard=0)],
            "cap_drop": ["ALL"],
            "security_opt": ["no-new-privileges:true"],
            "network_mode": self.network,
            "auto_remove": False,  # its logs and OOM flag are read after it exits
            "log_config": LogConfig(
                type=LogConfig.types.JSON, config={"max-size": LOG_MAX_SIZE, "max-file": "1"}
            ),
            "stdin_open": False,
            "tty": False,
        }

    def _wait(self, engine: str, started: float) -> int:
        """The container's exit status; past the timer and its grace, it is killed."""
        assert self.container is not None
        limits = self.limits
        allowed = limits.wall_seconds + limits.grace_seconds
        try:
            status = self.container.wait(timeout=allowed)
        except APIError as exc:
            raise self._error(exc, "wait for the container") from exc
        except requests.RequestException as exc:
            # A read timeout surfaces as ReadTimeout, or over some transports as a
            # ConnectionError: the clock tells them from a daemon that went away.
            if not isinstance(exc, requests.ReadTimeout) and time.monotonic() - started < allowed:
                raise self._error(exc, "wait for the container") from exc
            with self._errors("kill the container"), contextlib.suppress(APIError):
                self.container.kill()  # a 409: it stopped in the meantime
            raise self._timeout(engine) from None
        if status.get("Error"):
            raise SandboxError(
                f"Docker could not wait for the container: {status['Error'].get('Message')}",
                permanent=False,
                code="docker-unreachable",
            )
        return int(status["StatusCode"])

    def _outcome(self, engine: str, code: int, elapsed: float) -> ReviewResult:
        assert self.container is not None
        if code == 0:
            with self._errors("read the engine's result"):
                stdout = self._read(_head, stdout=True, stderr=False)
            return result_parse(engine, stdout)
        with self._errors("inspect the container"):
            self.container.reload()
        if self.container.attrs["State"].get("OOMKilled"):
            raise SandboxError(
                f"The {engine} engine ran out of memory (its limit is "
                f"{_size(self.limits.memory_bytes)}) and was stopped.",
                permanent=True,
                code="sandbox-memory",
            )
        # 137 from the timer as PID 1 (124 if an init runs it as a child).
        if code in (124, 128 + signal.SIGKILL) and elapsed >= self.limits.wall_seconds:
            raise self._timeout(engine)
        with self._errors("read the engine's errors"):
            stderr = self._read(_tail, stdout=False, stderr=True, tail=200)
        raise failure_from_exit(engine, _as_signal(code), stderr.decode(errors="replace"))

    def _read(self, keep: Callable[[Iterable[bytes]], bytes], **which: Any) -> bytes:
        """What `keep` keeps of the container's log (demultiplexed), streamed so that no
        more than that is read."""
        assert self.container is not None
        stream = self.container.logs(stream=True, follow=False, **which)
        try:
            return keep(stream)
        finally:
            # Drops what was not read. Over ssh:// the SDK cannot cancel a stream: the
            # connection then goes with the response.
            with contextlib.suppress(DockerException):
                stream.close()

    def _timeout(self, engine: str) -> SandboxError:
        return SandboxError(
            f"The {engine} engine did not finish within {self.limits.wall_seconds:g}s "
            "and was stopped.",
            permanent=True,
            code="sandbox-timeout",
        )

    @contextlib.contextmanager
    def _errors(self, what: str) -> Iterator[None]:
        try:
            yield
        except (DockerException, requests.RequestException) as exc:
            raise self._error(exc, what) from exc

    def _error(self, exc: Exception, what: str) -> SandboxError:
        """A Docker failure as a typed error: the operator's to fix (permanent), or the
        daemon's to get over (transient)."""
        if isinstance(exc, ImageNotFound):
            return SandboxError(
                f"The engine image {self.image} is not on the Docker host. Build it "
                f"(docker build -f sandbox/images/Dockerfile -t {self.image} .) or pull it.",
                permanent=True,
                code="docker-image",
            )
        if isinstance(exc, APIError):
            # 4xx is a request Docker will refuse again (a missing network, a bad mount),
            # except a 409: a name or state race that the next attempt does not meet.
            permanent = exc.is_client_error() and exc.status_code != 409
            return SandboxError(
                f"Docker could not {what}: {exc.explanation or exc}",
                permanent=permanent,
                code="docker-refused" if permanent else "docker-unreachable",
            )
        return SandboxError(
            f"The Docker daemon is unreachable (could not {what}): {exc}",
            permanent=False,
            code="docker-unreachable",
        )


def secondary_mounts(job: ReviewJob, checkout: Path) -> list[Mount]:
    """Each secondary repository, read-only, beside /workspace as it is beside the
    checkout on the host (`/secondary/<owner>/<name>`): the engine finds it where it
    would anywhere else. One that is not on disk is not mounted (the engine is told of
    it and finds nothing)."""
    mounts = []
    container_workspace = PurePosixPath(WORKSPACE)
    for secondary in job.secondaries:
        source = secondary.location(checkout)
        if source.is_symlink() or not source.is_dir():
            continue
        target = container_workspace.parent / secondary.path
        mounts.append(Mount(str(target), str(source), type="bind", read_only=True))
    return mounts


def _network_mode(network: str | None, proxy: str | None) -> str:
    if not network or network == "none":
        if proxy:
            raise SandboxError(
                "A proxy for the engine needs a Docker network to reach it.",
                permanent=True,
                code="docker-network",
            )
        return "none"
    if network == "host" or network.startswith("container:"):
        raise SandboxError(
            f"The engine's network cannot be {network!r}: it would share a network "
            "namespace that reaches more than the model API.",
            permanent=True,
            code="docker-network",
        )
    return network


def _environment(allowed: Mapping[str, str], proxy: str | None) -> dict[str, str]:
    for key, value in allowed.items():
        if GITHUB_NAME.match(key) or GITHUB_VALUE.match(value):
            raise SandboxError(
                f"Refusing to pass {key} to an engine: an engine never gets a GitHub credential.",
                permanent=True,
                code="sandbox-credential",
            )
    env = dict(allowed)
    if proxy:
        env.update(HTTPS_PROXY=proxy, https_proxy=proxy)
    # Last, so that no allowed key moves HOME or TMPDIR off their tmpfs. No PATH: the
    # image's leads to its tools.
    env.update(HOME=HOME, TMPDIR=TMP, LANG="C.UTF-8", LC_ALL="C.UTF-8")
    return env


def _head(chunks: Iterable[bytes]) -> bytes:
    """Up to one byte past the output bound: enough for `result_parse` to refuse it."""
    kept = bytearray()
    for chunk in chunks:
        kept += chunk
        if len(kept) > MAX_OUTPUT:
            break
    return bytes(kept[: MAX_OUTPUT + 1])


def _tail(chunks: Iterable[bytes]) -> bytes:
    """The last STDERR_KEPT bytes, reading no more than the output bound."""
    kept, read = bytearray(), 0
    for chunk in chunks:
        kept = (kept + chunk)[-STDERR_KEPT:]
        read += len(chunk)
        if read > MAX_OUTPUT:
            break
    return bytes(kept)


def _as_signal(code: int) -> int:
    """128+N, the shell's (and `timeout`'s) way of saying killed by signal N, as the
    negative code `failure_from_exit` names the signal from."""
    try:
        return -signal.Signals(code - 128) if code > 128 else code
    except ValueError:
        return code


def _size(count: int) -> str:
    for unit, size in (("GiB", 1024**3), ("MiB", 1024**2)):
        if count >= size:
            return f"{count / size:g} {unit}"
    return f"{count} bytes"
