"""A stored delivery is processed by a worker, retried with backoff, and failed after
three attempts; an operator can retry it; the sweeper loses nothing."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from tests.factories import WebhookDeliveryFactory
from tests.helpers import drain_queue, payload, post_webhook, queued_task_count
from webhooks import routing, services
from webhooks.models import DeliveryStatus, WebhookDelivery

pytestmark = pytest.mark.django_db


CALLS: list[int] = []


def explode(payload, *, delivery_id):
    CALLS.append(delivery_id)
    raise RuntimeError("handler exploded")


@pytest.fixture
def broken_handler(monkeypatch):
    """Route pull_request deliveries to a handler that raises, as a bug or an outage would."""
    CALLS.clear()
    monkeypatch.setitem(routing.HANDLERS, "pull_request", (explode,))
    return CALLS


def _make_due(delivery: WebhookDelivery) -> None:
    WebhookDelivery.objects.filter(pk=delivery.pk).update(next_attempt_at=timezone.now())


def test_a_delivery_for_an_unhandled_event_is_ignored_with_its_reason(
    client, fake_github, test_app, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        post_webhook(
            client,
            "check_suite",
            payload("check_suite", "requested"),
            secret=test_app.webhook_secret,
        )
    drain_queue()
    delivery = WebhookDelivery.objects.get()
    assert delivery.status == DeliveryStatus.IGNORED
    assert delivery.outcome == "check_suite.requested needs no action"
    assert delivery.attempts == 1


def test_an_unknown_event_is_ignored_not_failed_and_logged_at_info_with_why(caplog):
    caplog.set_level("INFO")
    delivery = WebhookDeliveryFactory(event="sponsorship", status=DeliveryStatus.RECEIVED)
    assert services.delivery_process(delivery.pk) == DeliveryStatus.IGNORED
    delivery.refresh_from_db()
    assert delivery.outcome == "Tasuku does not use sponsorship events"
    [refused] = [r for r in caplog.records if r.getMessage().startswith("delivery refused")]
    assert (refused.levelname, refused.reason, refused.exc_info) == (
        "INFO",
        "Tasuku does not use sponsorship events",
        None,
    )
    assert (refused.delivery, refused.event) == (delivery.delivery_id, "sponsorship")


def test_an_event_tasuku_knows_it_needs_not_is_ignored_without_a_refusal(caplog):
    caplog.set_level("INFO")
    delivery = WebhookDeliveryFactory(event="ping", status=DeliveryStatus.RECEIVED)
    assert services.delivery_process(delivery.pk) == DeliveryStatus.IGNORED
    assert not [r for r in caplog.records if r.getMessage().startswith("delivery refused")]


def test_a_failing_delivery_is_retried_with_backoff_and_fails_after_three_attempts(broken_handler):
    delivery = WebhookDeliveryFactory(
        event="pull_request", payload=payload("pull_request", "opened")
    )
    before = timezone.now()

    assert services.delivery_process(delivery.pk) == DeliveryStatus.RETRYING
    delivery.refresh_from_db()
    assert delivery.attempts == 1
    assert "handler exploded" in delivery.last_error
    assert delivery.next_attempt_at >= before + timedelta(seconds=30)

    _make_due(delivery)
    assert services.delivery_process(delivery.pk) == DeliveryStatus.RETRYING
    delivery.refresh_from_db()
    assert delivery.next_attempt_at >= timezone.now() + timedelta(seconds=59)

    _make_due(delivery)
    assert services.delivery_process(delivery.pk) == DeliveryStatus.FAILED
    delivery.refresh_from_db()
    assert delivery.status == DeliveryStatus.FAILED
    assert delivery.attempts == 3
    assert "RuntimeError: handler exploded" in delivery.last_error
    assert len(broken_handler) == 3
    # A fourth doorbell (a redelivered task) cannot take it again.
    assert services.delivery_process(delivery.pk) == "not claimed"


def test_a_permanent_error_fails_the_delivery_at_once(monkeypatch):
    from repos.github import GitHubError

    def refuse(payload, *, delivery_id):
        raise GitHubError("GitHub answered 404 (Not Found)", permanent=True, status=404)

    monkeypatch.setattr(
        services,
        "route",
        lambda event, payload, delivery_id: refuse(payload, delivery_id=delivery_id),
    )
    delivery = WebhookDeliveryFactory(event="pull_request")
    assert services.delivery_process(delivery.pk) == DeliveryStatus.FAILED
    delivery.refresh_from_db()
    assert delivery.attempts == 1
    assert "404" in delivery.last_error


def test_two_workers_with_the_same_doorbell_process_it_once():
    delivery = WebhookDeliveryFactory(event="ping")
    first = services.delivery_claim(delivery.pk)
    second = services.delivery_claim(delivery.pk)
    assert first is not None
    assert second is None


def test_the_status_page_retry_requeues_a_failed_delivery_and_a_worker_processes_it(
    operator_client, django_capture_on_commit_callbacks
):
    delivery = WebhookDeliveryFactory(
        event="sponsorship", status=DeliveryStatus.FAILED, attempts=3, last_error="boom"
    )
    page = operator_client.get("/status/?status=failed")
    assert b"Retry" in page.content and b"boom" in page.content

    with django_capture_on_commit_callbacks(execute=True):
        response = operator_client.post(
            f"/status/deliveries/{delivery.pk}/retry", {"next": "/status/"}
        )
    assert response.status_code == 302
    delivery.refresh_from_db()
    assert delivery.status == DeliveryStatus.RECEIVED
    assert delivery.attempts == 0
    assert queued_task_count() == 1

    drain_queue()
    delivery.refresh_from_db()
    assert delivery.status == DeliveryStatus.IGNORED
    assert delivery.attempts == 1


def test_retry_leaves_a_delivery_that_has_not_failed_alone(operator_client):
    delivery = WebhookDeliveryFactory(event="ping", status=DeliveryStatus.PROCESSED)
    assert operator_client.post(f"/status/deliveries/{delivery.pk}/retry").status_code == 302
    delivery.refresh_from_db()
    assert delivery.status == DeliveryStatus.PROCESSED
    assert queued_task_count() == 0


def test_the_status_page_is_for_staff_only(client, django_user_model):
    assert client.get("/status/").status_code == 302
    user = django_user_model.objects.create_user("dev", password="pw")
    client.force_login(user)
    assert client.get("/status/").status_code == 302
    delivery = WebhookDeliveryFactory(status=DeliveryStatus.FAILED)
    client.post(f"/status/deliveries/{delivery.pk}/retry")
    delivery.refresh_from_db()
    assert delivery.status == DeliveryStatus.FAILED


def test_the_status_page_finds_deliveries_by_repository_and_pull_request(staff_client):
    WebhookDeliveryFactory(
        event="pull_request", repository_full_name="acme/api", pr_number=7, outcome="admitted 7"
    )
    WebhookDeliveryFactory(
        event="pull_request", repository_full_name="acme/api", pr_number=8, outcome="admitted 8"
    )
    page = staff_client.get("/status/", {"q": "acme/api#7"})
    assert b"admitted 7" in page.content
    assert b"admitted 8" not in page.content


def test_the_admin_action_retries_failed_deliveries(staff_client, django_user_model):
    admin = django_user_model.objects.create_superuser("root", password="pw")
    staff_client.force_login(admin)
    failed = WebhookDeliveryFactory(status=DeliveryStatus.FAILED, attempts=3)
    done = WebhookDeliveryFactory(status=DeliveryStatus.PROCESSED)
    staff_client.post(
        "/admin/webhooks/webhookdelivery/",
        {"action": "retry", "_selected_action": [failed.pk, done.pk]},
    )
    failed.refresh_from_db()
    done.refresh_from_db()
    assert failed.status == DeliveryStatus.RECEIVED
    assert done.status == DeliveryStatus.PROCESSED


class TestSweeper:
    def test_it_rings_again_for_a_received_delivery_whose_doorbell_was_lost(self):
        # A web process killed between commit and enqueue leaves a row and no task.
        delivery = WebhookDeliveryFactory(
            event="ping", next_attempt_at=timezone.now() - timedelta(seconds=1)
        )
        assert queued_task_count() == 0
        assert services.deliveries_sweep()["rung"] == 1
        assert queued_task_count() == 1
        # ... and does not ring again at the next sweep while the task waits.
        assert services.deliveries_sweep()["rung"] == 0
        drain_queue()
        delivery.refresh_from_db()
        assert delivery.status == DeliveryStatus.IGNORED

    def test_it_does_not_ring_for_a_delivery_still_within_its_grace_period(self):
        WebhookDeliveryFactory(event="ping", next_attempt_at=timezone.now() + timedelta(minutes=1))
        assert services.deliveries_sweep()["rung"] == 0

    def test_it_hands_a_delivery_held_by_a_dead_worker_to_another(self):
        delivery = WebhookDeliveryFactory(event="ping")
        assert services.delivery_claim(delivery.pk) is not None  # ... and the worker dies
        later = timezone.now() + services.LEASE + timedelta(seconds=1)

        result = services.deliveries_sweep(now=later)

        assert result == {"failed": 0, "requeued": 1, "rung": 1}
        delivery.refresh_from_db()
        assert delivery.status == DeliveryStatus.RETRYING
        assert "worker stopped" in delivery.last_error
        drain_queue()
        delivery.refresh_from_db()
        assert delivery.status == DeliveryStatus.IGNORED
        assert delivery.attempts == 2

    def test_it_fails_a_delivery_whose_last_attempt_died_with_its_worker(self):
        delivery = WebhookDeliveryFactory(event="ping", attempts=2)
        assert services.delivery_claim(delivery.pk) is not None
        later = timezone.now() + services.LEASE + timedelta(seconds=1)
        assert services.deliveries_sweep(now=later)["failed"] == 1
        delivery.refresh_from_db()
        assert delivery.status == DeliveryStatus.FAILED

    def test_it_rings_for_retries_that_are_due(self):
        WebhookDeliveryFactory(
            event="ping",
            status=DeliveryStatus.RETRYING,
            attempts=1,
            next_attempt_at=timezone.now() - timedelta(seconds=1),
        )
        WebhookDeliveryFactory(
            event="ping",
            status=DeliveryStatus.RETRYING,
            attempts=1,
            next_attempt_at=timezone.now() + timedelta(minutes=5),
        )
        assert services.deliveries_sweep()["rung"] == 1


@pytest.mark.parametrize(
    ("change", "says"),
    [
        (lambda b: b.update(pull_request=None), "`pull_request` should be an object, not null"),
        (
            lambda b: b["pull_request"].update(number=True),
            "`pull_request.number` should be an integer, not bool",
        ),
        (
            lambda b: b["pull_request"].update(number="7"),
            "`pull_request.number` should be an integer, not str",
        ),
        (
            lambda b: b["pull_request"]["head"].update(sha=None),
            "`pull_request.head.sha` should be a",
        ),
        (lambda b: b.update(repository=[]), "`repository` should be an object, not list"),
    ],
    ids=["null", "bool-number", "string-number", "null-sha", "list-repository"],
)
def test_a_payload_of_the_wrong_types_is_ignored_with_the_reason_never_retried(
    fake_github, client, test_app, change, says
):
    from reviews.models import ReviewRun
    from tests.contract.webhooks import webhook_violations
    from tests.helpers import drain_queue, payload, post_webhook

    body = payload("pull_request", "opened")
    change(body)
    assert webhook_violations("pull_request", body)  # malformed by GitHub's schemas too
    assert (
        post_webhook(
            client, "pull_request", body, secret=test_app.webhook_secret, validate=False
        ).status_code
        == 202
    )
    drain_queue()
    delivery = WebhookDelivery.objects.get()
    assert (delivery.status, delivery.attempts, delivery.last_error) == ("ignored", 1, "")
    assert says in delivery.outcome
    assert not ReviewRun.objects.exists()
