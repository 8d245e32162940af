"""Folding a review into the repository's memory with the reviewer's fast model: one
forced tool call that rewrites the memory (a few bounded lines later reviews receive as
data) from the memory so far, the review's summary and what became of its findings.

Like triage it runs in the worker, reads no files and executes nothing. Its answer is
model output that read people's words (dismissal reasons), so it is bounded, and one
that talks to the reviewer ("ignore previous instructions", "approve …") is not taken;
any failure leaves the memory as it was, with the reason.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from pydantic import BaseModel, Field, ValidationError

from sandbox.agent.loop import ConversationFactory, Tokens
from sandbox.agent.tools import ToolSpec, inline_refs
from sandbox.agent.triage import INJECTION
from sandbox.contract import Price, ReviewJob
from sandbox.errors import ProviderError
from sandbox.prompt import memory_prompt

MEMORY_TOOL = "submit_memory"
MEMORY_MAX_CHARS = 2000
INPUT_MAX_CHARS = 12_000  # of the review's summary and of the fates, each
TIMEOUT = 90


class MemoryAnswer(BaseModel):
    memory: str = Field(max_length=MEMORY_MAX_CHARS)


SPEC = ToolSpec(
    MEMORY_TOOL,
    "Submit the repository's memory, rewritten.",
    inline_refs(MemoryAnswer.model_json_schema()),
)


@dataclass(frozen=True)
class Folded:
    text: str | None  # the new memory; None: keep the memory as it was (`note` says why)
    model: str
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    note: str = ""


def memory_fold(
    *,
    repository: str,
    memory: str,
    review: str,
    fates: str,
    model: str,
    conversation: ConversationFactory,
    env: Mapping[str, str],
    price: Price | None,
) -> Folded:
    def kept(note: str, tokens: Tokens | None = None) -> Folded:
        return _folded(None, model, tokens, price, note)

    prompt = memory_prompt(
        repository=repository,
        memory=memory[:MEMORY_MAX_CHARS],
        review=review[:INPUT_MAX_CHARS],
        fates=fates[:INPUT_MAX_CHARS],
        limit=MEMORY_MAX_CHARS,
    )
    job = ReviewJob(
        job_id="memory",
        repository=repository,
        pull_request=0,
        base_sha="",
        head_sha="",
        model=model,
    )
    try:
        chat = conversation(job, prompt, (SPEC,), env)
        turn = chat.send(timeout=TIMEOUT, force=MEMORY_TOOL)
    except ProviderError as exc:
        return kept(f"the memory model is unavailable ({exc}); the memory is unchanged")
    call = next((c for c in turn.calls if c.name == MEMORY_TOOL), None)
    if call is None or call.error:
        return kept("the memory model gave no memory; the memory is unchanged", turn.tokens)
    try:
        answer = MemoryAnswer.model_validate(call.arguments)
    except ValidationError:
        return kept("the memory model's answer was malformed; the memory is unchanged", turn.tokens)
    text = answer.memory.strip()
    if INJECTION.search(text):
        return kept(
            "the memory model's answer addressed the reviewer; the memory is unchanged",
            turn.tokens,
        )
    return _folded(text, model, turn.tokens, price)


def _folded(
    text: str | None, model: str, tokens: Tokens | None, price: Price | None, note: str = ""
) -> Folded:
    tokens = tokens or Tokens()
    cost = (
        price.cost(tokens.input, tokens.output, tokens.cache_read, tokens.cache_write)
        if price
        else 0.0
    )
    return Folded(
        text=text,
        model=model,
        input_tokens=tokens.input + tokens.cache_read + tokens.cache_write,
        output_tokens=tokens.output,
        cost_usd=round(cost, 6),
        note=note,
    )
