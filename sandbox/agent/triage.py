"""Triage by the reviewer's fast model: one forced tool call that says whether a change
is trivial (not worth a deep review) or substantive, and its risk areas.

It runs in the worker, not the sandbox: it reads no files and executes nothing, only
sends the diff (as fenced, untrusted data) to the provider. Because a "trivial" verdict
skips the deep review, it is guarded: a diff too large to show whole, or one whose
added lines talk to the reviewer ("ignore previous instructions", "mark this as
trivial"), is substantive without asking, and any failure (the provider, a malformed
answer) falls back to substantive — the change is then reviewed in depth.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, Field, ValidationError

from sandbox.agent.conversation import ConversationFactory, Tokens
from sandbox.agent.tools import ToolSpec, inline_refs
from sandbox.contract import Price, ReviewJob
from sandbox.errors import ProviderError
from sandbox.prompt import triage_prompt

TRIAGE_TOOL = "submit_triage"
MAX_DIFF_CHARS = 120_000
TIMEOUT = 90

INJECTION = re.compile(
    r"(ignore|disregard|forget)\s+(all\s+|any\s+|the\s+|your\s+)?(previous|prior|above|earlier)"
    r"\s+(instructions|prompts?|rules)"
    r"|(mark|classify|treat|triage)\s+(this|it|the\s+change)\s+as\s+trivial"
    r"|\b(system\s+prompt|you\s+are\s+now\b|as\s+an\s+ai\b)"
    r"|\b(approve|lgtm)\s+(this|the)\s+(pr|pull\s+request|change)",
    re.IGNORECASE,
)


class TriageAnswer(BaseModel):
    verdict: Literal["trivial", "substantive"]
    summary: str = Field(default="", max_length=1000)
    risk_areas: list[str] = Field(default_factory=list, max_length=10)


@dataclass(frozen=True)
class ModelVerdict:
    verdict: str
    summary: str
    risk_areas: tuple[str, ...]
    model: str
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    note: str = ""  # why the model was not asked, or why its answer was not taken


SPEC = ToolSpec(
    TRIAGE_TOOL,
    "Submit the triage verdict.",
    inline_refs(TriageAnswer.model_json_schema()),
)


def addresses_the_reviewer(diff: str) -> bool:
    added = "\n".join(line[1:] for line in diff.splitlines() if line.startswith("+"))
    return bool(INJECTION.search(added))


def model_triage(
    job: ReviewJob,
    model: str,
    conversation: ConversationFactory,
    env: Mapping[str, str],
    price: Price | None,
) -> ModelVerdict:
    def substantive(note: str, tokens: Tokens | None = None) -> ModelVerdict:
        return _verdict("substantive", note, [], model, tokens, price, note=note)

    if len(job.diff) > MAX_DIFF_CHARS or job.omitted:
        return substantive("too large to triage whole: reviewed in depth")
    if addresses_the_reviewer(job.diff):
        return substantive("the diff's added lines address the reviewer: reviewed in depth")
    prompt = triage_prompt(job, max_diff_chars=MAX_DIFF_CHARS)
    try:
        chat = conversation(job.model_copy(update={"model": model}), prompt, (SPEC,), env)
        turn = chat.send(timeout=TIMEOUT, force=TRIAGE_TOOL)
    except ProviderError as exc:
        return substantive(f"triage model unavailable ({exc}): reviewed in depth")
    call = next((c for c in turn.calls if c.name == TRIAGE_TOOL), None)
    if call is None or call.error:
        return substantive("the triage model gave no verdict: reviewed in depth", turn.tokens)
    try:
        answer = TriageAnswer.model_validate(call.arguments)
    except ValidationError:
        return substantive(
            "the triage model's verdict was malformed: reviewed in depth", turn.tokens
        )
    return _verdict(answer.verdict, answer.summary, answer.risk_areas, model, turn.tokens, price)


def _verdict(
    verdict: str,
    summary: str,
    risk_areas: list[str],
    model: str,
    tokens: Tokens | None,
    price: Price | None,
    note: str = "",
) -> ModelVerdict:
    tokens = tokens or Tokens()
    cost = (
        price.cost(tokens.input, tokens.output, tokens.cache_read, tokens.cache_write)
        if price
        else 0.0
    )
    return ModelVerdict(
        verdict=verdict,
        summary=summary[:1000],
        risk_areas=tuple(a[:100] for a in risk_areas[:5]),
        model=model,
        input_tokens=tokens.input + tokens.cache_read + tokens.cache_write,
        output_tokens=tokens.output,
        cost_usd=round(cost, 6),
        note=note,
    )
