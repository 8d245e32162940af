"""The intake's hot path: one statement writes the delivery and the doorbell that rings
a worker for it — one round trip on PostgreSQL, no BEGIN/COMMIT and no health-check
SELECT — and a connection the database dropped is replaced once, transparently."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from tests.helpers import drain_queue, post_webhook, queued_tasks
from webhooks.models import DeliveryStatus, WebhookDelivery

pytestmark = pytest.mark.django_db(transaction=True)


# "ping_like" is no event of GitHub's (so no schema can hold it: validate=False): a
# delivery stored, then ignored as not ours, and nothing else.


@pytest.fixture
def secret(fake_github, test_app) -> str:
    return test_app.webhook_secret


def test_a_delivery_and_its_doorbell_are_written_by_one_statement(client, secret):
    with CaptureQueriesContext(connection) as queries:
        answer = post_webhook(client, "ping_like", {"zen": "Keep it logically awesome."},
                              secret=secret, delivery_id="one-statement", validate=False)  # fmt: skip
    assert answer.status_code == 202, answer.content
    statements = [q["sql"] for q in queries.captured_queries]
    if connection.vendor == "postgresql":
        assert len(statements) == 1, statements
        assert statements[0].startswith("WITH stored AS (INSERT INTO")
    else:  # SQLite runs in the process: both inserts in one transaction
        assert [s.split()[0] for s in statements] == ["BEGIN", "INSERT", "INSERT", "COMMIT"]
    # The doorbell names the delivery by GitHub's ids; a worker finds it by them.
    [(func, args)] = queued_tasks("webhooks.tasks.delivery_process")
    assert args == ("123456", "one-statement")  # (hook id, delivery id)
    drain_queue()
    assert WebhookDelivery.objects.get().status == DeliveryStatus.IGNORED  # not ours


def test_a_copy_already_stored_writes_nothing_and_rings_nothing(client, secret):
    for _ in range(2):
        answer = post_webhook(
            client, "ping_like", {"x": 1}, secret=secret, delivery_id="twice", validate=False
        )
    assert answer.status_code == 200 and answer.json()["status"] == "duplicate"
    assert WebhookDelivery.objects.count() == 1
    assert len(queued_tasks("webhooks.tasks.delivery_process")) == 1


@pytest.mark.skipif("connection.vendor != 'postgresql'")
def test_a_connection_the_database_dropped_is_replaced_once_and_the_delivery_stored(client, secret):
    post_webhook(client, "ping_like", {"x": 1}, secret=secret, delivery_id="warm", validate=False)
    connection.connection.close()  # the server side went away behind Django's back
    answer = post_webhook(
        client, "ping_like", {"x": 2}, secret=secret, delivery_id="after", validate=False
    )
    assert answer.status_code == 202, answer.content
    assert WebhookDelivery.objects.filter(delivery_id="after").exists()


def test_an_idle_worker_starts_the_review_a_delivery_queued_at_once(
    client, secret, fake_github, settings
):
    from reviews.models import ReviewRun, RunStatus
    from tests.gitworld import REPO, world_build
    from tests.helpers import pull_request_payload

    settings.TASUKU_INLINE_FIRST_RUN = True
    world = world_build(fake_github)
    body = pull_request_payload(world.fake, world.repo, world.pull, action="opened")
    assert post_webhook(client, "pull_request", body, secret=secret).status_code == 202
    # Only the delivery's own task runs: the review it queued is done within it.
    drain_queue(only="webhooks.tasks.delivery_process")
    run = ReviewRun.objects.get()
    assert run.status == RunStatus.COMPLETED
    assert len(world.fake.reviews_of(REPO, 7)) == 1
    # Its doorbell, still rung, finds nothing to do.
    assert drain_queue(only="reviews.tasks.run_process") == ["not claimed"]


def test_a_busy_worker_leaves_the_review_to_the_queue(client, secret, fake_github, settings):
    from django_q.tasks import async_task

    from reviews.models import ReviewRun, RunStatus
    from tests.gitworld import world_build
    from tests.helpers import pull_request_payload

    settings.TASUKU_INLINE_FIRST_RUN = True
    world = world_build(fake_github)
    async_task("webhooks.tasks.deliveries_sweep")  # other work waiting
    body = pull_request_payload(world.fake, world.repo, world.pull, action="opened")
    post_webhook(client, "pull_request", body, secret=secret)
    drain_queue(only="webhooks.tasks.delivery_process")
    assert ReviewRun.objects.get().status == RunStatus.QUEUED


@pytest.mark.skipif("connection.vendor != 'postgresql'")
def test_a_pooler_that_forgets_prepared_statements_costs_no_delivery(
    client, secret, monkeypatch, caplog
):
    """Behind a transaction-mode pooler, the next delivery may reach a database connection
    that never saw the statement prepared: it is sent again unprepared, stored, and the
    process prepares it no more."""
    from webhooks import services

    monkeypatch.setattr(services, "_prepare", True)
    assert (
        post_webhook(client, "ping_like", {"x": 1}, secret=secret, validate=False).status_code
        == 202
    )
    with connection.cursor() as cursor:  # as another server connection would be:
        cursor.execute("SELECT name FROM pg_prepared_statements")
        [(name,)] = cursor.fetchall()
        cursor.execute(f'DEALLOCATE "{name}"')
    answer = post_webhook(
        client, "ping_like", {"x": 2}, secret=secret, delivery_id="pooled", validate=False
    )
    assert answer.status_code == 202, answer.content
    assert WebhookDelivery.objects.filter(delivery_id="pooled").exists()
    assert services._prepare is False
    assert "unprepared from now on" in caplog.text
    assert (
        post_webhook(client, "ping_like", {"x": 3}, secret=secret, validate=False).status_code
        == 202
    )
