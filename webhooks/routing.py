"""Which code handles a stored delivery, and which events Tasuku deliberately ignores.

Handlers are named by dotted path so that this table imports nothing at load time (the
apps above it plug in here); each takes the payload parsed into its event's model
(`webhooks/payloads.py`) and returns an `Outcome` in words.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from django.utils.module_loading import import_string

from webhooks.payloads import Event, Malformed, parse


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
    # to do: (dotted path of a task, its one argument) — a queued review run, say.
    then: tuple[tuple[str, int], ...] = ()

    @classmethod
    def ignore(cls, text: str) -> Outcome:
        return cls(text=text, ignored=True)


class Handler(Protocol):
    """Given its event's model (`webhooks.payloads.MODELS`), never the JSON itself, so no
    field of another type than GitHub's can reach it."""

    def __call__(self, payload: Event, *, delivery_id: int) -> Outcome: ...


# The handlers of each event, by dotted path, run in turn: each does its own part
# (admission, comment commands, a task's feedback) and none depends on another's.
HANDLERS: dict[str, tuple[str, ...]] = {
    "installation": ("repos.services.installation_event",),
    "installation_repositories": ("repos.services.installation_repositories_event",),
    "pull_request": ("reviews.intake.pull_requests.pull_request_event",),
    "issue_comment": (
        "reviews.intake.triggers.issue_comment_event",
        "reviews.passes.events.issue_comment_event",
    ),
    "check_run": (
        "reviews.passes.events.check_run_event",
        "reviews.intake.triggers.check_run_event",
    ),
    "check_suite": (
        "reviews.passes.events.check_suite_event",
        "reviews.intake.triggers.check_suite_event",
    ),
    "status": ("reviews.passes.events.status_event",),
    "pull_request_review_comment": (
        "reviews.replies.review_comment_event",
        "reviews.passes.events.review_comment_event",
    ),
    "pull_request_review": ("reviews.passes.events.pull_request_review_event",),
    "pull_request_review_thread": ("reviews.replies.thread_event",),
    "workflow_run": ("reviews.actions.workflow.workflow_run_event",),
    "merge_group": ("reviews.intake.merge_queue.merge_group_event",),
}

# Events an App with Tasuku's permissions receives but does not act on, with the reason
# recorded on each such delivery. An event in neither table is ignored as unknown.
IGNORED: dict[str, str] = {
    "ping": "GitHub's test delivery: the webhook works",
    "workflow_job": "workflow jobs do not change what Tasuku reviews",
    "push": "pushes are reviewed through their pull requests (pull_request.synchronize)",
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
    paths = HANDLERS.get(event)
    if paths is None:
        reason = IGNORED.get(event, f"Tasuku does not use {event} events")
        return Outcome.ignore(reason)
    parsed = parse(event, payload)
    if isinstance(parsed, Malformed):
        # Signed, so sent by whoever holds the webhook secret: trying again cannot help,
        # and nothing is admitted from it.
        return Outcome.ignore(
            f"malformed: not shaped as GitHub sends {event} events: {parsed.problem}"
        )
    outcomes: list[Outcome] = []
    failed: Exception | None = None
    for path in paths:
        handler: Handler = import_string(path)
        try:
            outcomes.append(handler(parsed, delivery_id=delivery_id))
        except Exception as exc:
            exc.add_note(f"in {path}, one of the {event} handlers")
            failed = failed or exc
    if failed is not None:
        raise failed
    return outcome_combined(outcomes)


def outcome_combined(outcomes: list[Outcome]) -> Outcome:
    """The handlers that acted, in their words; when none did, the first one's reason."""
    acting = [o for o in outcomes if not o.ignored]
    if not acting:
        return outcomes[0]
    decision = next((o.decision for o in acting if o.decision), "")
    then = tuple(step for o in acting for step in o.then)
    return Outcome(text="; ".join(o.text for o in acting), decision=decision, then=then)
