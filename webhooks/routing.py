"""Which code handles a stored delivery, and which events Tasuku deliberately ignores.

The apps above this one plug their handlers in from their `ready()` with `register`
(`repos/apps.py`, `reviews/apps.py`): a call a reader and a static tool can follow, in
the order the handlers run. Each takes the payload parsed into its event's model
(`webhooks/payloads.py`) and returns an `Outcome` in words.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from webhooks.payloads import Event, Malformed, parse

logger = logging.getLogger(__name__)


class Decision:
    """What admission decided about a delivery (empty when it was not a candidate)."""

    ADMITTED = "admitted"
    SKIPPED = "skipped"


@dataclass(frozen=True)
class Outcome:
    text: str
    ignored: bool = False
    decision: str = ""
    # Work the delivery made that its worker may start at once, when it has nothing else
    # to do: (the doorbell task's name, its one argument) — a queued review run, say; the
    # function behind the name is registered with `follow_up_register`.
    then: tuple[tuple[str, int], ...] = ()

    @classmethod
    def ignore(cls, text: str) -> Outcome:
        return cls(text=text, ignored=True)


class Handler(Protocol):
    """Given its event's model (`webhooks.payloads.MODELS`), never the JSON itself, so no
    field of another type than GitHub's can reach it."""

    def __call__(self, payload: Event, *, delivery_id: int) -> Outcome: ...


# The handlers of each event, in the order they were registered, run in turn: each does
# its own part (admission, comment commands, a task's feedback) and none depends on
# another's. Every event of `webhooks.payloads.MODELS` has at least one (a test holds it).
HANDLERS: dict[str, tuple[Handler, ...]] = {}


def register(event: str, *handlers: Handler) -> None:
    """Add `handlers` for `event`, after those already registered (once each: an app's
    `ready()` may run again in tests)."""
    known = HANDLERS.get(event, ())
    HANDLERS[event] = known + tuple(h for h in handlers if h not in known)


# The work a handler's outcome may ask its worker to start at once (`Outcome.then`), by
# the name its doorbell task has on the queue, registered with the function it calls.
FOLLOW_UPS: dict[str, Callable[[int], object]] = {}


def follow_up_register(task: str, function: Callable[[int], object]) -> None:
    FOLLOW_UPS[task] = function


def follow_up(task: str) -> Callable[[int], object]:
    """The function behind a doorbell task an outcome names (a KeyError names a task no
    app registered: a bug, not a delivery's doing)."""
    return FOLLOW_UPS[task]


def handler_name(handler: Handler) -> str:
    return f"{handler.__module__}.{getattr(handler, '__qualname__', handler)}"


# Events an App with Tasuku's permissions receives but does not act on, with the reason
# recorded on each such delivery. An event in neither table is ignored as unknown.
IGNORED: dict[str, str] = {
    "ping": "GitHub's test delivery: the webhook works",
    "workflow_job": "workflow jobs do not change what Tasuku reviews",
    "github_app_authorization": "user authorizations are not used",
    "installation_target": "account renames need no action",
    "repository": "repository settings changes need no action",
    "meta": "the App's webhook itself changed; nothing to do",
}


def route(event: str, payload: dict[str, Any], *, delivery_id: int) -> Outcome:
    """Hand a delivery to each of its handlers, or say why it is ignored.

    A handler that raises does not keep the others from running; its error is raised
    once they have (with a note naming it), so the delivery is tried again. Every
    handler is safe to repeat for the same delivery."""
    handlers = HANDLERS.get(event)
    if handlers is None:
        if event in IGNORED:
            return Outcome.ignore(IGNORED[event])
        return _refused(f"Tasuku does not use {event} events")
    parsed = parse(event, payload)
    if isinstance(parsed, Malformed):
        # Signed, so sent by whoever holds the webhook secret: trying again cannot help,
        # and nothing is admitted from it.
        return _refused(f"malformed: not shaped as GitHub sends {event} events: {parsed.problem}")
    outcomes: list[Outcome] = []
    failed: Exception | None = None
    for handler in handlers:
        try:
            outcomes.append(handler(parsed, delivery_id=delivery_id))
        except Exception as exc:  # each handler runs whatever another raised; re-raised below
            exc.add_note(f"in {handler_name(handler)}, one of the {event} handlers")
            failed = failed or exc
    if failed is not None:
        raise failed
    return outcome_combined(outcomes)


def _refused(reason: str) -> Outcome:
    """A delivery stored but refused (an event Tasuku does not know, a payload not shaped
    as GitHub sends it): ignored, and logged at INFO with why, found in the log beside
    the delivery's fields (tasuku/logs.py)."""
    logger.info("delivery refused: %s", reason, extra={"reason": reason})
    return Outcome.ignore(reason)


def outcome_combined(outcomes: list[Outcome]) -> Outcome:
    """The handlers that acted, in their words; when none did, the first one's reason."""
    acting = [o for o in outcomes if not o.ignored]
    if not acting:
        return outcomes[0]
    decision = next((o.decision for o in acting if o.decision), "")
    then = tuple(step for o in acting for step in o.then)
    return Outcome(text="; ".join(o.text for o in acting), decision=decision, then=then)
