"""The reaper's turn (reviews/reaper.py): one worker process sweeps per turn, every
TASUKU_REAP_SECONDS and at the end of the next lease; the status page shows it."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from reviews import reaper, runs
from reviews.models import ReaperTurn, ReviewRun
from tests.factories import ReviewRunFactory

pytestmark = pytest.mark.django_db


def test_one_process_wins_each_turn_and_the_next_is_due_a_period_later(settings):
    settings.TASUKU_REAP_SECONDS = 10
    swept = []
    now = timezone.now()
    first = reaper.reaper_turn("a:1", now=now, sweep=lambda: swept.append("a:1") or {"lost": 0})
    second = reaper.reaper_turn("b:2", now=now, sweep=lambda: swept.append("b:2") or {})
    assert swept == ["a:1"]
    turn = ReaperTurn.objects.get()
    assert turn.holder == "a:1" and turn.result == {"lost": 0}
    assert 9 < first <= 10 and 0 < second <= 10
    assert reaper.reaper_turn("b:2", now=turn.due_at + timedelta(seconds=1),
                              sweep=lambda: swept.append("b:2") or {}) > 0  # fmt: skip
    assert swept == ["a:1", "b:2"]


def test_a_turn_falls_due_when_the_next_lease_ends(settings):
    settings.TASUKU_REAP_SECONDS = 10
    run = ReviewRunFactory()
    runs.run_claim(run.pk, worker="dead:1")
    ends = timezone.now() + timedelta(seconds=3)
    ReviewRun.objects.filter(pk=run.pk).update(lease_expires_at=ends)
    wait = reaper.reaper_turn("a:1", sweep=dict)
    assert wait < 4
    assert ReaperTurn.objects.get().due_at == ends + reaper.SLACK


def test_the_status_page_shows_the_reapers_last_turn(staff_client):
    assert "Not yet: no worker has run" in staff_client.get("/status/").content.decode()
    reaper.reaper_turn("vm:4242", sweep=lambda: {"lost": 1})
    page = staff_client.get("/status/").content.decode()
    assert "vm:4242" in page and "overdue" not in page
    ReaperTurn.objects.update(due_at=timezone.now() - timedelta(minutes=5))
    assert "overdue: is a worker running?" in staff_client.get("/status/").content.decode()
