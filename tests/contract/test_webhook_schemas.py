"""The webhook payloads the tests send are held to GitHub's published schemas
(tests/contract/webhooks.py), and the check can fail."""

from __future__ import annotations

import json

import pytest

from tests.contract.webhooks import definition_for, webhook_schema, webhook_violations
from tests.helpers import FIXTURES, payload, post_webhook

RECORDED = sorted(path.stem for path in FIXTURES.glob("*.json"))


def test_the_vendored_schemas_name_their_package_and_version():
    vendored = webhook_schema()["x-tasuku-vendored"]
    assert vendored["package"] == "@octokit/webhooks-schemas"
    assert vendored["version"] and vendored["license"] == "MIT"
    assert len(vendored["source_sha256"]) == 64


@pytest.mark.parametrize("name", RECORDED)
def test_every_recorded_payload_is_what_github_sends_for_its_event_and_action(name):
    event = name.split("__")[0]
    assert webhook_violations(event, payload(event, name.split("__")[1])) == []


def test_the_definition_is_chosen_by_event_and_action():
    assert definition_for("pull_request", "opened") == "pull_request$opened"
    assert definition_for("ping", None) == "ping$event"
    assert definition_for("status", None) == "status$event"
    assert definition_for("pull_request", "frobbed") is None
    assert definition_for("ping_like", None) is None


def test_a_payload_missing_what_github_always_sends_fails_naming_event_action_and_field():
    body = payload("pull_request", "opened")
    del body["pull_request"]["head"]
    body["number"] = "7"
    assert webhook_violations("pull_request", body) == [
        "/number: '7' is not of type 'integer'",
        "/pull_request: 'head' is a required property",
    ]


def test_a_member_no_schema_describes_and_a_wrong_format_fail():
    body = payload("check_run", "completed")
    body["check_run"]["started_at"] = "yesterday"
    body["repository"]["owner"]["user_view_type"] = "public"  # REST's, not the webhook's
    problems = webhook_violations("check_run", body)
    assert "/check_run/started_at: 'yesterday' is not a 'date-time'" in problems
    assert any(
        p.startswith("/repository/owner:") and "'user_view_type' was unexpected" in p
        for p in problems
    )


def test_an_action_or_event_github_does_not_have_fails():
    body = payload("pull_request", "opened") | {"action": "frobbed"}
    assert webhook_violations("pull_request", body) == [
        "GitHub's webhook schema has no event 'pull_request' with action 'frobbed'"
    ]
    assert webhook_violations("ping_like", {"zen": "hi"}) != []


def test_post_webhook_refuses_to_send_a_payload_github_would_not(client):
    body = payload("installation", "suspend")
    body["installation"]["suspended_by"] = None
    with pytest.raises(AssertionError) as failure:
        post_webhook(client, "installation", body, secret="s")
    message = str(failure.value)
    assert "webhook installation (action 'suspend')" in message
    assert "/installation/suspended_by: None is not of type 'object'" in message
    assert "validate=False" in message  # how to send one malformed on purpose


def test_post_webhook_refuses_bytes_that_are_not_json_unless_told(client):
    with pytest.raises(AssertionError, match="the body is not JSON"):
        post_webhook(client, "pull_request", b"{not json", secret="s")


@pytest.mark.django_db
def test_validate_false_sends_a_malformed_payload_as_it_is(client, settings):
    settings.GITHUB_WEBHOOK_SECRET = "s"
    body = json.dumps({"action": "opened"}).encode()
    response = post_webhook(client, "pull_request", body, secret="wrong", validate=False)
    assert response.status_code in (401, 503)  # refused by Tasuku, not by the test helper
