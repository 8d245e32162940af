"""The fake Anthropic Messages API: `POST /v1/messages`, non-streaming.

Reference: https://docs.anthropic.com/en/api/messages and
https://docs.anthropic.com/en/api/errors (error shapes, request-id).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

from tests.fakes.models.script import ToolResult, Usage
from tests.fakes.models.server import (
    Answer,
    FakeModelServer,
    ModelFilter,
    Summary,
    Turn,
    http_phrase,
    random_id,
)

ANTHROPIC_TEST_KEY = "sk-ant-test"

ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    405: "invalid_request_error",
    409: "conflict_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    504: "timeout_error",
    529: "overloaded_error",
}

ERROR_MESSAGES = {
    400: "Invalid request.",
    401: "invalid x-api-key",
    402: "Your credit balance is too low to access the Anthropic API.",
    403: "Your API key does not have permission to use the specified resource.",
    404: "The requested resource could not be found.",
    413: "Request exceeds the maximum allowed number of bytes.",
    429: "This request would exceed the rate limit for your organization. Please try again later.",
    500: "Internal server error",
    504: "Request timed out.",
    529: "Overloaded",
}

# Reference: https://docs.anthropic.com/en/docs/build-with-claude/tool-use (tool `name`)
TOOL_NAME = re.compile(r"[a-zA-Z0-9_-]{1,64}")
TOOL_CHOICES = ("auto", "any", "tool", "none")


def _claude(model: str) -> bool:
    return model.startswith("claude-")


class FakeAnthropic(FakeModelServer):
    """A fake of the Anthropic Messages API; see the package docstring.

    `keys`: the API keys accepted (None accepts any). `models`: the model names that
    exist, as a collection or a predicate (default: any name starting "claude-").
    """

    dialect = "anthropic"

    def __init__(
        self,
        *,
        keys: Iterable[str] | None = (ANTHROPIC_TEST_KEY,),
        models: ModelFilter = _claude,
        port: int = 0,
    ) -> None:
        super().__init__(keys=keys, models=models, port=port)

    def is_endpoint(self, path: str) -> bool:
        return path.rstrip("/") == "/v1/messages"

    def new_request_id(self) -> str:
        return random_id("req_01", 22)

    def response_headers(self, request_id: str) -> dict[str, str]:
        return {"request-id": request_id, "anthropic-organization-id": "fake-organization"}

    def error(self, status: int, message: str | None = None, **extra: Any) -> Answer:
        kind = extra.pop("kind", None) or ERROR_TYPES.get(
            status, "api_error" if status >= 500 else "invalid_request_error"
        )
        default = ERROR_MESSAGES.get(status) or http_phrase(status)
        error: dict[str, Any] = {"type": kind, "message": message or default}
        error.update(extra)
        # The top-level request_id is filled in when the answer is sent.
        return Answer(status, {"type": "error", "error": error, "request_id": None})

    def finalize(self, answer: Answer, request_id: str) -> Answer:
        body = answer.body
        if isinstance(body, dict) and body.get("type") == "error" and "request_id" in body:
            answer.body = {**body, "request_id": request_id}
        return answer

    def not_found(self, method: str, path: str) -> Answer:
        return self.error(404, "Not Found")

    # --- authentication ---

    def credential_of(self, headers: Mapping[str, str]) -> str | None:
        # The docs name `x-api-key`; anthropic 2.14's client sends the same key as
        # `Authorization: Bearer`, so both carry an API key here.
        if "x-api-key" in headers:
            return headers["x-api-key"]
        scheme, _, token = headers.get("authorization", "").partition(" ")
        return token.strip() if scheme.lower() == "bearer" and token.strip() else None

    def authenticate(self, credential: str | None) -> None:
        if credential is None:
            raise self.reject(401, "x-api-key header is required")
        if self.keys is not None and credential not in self.keys:
            raise self.reject(401, "invalid x-api-key")

    # --- validation ---

    def validate(self, body: dict[str, Any], headers: Mapping[str, str]) -> None:
        if not headers.get("anthropic-version"):
            raise self.reject(400, "anthropic-version: header is required")
        for name in ("max_tokens", "messages", "model"):
            if name not in body:
                raise self.reject(400, f"{name}: Field required")
        if body.get("stream"):
            raise self.reject(
                400,
                "stream: streaming is not supported by the fake Anthropic server; "
                "call messages.create without stream=True",
            )
        max_tokens = body["max_tokens"]
        if not isinstance(max_tokens, int) or isinstance(max_tokens, bool):
            raise self.reject(400, "max_tokens: Input should be a valid integer")
        if max_tokens < 0:
            raise self.reject(400, "max_tokens: Input should be greater than or equal to 0")
        if not isinstance(body["model"], str):
            raise self.reject(400, "model: Input should be a valid string")
        self._check_system(body.get("system"))
        names = self._check_tools(body.get("tools"))
        self._check_tool_choice(body.get("tool_choice"), names)
        self._check_messages(body["messages"])
        if not self.model_known(body["model"]):
            raise self.reject(404, f"model: {body['model']}")

    def _check_system(self, system: Any) -> None:
        if system is None or isinstance(system, str):
            return
        if not isinstance(system, list):
            raise self.reject(400, "system: Input should be a valid string or list")
        for i, block in enumerate(system):
            if not isinstance(block, dict) or block.get("type") != "text":
                raise self.reject(400, f"system.{i}: Input should be a text block")
            if not isinstance(block.get("text"), str):
                raise self.reject(400, f"system.{i}.text: Field required")

    def _check_tools(self, tools: Any) -> set[str]:
        names: set[str] = set()
        if tools is None:
            return names
        if not isinstance(tools, list):
            raise self.reject(400, "tools: Input should be a valid list")
        for i, tool in enumerate(tools):
            if not isinstance(tool, dict):
                raise self.reject(400, f"tools.{i}: Input should be a valid dictionary")
            name = tool.get("name")
            if tool.get("type") in (None, "custom"):
                if not isinstance(name, str) or not TOOL_NAME.fullmatch(name):
                    raise self.reject(
                        400,
                        f"tools.{i}.custom.name: String should match pattern "
                        "'^[a-zA-Z0-9_-]{1,64}$'",
                    )
                if "input_schema" not in tool:
                    raise self.reject(400, f"tools.{i}.custom.input_schema: Field required")
                schema = tool["input_schema"]
                if not isinstance(schema, dict) or schema.get("type") != "object":
                    raise self.reject(
                        400, f"tools.{i}.custom.input_schema.type: Input should be 'object'"
                    )
            # Server tools (web search, code execution, …) have a versioned `type` and
            # no schema, but their names share the namespace.
            if name in names:
                raise self.reject(400, "tools: Tool names must be unique.")
            if isinstance(name, str):
                names.add(name)
        return names

    def _check_tool_choice(self, choice: Any, names: set[str]) -> None:
        if choice is None:
            return
        if not isinstance(choice, dict) or choice.get("type") not in TOOL_CHOICES:
            raise self.reject(
                400, "tool_choice: Input should be one of 'auto', 'any', 'tool' or 'none'"
            )
        if choice["type"] == "tool" and choice.get("name") not in names:
            raise self.reject(
                400, f"tool_choice.name: no tool named {choice.get('name')!r} in `tools`"
            )

    def _check_messages(self, messages: Any) -> None:
        if not isinstance(messages, list):
            raise self.reject(400, "messages: Input should be a valid list")
        if not messages:
            raise self.reject(
                400, "messages: List should have at least 1 item after validation, not 0"
            )
        # Consecutive turns of one role are combined into one turn (documented), so
        # the tool_use/tool_result pairing is checked between combined turns. Each
        # turn keeps the original (message, block) indices for the error paths.
        turns: list[tuple[str, int, list[tuple[int, int, dict[str, Any]]]]] = []
        last = len(messages) - 1
        for i, message in enumerate(messages):
            blocks = self._blocks_of(i, message, final=i == last)
            role = message["role"]
            if turns and turns[-1][0] == role:
                turns[-1][2].extend(blocks)
            else:
                turns.append((role, i, blocks))
        if turns[0][0] != "user":
            raise self.reject(400, 'messages: first message must use the "user" role')

        # tool_use blocks only pass `_blocks_of` in assistant messages.
        uses = [[b["id"] for _, _, b in blocks if _is(b, "tool_use")] for _, _, blocks in turns]

        for k, (role, _, blocks) in enumerate(turns):
            if role != "user":
                continue
            expected = set(uses[k - 1]) if k > 0 else set()
            seen: set[str] = set()
            for i, j, block in blocks:
                if not _is(block, "tool_result"):
                    continue
                tool_use_id = block["tool_use_id"]
                if tool_use_id not in expected:
                    raise self.reject(
                        400,
                        f"messages.{i}.content.{j}: unexpected `tool_use_id` found in "
                        f"`tool_result` blocks: {tool_use_id}. Each `tool_result` block must "
                        "have a corresponding `tool_use` block in the previous message.",
                    )
                if tool_use_id in seen:
                    raise self.reject(
                        400,
                        f"messages.{i}.content.{j}: each `tool_use` must have a single result. "
                        f"Found multiple `tool_result` blocks with id: {tool_use_id}",
                    )
                seen.add(tool_use_id)

        for k, (role, first, _) in enumerate(turns):
            ids = uses[k]
            if role != "assistant" or not ids:
                continue
            if len(set(ids)) != len(ids):
                raise self.reject(400, f"messages.{first}: `tool_use` ids must be unique")
            following = turns[k + 1][2] if k + 1 < len(turns) else []
            answered = {b["tool_use_id"] for _, _, b in following if _is(b, "tool_result")}
            missing = [tool_use_id for tool_use_id in ids if tool_use_id not in answered]
            if missing:
                raise self.reject(
                    400,
                    f"messages.{first}: `tool_use` ids were found without `tool_result` blocks "
                    f"immediately after: {', '.join(missing)}. Each `tool_use` block must have "
                    "a corresponding `tool_result` block in the next message.",
                )
            if not all(_is(b, "tool_result") for _, _, b in following[: len(ids)]):
                raise self.reject(
                    400,
                    f"messages.{turns[k + 1][1]}: Did not find {len(ids)} tool_result block(s) "
                    "at the beginning of this message. Messages following tool_use blocks must "
                    "begin with a matching number of tool_result blocks.",
                )

    def _blocks_of(
        self, i: int, message: Any, *, final: bool
    ) -> list[tuple[int, int, dict[str, Any]]]:
        if not isinstance(message, dict):
            raise self.reject(400, f"messages.{i}: Input should be a valid dictionary")
        role = message.get("role")
        if role not in ("user", "assistant"):
            raise self.reject(400, f"messages.{i}.role: Input should be 'user' or 'assistant'")
        content = message.get("content")
        empty = (
            f"messages.{i}: all messages must have non-empty content except for the optional "
            "final assistant message"
        )
        if isinstance(content, str):
            if not content and not (final and role == "assistant"):
                raise self.reject(400, empty)
            return [(i, 0, {"type": "text", "text": content})] if content else []
        if not isinstance(content, list):
            raise self.reject(400, f"messages.{i}.content: Input should be a valid string or list")
        if not content and not (final and role == "assistant"):
            raise self.reject(400, empty)
        blocks = []
        for j, block in enumerate(content):
            where = f"messages.{i}.content.{j}"
            if not isinstance(block, dict) or not isinstance(block.get("type"), str):
                raise self.reject(400, f"{where}.type: Field required")
            kind = block["type"]
            if kind == "text" and not block.get("text"):
                raise self.reject(400, "messages: text content blocks must be non-empty")
            if kind == "tool_use":
                if role != "assistant":
                    raise self.reject(
                        400, f"{where}: `tool_use` blocks can only be in `assistant` messages"
                    )
                for name, kinds in (("id", str), ("name", str), ("input", dict)):
                    if not isinstance(block.get(name), kinds):
                        raise self.reject(400, f"{where}.tool_use.{name}: Field required")
            if kind == "tool_result":
                if role != "user":
                    raise self.reject(
                        400, f"{where}: `tool_result` blocks can only be in `user` messages"
                    )
                if not isinstance(block.get("tool_use_id"), str):
                    raise self.reject(400, f"{where}.tool_result.tool_use_id: Field required")
            blocks.append((i, j, block))
        return blocks

    # --- answers ---

    def render(self, body: dict[str, Any], turn: Turn, usage: Usage) -> dict[str, Any]:
        content: list[dict[str, Any]] = []
        if turn.text:
            content.append({"type": "text", "text": turn.text})
        for call in turn.calls:
            arguments = json.loads(call.input) if isinstance(call.input, str) else dict(call.input)
            if not isinstance(arguments, dict):
                raise TypeError(f"an Anthropic tool_use input must be an object: {call.input!r}")
            content.append(
                {
                    "type": "tool_use",
                    "id": call.id or random_id("toolu_01", 22),
                    "name": call.name,
                    "input": arguments,
                }
            )
        if turn.truncated:
            stop_reason = "max_tokens"
        elif turn.calls:
            stop_reason = "tool_use"
        else:
            stop_reason = "end_turn"
        return {
            "id": random_id("msg_01", 22),
            "type": "message",
            "role": "assistant",
            "model": body["model"],
            "content": content,
            "stop_reason": stop_reason,
            "stop_sequence": None,
            "usage": {
                "input_tokens": usage[0],
                "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": 0,
                "output_tokens": usage[1],
                "service_tier": "standard",
            },
        }

    def summarize(self, body: dict[str, Any]) -> Summary:
        system = body.get("system") or ""
        if isinstance(system, list):
            system = "\n\n".join(b.get("text", "") for b in system if isinstance(b, dict))
        tools = body.get("tools") or []
        names = [t["name"] for t in tools if isinstance(t, dict) and isinstance(t.get("name"), str)]
        results: list[ToolResult] = []
        messages = body.get("messages") or []
        last_user = next((m for m in reversed(messages) if m.get("role") == "user"), None)
        content = last_user.get("content") if last_user else None
        for block in content if isinstance(content, list) else []:
            if _is(block, "tool_result"):
                results.append(
                    ToolResult(
                        tool_use_id=str(block.get("tool_use_id")),
                        content=_text_of(block.get("content")),
                        is_error=bool(block.get("is_error", False)),
                    )
                )
        return Summary(system=str(system), tool_names=names, tool_results=results)


def _is(block: Any, kind: str) -> bool:
    return isinstance(block, dict) and block.get("type") == kind


def _text_of(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(b.get("text", "") for b in content if _is(b, "text"))
    return str(content)
