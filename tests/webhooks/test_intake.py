"""POST /webhooks/github: verify, store, ring the doorbell, answer."""

from __future__ import annotations

import json
import threading

import pytest
from django.db import connection
from django.test import Client

from tests.helpers import payload, post_webhook, queued_task_count, signed_webhook
from webhooks.models import DeliveryStatus, WebhookDelivery
from webhooks.signature import signature_for

pytestmark = pytest.mark.django_db


@pytest.fixture
def secret(fake_github, test_app) -> str:
    return test_app.webhook_secret


def test_it_stores_a_signed_delivery_and_answers_202_with_its_id(client, secret):
    body = payload("pull_request", "opened")
    response = post_webhook(client, "pull_request", body, secret=secret, delivery_id="d-1")

    assert response.status_code == 202
    assert response.json() == {"status": "accepted", "delivery": "d-1"}
    delivery = WebhookDelivery.objects.get()
    assert delivery.delivery_id == "d-1"
    assert delivery.hook_id == "123456"
    assert delivery.event == "pull_request"
    assert delivery.action == "opened"
    assert delivery.installation_id == body["installation"]["id"]
    assert delivery.repository_full_name == "Codertocat/Hello-World"
    assert delivery.pr_number == 2
    assert delivery.payload == body
    assert delivery.status == DeliveryStatus.RECEIVED


def test_the_doorbell_is_written_in_the_deliverys_transaction(fake_github):
    """Stored together or not at all: a worker never finds a doorbell without its
    delivery, nor a committed delivery without its doorbell."""
    from django.db import transaction

    from webhooks.services import delivery_record

    with pytest.raises(RuntimeError), transaction.atomic():
        delivery_record(hook_id="1", delivery_id="x", event="pull_request", text="{}", payload={})
        assert queued_task_count() == 1
        raise RuntimeError("the request failed before commit")
    assert queued_task_count() == 0
    assert not WebhookDelivery.objects.exists()

    delivery_record(hook_id="1", delivery_id="x", event="pull_request", text="{}", payload={})
    assert queued_task_count() == 1
    assert WebhookDelivery.objects.count() == 1


def test_with_another_broker_the_doorbell_rings_after_commit(
    fake_github, settings, django_capture_on_commit_callbacks
):
    from webhooks.services import delivery_record

    settings.Q_CLUSTER = {**settings.Q_CLUSTER, "orm": None, "redis": {}}
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        delivery_record(hook_id="1", delivery_id="y", event="pull_request", text="{}", payload={})
    assert len(callbacks) == 1
    assert queued_task_count() == 0


def test_it_refuses_an_unsigned_delivery_with_401_and_stores_nothing(client, secret):
    response = post_webhook(
        client, "pull_request", {"action": "opened"}, secret=secret, signature="", validate=False
    )
    assert response.status_code == 401
    assert not WebhookDelivery.objects.exists()


def test_it_refuses_a_delivery_signed_with_another_secret(client, secret, caplog):
    caplog.set_level("INFO", logger="webhooks.intake")
    response = post_webhook(
        client, "pull_request", {"action": "opened"}, secret="not the secret", validate=False
    )
    assert response.status_code == 401
    assert not WebhookDelivery.objects.exists()
    # Found in the log: why, and which delivery GitHub says it was.
    [refusal] = [r for r in caplog.records if r.getMessage().startswith("webhook refused")]
    assert refusal.levelname == "INFO" and refusal.exc_info is None  # no traceback
    assert (refusal.status, refusal.event) == (401, "pull_request")
    assert refusal.reason == "missing or invalid X-Hub-Signature-256"
    assert refusal.delivery and refusal.delivery in refusal.getMessage()


def test_a_non_ascii_signature_is_refused_with_401_and_logs_no_error(client, secret, caplog):
    caplog.set_level("INFO")
    body = payload("pull_request", "opened")
    signature = signature_for(secret, json.dumps(body).encode())
    response = post_webhook(
        client, "pull_request", body, secret=secret, signature=signature[:-1] + "\u00e9"
    )
    assert response.status_code == 401
    assert not WebhookDelivery.objects.exists()
    assert not [r for r in caplog.records if r.levelname in ("ERROR", "CRITICAL")]


def test_it_answers_503_and_stores_nothing_when_no_secret_is_configured(client, settings):
    settings.GITHUB_WEBHOOK_SECRET = ""
    response = post_webhook(client, "pull_request", {"action": "opened"}, secret="", validate=False)
    assert response.status_code == 503
    assert response.json()["error"] == "not configured"
    assert "GITHUB_WEBHOOK_SECRET" in response.json()["missing"]
    assert not WebhookDelivery.objects.exists()


def test_it_answers_503_when_the_app_has_a_secret_but_no_credentials(client, settings, secret):
    settings.GITHUB_PRIVATE_KEY = ""
    response = post_webhook(
        client, "pull_request", {"action": "opened"}, secret=secret, validate=False
    )
    assert response.status_code == 503
    assert response.json()["missing"] == ["GITHUB_PRIVATE_KEY or GITHUB_PRIVATE_KEY_PATH"]
    assert not WebhookDelivery.objects.exists()


def test_a_redelivery_answers_200_and_stores_nothing_new(client, secret):
    body = payload("pull_request", "opened")
    first = post_webhook(client, "pull_request", body, secret=secret, delivery_id="same")
    again = post_webhook(client, "pull_request", body, secret=secret, delivery_id="same")
    assert (first.status_code, again.status_code) == (202, 200)
    assert again.json()["status"] == "duplicate"
    assert WebhookDelivery.objects.count() == 1


def test_the_same_guid_from_another_hook_is_another_delivery(client, secret):
    body = payload("pull_request", "opened")
    post_webhook(client, "pull_request", body, secret=secret, delivery_id="g", hook_id="1")
    response = post_webhook(
        client, "pull_request", body, secret=secret, delivery_id="g", hook_id="2"
    )
    assert response.status_code == 202
    assert WebhookDelivery.objects.count() == 2


def test_a_redelivery_of_a_failed_delivery_queues_it_again(client, secret):
    body = payload("pull_request", "opened")
    post_webhook(client, "pull_request", body, secret=secret, delivery_id="f")
    WebhookDelivery.objects.update(status=DeliveryStatus.FAILED, attempts=3, last_error="boom")

    response = post_webhook(client, "pull_request", body, secret=secret, delivery_id="f")

    assert response.status_code == 200
    delivery = WebhookDelivery.objects.get()
    assert delivery.status == DeliveryStatus.RECEIVED
    assert delivery.attempts == 0


def test_ping_answers_200_and_is_recorded_as_ignored(client, secret):
    response = post_webhook(client, "ping", payload("ping", "default"), secret=secret)
    assert response.status_code == 200
    delivery = WebhookDelivery.objects.get()
    assert delivery.status == DeliveryStatus.IGNORED
    assert queued_task_count() == 0


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"HTTP_X_GITHUB_EVENT": ""}, "X-GitHub-Event"),
        ({"HTTP_X_GITHUB_DELIVERY": ""}, "X-GitHub-Delivery"),
    ],
)
def test_it_refuses_a_delivery_without_event_or_delivery_headers(client, secret, headers, expected):
    # A delivery GitHub would send (its payload held to GitHub's schema), a header blanked.
    raw, sent = signed_webhook("pull_request", payload("pull_request", "opened"), secret=secret)
    base = {f"HTTP_{name.upper().replace('-', '_')}": value for name, value in sent.items()
            if name != "Content-Type"}  # fmt: skip
    response = client.post(
        "/webhooks/github", data=raw, content_type="application/json", **{**base, **headers}
    )
    assert response.status_code == 400
    assert expected in response.json()["error"]
    assert not WebhookDelivery.objects.exists()


@pytest.mark.parametrize("raw", [b"{not json", b"[1, 2]", b"\xff\xfe"])
def test_it_refuses_a_signed_body_that_is_not_a_json_object(client, secret, raw):
    response = post_webhook(client, "pull_request", raw, secret=secret, validate=False)
    assert response.status_code == 400
    assert not WebhookDelivery.objects.exists()


def test_a_nul_character_in_a_payload_is_stored_not_refused(client, secret):
    body = payload("pull_request", "opened")
    body["pull_request"]["title"] = "bad\u0000title"
    response = post_webhook(client, "pull_request", body, secret=secret)
    assert response.status_code == 202
    title = WebhookDelivery.objects.get().payload["pull_request"]["title"]
    assert title in ("bad\u0000title", "bad\ufffdtitle")


def test_it_only_accepts_post(client, secret):
    assert client.get("/webhooks/github").status_code == 405


def test_a_body_of_25_mb_plus_one_byte_is_refused_with_413_and_nothing_stored(
    client, secret, settings
):
    limit = settings.TASUKU_WEBHOOK_MAX_BYTES
    assert limit == 25 * 1024 * 1024
    raw = b'{"pad": "' + b"x" * (limit + 1 - len(b'{"pad": ""}')) + b'"}'
    assert len(raw) == limit + 1
    response = post_webhook(client, "pull_request", raw, secret=secret, validate=False)
    assert response.status_code == 413
    assert not WebhookDelivery.objects.exists()


def test_a_body_of_exactly_25_mb_is_accepted(client, secret, settings):
    limit = settings.TASUKU_WEBHOOK_MAX_BYTES
    raw = b'{"pad": "' + b"x" * (limit - len(b'{"pad": ""}')) + b'"}'
    assert len(raw) == limit
    response = post_webhook(client, "push", raw, secret=secret, validate=False)
    assert response.status_code == 202
    assert WebhookDelivery.objects.count() == 1


@pytest.mark.django_db(transaction=True)
def test_concurrent_copies_of_one_delivery_store_one_row(fake_github, test_app):
    """Eight threads post the same delivery at once; the unique constraint decides."""
    body = payload("pull_request", "opened")
    barrier = threading.Barrier(8)
    statuses: list[int] = []
    lock = threading.Lock()

    def send() -> None:
        client = Client()
        barrier.wait()
        try:
            response = post_webhook(
                client, "pull_request", body, secret=test_app.webhook_secret, delivery_id="race"
            )
            with lock:
                statuses.append(response.status_code)
        finally:
            connection.close()

    threads = [threading.Thread(target=send) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert sorted(statuses) == [200] * 7 + [202]
    assert WebhookDelivery.objects.filter(delivery_id="race").count() == 1


def test_with_the_database_down_a_delivery_gets_503_and_a_retry_after_not_a_500(
    client, secret, monkeypatch
):
    from django.db import OperationalError

    def down(*args, **kwargs):
        raise OperationalError('connection to server at "127.0.0.1", port 5432 failed')

    monkeypatch.setattr("webhooks.services._delivery_insert", down)
    body = payload("pull_request", "opened")
    response = post_webhook(client, "pull_request", body, secret=secret, delivery_id="d-down")
    assert response.status_code == 503
    assert response["Retry-After"] == "60"
    assert "not stored" in response.json()["error"]


@pytest.mark.parametrize(
    ("raw", "says"),
    [
        (b'{"action": "opened", "n": NaN}', "NaN is not a JSON value"),
        (b'{"action": "opened", "n": Infinity}', "Infinity is not a JSON value"),
        (b'{"action": "opened", "n": -Infinity}', "-Infinity is not a JSON value"),
        (b'{"action": "opened", "title": "half \\ud800 a pair"}', "lone surrogate"),
        (b'{"action": "opened", "title": "\\udc00"}', "lone surrogate"),
        (b'{"a": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", "nested too deeply"),
    ],
    ids=["nan", "infinity", "minus-infinity", "high-surrogate", "low-surrogate", "deep"],
)
def test_json_no_database_can_hold_is_refused_with_400_and_nothing_stored(
    client, secret, raw, says
):
    response = post_webhook(client, "pull_request", raw, secret=secret, validate=False)
    assert response.status_code == 400
    assert says in response.json()["error"]
    assert not WebhookDelivery.objects.exists()


def test_a_whole_surrogate_pair_and_an_escaped_backslash_u_are_ordinary_text(client, secret):
    body = payload("pull_request", "opened")
    body["pull_request"]["title"] = "ship it 😀 and a literal \\ud800"
    response = post_webhook(client, "pull_request", body, secret=secret)
    assert response.status_code == 202
    stored = WebhookDelivery.objects.get()
    assert stored.payload["pull_request"]["title"] == "ship it 😀 and a literal \\ud800"


def test_the_body_is_kept_byte_exact_with_its_signature_and_the_delivery_page_verifies_it(
    client, secret, staff_client
):
    from webhooks.signature import signature_for, signature_valid

    # Odd spacing, keys out of order, a duplicate-looking escape and a NUL: jsonb keeps
    # none of these as sent; the signature covers exactly these bytes.
    raw = (
        b'{ "zeta":1,  "action" : "opened","installation":{"id":41},\n'
        b'  "title":"bad\\u0000title", "number": 1.0e0 }'
    )
    response = post_webhook(client, "ping", raw, secret=secret, validate=False)
    assert response.status_code == 200
    delivery = WebhookDelivery.objects.get()
    assert delivery.raw_body == raw
    assert delivery.signature == signature_for(secret, raw)
    assert signature_valid(secret, delivery.raw_body, delivery.signature)
    page = staff_client.get(f"/status/deliveries/{delivery.pk}/").content.decode()
    assert f"{len(raw)} bytes kept as received" in page
    assert "its signature verifies with the webhook secret" in page


def test_a_host_the_site_does_not_serve_is_refused_and_nothing_stored(client, secret):
    body = payload("pull_request", "opened")
    response = post_webhook(client, "pull_request", body, secret=secret, HTTP_HOST="evil.example")
    assert response.status_code == 400
    assert not WebhookDelivery.objects.exists()
