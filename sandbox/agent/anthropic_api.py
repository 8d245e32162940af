"""The `anthropic` engine: the agent loop over the Messages API with tool use, through
the official `anthropic` SDK.

The key comes from ANTHROPIC_API_KEY (the runner passes that one key and nothing else);
ANTHROPIC_BASE_URL, when set, points the SDK elsewhere (a proxy or gateway). A call is
tried again after 408/409/429/5xx and connection errors, honouring `retry-after`, every try
within the call's timeout (sandbox/agent/attempts.py).
Each turn may write at most the job's `max_output_tokens` (`max_tokens`).
Prompt caching: the system prompt and the newest user message carry a cache breakpoint,
so each step pays full price only for what is new.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from sandbox.agent.attempts import within
from sandbox.agent.conversation import (
    Call,
    Result,
    Tokens,
    Turn,
    close_quietly,
    sdk_http_client,
)
from sandbox.agent.errors import provider_error
from sandbox.agent.loop import agent_review
from sandbox.agent.tools import ToolSpec
from sandbox.contract import ReviewJob, ReviewResult
from sandbox.errors import ProviderError
from sandbox.prompt import Prompt

CACHE = {"type": "ephemeral"}


class AnthropicConversation:
    def __init__(
        self,
        job: ReviewJob,
        prompt: Prompt,
        tools: tuple[ToolSpec, ...],
        env: Mapping[str, str] | None = None,
        *,
        resume: list[dict[str, Any]] | None = None,
    ) -> None:
        """`resume`: the messages of a conversation to continue (sandbox/agent/resume.py);
        the prompt's user message is then its next message."""
        import anthropic

        env = os.environ if env is None else env
        key = env.get("ANTHROPIC_API_KEY", "")
        if not key:
            raise ProviderError(
                "No Anthropic API key: set it on the reviewer in the admin or as "
                "ANTHROPIC_API_KEY.",
                permanent=True,
                code="provider-missing-key",
            )
        self.anthropic = anthropic
        self.model = job.model
        self.max_tokens = job.limits.max_output_tokens
        self.client = anthropic.Anthropic(
            api_key=key,
            base_url=env.get("ANTHROPIC_BASE_URL") or None,
            max_retries=0,  # tried again within the call's timeout (sandbox/agent/attempts.py)
            http_client=sdk_http_client(anthropic.DefaultHttpxClient),
        )
        self.system = [{"type": "text", "text": prompt.system, "cache_control": CACHE}]
        self.tools = [
            {"name": t.name, "description": t.description, "input_schema": t.input_schema}
            for t in tools
        ]
        self.messages: list[dict[str, Any]] = []
        if resume:
            self.messages = _uncached(resume)
            if self.messages[-1].get("role") == "user":
                # The kept conversation ends with the results of its last calls: the new
                # pass's prompt goes with them (one user turn).
                last = self.messages.pop()
                content = last["content"]
                blocks = (
                    content if isinstance(content, list) else [{"type": "text", "text": content}]
                )
                self._user([*blocks, {"type": "text", "text": prompt.user}])
                return
        self._user([{"type": "text", "text": prompt.user}])

    def saved(self, closing: str) -> list[dict[str, Any]]:
        """The messages to keep: every tool call of the last turn answered (`closing`)."""
        messages = _uncached(self.messages)
        last = messages[-1] if messages else {}
        if last.get("role") == "assistant":
            ids = [b["id"] for b in last["content"] if b.get("type") == "tool_use"]
            if ids:
                messages.append(
                    {
                        "role": "user",
                        "content": [
                            {"type": "tool_result", "tool_use_id": i, "content": closing}
                            for i in ids
                        ],
                    }
                )
        return messages

    def _user(self, blocks: list[dict[str, Any]]) -> None:
        # At most four cache breakpoints per request: keep one, on the newest message.
        for message in self.messages:
            for block in message["content"]:
                block.pop("cache_control", None)
        blocks[-1]["cache_control"] = CACHE
        self.messages.append({"role": "user", "content": blocks})

    def __del__(self) -> None:
        close_quietly(getattr(self, "client", None))  # None: the key was missing

    def send(self, *, timeout: float, force: str | None = None) -> Turn:
        choice = {"type": "tool", "name": force} if force else {"type": "auto"}
        try:
            response = within(
                self.anthropic,
                lambda seconds: self.client.messages.create(
                    model=self.model,
                    max_tokens=self.max_tokens,
                    system=self.system,
                    tools=self.tools,
                    tool_choice=choice,
                    messages=self.messages,
                    timeout=seconds,
                ),
                timeout,
            )
        except self.anthropic.AnthropicError as exc:
            raise provider_error("Anthropic", self.model, exc) from exc
        except ValueError as exc:  # a body that is not JSON
            raise provider_error("Anthropic", self.model, exc) from exc
        content = [block.model_dump(mode="json", exclude_none=True) for block in response.content]
        # Only what the API accepts back: text and tool_use blocks (no citations etc.).
        kept = []
        texts, calls = [], []
        for block in content:
            if block.get("type") == "text":
                texts.append(block.get("text", ""))
                kept.append({"type": "text", "text": block.get("text", "")})
            elif block.get("type") == "tool_use":
                calls.append(Call(id=block["id"], name=block["name"], arguments=block.get("input")))
                kept.append(
                    {
                        "type": "tool_use",
                        "id": block["id"],
                        "name": block["name"],
                        "input": block.get("input", {}),
                    }
                )
        if not kept:
            kept = [{"type": "text", "text": "(no answer)"}]
        self.messages.append({"role": "assistant", "content": kept})
        usage = response.usage
        return Turn(
            text="\n".join(t for t in texts if t),
            calls=calls,
            stop=response.stop_reason or "",
            tokens=Tokens(
                input=usage.input_tokens or 0,
                output=usage.output_tokens or 0,
                cache_read=getattr(usage, "cache_read_input_tokens", None) or 0,
                cache_write=getattr(usage, "cache_creation_input_tokens", None) or 0,
            ),
        )

    def answer(self, results: list[Result], note: str = "") -> None:
        blocks: list[dict[str, Any]] = [
            {
                "type": "tool_result",
                "tool_use_id": r.call.id,
                "content": r.content or "(empty)",
                **({"is_error": True} if r.is_error else {}),
            }
            for r in results
        ]
        if note:
            blocks.append({"type": "text", "text": note})
        self._user(blocks)

    def say(self, text: str) -> None:
        self._user([{"type": "text", "text": text}])


def _uncached(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    copied = copy.deepcopy(messages)
    for message in copied:
        if isinstance(message.get("content"), list):
            for block in message["content"]:
                block.pop("cache_control", None)
    return copied


def review(job: ReviewJob, root: Path) -> ReviewResult:
    return agent_review(job, root, engine="anthropic", conversation=AnthropicConversation)
