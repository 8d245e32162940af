"""The way back from an engine to Tasuku, for connector calls only.

An engine never makes a connector call itself: it holds neither the endpoint nor the
credential (the job carries a connector's name, description and input schema, nothing
more). It sends the call to the process that started it, over a Unix socket that
process opened for this one run (`ConnectorBridge`), and reads the answer back:

- the worker (the `local` and `docker` runners): the bridge's handler is Tasuku's own
  (reviews/engines/connectors.py), which checks the call and makes it;
- the Actions runner (`tasuku-runner`): the handler forwards the call to Tasuku's
  `POST /api/runner/connector` with the runner's OIDC token (sandbox/actions_runner.py).

Why a socket to the parent, and not the engine calling Tasuku's HTTP API: the docker
runner's container has no network but the model API's, and giving it a route to
Tasuku's web server would open every one of Tasuku's endpoints to a process that reads
untrusted pull requests. A socket file bind-mounted into the container reaches exactly
one thing — this bridge, for this run — and vanishes with it. It needs no network and no
configuration.

The trust boundary: whoever can open the socket and knows the run's token (a random
value made per run, in the engine's environment) can ask for the calls the run's
reviewer is allowed, while the engine runs — nothing more: the handler, on Tasuku's
side, checks every call (the connector, the reviewer's permission, the input against
its schema, the run still live, the review's call bound). The socket is in a directory
only the worker's user can enter; the container is given the socket file alone.

The protocol: one connection per call. The engine writes one line of JSON, `{"token",
"name", "input"}`, and reads one line back, a `ConnectorAnswer`. Imports nothing from
Django: the engine and the Actions runner use it too.
"""

from __future__ import annotations

import contextlib
import contextvars
import hmac
import json
import logging
import os
import secrets
import shutil
import socket
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from sandbox.contract import MAX_CONNECTOR_ANSWER, ConnectorAnswer

logger = logging.getLogger(__name__)

SOCKET_VARIABLE = "TASUKU_CONNECTOR_SOCKET"
TOKEN_VARIABLE = "TASUKU_CONNECTOR_TOKEN"  # noqa: S105 - the variable's name
# Where the docker runner mounts the socket inside the container.
CONTAINER_SOCKET = "/run/tasuku/connectors.sock"
SOCKET_NAME = "connectors.sock"
MAX_REQUEST = 256 * 1024
# An answer's content is at most MAX_CONNECTOR_ANSWER characters; JSON may spend up to
# six bytes on one (a control character as \\u00XX).
MAX_ANSWER = 6 * (MAX_CONNECTOR_ANSWER + 10_000) + 1024
REQUEST_SECONDS = 10  # for the engine to send its request, once connected
# A Unix socket's path is at most 107 bytes; a longer one is reached through its
# directory's descriptor (Linux: /proc/self/fd/N/name).
SUN_PATH_MAX = 100

Handler = Callable[[str, Any], ConnectorAnswer]


def refused(reason: str) -> ConnectorAnswer:
    return ConnectorAnswer(status="refused", content=reason)


def failed(reason: str, *, duration_ms: int = 0, read: int = 0) -> ConnectorAnswer:
    return ConnectorAnswer(status="failed", content=reason, duration_ms=duration_ms, bytes=read)


@contextlib.contextmanager
def _address(path: Path) -> Iterator[str]:
    """`path` as a socket address: itself, or through its directory's descriptor when it
    is too long for one."""
    text = str(path)
    if len(text.encode()) < SUN_PATH_MAX:
        yield text
        return
    fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        yield f"/proc/self/fd/{fd}/{path.name}"
    finally:
        os.close(fd)


def _read_line(conn: socket.socket, limit: int) -> bytes:
    data = bytearray()
    while b"\n" not in data:
        chunk = conn.recv(65_536)
        if not chunk:
            break
        data += chunk
        if len(data) > limit:
            raise ValueError(f"more than {limit} bytes")
    return bytes(data.split(b"\n", 1)[0])


class ConnectorBridge:
    """A Unix socket for one run's connector calls, served by a thread of the process
    that runs the engine, each call answered by `handler(name, input)`.

        with ConnectorBridge(handler, directory=beside_checkout, live=...) as bridge:
            env = bridge.environment()   # the socket's path and the run's token
            ... run the engine with env ...

    `live()` is asked before each call (a run whose lease was lost is not live); calls
    are answered one at a time (the reviewer makes them one at a time). Leaving closes
    the socket and removes its directory: the way back ends with the engine."""

    def __init__(
        self,
        handler: Handler,
        *,
        directory: str | Path | None = None,
        live: Callable[[], bool] = lambda: True,
    ) -> None:
        self.handler = handler
        self.live = live
        self.parent = directory
        # Hex: an environment value the docker runner never mistakes for a GitHub token.
        self.token = secrets.token_hex(32)
        self.path: Path | None = None
        self._dir: Path | None = None
        self._server: socket.socket | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> ConnectorBridge:
        self._dir = Path(tempfile.mkdtemp(prefix="tasuku-conn-", dir=self.parent))
        self.path = self._dir / SOCKET_NAME
        server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            with _address(self.path) as address:
                server.bind(address)
            # The engine's user may not be the worker's (the container's is 10001): the
            # directory (0700) keeps the host's other users out, the token the rest.
            os.chmod(self.path, 0o666)  # noqa: S103
            server.listen(8)
            server.settimeout(0.2)
        except (
            BaseException
        ):  # the socket and its directory are removed however setup failed; re-raised
            server.close()
            shutil.rmtree(self._dir, ignore_errors=True)
            raise
        self._server = server
        # In the log context of the run it serves (a thread does not inherit its creator's).
        self._thread = threading.Thread(
            target=contextvars.copy_context().run,
            args=(self._serve,),
            name="connector-bridge",
            daemon=True,
        )
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        if self._server is not None:
            self._server.close()
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)

    def environment(self, socket_path: str | None = None) -> dict[str, str]:
        """What the engine is given to reach the bridge: the socket's path (`socket_path`
        where the engine sees it elsewhere, in a container) and the run's token."""
        assert self.path is not None, "enter the bridge first"
        return {SOCKET_VARIABLE: socket_path or str(self.path), TOKEN_VARIABLE: self.token}

    def _serve(self) -> None:
        assert self._server is not None
        while not self._stop.is_set():
            try:
                conn, _ = self._server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with conn:
                try:
                    self._answer(conn)
                except OSError as exc:  # the engine went away mid-call
                    logger.warning("connector call not answered: %s", exc)

    def _answer(self, conn: socket.socket) -> None:
        conn.settimeout(REQUEST_SECONDS)
        answer = self._answer_for(conn)
        conn.settimeout(30)
        conn.sendall(answer.model_dump_json().encode() + b"\n")

    def _answer_for(self, conn: socket.socket) -> ConnectorAnswer:
        try:
            request = json.loads(_read_line(conn, MAX_REQUEST))
        except (ValueError, TimeoutError) as exc:
            return refused(f"Not a connector call: {exc}")
        if not isinstance(request, dict):
            return refused("Not a connector call.")
        token = request.get("token")
        if not isinstance(token, str) or not hmac.compare_digest(token, self.token):
            logger.warning("a connector call with a wrong token was refused")
            return refused("Not this run's token.")
        name = request.get("name")
        if not isinstance(name, str) or not name:
            return refused("The call names no connector.")
        if not self.live():
            return refused("The review has ended: no more connector calls are made.")
        try:
            return self.handler(name, request.get("input"))
        except Exception:
            # Logged without the input or the answer: either may hold what the team's
            # system said, and the log is not the place for it.
            logger.exception("connector %s: the call could not be made", name[:60])
            return failed("Tasuku could not make the call (an internal error; it is logged).")


class ConnectorClient:
    """The engine's end: sends one call to the bridge and waits for its answer."""

    def __init__(self, path: str, token: str) -> None:
        self.path = path
        self.token = token

    @classmethod
    def from_environment(cls, env: Mapping[str, str] | None = None) -> ConnectorClient | None:
        env = os.environ if env is None else env
        path, token = env.get(SOCKET_VARIABLE, ""), env.get(TOKEN_VARIABLE, "")
        return cls(path, token) if path and token else None

    def call(self, name: str, arguments: Any, *, timeout: float) -> ConnectorAnswer:
        """Tasuku's answer, or a failure the model can read when Tasuku cannot be
        reached or does not answer within `timeout` seconds."""
        started = time.monotonic()
        request = json.dumps({"token": self.token, "name": name, "input": arguments})
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
                conn.settimeout(timeout)
                with _address(Path(self.path)) as address:
                    conn.connect(address)
                conn.sendall(request.encode() + b"\n")
                line = _read_line(conn, MAX_ANSWER)
            return ConnectorAnswer.model_validate_json(line)
        except TimeoutError:
            return failed(
                f"No answer from Tasuku within {timeout:g} s.",
                duration_ms=int((time.monotonic() - started) * 1000),
            )
        except (OSError, ValueError, ValidationError) as exc:
            return failed(f"Tasuku could not be reached for this call: {type(exc).__name__}.")
