"""Retention: what the daily prune removes after the TASUKU_KEEP_*_DAYS settings, and
what it keeps (findings, reviews: the figures)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.management import call_command
from django.utils import timezone

from reviews.models import ActionsDispatch, Finding, Review, ReviewRun, RunAttempt
from reviews.queue.retention import data_prune
from tests.factories import FindingFactory, ReviewFactory, WebhookDeliveryFactory
from webhooks.models import WebhookDelivery

pytestmark = pytest.mark.django_db


def test_old_records_go_and_the_figures_stay(settings, capsys):
    now = timezone.now()
    old, recent = now - timedelta(days=400), now - timedelta(days=1)
    stale = WebhookDeliveryFactory(status="processed", received_at=old)
    WebhookDeliveryFactory(status="processed", received_at=recent)
    pending = WebhookDeliveryFactory(status="retrying", received_at=old)  # not final: kept
    review = ReviewFactory(transcript=[{"text": "looked at app.py"}])
    finding = FindingFactory(review=review)
    run = review.run
    ReviewRun.objects.filter(pk=run.pk).update(
        status="completed", finished_at=old, delivery=stale, runner_result={"findings": []},
    )  # fmt: skip
    ActionsDispatch.objects.create(run=run, job={"files": []})
    Review.objects.filter(pk=review.pk).update(created_at=old)
    RunAttempt.objects.create(run=run, number=1, worker="w", started_at=old, outcome="succeeded")

    assert data_prune(now=now, dry_run=True)["deliveries"] == 1
    assert WebhookDelivery.objects.count() == 3  # a dry run removes nothing
    call_command("prune")
    out = capsys.readouterr().out
    assert "Kept: deliveries 30 days, transcripts 90 days" in out
    assert "deliveries: removed 1" in out and "transcripts: removed 1" in out

    assert set(WebhookDelivery.objects.values_list("pk", flat=True)) == {
        pending.pk, WebhookDelivery.objects.exclude(pk=pending.pk).get().pk,
    }  # fmt: skip
    run.refresh_from_db()
    review.refresh_from_db()
    assert (run.delivery, run.dispatch.job, run.runner_result) == (None, None, None)
    assert review.transcript == []
    assert not RunAttempt.objects.filter(run=run).exists()
    assert Finding.objects.filter(pk=finding.pk).exists()  # findings stay


def test_zero_days_keeps_for_ever(settings):
    settings.TASUKU_KEEP_DELIVERIES_DAYS = 0
    WebhookDeliveryFactory(status="processed", received_at=timezone.now() - timedelta(days=4000))
    assert "deliveries" not in data_prune()
    assert WebhookDelivery.objects.count() == 1
