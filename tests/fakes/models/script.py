"""Script steps (what the fake model answers, one step per request) and request records.

Steps are dialect-free: the same `ToolCall` becomes a `tool_use` block from the fake
Anthropic and a `tool_calls` entry from the fake OpenAI.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeAlias

Usage: TypeAlias = tuple[int, int]
"""(input tokens, output tokens) reported for one answer."""


@dataclass(frozen=True)
class ToolCall:
    """The assistant calls one tool, after saying `text` (if any).

    `input` is normally a mapping; a string is sent verbatim as OpenAI's `arguments`
    (to play a model that emits broken JSON) and must decode to an object for Anthropic.
    `id` pins the tool-use id; otherwise one is generated ("toolu_…" / "call_…").
    """

    name: str
    input: Mapping[str, Any] | str = field(default_factory=dict)
    text: str = ""
    usage: Usage | None = None
    id: str | None = None
    truncated: bool = False


@dataclass(frozen=True)
class ToolCalls:
    """The assistant calls several tools in one turn."""

    calls: Sequence[ToolCall]
    text: str = ""
    usage: Usage | None = None
    truncated: bool = False


@dataclass(frozen=True)
class Reply:
    """Plain assistant text. `truncated` plays a model cut off by `max_tokens`
    (stop_reason "max_tokens" / finish_reason "length") instead of a natural stop."""

    text: str
    usage: Usage | None = None
    truncated: bool = False


@dataclass(frozen=True)
class Fail:
    """An error answer. With `body=None` the body is the dialect's own error shape for
    `status` (Anthropic: 429 rate_limit_error, 500 api_error, 529 overloaded_error, …;
    OpenAI: {"error": {message, type, param, code}}), carrying `message` if given.
    A `bytes` body is sent raw; any other body is sent as JSON."""

    status: int
    body: Any = None
    headers: Mapping[str, str] | None = None
    message: str | None = None


@dataclass(frozen=True)
class Malformed:
    """An answer whose body does not parse (by default a 200 claiming JSON)."""

    raw: bytes = b"{not json"
    status: int = 200
    content_type: str = "application/json"


@dataclass(frozen=True)
class Hang:
    """Wait `seconds` before answering `then`; with `then=None` the connection is
    dropped unanswered (the client is expected to have timed out by then). A reset
    of the fake cuts the wait short."""

    seconds: float
    then: Step | None = None


@dataclass(frozen=True)
class Loop:
    """Answer `step` to this and every later request (a model that never stops)."""

    step: Step


Step: TypeAlias = (
    "ToolCall | ToolCalls | Reply | Fail | Malformed | Hang | Loop | Callable[[ModelRequest], Step]"
)
"""A step, or a callable taking the request (see `ModelRequest`) and returning one."""


def rate_limited(retry_after: str | None = "1", message: str | None = None) -> Fail:
    """A 429 in the dialect's shape, with `retry-after` as the real APIs send it."""
    headers = {"retry-after": retry_after} if retry_after is not None else {}
    return Fail(429, headers=headers, message=message)


@dataclass(frozen=True)
class ToolResult:
    """A tool result the client sent back, the same for both dialects (OpenAI has no
    error flag, so `is_error` is always False there)."""

    tool_use_id: str
    content: str
    is_error: bool = False


@dataclass
class ModelRequest:
    """One HTTP request the fake received, and what it answered."""

    method: str
    path: str
    headers: dict[str, str]  # names lower-cased
    raw: bytes
    body: Any  # the parsed JSON; None when the body was not JSON
    received_at: float  # time.monotonic(), to measure the client's back-off
    request_id: str
    credential: str | None = None  # the API key presented, from whichever header
    system: str = ""  # the system prompt as text
    tool_names: list[str] = field(default_factory=list)
    tool_results: list[ToolResult] = field(default_factory=list)  # in the last user turn
    status: int = 0  # 0 while unanswered, or when the connection was dropped
    answer: Any = None  # the JSON answered, or the raw bytes
    step: Any = None  # the script step answered; None when the fake's own checks answered

    @property
    def model(self) -> str | None:
        return self.body.get("model") if isinstance(self.body, dict) else None

    @property
    def messages(self) -> list[dict[str, Any]]:
        messages = self.body.get("messages") if isinstance(self.body, dict) else None
        return messages if isinstance(messages, list) else []

    @property
    def tools(self) -> list[dict[str, Any]]:
        tools = self.body.get("tools") if isinstance(self.body, dict) else None
        return tools if isinstance(tools, list) else []


def conversations(
    route: Callable[[ModelRequest], str], scripts: Mapping[str, Sequence[Step]]
) -> Loop:
    """One script per conversation, for clients that hold several at once (a reviewer
    and the explorers it sends, in threads): `route` names the conversation a request
    belongs to, and it is answered with that conversation's next step."""
    import threading

    queues = {name: list(steps) for name, steps in scripts.items()}
    lock = threading.Lock()

    def step(request: ModelRequest) -> Step:
        name = route(request)
        with lock:
            queue = queues.get(name)
            if not queue:
                raise AssertionError(f"no step left for the conversation {name!r}")
            return queue.pop(0) if len(queue) > 1 or not isinstance(queue[0], Loop) else queue[0]

    return Loop(step)
