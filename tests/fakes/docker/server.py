"""The fake Docker Engine's HTTP server and routes.

Paths, query parameters, bodies, status codes and `{"message": …}` error bodies follow
the Docker Engine API (https://docs.docker.com/reference/api/engine/), in the daemon's
own wording where the runner or the SDK reads them.
"""

from __future__ import annotations

import contextlib
import json
import re
import secrets
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

from tests.fakes.docker.state import (
    SIGNALS,
    Call,
    FakeContainer,
    Image,
    Injection,
    Program,
    ProgramSource,
    frame,
)

API_VERSION = "1.45"
MIN_API_VERSION = "1.24"
NAME = re.compile(r"/?[a-zA-Z0-9][a-zA-Z0-9_.-]+")
VERSIONED = re.compile(r"/v(\d+\.\d+)(/.*)")
BUILTIN_NETWORKS = {"none", "bridge", "host", "default"}


class DockerError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class Dropped(Exception):
    """Close the connection without answering (a daemon that went away)."""


class FakeDocker:
    """A stateful fake of the Docker Engine API on 127.0.0.1: see the package docstring."""

    def __init__(self, *, port: int = 0) -> None:
        self.lock = threading.RLock()
        self.images: dict[str, Image] = {}
        self.networks: set[str] = set()
        self.containers: dict[str, FakeContainer] = {}  # not removed, by id
        self.created: list[FakeContainer] = []  # every container created, removed or not
        self.calls: list[Call] = []
        self.injections: list[Injection] = []
        self.program: ProgramSource = Program()
        self.routes: list[tuple[str, re.Pattern[str], Callable[..., Any]]] = [
            ("GET", re.compile(r"/_ping"), self._ping),
            ("HEAD", re.compile(r"/_ping"), self._ping),
            ("GET", re.compile(r"/version"), self._version),
            ("GET", re.compile(r"/images/(?P<name>.+)/json"), self._image_inspect),
            ("POST", re.compile(r"/containers/create"), self._create),
            ("GET", re.compile(r"/containers/(?P<ref>[^/]+)/json"), self._inspect),
            ("POST", re.compile(r"/containers/(?P<ref>[^/]+)/start"), self._start),
            ("POST", re.compile(r"/containers/(?P<ref>[^/]+)/wait"), self._wait),
            ("GET", re.compile(r"/containers/(?P<ref>[^/]+)/logs"), self._logs),
            ("POST", re.compile(r"/containers/(?P<ref>[^/]+)/kill"), self._kill),
            ("DELETE", re.compile(r"/containers/(?P<ref>[^/]+)"), self._remove),
        ]
        self.server = ThreadingHTTPServer(("127.0.0.1", port), _Handler)
        self.server.daemon_threads = True
        self.server.fake = self  # type: ignore[attr-defined]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    # --- lifecycle ---

    @property
    def url(self) -> str:
        """What DOCKER_HOST would say."""
        host, port = self.server.server_address[:2]
        return f"tcp://{host}:{port}"

    def start(self) -> FakeDocker:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        with self.lock:
            for container in self.containers.values():
                container.end(137)  # frees any `wait` still blocked

    def reset(self) -> None:
        with self.lock:
            for container in self.containers.values():
                container.end(137)
            self.images.clear()
            self.networks.clear()
            self.containers.clear()
            self.created.clear()
            self.calls.clear()
            self.injections.clear()
            self.program = Program()

    # --- state set-up for tests ---

    def add_image(self, reference: str, **config: Any) -> Image:
        with self.lock:
            image = Image(id=f"sha256:{_hex()}", reference=_normalise(reference), config=config)
            self.images[image.reference] = image
            return image

    def add_network(self, name: str) -> None:
        with self.lock:
            self.networks.add(name)

    def add_container(
        self, name: str, image: str, *, program: ProgramSource | None = None, running: bool = True
    ) -> FakeContainer:
        """A container made outside the code under test (one a killed worker left)."""
        with self.lock:
            container = FakeContainer.new(
                name=name,
                image=self.images[_normalise(image)],
                config={"Image": image, "Cmd": ["sleep", "infinity"], "HostConfig": {}},
                program=program or Program(hang=True),
            )
            self._register(container)
            if running:
                container.start(self.lock)
            return container

    def inject(self, method: str, path: str, **kwargs: Any) -> Injection:
        with self.lock:
            injection = Injection(method, path, **kwargs)
            self.injections.append(injection)
            return injection

    # --- what tests read ---

    def calls_to(self, method: str, path: str) -> list[Call]:
        """The calls with `method` whose path matches `path` (a regex) in full."""
        return [
            call for call in self.calls if call.method == method and re.fullmatch(path, call.path)
        ]

    def find(self, ref: str) -> FakeContainer | None:
        """A live container by id, unique id prefix or name, as Docker resolves them."""
        with self.lock:
            if ref in self.containers:
                return self.containers[ref]
            for container in self.containers.values():
                if container.name == ref.lstrip("/"):
                    return container
            matches = [c for c in self.containers.values() if c.id.startswith(ref)]
            return matches[0] if len(matches) == 1 else None

    # --- dispatch ---

    def handle(self, method: str, raw_path: str, body: bytes) -> tuple[int, str, bytes]:
        parts = urlsplit(raw_path)
        path, version = unquote(parts.path), None
        if match := VERSIONED.fullmatch(path):
            version, path = match.groups()
        query = dict(parse_qsl(parts.query, keep_blank_values=True))
        payload = json.loads(body) if body else None
        with self.lock:
            self.calls.append(Call(method, path, query, payload, version))
            injection = self._injection(method, path)
        try:
            if injection is not None and not injection.after:
                _fail(injection)
            if version is not None:
                _check_version(version)
            answer = self._route(method, path, query, payload)
            if injection is not None:
                _fail(injection)
            return answer
        except DockerError as error:
            return _json(error.status, {"message": error.message})
        except Dropped:
            raise
        except Exception as error:  # a bug in the fake or a test's program: the test sees it
            return _json(500, {"message": f"fake docker: {error!r}"})

    def _route(
        self, method: str, path: str, query: dict[str, str], body: Any
    ) -> tuple[int, str, bytes]:
        for route_method, pattern, route in self.routes:
            if method == route_method and (match := pattern.fullmatch(path)):
                if route in (self._wait, self._logs):  # they block: they lock as they go
                    return route(query=query, body=body, **match.groupdict())
                with self.lock:
                    return route(query=query, body=body, **match.groupdict())
        raise DockerError(404, "page not found")

    def _injection(self, method: str, path: str) -> Injection | None:
        for injection in self.injections:
            if injection.method == method and re.fullmatch(injection.path, path):
                injection.count -= 1
                if injection.count <= 0:
                    self.injections.remove(injection)
                return injection
        return None

    # --- routes ---

    def _ping(self, **_: Any) -> tuple[int, str, bytes]:
        return 200, "text/plain; charset=utf-8", b"OK"

    def _version(self, **_: Any) -> tuple[int, str, bytes]:
        return _json(
            200,
            {
                "Version": "26.1.4",
                "ApiVersion": API_VERSION,
                "MinAPIVersion": MIN_API_VERSION,
                "Os": "linux",
                "Arch": "amd64",
                "KernelVersion": "6.1.0-fake",
                "Components": [{"Name": "Engine", "Version": "26.1.4"}],
            },
        )

    def _image_inspect(self, name: str, **_: Any) -> tuple[int, str, bytes]:
        image = self._image(name)
        return _json(
            200,
            {
                "Id": image.id,
                "RepoTags": [image.reference],
                "Os": "linux",
                "Architecture": "amd64",
                "Config": image.config,
            },
        )

    def _create(self, query: dict[str, str], body: Any, **_: Any) -> tuple[int, str, bytes]:
        body = body or {}
        name = query.get("name", "")
        if name and not NAME.fullmatch(name):
            raise DockerError(
                400,
                f"Invalid container name ({name}), only [a-zA-Z0-9][a-zA-Z0-9_.-] are allowed",
            )
        if not body.get("Image"):
            raise DockerError(400, "No command specified")
        image = self._image(body["Image"])
        name = name.lstrip("/") or f"fake_{_hex()[:8]}"
        if (existing := self.find(name)) is not None:
            raise DockerError(
                409,
                f'Conflict. The container name "/{name}" is already in use by container '
                f'"{existing.id}". You have to remove (or rename) that container to be able '
                "to reuse that name.",
            )
        host = body.get("HostConfig") or {}
        mode = host.get("NetworkMode") or "default"
        known = BUILTIN_NETWORKS | self.networks
        if mode not in known and not mode.startswith("container:"):
            raise DockerError(404, f"network {mode} not found")
        for mount in host.get("Mounts") or []:
            kind = mount.get("Type", "volume")
            if not mount.get("Target", "").startswith("/"):
                raise DockerError(
                    400,
                    f'invalid mount config for type "{kind}": invalid mount path: '
                    f"'{mount.get('Target', '')}' mount path must be absolute",
                )
            if kind == "bind" and not Path(mount.get("Source", "")).exists():
                raise DockerError(
                    400,
                    f'invalid mount config for type "bind": bind source path does not exist: '
                    f"{mount.get('Source', '')}",
                )
        container = FakeContainer.new(name=name, image=image, config=body, program=self.program)
        self._register(container)
        return _json(201, {"Id": container.id, "Warnings": []})

    def _inspect(self, ref: str, **_: Any) -> tuple[int, str, bytes]:
        return _json(200, self._container(ref).inspect())

    def _start(self, ref: str, **_: Any) -> tuple[int, str, bytes]:
        container = self._container(ref)
        if container.status != "created":
            return 304, "", b""  # already started
        container.start(self.lock)
        return 204, "", b""

    def _wait(self, ref: str, query: dict[str, str], **_: Any) -> tuple[int, str, bytes]:
        with self.lock:
            container = self._container(ref)
        condition = query.get("condition", "not-running")
        if condition not in ("not-running", "next-exit", "removed"):
            raise DockerError(400, f"invalid condition: {condition!r}")
        if not (container.status == "created" and condition == "not-running"):
            container.exited.wait()  # outside the lock: the program ends on its own thread
        return _json(200, {"StatusCode": container.exit_code, "Error": None})

    def _logs(self, ref: str, query: dict[str, str], **_: Any) -> tuple[int, str, bytes]:
        with self.lock:
            container = self._container(ref)
        streams = {1} if _bool(query.get("stdout")) else set()
        streams |= {2} if _bool(query.get("stderr")) else set()
        if not streams:
            raise DockerError(400, "Bad parameters: you must choose at least one stream")
        if _bool(query.get("follow")) and container.running:
            container.exited.wait()
        with self.lock:
            entries = [(stream, line) for stream, line in container.log if stream in streams]
        tail = query.get("tail", "all")
        if tail not in ("", "all"):
            entries = entries[-int(tail) :] if int(tail) > 0 else []
        body = b"".join(frame(stream, line) for stream, line in entries)
        return 200, "application/vnd.docker.multiplexed-stream", body

    def _kill(self, ref: str, query: dict[str, str], **_: Any) -> tuple[int, str, bytes]:
        container = self._container(ref)
        signal = query.get("signal", "SIGKILL")
        number = int(signal) if signal.isdigit() else SIGNALS.get(signal.upper())
        if number is None:
            raise DockerError(400, f"Invalid signal: {signal}")
        if not container.running:
            raise DockerError(
                409, f"cannot kill container: {ref}: container {container.id} is not running"
            )
        container.kill(number)
        return 204, "", b""

    def _remove(self, ref: str, query: dict[str, str], **_: Any) -> tuple[int, str, bytes]:
        container = self._container(ref)
        if container.running:
            if not _bool(query.get("force")):
                raise DockerError(
                    409,
                    f'cannot remove container "/{container.name}": container is running: '
                    "stop the container before removing or force remove",
                )
            container.kill(9)
        container.removed = True
        del self.containers[container.id]
        return 204, "", b""

    # --- helpers ---

    def _register(self, container: FakeContainer) -> None:
        self.containers[container.id] = container
        self.created.append(container)

    def _image(self, name: str) -> Image:
        reference = _normalise(name)
        if reference in self.images:
            return self.images[reference]
        for image in self.images.values():
            if image.id == name or image.id.removeprefix("sha256:").startswith(name):
                return image
        raise DockerError(404, f"No such image: {reference}")

    def _container(self, ref: str) -> FakeContainer:
        container = self.find(ref)
        if container is None:
            raise DockerError(404, f"No such container: {ref}")
        return container


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as the SDK's connection pool expects
    # A kept-alive connection answered in several writes meets Nagle's algorithm and the
    # client's delayed ACK: 40 ms a call that a real server does not take.
    disable_nagle_algorithm = True

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _serve(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        fake: FakeDocker = self.server.fake  # type: ignore[attr-defined]
        try:
            status, content_type, payload = fake.handle(self.command, self.path, body)
        except Dropped:
            self.close_connection = True
            return
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            # A client that stopped waiting (its timeout) is gone by now.
            self.send_response(status)
            self.send_header("Api-Version", API_VERSION)
            self.send_header("Server", "Docker/26.1.4 (linux)")
            if content_type:
                self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(payload)

    do_GET = do_POST = do_DELETE = do_HEAD = _serve


def _fail(injection: Injection) -> None:
    if injection.drop:
        raise Dropped
    raise DockerError(injection.status, injection.message)


def _json(status: int, payload: Any) -> tuple[int, str, bytes]:
    return status, "application/json", json.dumps(payload).encode()


def _bool(value: str | None) -> bool:
    """The daemon's reading of a boolean query parameter (the SDK sends `True`/`False`)."""
    return (value or "").strip().lower() not in ("", "0", "no", "false", "none")


def _normalise(reference: str) -> str:
    reference = reference.removeprefix("docker.io/").removeprefix("library/")
    last = reference.rsplit("/", 1)[-1]
    return reference if ":" in last or "@" in last else f"{reference}:latest"


def _check_version(version: str) -> None:
    def parts(text: str) -> tuple[int, ...]:
        return tuple(int(part) for part in text.split("."))

    if parts(version) > parts(API_VERSION):
        raise DockerError(
            400,
            f"client version {version} is too new. Maximum supported API version is {API_VERSION}",
        )
    if parts(version) < parts(MIN_API_VERSION):
        raise DockerError(
            400,
            f"client version {version} is too old. Minimum supported API version is "
            f"{MIN_API_VERSION}, please upgrade your client to a newer version",
        )


def _hex() -> str:
    return secrets.token_hex(32)
