"""The fake OpenAI Chat Completions API: `POST {prefix}/chat/completions`, non-streaming.

The prefix (default "/v1") is part of the SDK's `base_url`, so the same fake also plays
an "OpenAI-compatible server" mounted elsewhere.

Reference: https://platform.openai.com/docs/api-reference/chat/create and
https://platform.openai.com/docs/guides/error-codes (error shapes).
"""

from __future__ import annotations

import json
import time
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
    matches,
    random_id,
)

OPENAI_TEST_KEY = "sk-test"

ROLES = ("system", "developer", "user", "assistant", "tool", "function")

# (type, code, message) by status, as the real API words them.
ERRORS: dict[int, tuple[str, str | None, str]] = {
    400: ("invalid_request_error", None, "Invalid request."),
    401: ("invalid_request_error", "invalid_api_key", "Incorrect API key provided."),
    403: ("invalid_request_error", None, "You are not allowed to perform this request."),
    404: ("invalid_request_error", None, "Not found."),
    429: (
        "requests",
        "rate_limit_exceeded",
        "Rate limit reached for requests. Please try again in 1s. Visit "
        "https://platform.openai.com/account/rate-limits to learn more.",
    ),
    500: (
        "server_error",
        None,
        "The server had an error while processing your request. Sorry about that!",
    ),
    502: ("server_error", None, "Bad gateway."),
    503: ("server_error", None, "The server is overloaded or not ready yet."),
}

MISSING_KEY = (
    "You didn't provide an API key. You need to provide your API key in an Authorization "
    "header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY), or as the password "
    "field (with blank username) if you're accessing the API from your browser and are "
    "prompted for a username and password. You can obtain an API key from "
    "https://platform.openai.com/account/api-keys."
)


def _openai_model(model: str) -> bool:
    return model.startswith(("gpt-", "chatgpt-", "o1", "o3", "o4", "codex-"))


def _reasoning_model(model: str) -> bool:
    return model.startswith(("o1", "o3", "o4", "gpt-5", "gpt-6", "codex-"))


def _masked(key: str) -> str:
    if len(key) <= 8:
        return key
    return key[:3] + "*" * (len(key) - 7) + key[-4:]


class FakeOpenAI(FakeModelServer):
    """A fake of OpenAI Chat Completions; see the package docstring.

    `keys`: the API keys accepted (None accepts any, as many local OpenAI-compatible
    servers do). `models`: the model names that exist, as a collection or a predicate
    (default: OpenAI's own families, "gpt-…", "o3…", …). `reasoning_models`: the models
    that refuse `max_tokens` and a non-default `temperature`, as the o-series and gpt-5
    onwards do (a predicate or collection; default by those prefixes). `prefix`: where the
    API is mounted; `base_url` includes it.
    """

    dialect = "openai"

    def __init__(
        self,
        *,
        keys: Iterable[str] | None = (OPENAI_TEST_KEY,),
        models: ModelFilter = _openai_model,
        reasoning_models: ModelFilter = _reasoning_model,
        prefix: str = "/v1",
        port: int = 0,
    ) -> None:
        super().__init__(keys=keys, models=models, prefix=prefix, port=port)
        self._initial_reasoning_models = reasoning_models
        self.reasoning_models = reasoning_models

    def reset(self) -> None:
        super().reset()
        self.reasoning_models = self._initial_reasoning_models

    def is_endpoint(self, path: str) -> bool:
        return path.rstrip("/") == f"{self.prefix}/chat/completions"

    def new_request_id(self) -> str:
        return random_id("req_", 32)

    def response_headers(self, request_id: str) -> dict[str, str]:
        return {
            "x-request-id": request_id,
            "openai-version": "2020-10-01",
            "openai-processing-ms": "1",
        }

    def error(self, status: int, message: str | None = None, **extra: Any) -> Answer:
        default_type, default_code, default_message = ERRORS.get(
            status,
            (
                "server_error" if status >= 500 else "invalid_request_error",
                None,
                http_phrase(status),
            ),
        )
        error = {
            "message": message or default_message,
            "type": extra.pop("type", default_type),
            "param": extra.pop("param", None),
            "code": extra.pop("code", default_code),
        }
        error.update(extra)
        return Answer(status, {"error": error})

    def not_found(self, method: str, path: str) -> Answer:
        return self.error(404, f"Invalid URL ({method} {path})")

    unparsable_body_message = (
        "We could not parse the JSON body of your request. (HINT: This likely means you aren't "
        "using your HTTP library correctly. The OpenAI API expects a JSON payload, but what was "
        "sent was not valid JSON."
    )

    # --- authentication ---

    def credential_of(self, headers: Mapping[str, str]) -> str | None:
        scheme, _, token = headers.get("authorization", "").partition(" ")
        return token.strip() if scheme.lower() == "bearer" and token.strip() else None

    def authenticate(self, credential: str | None) -> None:
        if self.keys is None:
            return
        if credential is None:
            raise self.reject(401, MISSING_KEY, code=None)
        if credential not in self.keys:
            raise self.reject(
                401,
                f"Incorrect API key provided: {_masked(credential)}. You can find your API key "
                "at https://platform.openai.com/account/api-keys.",
            )

    # --- validation ---

    def validate(self, body: dict[str, Any], headers: Mapping[str, str]) -> None:
        if not isinstance(body.get("model"), str) or not body["model"]:
            raise self.reject(400, "you must provide a model parameter")
        if "messages" not in body:
            raise self.reject(
                400,
                "Missing required parameter: 'messages'.",
                param="messages",
                code="missing_required_parameter",
            )
        if body.get("stream"):
            raise self.reject(
                400,
                "Streaming is not supported by the fake OpenAI server; call "
                "chat.completions.create without stream=True.",
                param="stream",
                code="unsupported_value",
            )
        self._check_tools(body.get("tools"))
        self._check_messages(body["messages"])
        if matches(self.reasoning_models, body["model"]):
            self._check_reasoning_parameters(body)
        if not self.model_known(body["model"]):
            raise self.reject(
                404,
                f"The model `{body['model']}` does not exist or you do not have access to it.",
                code="model_not_found",
            )

    def _check_reasoning_parameters(self, body: dict[str, Any]) -> None:
        if body.get("max_tokens") is not None:
            raise self.reject(
                400,
                "Unsupported parameter: 'max_tokens' is not supported with this model. Use "
                "'max_completion_tokens' instead.",
                param="max_tokens",
                code="unsupported_parameter",
            )
        temperature = body.get("temperature")
        if temperature is not None and temperature != 1:
            raise self.reject(
                400,
                f"Unsupported value: 'temperature' does not support {temperature} with this "
                "model. Only the default (1) value is supported.",
                param="temperature",
                code="unsupported_value",
            )

    def _check_tools(self, tools: Any) -> None:
        if tools is None:
            return
        if not isinstance(tools, list):
            raise self.reject(
                400,
                "Invalid type for 'tools': expected an array.",
                param="tools",
                code="invalid_type",
            )
        for i, tool in enumerate(tools):
            if not isinstance(tool, dict):
                raise self.reject(
                    400,
                    f"Invalid type for 'tools[{i}]': expected an object.",
                    param=f"tools[{i}]",
                    code="invalid_type",
                )
            kind = tool.get("type")
            if kind not in ("function", "custom"):
                raise self.reject(
                    400,
                    f"Invalid value: {kind!r}. Supported values are: 'function' and 'custom'.",
                    param=f"tools[{i}].type",
                    code="invalid_value",
                )
            spec = tool.get(kind)
            if not isinstance(spec, dict):
                raise self.reject(
                    400,
                    f"Missing required parameter: 'tools[{i}].{kind}'.",
                    param=f"tools[{i}].{kind}",
                    code="missing_required_parameter",
                )
            if not isinstance(spec.get("name"), str) or not spec["name"]:
                raise self.reject(
                    400,
                    f"Missing required parameter: 'tools[{i}].{kind}.name'.",
                    param=f"tools[{i}].{kind}.name",
                    code="missing_required_parameter",
                )

    def _check_messages(self, messages: Any) -> None:
        if not isinstance(messages, list):
            raise self.reject(
                400,
                "Invalid type for 'messages': expected an array.",
                param="messages",
                code="invalid_type",
            )
        if not messages:
            raise self.reject(
                400,
                "Invalid 'messages': empty array. Expected an array with minimum length 1, "
                "but got an empty array instead.",
                param="messages",
                code="empty_array",
            )
        open_index: int | None = None  # the assistant message whose tool_calls are pending
        expected: list[str] = []
        answered: set[str] = set()
        for i, message in enumerate(messages):
            if not isinstance(message, dict):
                raise self.reject(
                    400,
                    f"Invalid type for 'messages[{i}]': expected an object.",
                    param=f"messages[{i}]",
                    code="invalid_type",
                )
            role = message.get("role")
            if role not in ROLES:
                raise self.reject(
                    400,
                    f"Invalid value: {role!r}. Supported values are: 'system', 'assistant', "
                    "'user', 'function', 'tool', and 'developer'.",
                    param=f"messages[{i}].role",
                    code="invalid_value",
                )
            if role == "tool":
                tool_call_id = message.get("tool_call_id")
                if not isinstance(tool_call_id, str):
                    raise self.reject(
                        400,
                        f"Missing required parameter: 'messages[{i}].tool_call_id'.",
                        param=f"messages[{i}].tool_call_id",
                        code="missing_required_parameter",
                    )
                if open_index is None:
                    raise self.reject(
                        400,
                        "Invalid parameter: messages with role 'tool' must be a response to a "
                        "preceeding message with 'tool_calls'.",
                        param=f"messages.[{i}].role",
                    )
                if tool_call_id not in expected:
                    raise self.reject(
                        400,
                        f"Invalid parameter: 'tool_call_id' of '{tool_call_id}' not found in "
                        "'tool_calls' of previous message.",
                        param=f"messages.[{i}].tool_call_id",
                    )
                answered.add(tool_call_id)
                continue
            self._check_unanswered(open_index, expected, answered)
            open_index, expected, answered = None, [], set()
            if role == "assistant" and message.get("tool_calls"):
                expected = self._tool_call_ids(i, message["tool_calls"])
                open_index = i
        self._check_unanswered(open_index, expected, answered)

    def _check_unanswered(self, index: int | None, expected: list[str], answered: set[str]) -> None:
        missing = [tool_call_id for tool_call_id in expected if tool_call_id not in answered]
        if index is not None and missing:
            raise self.reject(
                400,
                "An assistant message with 'tool_calls' must be followed by tool messages "
                "responding to each 'tool_call_id'. The following tool_call_ids did not have "
                f"response messages: {', '.join(missing)}",
                param=f"messages.[{index}].role",
            )

    def _tool_call_ids(self, i: int, calls: Any) -> list[str]:
        if not isinstance(calls, list):
            raise self.reject(
                400,
                f"Invalid type for 'messages[{i}].tool_calls': expected an array.",
                param=f"messages[{i}].tool_calls",
                code="invalid_type",
            )
        ids = []
        for j, call in enumerate(calls):
            where = f"messages[{i}].tool_calls[{j}]"
            if not isinstance(call, dict) or not isinstance(call.get("id"), str):
                raise self.reject(
                    400,
                    f"Missing required parameter: '{where}.id'.",
                    param=f"{where}.id",
                    code="missing_required_parameter",
                )
            function = call.get("function")
            if call.get("type", "function") != "function" or not isinstance(function, dict):
                raise self.reject(
                    400,
                    f"Missing required parameter: '{where}.function'.",
                    param=f"{where}.function",
                    code="missing_required_parameter",
                )
            if not isinstance(function.get("arguments"), str):
                got = type(function.get("arguments")).__name__
                raise self.reject(
                    400,
                    f"Invalid type for '{where}.function.arguments': expected a string, but got "
                    f"{'an object' if got == 'dict' else got} instead.",
                    param=f"{where}.function.arguments",
                    code="invalid_type",
                )
            ids.append(call["id"])
        return ids

    # --- answers ---

    def render(self, body: dict[str, Any], turn: Turn, usage: Usage) -> dict[str, Any]:
        message: dict[str, Any] = {
            "role": "assistant",
            "content": turn.text or None,
            "refusal": None,
            "annotations": [],
        }
        if turn.calls:
            message["tool_calls"] = [
                {
                    "id": call.id or random_id("call_", 24),
                    "type": "function",
                    "function": {
                        "name": call.name,
                        "arguments": call.input
                        if isinstance(call.input, str)
                        else json.dumps(dict(call.input)),
                    },
                }
                for call in turn.calls
            ]
        if turn.truncated:
            finish_reason = "length"
        elif turn.calls:
            finish_reason = "tool_calls"
        else:
            finish_reason = "stop"
        return {
            "id": random_id("chatcmpl-", 29),
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body["model"],
            "choices": [
                {"index": 0, "message": message, "logprobs": None, "finish_reason": finish_reason}
            ],
            "usage": {
                "prompt_tokens": usage[0],
                "completion_tokens": usage[1],
                "total_tokens": usage[0] + usage[1],
                "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
                "completion_tokens_details": {
                    "reasoning_tokens": 0,
                    "audio_tokens": 0,
                    "accepted_prediction_tokens": 0,
                    "rejected_prediction_tokens": 0,
                },
            },
            "service_tier": "default",
            "system_fingerprint": "fp_fake",
        }

    def summarize(self, body: dict[str, Any]) -> Summary:
        messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
        system = "\n\n".join(
            _text_of(m.get("content")) for m in messages if m.get("role") in ("system", "developer")
        )
        names = []
        for tool in body.get("tools") or []:
            spec = tool.get(tool.get("type")) if isinstance(tool, dict) else None
            if isinstance(spec, dict) and isinstance(spec.get("name"), str):
                names.append(spec["name"])
        # The tool results of the last turn: the run of tool messages after the last
        # assistant message.
        results: list[ToolResult] = []
        for message in messages:
            if message.get("role") == "assistant":
                results = []
            elif message.get("role") == "tool":
                results.append(
                    ToolResult(
                        tool_use_id=str(message.get("tool_call_id")),
                        content=_text_of(message.get("content")),
                    )
                )
        return Summary(system=system, tool_names=names, tool_results=results)


def _text_of(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            part.get("text", "")
            for part in content
            if isinstance(part, dict) and part.get("type") == "text"
        )
    return str(content)
