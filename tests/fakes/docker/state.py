"""The fake Docker Engine's state: images, containers and the programs they run."""

from __future__ import annotations

import secrets
import struct
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

STDOUT, STDERR = 1, 2
NEVER = "0001-01-01T00:00:00Z"  # Docker's zero time, for a container not started or not ended
SIGNALS = {"SIGKILL": 9, "KILL": 9, "SIGTERM": 15, "TERM": 15, "SIGINT": 2, "INT": 2}


def now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def frame(stream: int, data: bytes) -> bytes:
    """One frame of Docker's multiplexed stream: the stream (1 stdout, 2 stderr), three
    zero bytes, the payload's size as a big-endian uint32, then the payload."""
    return struct.pack(">BxxxL", stream, len(data)) + data


@dataclass(frozen=True)
class Program:
    """What a fake container does when started.

    It writes `stdout` and `stderr`, runs `seconds`, then exits with `exit_code`; `oom`:
    the kernel's OOM killer stops it (exit 137, State.OOMKilled); `oom_child`: the OOM
    killer stops one of its child processes and it exits with `exit_code` all the same
    (Docker reports the container's cgroup OOM events: State.OOMKilled is true whichever
    process was killed); `hang`: it never exits
    by itself, only a kill or its self-destruct timer stops it; `stuck`: not even the
    timer (a process in uninterruptible sleep), only a kill through the API.
    """

    exit_code: int = 0
    stdout: bytes = b""
    stderr: bytes = b""
    seconds: float = 0.0
    oom: bool = False
    oom_child: bool = False
    hang: bool = False
    stuck: bool = False


@dataclass(frozen=True)
class Invocation:
    """What a program given as a callable sees of its container: the create body and the
    files its mounts bring in from the host."""

    config: dict[str, Any]

    @property
    def cmd(self) -> list[str]:
        return list(self.config.get("Cmd") or [])

    @property
    def env(self) -> dict[str, str]:
        return dict(item.split("=", 1) for item in self.config.get("Env") or [])

    def host_path(self, path: str) -> Path:
        """The host file behind `path` inside the container (bind mounts only)."""
        mounts = sorted(
            self.config.get("HostConfig", {}).get("Mounts") or [],
            key=lambda mount: len(mount["Target"]),
            reverse=True,
        )
        for mount in mounts:
            target = mount["Target"].rstrip("/")
            if path == target or path.startswith(target + "/"):
                return Path(mount["Source"] + path[len(target) :])
        raise FileNotFoundError(f"{path} is not mounted into the fake container")

    def read(self, path: str) -> bytes:
        return self.host_path(path).read_bytes()


ProgramSource = Program | Callable[[Invocation], Program]


@dataclass
class Image:
    id: str
    reference: str
    config: dict[str, Any] = field(default_factory=dict)


@dataclass
class FakeContainer:
    id: str
    name: str
    image: Image
    config: dict[str, Any]  # the create body, as Docker received it
    program: ProgramSource
    created: str = field(default_factory=now)
    status: str = "created"  # created | running | exited
    exit_code: int = 0
    oom_killed: bool = False
    started_at: str = NEVER
    finished_at: str = NEVER
    removed: bool = False
    killed_with: list[int] = field(default_factory=list)
    log: list[tuple[int, bytes]] = field(default_factory=list)  # (stream, line), in order
    exited: threading.Event = field(default_factory=threading.Event)
    _stop: threading.Event = field(default_factory=threading.Event)

    @classmethod
    def new(cls, **kwargs: Any) -> FakeContainer:
        return cls(id=secrets.token_hex(32), **kwargs)

    @property
    def host_config(self) -> dict[str, Any]:
        return self.config.get("HostConfig") or {}

    @property
    def running(self) -> bool:
        return self.status == "running"

    def timer(self) -> float | None:
        """The self-destruct deadline when PID 1 is `timeout -s KILL <seconds> …`."""
        cmd = self.config.get("Cmd") or []
        if len(cmd) > 3 and cmd[0] == "timeout" and cmd[1:3] == ["-s", "KILL"]:
            return float(cmd[3])
        return None

    # --- the "process" ---

    def start(self, lock: threading.RLock) -> None:
        program = self.program
        if callable(program):
            program = program(Invocation(self.config))
        self.status, self.started_at = "running", now()
        for stream, data in ((STDOUT, program.stdout), (STDERR, program.stderr)):
            self.log.extend((stream, line) for line in data.splitlines(keepends=True))
        threading.Thread(target=self._live, args=(program, lock), daemon=True).start()

    def _live(self, program: Program, lock: threading.RLock) -> None:
        timer = None if program.stuck else self.timer()
        runs = float("inf") if program.hang or program.stuck else program.seconds
        limit = min(runs, timer if timer is not None else float("inf"))
        killed = self._stop.wait(None if limit == float("inf") else limit)
        with lock:
            if killed or not self.running:
                return  # `kill` ended it
            if runs <= limit:
                code, oom = (137, True) if program.oom else (program.exit_code, False)
                oom = oom or program.oom_child
            else:  # the timer's SIGKILL; as PID 1 it reports 128 + 9
                code, oom = 137, False
            self.end(code, oom=oom)

    def kill(self, signal: int) -> None:
        self.killed_with.append(signal)
        self.end(128 + signal)

    def end(self, code: int, *, oom: bool = False) -> None:
        self.status, self.exit_code, self.oom_killed = "exited", code, oom
        self.finished_at = now()
        self._stop.set()
        self.exited.set()

    # --- what the API shows ---

    def inspect(self) -> dict[str, Any]:
        config = {
            k: v for k, v in self.config.items() if k not in ("HostConfig", "NetworkingConfig")
        }
        config.setdefault("Tty", False)
        config.setdefault("Labels", {})
        mode = self.host_config.get("NetworkMode") or "default"
        return {
            "Id": self.id,
            "Created": self.created,
            "Path": (self.config.get("Cmd") or [""])[0],
            "Args": (self.config.get("Cmd") or [])[1:],
            "State": {
                "Status": self.status,
                "Running": self.running,
                "Paused": False,
                "Restarting": False,
                "OOMKilled": self.oom_killed,
                "Dead": False,
                "Pid": 4242 if self.running else 0,
                "ExitCode": self.exit_code,
                "Error": "",
                "StartedAt": self.started_at,
                "FinishedAt": self.finished_at,
            },
            "Image": self.image.id,
            "Name": f"/{self.name}",
            "RestartCount": 0,
            "HostConfig": self.host_config,
            "Config": config,
            "Mounts": [
                {
                    "Type": mount.get("Type", "volume"),
                    "Source": mount.get("Source", ""),
                    "Destination": mount["Target"],
                    "Mode": "",
                    "RW": not mount.get("ReadOnly", False),
                    "Propagation": "rprivate",
                }
                for mount in self.host_config.get("Mounts") or []
            ],
            "NetworkSettings": {"Networks": {} if mode == "none" else {mode: {}}},
        }


@dataclass(frozen=True)
class Call:
    method: str
    path: str  # without the /v1.xx prefix
    query: dict[str, str]
    body: Any
    version: str | None  # the API version in the path, if any
    at: float = field(default_factory=time.monotonic)


@dataclass
class Injection:
    """The next `count` calls matching `method` and `path` (a regex) answer `status` with
    `message`, or (`drop`) have their connection closed unanswered; before the call took
    effect, or (`after`) once it has."""

    method: str
    path: str
    status: int = 500
    message: str = "injected failure"
    drop: bool = False
    after: bool = False
    count: int = 1
