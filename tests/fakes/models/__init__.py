"""Stateful fakes of the model APIs, served over real HTTP on 127.0.0.1.

The product's model engines talk to them through the real SDKs (`anthropic`, `openai`),
pointed here by `base_url`, so what is tested is the engines' actual HTTP behaviour.

- `FakeAnthropic` speaks the Messages API (`POST /v1/messages`); `FakeOpenAI` speaks
  Chat Completions (`POST {prefix}/chat/completions`, prefix "/v1" by default).
- Both check the API key (401 in the real body shape), the model name (404), and the
  request the real API would refuse with 400: the pairing of tool calls with tool
  results, the tool definitions, required fields, `stream` (not supported here).
- Both answer from one script of dialect-free steps, one step per request that passed
  those checks: `ToolCall`, `ToolCalls`, `Reply`, `Fail`, `Malformed`, `Hang`, `Loop`,
  or a callable taking the `ModelRequest` and returning a step. An exhausted script
  answers 500 "fake script exhausted" with `x-should-retry: false`.
- Every request is recorded (`requests`, `model_requests`, `last_request`) with its
  headers, parsed body, the system prompt and last tool results read the same way in
  both dialects, the status and body answered, and its arrival time.
"""

from __future__ import annotations

from tests.fakes.models.anthropic_api import ANTHROPIC_TEST_KEY, FakeAnthropic
from tests.fakes.models.openai_api import OPENAI_TEST_KEY, FakeOpenAI
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
    conversations,
    rate_limited,
)
from tests.fakes.models.server import FakeModelServer

__all__ = [
    "ANTHROPIC_TEST_KEY",
    "OPENAI_TEST_KEY",
    "Fail",
    "FakeAnthropic",
    "FakeModelServer",
    "FakeOpenAI",
    "Hang",
    "Loop",
    "Malformed",
    "ModelRequest",
    "Reply",
    "Step",
    "ToolCall",
    "ToolCalls",
    "ToolResult",
    "conversations",
    "rate_limited",
]
