"""A delivery's payload is parsed into its event's model before any handler runs: what
GitHub sends parses (unknown fields and its nulls included); anything else is recorded
as an ignored, malformed delivery naming the field, processed once and never retried,
and nothing is created from it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from repos.models import Installation, Repository
from reviews.models import ReviewRun
from tests.contract.webhooks import webhook_violations
from tests.helpers import FIXTURES, drain_queue, payload, post_webhook, queued_task_count
from webhooks import routing, services
from webhooks.models import DeliveryStatus, WebhookDelivery
from webhooks.payloads import MODELS, Malformed, parse

RECORDED = sorted(
    path.stem for path in FIXTURES.glob("*.json") if path.stem.split("__")[0] in MODELS
)


@pytest.mark.parametrize("name", RECORDED)
def test_every_recorded_payload_parses_as_its_events_model(name):
    event, variant = name.split("__")
    parsed = parse(event, payload(event, variant))
    assert isinstance(parsed, MODELS[event]), parsed


def test_every_event_with_handlers_has_a_model():
    assert set(routing.HANDLERS) == set(MODELS)


def test_a_parsed_payload_keeps_the_json_it_came_from_and_cannot_be_changed():
    body = payload("workflow_run", "completed")
    parsed = parse("workflow_run", body)
    assert parsed.raw is body
    assert parsed.workflow_run.id == body["workflow_run"]["id"]
    with pytest.raises(ValueError, match="frozen"):
        parsed.workflow_run.id = 1


def test_unknown_fields_and_the_nulls_github_sends_are_accepted():
    body = payload("pull_request", "opened")
    del body["installation"]  # a repository webhook's delivery has none
    body["a_field_github_adds_next_year"] = {"nested": [1, 2]}
    body["pull_request"].update(user=None, merged=None, changed_files=None, labels=None)
    body["pull_request"]["head"]["repo"] = None  # the fork was deleted
    parsed = parse("pull_request", body)
    assert not isinstance(parsed, Malformed), parsed
    assert (parsed.installation, parsed.pull_request.user) == (None, None)
    assert parsed.pull_request.merged is None

    review = payload("pull_request_review", "submitted")
    review["review"].update(body=None, user=None)
    assert parse("pull_request_review", review).review.body is None

    comment = payload("pull_request_review_comment", "created")
    comment["comment"].update(line=None, in_reply_to_id=None)
    assert parse("pull_request_review_comment", comment).comment.line is None

    check = payload("check_run", "completed")
    check["check_run"]["external_id"] = None
    assert parse("check_run", check).check_run.external_id is None

    run = payload("workflow_run", "requested")
    run["workflow_run"]["conclusion"] = None
    assert parse("workflow_run", run).workflow_run.conclusion is None

    installed = payload("installation", "created")
    installed["installation"]["account"] = None
    del installed["repositories"]
    assert parse("installation", installed).repositories is None

    on_an_issue = payload("issue_comment", "created")
    on_an_issue["issue"].pop("pull_request", None)
    assert not parse("issue_comment", on_an_issue).issue.is_pull_request


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ([], "the payload should be an object, not list []"),
        (
            {k: v for k, v in payload("pull_request", "opened").items() if k != "pull_request"},
            "`pull_request` is missing",
        ),
        (
            {**payload("pull_request", "opened"), "pull_request": "#7"},
            "`pull_request` should be an object, not str '#7'",
        ),
    ],
    ids=["a-list", "no-pull-request", "a-string-for-an-object"],
)
def test_the_problem_is_one_sentence_naming_the_field(body, says):
    assert parse("pull_request", body) == Malformed(says)


def test_a_long_value_is_cut_short_in_the_problem():
    body = payload("check_suite", "completed")
    body["check_suite"]["head_sha"] = ["a" * 100]
    problem = parse("check_suite", body).problem
    assert problem.startswith("`check_suite.head_sha` should be a string, not list ['aaa")
    assert len(problem) < 120


SEEN: list[Any] = []


def record_payload(payload, *, delivery_id):
    SEEN.append(payload)
    return routing.Outcome("seen")


@pytest.fixture
def recording_handler(monkeypatch) -> list[Any]:
    """check_suite deliveries go to a handler that keeps what it was given."""
    SEEN.clear()
    monkeypatch.setitem(routing.HANDLERS, "check_suite", (record_payload,))
    return SEEN


def test_a_handler_is_given_its_events_model(recording_handler):
    body = payload("check_suite", "completed")
    assert routing.route("check_suite", body, delivery_id=1).text == "seen"
    assert [type(p).__name__ for p in recording_handler] == ["CheckSuiteEvent"]
    assert recording_handler[0].check_suite.head_sha == body["check_suite"]["head_sha"]


def test_no_handler_runs_on_a_malformed_payload(recording_handler):
    body = payload("check_suite", "completed")
    del body["check_suite"]
    outcome = routing.route("check_suite", body, delivery_id=1)
    assert outcome == routing.Outcome.ignore(
        "malformed: not shaped as GitHub sends check_suite events: `check_suite` is missing"
    )
    assert recording_handler == []


# --- through the intake: signed, stored, processed ----------------------------------------


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    """A change to a payload: the field at dotted `path` (list items by index) becomes
    `value`, or is removed when `value` is MISSING."""

    def change(body: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        node: Any = body
        for part in parents:
            node = node[int(part)] if isinstance(node, list) else node[part]
        if value is MISSING:
            del node[last]
        else:
            node[last] = value

    return change


MISSING = object()

# (event, recorded variant, change, what the outcome says)
MALFORMED = {
    "a_pull_request_whose_draft_flag_is_a_string": (
        "pull_request", "opened", _set("pull_request.draft", "false"),
        "`pull_request.draft` should be a boolean, not str 'false'",
    ),
    "a_pull_request_without_a_head_sha": (
        "pull_request", "synchronize", _set("pull_request.head.sha", MISSING),
        "`pull_request.head.sha` is missing",
    ),
    "a_comment_whose_issue_number_is_a_string": (
        "issue_comment", "created", _set("issue.number", "7"),
        "`issue.number` should be an integer, not str '7'",
    ),
    "a_comment_without_its_repository": (
        "issue_comment", "created", _set("repository", MISSING), "`repository` is missing",
    ),
    "an_inline_comment_without_an_id": (
        "pull_request_review_comment", "created", _set("comment.id", MISSING),
        "`comment.id` is missing",
    ),
    "an_inline_comment_replying_to_a_string": (
        "pull_request_review_comment", "created", _set("comment.in_reply_to_id", "12"),
        "`comment.in_reply_to_id` should be an integer, not str '12'",
    ),
    "a_review_whose_author_login_is_a_number": (
        "pull_request_review", "submitted", _set("review.user.login", 42),
        "`review.user.login` should be a string, not int 42",
    ),
    "a_resolved_thread_whose_comments_are_not_a_list": (
        "pull_request_review_thread", "resolved", _set("thread.comments", {"id": 1}),
        "`thread.comments` should be a list, not dict {'id': 1}",
    ),
    "a_resolved_thread_whose_first_comment_has_no_id": (
        "pull_request_review_thread", "resolved", _set("thread.comments.0.id", None),
        "`thread.comments[0].id` should be an integer, not null",
    ),
    "a_check_run_whose_id_is_a_string": (
        "check_run", "completed", _set("check_run.id", "4"),
        "`check_run.id` should be an integer, not str '4'",
    ),
    "a_check_suite_whose_head_sha_is_null": (
        "check_suite", "completed", _set("check_suite.head_sha", None),
        "`check_suite.head_sha` should be a string, not null",
    ),
    "a_status_without_a_sha": ("status", "success", _set("sha", MISSING), "`sha` is missing"),
    "a_workflow_run_whose_id_is_a_boolean": (
        "workflow_run", "completed", _set("workflow_run.id", True),
        "`workflow_run.id` should be an integer, not bool True",
    ),
    "a_merge_group_whose_head_sha_is_a_number": (
        "merge_group", "checks_requested", _set("merge_group.head_sha", 7),
        "`merge_group.head_sha` should be a string, not int 7",
    ),
    "an_installation_whose_id_is_a_string": (
        "installation", "created", _set("installation.id", "1"),
        "`installation.id` should be an integer, not str '1'",
    ),
    "an_installation_whose_repository_is_private_in_words": (
        "installation", "created", _set("repositories.0.private", "yes"),
        "`repositories[0].private` should be a boolean, not str 'yes'",
    ),
    "added_repositories_that_are_not_a_list": (
        "installation_repositories", "added", _set("repositories_added", None),
        "`repositories_added` should be a list, not null",
    ),
}  # fmt: skip


@pytest.mark.django_db
@pytest.mark.parametrize(("event", "variant", "change", "says"), MALFORMED.values(), ids=MALFORMED)
def test_it_ignores_a_malformed_delivery_once_naming_the_field_and_creates_nothing(
    fake_github,
    client,
    test_app,
    django_capture_on_commit_callbacks,
    event,
    variant,
    change,
    says,
    caplog,
):
    caplog.set_level("INFO", logger="webhooks.routing")
    body = payload(event, variant)
    change(body)
    assert webhook_violations(event, body)  # malformed by GitHub's schemas too
    with django_capture_on_commit_callbacks(execute=True):
        response = post_webhook(client, event, body, secret=test_app.webhook_secret, validate=False)
    assert response.status_code == 202
    drain_queue()

    delivery = WebhookDelivery.objects.get()
    assert (delivery.status, delivery.attempts, delivery.last_error) == ("ignored", 1, "")
    assert delivery.outcome == f"malformed: not shaped as GitHub sends {event} events: {says}"
    assert delivery.processed_at is not None and delivery.next_attempt_at is None
    # Found in the log at INFO, with why, the delivery's id and no traceback.
    [refused] = [r for r in caplog.records if r.getMessage().startswith("delivery refused")]
    assert (refused.levelname, refused.reason, refused.exc_info) == ("INFO", delivery.outcome, None)
    assert refused.delivery == delivery.delivery_id
    # Finished: no retry is due, and another doorbell cannot take it again.
    assert queued_task_count() == 0
    assert services.delivery_process(delivery.pk) == "not claimed"
    assert not Installation.objects.exists()
    assert not Repository.objects.exists()
    assert not ReviewRun.objects.exists()


def test_it_ignores_a_pull_request_whose_number_is_a_boolean(
    fake_github, client, test_app, django_capture_on_commit_callbacks, db
):
    body = payload("pull_request", "opened")
    body["pull_request"]["number"] = True
    with django_capture_on_commit_callbacks(execute=True):
        post_webhook(client, "pull_request", body, secret=test_app.webhook_secret, validate=False)
    drain_queue()
    delivery = WebhookDelivery.objects.get()
    assert delivery.status == DeliveryStatus.IGNORED
    assert delivery.outcome == (
        "malformed: not shaped as GitHub sends pull_request events: "
        "`pull_request.number` should be an integer, not bool True"
    )
    assert delivery.decision == ""
    assert not ReviewRun.objects.exists()


def test_the_status_page_lists_a_malformed_delivery_as_ignored_with_its_reason(
    fake_github, client, test_app, staff_client, django_capture_on_commit_callbacks
):
    body = payload("check_run", "completed")
    body["check_run"]["head_sha"] = 7
    with django_capture_on_commit_callbacks(execute=True):
        post_webhook(client, "check_run", body, secret=test_app.webhook_secret, validate=False)
    drain_queue()
    page = staff_client.get("/status/", {"status": "ignored"}).content.decode()
    assert "malformed: not shaped as GitHub sends check_run events:" in page
    assert "`check_run.head_sha` should be a string, not int 7" in page
