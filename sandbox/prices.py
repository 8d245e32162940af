"""What model tokens cost: the one price table, looked up by model name.

US dollars per million tokens, after the providers' pricing pages (Anthropic:
https://platform.claude.com/docs/en/about-claude/pricing, OpenAI:
https://platform.openai.com/docs/pricing). Prices change and new models appear faster
than this table: an operator overrides or extends it with `TASUKU_MODEL_PRICES`
(settings). A model neither knows is reviewed with its cost counted as zero and a note
saying so, and a reviewer with a cost cap refuses such a model in the admin. Imports
nothing from Django.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping

from sandbox.contract import Price


def _p(inp: float, out: float, read: float | None = None, write: float | None = None) -> Price:
    return Price(
        input_per_mtok=inp,
        output_per_mtok=out,
        cache_read_per_mtok=read,
        cache_write_per_mtok=write,
    )


# Keys are model names; a dated snapshot of one ("claude-sonnet-4-5-20250929",
# "gpt-4.1-2025-04-14") or its "-latest"/"-0" alias has its price. Nothing looser: a
# prefix match would price "gpt-5.5" or "o3-pro" as their much cheaper namesakes.
PRICES: dict[str, Price] = {
    # Anthropic (cache writes are the 5-minute rate Tasuku uses)
    "claude-fable-5-1": _p(10, 50, 0.25, 12.50),
    "claude-fable-5": _p(10, 50, 1, 12.50),
    "claude-mythos-5-1": _p(10, 50, 0.25, 12.50),
    "claude-mythos-5": _p(10, 50, 1, 12.50),
    "claude-sonnet-5-5": _p(2, 10, 0.10, 2.50),
    "claude-sonnet-5": _p(2, 10, 0.20, 2.50),
    # Haiku 5.5 costs five times less for prompts under 100,000 tokens; an agent's prompt
    # grows past that, so the higher rate is used (a cap errs on the safe side).
    "claude-haiku-5-5": _p(0.50, 2.50, 0.05, 0.625),
    "claude-opus-5": _p(5, 25, 0.50, 6.25),
    "claude-opus-4-8": _p(5, 25, 0.50, 6.25),
    "claude-opus-4-7": _p(5, 25, 0.50, 6.25),
    "claude-opus-4-6": _p(5, 25, 0.50, 6.25),
    "claude-opus-4-5": _p(5, 25, 0.50, 6.25),
    "claude-opus-4-1": _p(15, 75, 1.50, 18.75),
    "claude-opus-4": _p(15, 75, 1.50, 18.75),
    "claude-sonnet-4-6": _p(3, 15, 0.30, 3.75),
    "claude-sonnet-4-5": _p(3, 15, 0.30, 3.75),
    "claude-sonnet-4": _p(3, 15, 0.30, 3.75),
    "claude-3-7-sonnet": _p(3, 15, 0.30, 3.75),
    "claude-haiku-4-5": _p(1, 5, 0.10, 1.25),
    "claude-3-5-haiku": _p(0.80, 4, 0.08, 1),
    "claude-3-haiku": _p(0.25, 1.25, 0.03, 0.30),
    # OpenAI (cached input is the read rate; there is no write surcharge)
    "gpt-5": _p(1.25, 10, 0.125),
    "gpt-5.1": _p(1.25, 10, 0.125),
    "gpt-5-mini": _p(0.25, 2, 0.025),
    "gpt-5-nano": _p(0.05, 0.40, 0.005),
    "gpt-4.1": _p(2, 8, 0.50),
    "gpt-4.1-mini": _p(0.40, 1.60, 0.10),
    "gpt-4.1-nano": _p(0.10, 0.40, 0.025),
    "gpt-4o": _p(2.50, 10, 1.25),
    "gpt-4o-mini": _p(0.15, 0.60, 0.075),
    "o3": _p(2, 8, 0.50),
    "o3-mini": _p(1.10, 4.40, 0.55),
    "o4-mini": _p(1.10, 4.40, 0.275),
}


class PriceTableError(ValueError):
    pass


def prices_parse(text: str) -> dict[str, Price]:
    """`TASUKU_MODEL_PRICES`: a JSON object of model-name prefix → `[input, output]` or
    `{"input": …, "output": …, "cache_read": …, "cache_write": …}` (dollars per million
    tokens)."""
    if not text.strip():
        return {}
    try:
        raw = json.loads(text)
    except ValueError as exc:
        raise PriceTableError(f"not JSON: {exc}") from exc
    if not isinstance(raw, dict):
        raise PriceTableError("must be a JSON object of model name → price")
    table: dict[str, Price] = {}
    for model, value in raw.items():
        try:
            if isinstance(value, list) and len(value) == 2:
                table[model] = _p(float(value[0]), float(value[1]))
            elif isinstance(value, dict) and {"input", "output"} <= set(value):
                table[model] = _p(
                    float(value["input"]),
                    float(value["output"]),
                    None if value.get("cache_read") is None else float(value["cache_read"]),
                    None if value.get("cache_write") is None else float(value["cache_write"]),
                )
            else:
                raise PriceTableError(
                    f"{model}: give [input, output] or {{'input': …, 'output': …}} "
                    "in dollars per million tokens"
                )
        except (TypeError, ValueError) as exc:
            if isinstance(exc, PriceTableError):
                raise
            raise PriceTableError(f"{model}: {exc}") from exc
    return table


SNAPSHOT = re.compile(r"-(\d{8}|\d{4}-\d{2}-\d{2}|latest|0)")


def price_for(model: str, overrides: Mapping[str, Price] | None = None) -> Price | None:
    """The price of `model` or of the model it is a snapshot of; the operator's table
    (`overrides`) first. None when neither knows it."""
    for table in (overrides or {}, PRICES):
        if model in table:
            return table[model]
        for key, price in table.items():
            if model.startswith(key) and SNAPSHOT.fullmatch(model[len(key) :]):
                return price
    return None
