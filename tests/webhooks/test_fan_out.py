"""An event's handlers run in turn, each on its own: one that raises keeps none of the
others from doing their part, and the delivery is tried again for it."""

from __future__ import annotations

import pytest

from tests.helpers import payload
from webhooks import routing
from webhooks.routing import Outcome

CALLS: list[str] = []


def acts(payload, *, delivery_id):
    CALLS.append("acts")
    return Outcome("comment recorded for 1 task", decision="")


def admits(payload, *, delivery_id):
    CALLS.append("admits")
    return Outcome("queued a review", decision=routing.Decision.ADMITTED)


def ignores(payload, *, delivery_id):
    CALLS.append("ignores")
    return Outcome.ignore("not addressed to Tasuku")


def explodes(payload, *, delivery_id):
    CALLS.append("explodes")
    raise RuntimeError("handler exploded")


@pytest.fixture
def handlers(monkeypatch):
    CALLS.clear()

    def use(*names: str) -> None:
        monkeypatch.setitem(routing.HANDLERS, "issue_comment", tuple(globals()[n] for n in names))

    return use


PAYLOAD = payload("issue_comment", "created")


def test_a_handler_that_raises_does_not_stop_the_others_and_its_error_is_raised(handlers):
    handlers("explodes", "acts")
    with pytest.raises(RuntimeError, match="handler exploded") as raised:
        routing.route("issue_comment", PAYLOAD, delivery_id=1)
    assert CALLS == ["explodes", "acts"]
    assert any("tests.webhooks.test_fan_out.explodes" in note for note in raised.value.__notes__)


def test_the_outcome_is_what_the_acting_handlers_said_with_the_decision_they_made(handlers):
    handlers("ignores", "admits", "acts")
    outcome = routing.route("issue_comment", PAYLOAD, delivery_id=1)
    assert CALLS == ["ignores", "admits", "acts"]
    assert (outcome.ignored, outcome.decision) == (False, routing.Decision.ADMITTED)
    assert outcome.text == "queued a review; comment recorded for 1 task"


def test_when_no_handler_acts_the_first_ones_reason_is_the_outcome(handlers):
    handlers("ignores", "acts")
    assert routing.route("issue_comment", PAYLOAD, delivery_id=1).text.startswith("comment")
    handlers("ignores")
    outcome = routing.route("issue_comment", PAYLOAD, delivery_id=1)
    assert (outcome.ignored, outcome.text) == (True, "not addressed to Tasuku")


def test_every_event_has_its_handlers_registered_by_the_apps_in_the_order_they_run():
    """Registered as calls from the apps' `ready()`, never named by strings."""
    named = {event: [routing.handler_name(h) for h in hs] for event, hs in routing.HANDLERS.items()}
    assert named == {
        "installation": ["repos.services.installation_event"],
        "installation_repositories": ["repos.services.installation_repositories_event"],
        "pull_request": [
            "reviews.intake.pull_requests.pull_request_event",
            "reviews.publication.fixes.pull_request_event",
        ],
        "push": ["repos.reviewer_sync.push_event"],
        "issue_comment": [
            "reviews.intake.triggers.issue_comment_event",
            "reviews.passes.events.issue_comment_event",
        ],
        "check_run": [
            "reviews.passes.events.check_run_event",
            "reviews.intake.triggers.check_run_event",
        ],
        "check_suite": [
            "reviews.passes.events.check_suite_event",
            "reviews.intake.triggers.check_suite_event",
        ],
        "status": ["reviews.passes.events.status_event"],
        "pull_request_review_comment": [
            "reviews.conversation.replies.review_comment_event",
            "reviews.passes.events.review_comment_event",
        ],
        "pull_request_review": ["reviews.passes.events.pull_request_review_event"],
        "pull_request_review_thread": ["reviews.conversation.replies.thread_event"],
        "workflow_run": ["reviews.actions.workflow.workflow_run_event"],
        "merge_group": ["reviews.intake.merge_queue.merge_group_event"],
    }
    routing.register("status", routing.HANDLERS["status"][0])  # a second ready(): no copy
    assert len(routing.HANDLERS["status"]) == 1
