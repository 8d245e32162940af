"""The cost cap, held before each model call rather than checked after it.

A call's cost is known only once it is made, so each call first reserves its worst
case: what the context it sends can cost (the last call's prompt, what the model wrote
then, and what was added since, at the dearest input rate) plus `max_output_tokens` at
the output rate. A call whose worst case would pass the cap is not made; the review
ends incomplete instead. Once the call returns, the reservation gives way to what it
cost. The reviewer and its explorers (threads) share one `Budget`, so together they can
never pass the cap either.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass

from sandbox.agent.conversation import Tokens
from sandbox.contract import Price

# Tokens are estimated from characters only for what was added since the last call (the
# provider counts everything else). Code and JSON run at three to four characters a
# token; three errs on the side of the cap.
CHARS_PER_TOKEN = 3


def tokens_for(chars: int) -> int:
    return math.ceil(chars / CHARS_PER_TOKEN)


def call_cost(price: Price | None, tokens: Tokens) -> float:
    if price is None:
        return 0.0
    return price.cost(tokens.input, tokens.output, tokens.cache_read, tokens.cache_write)


@dataclass
class Meter:
    """One agent's context, to bound what its next call can cost."""

    price: Price | None
    max_output: int
    pending_chars: int = 0  # added since the last call (the whole prompt before the first)
    last_prompt: int = 0
    last_output: int = 0

    def added(self, chars: int) -> None:
        self.pending_chars += chars

    def sent(self, tokens: Tokens) -> None:
        self.last_prompt, self.last_output, self.pending_chars = tokens.prompt, tokens.output, 0

    def next_prompt_tokens(self, extra_chars: int = 0) -> int:
        return self.last_prompt + self.last_output + tokens_for(self.pending_chars + extra_chars)

    def worst_next(self, extra_chars: int = 0) -> float:
        """The most the next call can cost; `extra_chars` will be added before it."""
        if self.price is None:
            return 0.0
        price = self.price
        dearest = max(price.input_per_mtok, price.cache_write_per_mtok or 0.0)
        return (
            self.next_prompt_tokens(extra_chars) * dearest + self.max_output * price.output_per_mtok
        ) / 1e6


class Budget:
    """The review's spending against its cap (None: no cap), shared across threads."""

    def __init__(self, cap: float | None) -> None:
        self.cap = cap
        self.spent = 0.0
        self.reserved = 0.0
        self._lock = threading.Lock()

    def reserve(self, amount: float) -> bool:
        """Hold `amount` for a call about to be made; False (nothing held) when it could
        pass the cap."""
        with self._lock:
            if self.cap is not None and self.spent + self.reserved + amount > self.cap + 1e-12:
                return False
            self.reserved += amount
            return True

    def release(self, amount: float) -> None:
        with self._lock:
            self.reserved = max(self.reserved - amount, 0.0)

    def settle(self, reserved: float, cost: float) -> None:
        """A call that held `reserved` is made and cost `cost`."""
        with self._lock:
            self.reserved = max(self.reserved - reserved, 0.0)
            self.spent += cost

    def refusal(self, worst: float) -> str:
        """Why a call of worst case `worst` was not made, in numbers."""
        with self._lock:
            spent, held = self.spent, self.reserved
        return (
            f"${self.cap or 0:.2f} cap; ${spent:.4f} spent"
            + (f", ${held:.4f} held for calls under way" if held else "")
            + f"; the next call could have cost up to ${worst:.4f}"
        )
