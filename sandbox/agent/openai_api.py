"""The `openai` engine: the agent loop over Chat Completions with function calling,
through the official `openai` SDK.

The key comes from OPENAI_API_KEY. OPENAI_BASE_URL (the reviewer's base URL) points
the SDK at any OpenAI-compatible server a team runs itself — vLLM, Ollama, LM Studio —
which often need no key; the SDK insists on one, so a placeholder is sent then. A call is
tried again after 408/409/429/5xx and connection errors, honouring `retry-after`, every try
within the call's timeout (sandbox/agent/attempts.py).
Each turn may write at most the job's `max_output_tokens`, sent as
`max_completion_tokens` (the parameter reasoning models accept; `max_tokens` is refused
by them).
"""

from __future__ import annotations

import copy
import json
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

NO_KEY = "unused"  # self-hosted servers ignore the key; the SDK requires one


class OpenAIConversation:
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
        the prompt's user message is then its next message, under this job's system
        prompt."""
        import openai

        env = os.environ if env is None else env
        base_url = env.get("OPENAI_BASE_URL") or None
        key = env.get("OPENAI_API_KEY", "")
        if not key and not base_url:
            raise ProviderError(
                "No OpenAI API key: set it on the reviewer in the admin or as OPENAI_API_KEY "
                "(a self-hosted OpenAI-compatible server needs only its base URL).",
                permanent=True,
                code="provider-missing-key",
            )
        self.openai = openai
        self.model = job.model
        self.max_tokens = job.limits.max_output_tokens
        self.client = openai.OpenAI(
            api_key=key or NO_KEY,
            base_url=base_url,
            max_retries=0,  # tried again within the call's timeout (sandbox/agent/attempts.py)
            http_client=sdk_http_client(openai.DefaultHttpxClient),
        )
        self.tools = [
            {
                "type": "function",
                "function": {
                    "name": t.name,
                    "description": t.description,
                    "parameters": t.input_schema,
                },
            }
            for t in tools
        ]
        earlier = [m for m in copy.deepcopy(resume or []) if m.get("role") != "system"]
        self.messages: list[dict[str, Any]] = [
            {"role": "system", "content": prompt.system},
            *earlier,
            {"role": "user", "content": prompt.user},
        ]

    def saved(self, closing: str) -> list[dict[str, Any]]:
        """The messages to keep (the system prompt is each job's own): every tool call
        of the last turn answered (`closing`)."""
        messages = [m for m in copy.deepcopy(self.messages) if m.get("role") != "system"]
        last = messages[-1] if messages else {}
        for call in last.get("tool_calls") or [] if last.get("role") == "assistant" else []:
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": closing})
        return messages

    def __del__(self) -> None:
        close_quietly(getattr(self, "client", None))  # None: the key was missing

    def send(self, *, timeout: float, force: str | None = None) -> Turn:
        choice: Any = {"type": "function", "function": {"name": force}} if force else "auto"
        try:
            response = within(
                self.openai,
                lambda seconds: self.client.chat.completions.create(
                    model=self.model,
                    messages=self.messages,
                    tools=self.tools,
                    tool_choice=choice,
                    max_completion_tokens=self.max_tokens,
                    timeout=seconds,
                ),
                timeout,
            )
        except self.openai.OpenAIError as exc:
            raise provider_error("OpenAI", self.model, exc) from exc
        except ValueError as exc:  # a body that is not JSON
            raise provider_error("OpenAI", self.model, exc) from exc
        if not response.choices:
            raise ProviderError(
                "The OpenAI API answered with no choices.",
                permanent=False,
                code="provider-bad-response",
            )
        choice_0 = response.choices[0]
        message = choice_0.message
        calls = []
        echoed = []
        for tool_call in message.tool_calls or []:
            function = getattr(tool_call, "function", None)
            if function is None:
                continue
            try:
                arguments, error = json.loads(function.arguments or "{}"), ""
            except ValueError as exc:
                arguments, error = None, str(exc)
            calls.append(
                Call(id=tool_call.id, name=function.name, arguments=arguments, error=error)
            )
            echoed.append(
                {
                    "id": tool_call.id,
                    "type": "function",
                    "function": {"name": function.name, "arguments": function.arguments or "{}"},
                }
            )
        assistant: dict[str, Any] = {"role": "assistant", "content": message.content or ""}
        if echoed:
            assistant["tool_calls"] = echoed
        self.messages.append(assistant)
        usage = response.usage
        prompt_tokens = (usage.prompt_tokens or 0) if usage else 0
        details = getattr(usage, "prompt_tokens_details", None) if usage else None
        cached = (getattr(details, "cached_tokens", None) or 0) if details else 0
        finish = choice_0.finish_reason or ""
        return Turn(
            text=message.content or "",
            calls=calls,
            stop={"length": "max_tokens", "tool_calls": "tool_use", "stop": "end_turn"}.get(
                finish, finish
            ),
            tokens=Tokens(
                input=max(prompt_tokens - cached, 0),
                output=(usage.completion_tokens or 0) if usage else 0,
                cache_read=cached,
            ),
        )

    def answer(self, results: list[Result], note: str = "") -> None:
        for r in results:
            content = r.content or "(empty)"
            self.messages.append(
                {
                    "role": "tool",
                    "tool_call_id": r.call.id,
                    "content": f"Error: {content}" if r.is_error else content,
                }
            )
        if note:
            self.messages.append({"role": "user", "content": note})

    def say(self, text: str) -> None:
        self.messages.append({"role": "user", "content": text})


def review(job: ReviewJob, root: Path) -> ReviewResult:
    return agent_review(job, root, engine="openai", conversation=OpenAIConversation)
