"""The durable row queue (tasuku/durable.py), on a real table: one holder per row, a dead
holder's row handed on, a row that waits out GitHub's weather without spending attempts,
and an installation waiting out a rate limit putting every queue's work off."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from repos.github import GitHubError
from repos.models import Installation
from tasuku import durable
from tests.factories import WebhookDeliveryFactory
from tests.helpers import queued_task_count
from webhooks.models import DeliveryStatus, WebhookDelivery
from webhooks.services import DELIVERIES

pytestmark = pytest.mark.django_db


def delivery(**fields):
    return WebhookDeliveryFactory(event="pull_request", installation_id=41, **fields)


def test_one_claim_wins_and_only_its_attempt_can_finish_the_row():
    row = delivery()
    first = DELIVERIES.claim(row.pk)
    assert first == 1
    assert DELIVERIES.claim(row.pk) is None  # the same doorbell twice
    assert not DELIVERIES.finish(row.pk, first + 1, DeliveryStatus.PROCESSED)  # not its attempt
    assert DELIVERIES.finish(row.pk, first, DeliveryStatus.PROCESSED)
    assert not DELIVERIES.finish(row.pk, first, DeliveryStatus.PROCESSED)  # once


def test_a_dead_holders_row_is_handed_on_and_rung_and_the_old_holder_cannot_finish_it():
    row = delivery()
    first = DELIVERIES.claim(row.pk)
    later = timezone.now() + DELIVERIES.lease_for() + timedelta(seconds=1)
    assert DELIVERIES.sweep(now=later, lost={"last_error": "lost"}) == {
        "failed": 0, "requeued": 1, "rung": 1,
    }  # fmt: skip
    assert queued_task_count() == 1
    second = DELIVERIES.claim(row.pk)
    assert second == first + 1
    assert not DELIVERIES.finish(row.pk, first, DeliveryStatus.PROCESSED)


def test_a_row_whose_last_attempt_died_with_its_worker_fails():
    row = delivery(attempts=2)
    assert DELIVERIES.claim(row.pk) == 3
    later = timezone.now() + DELIVERIES.lease_for() + timedelta(seconds=1)
    assert DELIVERIES.sweep_lost(now=later) == {"failed": 1, "requeued": 0}
    assert WebhookDelivery.objects.get(pk=row.pk).status == DeliveryStatus.FAILED


def test_a_sweeper_back_from_a_database_outage_hands_on_no_row_before_a_lease(monkeypatch):
    """Cut off with the row's holder, it saw no renewal because none could be made: it
    judges the lease once it has been connected for one (tasuku/outage.py)."""
    from django.db import OperationalError

    from tasuku import outage

    ticks = [100.0]
    monkeypatch.setattr(outage, "OUTAGE", outage.Outage(clock=lambda: ticks[0]))
    row = delivery()
    first = DELIVERIES.claim(row.pk)
    later = timezone.now() + DELIVERIES.lease_for() + timedelta(seconds=1)
    outage.failed(OperationalError("server closed the connection unexpectedly"))
    ticks[0] += 30
    outage.answered()
    assert DELIVERIES.sweep_lost(now=later) == {"failed": 0, "requeued": 0}
    assert WebhookDelivery.objects.get(pk=row.pk).attempts == first
    ticks[0] += DELIVERIES.lease_for().total_seconds()
    assert DELIVERIES.sweep_lost(now=later) == {"failed": 0, "requeued": 1}


@pytest.mark.parametrize(
    ("exc", "kind", "why"),
    [
        (GitHubError("gone", permanent=True, status=404), durable.FAILED, "permanent"),
        (GitHubError("502", permanent=False, status=502), durable.DEFERRED, durable.UNAVAILABLE),
        (GitHubError("no answer", permanent=False), durable.DEFERRED, durable.UNAVAILABLE),
        (
            GitHubError("limited", permanent=False, status=403, retry_after=60),
            durable.DEFERRED,
            durable.RATE_LIMIT,
        ),  # fmt: skip
        (ValueError("a bug"), durable.RETRY, "transient"),
    ],
)
def test_what_a_failed_attempt_means(exc, kind, why):
    now = timezone.now()
    verdict = DELIVERIES.verdict(exc, attempt=1, deferrals=0, since=now, now=now)
    assert (verdict.kind, verdict.why) == (kind, why)
    if kind == durable.DEFERRED and why == durable.RATE_LIMIT:
        assert verdict.at >= now + timedelta(seconds=60)
    # The last attempt fails what would be retried, not what is deferred.
    last = DELIVERIES.verdict(exc, attempt=3, deferrals=0, since=now, now=now)
    assert last.kind == (durable.FAILED if kind == durable.RETRY else kind)
    # A row that has waited a day for GitHub fails the ordinary way.
    old = DELIVERIES.verdict(exc, attempt=3, deferrals=5, since=now - timedelta(days=2), now=now)
    assert old.kind == durable.FAILED


def test_a_deferred_attempt_is_given_back_and_the_row_is_due_when_github_asked():
    row = delivery()
    attempt = DELIVERIES.claim(row.pk)
    exc = GitHubError("limited", permanent=False, status=403, retry_after=120)
    verdict = DELIVERIES.verdict(exc, attempt=attempt, deferrals=0, since=row.received_at,
                                 installation=41)  # fmt: skip
    assert DELIVERIES.settle(row.pk, attempt, verdict, last_error="limited")
    row.refresh_from_db()
    assert (row.status, row.attempts, row.deferrals) == (DeliveryStatus.RETRYING, 0, 1)
    assert row.next_attempt_at >= timezone.now() + timedelta(seconds=115)
    assert DELIVERIES.claim(row.pk) is None  # not before GitHub asked
    assert DELIVERIES.ring_due() == 0


def test_while_an_installation_waits_out_a_limit_its_rows_wait_too_without_spending_attempts():
    Installation.objects.create(github_id=41, account_login="acme")
    until = timezone.now() + timedelta(minutes=3)
    durable.installation_quiet(41, until, "secondary rate limit")
    row = delivery()
    other = WebhookDeliveryFactory(event="pull_request", installation_id=99)
    assert DELIVERIES.claim(row.pk) is None
    row.refresh_from_db()
    assert (row.attempts, row.next_attempt_at) == (0, until)
    assert DELIVERIES.claim(other.pk) == 1  # another installation's work goes on
    # When the wait is over, the sweeper rings the row (its wait began after its doorbell).
    later = until + timedelta(seconds=1)
    assert DELIVERIES.ring_due(now=later) == 1
    assert DELIVERIES.claim(row.pk, now=later) == 1
