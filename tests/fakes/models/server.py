"""The fake model servers' shared plumbing: HTTP, the script, recording, usage.

A dialect (Anthropic, OpenAI) subclasses `FakeModelServer` and supplies the routes,
authentication, request validation and the JSON shapes of answers and errors.
"""

from __future__ import annotations

import json
import secrets
import string
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self
from urllib.parse import urlsplit

from tests.fakes.models.script import (
    Fail,
    Hang,
    Loop,
    Malformed,
    ModelRequest,
    Reply,
    Step,
    ToolCall,
    ToolCalls,
    ToolResult,
    Usage,
)

ModelFilter = Iterable[str] | Callable[[str], bool]

_ALPHANUMERIC = string.ascii_letters + string.digits


def http_phrase(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return f"Error {status}"


def matches(models: ModelFilter, model: str) -> bool:
    return bool(models(model)) if callable(models) else model in set(models)


def random_id(prefix: str, length: int) -> str:
    return prefix + "".join(secrets.choice(_ALPHANUMERIC) for _ in range(length))


@dataclass
class Answer:
    """An HTTP answer before it is written. `body` is JSON-able, or bytes sent raw."""

    status: int
    body: Any
    headers: dict[str, str] = field(default_factory=dict)
    content_type: str = "application/json"


class Rejected(Exception):
    """Raised by a dialect's checks to answer with an error instead of a script step."""

    def __init__(self, answer: Answer) -> None:
        super().__init__(answer.status)
        self.answer = answer


@dataclass
class Turn:
    """A scripted assistant turn, before a dialect renders it."""

    text: str
    calls: list[ToolCall]
    truncated: bool
    usage: Usage | None


@dataclass
class Summary:
    """What a test most often asserts about a request, read the same way in both dialects."""

    system: str = ""
    tool_names: list[str] = field(default_factory=list)
    tool_results: list[ToolResult] = field(default_factory=list)


class FakeModelServer:
    """Serves one model API dialect on 127.0.0.1 and answers from a script."""

    dialect = "model"
    default_output_tokens = 50
    unparsable_body_message = "The request body is not valid JSON."

    def __init__(
        self, *, keys: Iterable[str] | None, models: ModelFilter, prefix: str = "", port: int = 0
    ) -> None:
        self.lock = threading.RLock()
        self.prefix = "/" + prefix.strip("/") if prefix.strip("/") else ""
        self._initial_keys = None if keys is None else frozenset(keys)
        self._initial_models = models
        self.keys: frozenset[str] | None = self._initial_keys
        self.models: ModelFilter = models
        self.errors: list[BaseException] = []
        self._requests: list[ModelRequest] = []
        self._steps: deque[Step] = deque()
        self._loop: Step | None = None
        self._wake = threading.Event()
        self.server = ThreadingHTTPServer(("127.0.0.1", port), _Handler)
        self.server.daemon_threads = True
        self.server.fake = self  # type: ignore[attr-defined]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    # --- lifecycle ---

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def base_url(self) -> str:
        """What to give the SDK as `base_url`."""
        return self.url + self.prefix

    def start(self) -> Self:
        self.thread.start()
        return self

    def stop(self) -> None:
        self._wake.set()
        self.server.shutdown()
        self.server.server_close()

    def reset(self) -> None:
        """Forget the script, the records and any key or model changes; wake hung answers."""
        with self.lock:
            self._steps.clear()
            self._loop = None
            self._requests.clear()
            self.errors.clear()
            self.keys = self._initial_keys
            self.models = self._initial_models
            self._wake.set()
            self._wake = threading.Event()

    # --- scripting ---

    def script(self, *steps: Step, repeat_last: bool = False) -> Self:
        """Replace the script: each model request consumes the next step. With
        `repeat_last` the last step answers every request once it is reached."""
        with self.lock:
            self._steps.clear()
            self._loop = None
            self.extend(*steps)
            if repeat_last and self._steps:
                self._steps[-1] = Loop(self._steps[-1])
        return self

    def extend(self, *steps: Step) -> Self:
        """Append steps to the script."""
        with self.lock:
            self._steps.extend(steps)
        return self

    @property
    def unused_steps(self) -> list[Step]:
        with self.lock:
            return list(self._steps)

    def _next_step(self) -> Step | None:
        with self.lock:
            if self._loop is not None:
                return self._loop
            if not self._steps:
                return None
            step = self._steps.popleft()
            if isinstance(step, Loop):
                self._loop = step.step
                return step.step
            return step

    # --- inspection ---

    @property
    def requests(self) -> list[ModelRequest]:
        """Every request received, in order, including those the fake refused."""
        with self.lock:
            return list(self._requests)

    @property
    def model_requests(self) -> list[ModelRequest]:
        """The requests that reached the script (passed authentication and validation)."""
        with self.lock:
            return [r for r in self._requests if r.step is not None]

    @property
    def last_request(self) -> ModelRequest:
        with self.lock:
            if not self._requests:
                raise AssertionError(f"the fake {self.dialect} received no request")
            return self._requests[-1]

    def model_known(self, model: str) -> bool:
        return matches(self.models, model)

    # --- dialect hooks ---

    def is_endpoint(self, path: str) -> bool:
        raise NotImplementedError

    def credential_of(self, headers: Mapping[str, str]) -> str | None:
        """The API key presented, if any."""
        raise NotImplementedError

    def authenticate(self, credential: str | None) -> None:
        """Raises `Rejected` when the credential is missing or unknown."""
        raise NotImplementedError

    def validate(self, body: dict[str, Any], headers: Mapping[str, str]) -> None:
        """Raises `Rejected` with the real API's error for a request it would refuse."""
        raise NotImplementedError

    def render(self, body: dict[str, Any], turn: Turn, usage: Usage) -> dict[str, Any]:
        raise NotImplementedError

    def error(self, status: int, message: str | None = None, **extra: Any) -> Answer:
        """An error answer in the dialect's shape; `message=None` takes the default for
        `status`."""
        raise NotImplementedError

    def reject(self, status: int, message: str, **extra: Any) -> Rejected:
        return Rejected(self.error(status, message, **extra))

    def summarize(self, body: dict[str, Any]) -> Summary:
        raise NotImplementedError

    def not_found(self, method: str, path: str) -> Answer:
        raise NotImplementedError

    def finalize(self, answer: Answer, request_id: str) -> Answer:
        """Last touches to an answer once its request id is known."""
        return answer

    def response_headers(self, request_id: str) -> dict[str, str]:
        raise NotImplementedError

    def new_request_id(self) -> str:
        raise NotImplementedError

    # --- request handling ---

    def handle(self, handler: _Handler) -> None:
        raw = self._read_body(handler)
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        request = ModelRequest(
            method=handler.command,
            path=urlsplit(handler.path).path,
            headers={k.lower(): v for k, v in handler.headers.items()},
            raw=raw,
            body=body,
            received_at=time.monotonic(),
            request_id=self.new_request_id(),
        )
        if isinstance(body, dict):
            try:
                summary = self.summarize(body)
            except (AttributeError, KeyError, TypeError, ValueError):
                summary = Summary()  # a malformed body; `validate` will say why
            request.system = summary.system
            request.tool_names = summary.tool_names
            request.tool_results = summary.tool_results
        with self.lock:
            self._requests.append(request)

        try:
            answer = self._answer(request)
        except Exception as exc:  # a misused fake or a failing step callable: fail loudly
            with self.lock:
                self.errors.append(exc)
            answer = self.error(500, f"fake {self.dialect} server error: {exc!r}")
            answer.headers["x-should-retry"] = "false"

        if answer is None:
            handler.close_connection = True
            return
        answer = self.finalize(answer, request.request_id)
        request.status = answer.status
        request.answer = answer.body
        self._send(handler, request.request_id, answer)

    def _answer(self, request: ModelRequest) -> Answer | None:
        if not self.is_endpoint(request.path):
            return self.not_found(request.method, request.path)
        if request.method != "POST":
            return self.error(405, f"Method Not Allowed: {request.method} {request.path}")
        try:
            request.credential = self.credential_of(request.headers)
            self.authenticate(request.credential)
            if not isinstance(request.body, dict):
                raise Rejected(self.error(400, self.unparsable_body_message))
            self.validate(request.body, request.headers)
        except Rejected as rejected:
            return rejected.answer

        step = self._next_step()
        if step is None:
            # Not retryable, so a test that under-scripted fails at once rather than
            # after the SDK's back-off.
            answer = self.error(500, "fake script exhausted: no step left for this request")
            answer.headers["x-should-retry"] = "false"
            return answer
        return self._perform(step, request)

    def _perform(self, step: Step, request: ModelRequest) -> Answer | None:
        for _ in range(100):
            if isinstance(step, Loop):
                step = step.step
            elif callable(step):
                step = step(request)
            else:
                break
        request.step = step
        if isinstance(step, Hang):
            with self.lock:
                wake = self._wake
            if wake.wait(step.seconds) or step.then is None:
                return None  # reset or stopped meanwhile: nobody is waiting for the answer
            return self._perform(step.then, request)
        if isinstance(step, Fail):
            return self._fail(step)
        if isinstance(step, Malformed):
            return Answer(step.status, step.raw, content_type=step.content_type)
        if isinstance(step, Reply):
            turn = Turn(step.text, [], step.truncated, step.usage)
        elif isinstance(step, ToolCall):
            turn = Turn(step.text, [step], step.truncated, step.usage)
        elif isinstance(step, ToolCalls):
            turn = Turn(step.text, list(step.calls), step.truncated, step.usage)
        else:
            raise TypeError(f"not a script step: {step!r}")
        body = request.body
        assert isinstance(body, dict)
        usage = turn.usage or (max(1, len(request.raw) // 4), self.default_output_tokens)
        return Answer(200, self.render(body, turn, usage))

    def _fail(self, step: Fail) -> Answer:
        if step.body is None:
            answer = self.error(step.status, step.message)
        else:
            answer = Answer(step.status, step.body)
        for name, value in (step.headers or {}).items():
            if name.lower() == "content-type":
                answer.content_type = value
            else:
                answer.headers[name] = value
        return answer

    # --- HTTP plumbing ---

    @staticmethod
    def _read_body(handler: _Handler) -> bytes:
        length = int(handler.headers.get("Content-Length") or 0)
        return handler.rfile.read(length) if length else b""

    def _send(self, handler: _Handler, request_id: str, answer: Answer) -> None:
        body = answer.body
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        try:
            handler.send_response(answer.status)
            handler.send_header("Content-Type", answer.content_type)
            handler.send_header("Content-Length", str(len(data)))
            for name, value in {**self.response_headers(request_id), **answer.headers}.items():
                handler.send_header(name, value)
            handler.end_headers()
            handler.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            handler.close_connection = True  # the client gave up (timed out) first


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # A kept-alive connection answered in several writes meets Nagle's algorithm and the
    # client's delayed ACK: 40 ms a call that a real server does not take.
    disable_nagle_algorithm = True
    server: ThreadingHTTPServer

    def _serve(self) -> None:
        self.server.fake.handle(self)  # type: ignore[attr-defined]

    do_GET = do_POST = do_PATCH = do_PUT = do_DELETE = _serve

    def log_message(self, format: str, *args: Any) -> None:  # keep test output quiet
        pass
