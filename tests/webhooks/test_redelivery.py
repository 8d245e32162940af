"""Deliveries GitHub could not make are asked for again: read from the App's delivery log
on the fake GitHub (as GitHub describes it), bounded, recorded on the status page."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from repos.deliveries import ASK_AGAIN_AFTER, MAX_ASKS, deliveries_recover
from tests.helpers import payload, post_webhook
from webhooks.models import Redelivery, WebhookDelivery

pytestmark = pytest.mark.django_db


@pytest.fixture
def log(fake_github, test_app):
    def add(guid, status_code, *, hours_ago=1.0, event="pull_request", action="opened"):
        return fake_github.hook_delivery_add(
            test_app.app_id, guid, event, action=action, status_code=status_code,
            delivered_at=timezone.now() - timedelta(hours=hours_ago), installation_id=41,
        )  # fmt: skip

    return add


def test_only_deliveries_tasuku_never_got_are_asked_for_again(fake_github, log, client, test_app):
    down = log("guid-down", 503)  # Tasuku's database was down: 503, nothing stored
    log("guid-fine", 202)
    log("guid-late", 502, hours_ago=2)
    log("guid-late", 202, hours_ago=1.5)  # a later attempt reached Tasuku
    log("guid-old", 503, hours_ago=80)  # past what GitHub keeps for redelivery
    stored = log("guid-stored", 500)  # answered an error after storing it: Tasuku's own
    post_webhook(client, "pull_request", payload("pull_request", "opened"),
                 secret=test_app.webhook_secret, delivery_id=stored.guid)  # fmt: skip
    timeout = log("guid-timeout", 0, hours_ago=3)  # no answer at all

    result = deliveries_recover()

    assert sorted(fake_github.hooks.asked) == sorted([down.id, timeout.id])
    assert result == {"read": 6, "missing": 2, "asked": 2, "errors": 0}  # the old one unread
    row = Redelivery.objects.get(guid="guid-down")
    assert (row.asks, row.event, row.action, row.github_delivery_id) == (
        1,
        "pull_request",
        "opened",
        down.id,
    )
    assert row.failed_status.startswith("503")


def test_an_event_is_asked_for_at_most_a_few_times_and_not_again_at_once(fake_github, log):
    fake_github.hooks.redelivery_status = 503  # Tasuku is still down when GitHub redelivers
    log("guid-down", 503)
    deliveries_recover()
    deliveries_recover()  # at once: not asked again
    assert len(fake_github.hooks.asked) == 1
    for _ in range(MAX_ASKS + 2):
        Redelivery.objects.update(asked_at=timezone.now() - ASK_AGAIN_AFTER - timedelta(seconds=1))
        deliveries_recover()
    assert len(fake_github.hooks.asked) == MAX_ASKS
    assert Redelivery.objects.get().asks == MAX_ASKS


def test_the_whole_window_is_read_page_by_page(fake_github, log):
    for n in range(150):
        log(f"guid-{n}", 202, hours_ago=1 + n / 100)
    missing = log("guid-deep", 503, hours_ago=5)  # on the second page
    result = deliveries_recover()
    assert fake_github.hooks.asked == [missing.id]
    assert result["read"] == 151
    listed = fake_github.requests(method="GET", path=r"^/app/hook/deliveries")
    assert len(listed) == 2 and "cursor" in listed[1].query


def test_github_failing_to_list_is_recorded_not_raised(fake_github, log):
    log("guid-down", 503)
    fake_github.inject(3, status=502, method="GET", path=r"^/app/hook/deliveries")
    assert deliveries_recover()["errors"] == 1
    assert not fake_github.hooks.asked


def test_a_delivery_lost_while_the_database_was_down_arrives_after_all(
    fake_github, log, client, test_app, monkeypatch, staff_client
):
    from django.db import OperationalError

    body = payload("pull_request", "opened")

    def down(*args, **kwargs):
        raise OperationalError("the database system is starting up")

    with monkeypatch.context() as patched:
        patched.setattr("webhooks.services._delivery_insert", down)
        answer = post_webhook(client, "pull_request", body, secret=test_app.webhook_secret,
                              delivery_id="guid-lost")  # fmt: skip
    assert answer.status_code == 503
    attempt = log("guid-lost", answer.status_code)  # what GitHub's log records

    deliveries_recover()
    assert fake_github.hooks.asked == [attempt.id]
    # GitHub redelivers it (same X-GitHub-Delivery): stored now.
    again = post_webhook(client, "pull_request", body, secret=test_app.webhook_secret,
                         delivery_id="guid-lost")  # fmt: skip
    assert again.status_code == 202
    assert WebhookDelivery.objects.filter(delivery_id="guid-lost").exists()
    Redelivery.objects.update(asked_at=timezone.now() - ASK_AGAIN_AFTER * 2)
    deliveries_recover()
    assert len(fake_github.hooks.asked) == 1  # stored: nothing more to ask
    page = staff_client.get("/status/").content.decode()
    assert "guid-lost" in page and "Redeliveries" in page
