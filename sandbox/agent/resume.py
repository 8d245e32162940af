"""Keeping a reviewer's conversation for the next pass, and continuing it.

At the end of a review the API engines keep their conversation as the provider holds it
(`SavedConversation`): what the model read and decided, its own messages, the tool calls
and their results. A later pass of the same reviewer, engine and model continues it: the
new pass's prompt is one more message, so the model remembers what it read and ruled.
Kept conversations are bounded (MAX_CONVERSATION_CHARS): the longest tool results, oldest
first, are cut to a head and a note — what a file said can be read again — and one still
too large is not kept. Imports nothing from Django.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from sandbox.contract import MAX_CONVERSATION_CHARS, ReviewJob, SavedConversation

SHORTENED_KEEP = 1_000  # characters kept of a shortened tool result
SHORTEN_OVER = 1_500  # tool results longer than this are shortened first
CLOSING = "Review received."


def resumable(job: ReviewJob, provider: str) -> tuple[list[dict] | None, str]:
    """The messages to continue, or None and why the conversation starts fresh ("" when
    there was none to continue)."""
    saved = job.resume
    if saved is None:
        return None, ""
    if saved.provider != provider:
        return None, f"the previous pass ran on {saved.provider}, this one on {provider}"
    if saved.model != job.model:
        return None, f"the previous pass used {saved.model}, this one {job.model}"
    if not saved.messages:
        return None, "the previous pass kept no messages"
    return copy.deepcopy(saved.messages), ""


def conversation_kept(
    provider: str, model: str, messages: list[dict[str, Any]], boundaries: tuple[str, ...]
) -> SavedConversation | None:
    """The conversation as it is kept, shortened to fit; None when even shortened it is
    larger than MAX_CONVERSATION_CHARS."""
    kept = copy.deepcopy(messages)
    size = _size(kept)
    shortened = 0
    if size > MAX_CONVERSATION_CHARS:
        for holder, key in _tool_results(kept):
            text = holder[key]
            if not isinstance(text, str) or len(text) <= SHORTEN_OVER:
                continue
            note = (
                f"\n… (shortened when this conversation was kept: {len(text) - SHORTENED_KEEP} "
                "more characters; read it again if it matters)"
            )
            holder[key] = text[:SHORTENED_KEEP] + note
            shortened += 1
            size -= len(text) - len(holder[key])
            if size <= MAX_CONVERSATION_CHARS:
                break
        if _size(kept) > MAX_CONVERSATION_CHARS:
            return None
    return SavedConversation(
        provider=provider,
        model=model,
        messages=kept,
        boundaries=boundaries[-50:],
        shortened=shortened,
    )


def _size(messages: list[dict[str, Any]]) -> int:
    return len(json.dumps(messages, ensure_ascii=False))


def _tool_results(messages: list[dict[str, Any]]):
    """(holder, key) of each tool result's text, oldest first, in either dialect:
    Anthropic's `tool_result` blocks, OpenAI's `tool` messages."""
    for message in messages:
        if message.get("role") == "tool" and isinstance(message.get("content"), str):
            yield message, "content"
        content = message.get("content")
        if isinstance(content, list):
            for block in content:
                if isinstance(block, dict) and block.get("type") == "tool_result":
                    yield block, "content"
