"""The reaper's turn (reviews/queue/reaper.py): one worker process sweeps per turn, every
TASUKU_REAP_SECONDS and at the end of the next lease; the status page shows it. A reaper
back from a database outage declares no run lost before it has been connected for a
lease (tasuku/outage.py)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import OperationalError
from django.utils import timezone

from reviews.models import ReaperTurn, ReviewRun
from reviews.queue import reaper, runs
from tasuku import outage
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


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch):
    """This process's view of the database (tasuku/outage.py), on a clock the test moves."""
    ticking = Clock()
    monkeypatch.setattr(outage, "OUTAGE", outage.Outage(clock=ticking))
    return ticking


def _expired_run(worker: str) -> ReviewRun:
    run = ReviewRunFactory()
    held = runs.run_claim(run.pk, worker=worker)
    assert held is not None
    ReviewRun.objects.filter(pk=run.pk).update(
        lease_expires_at=timezone.now() - timedelta(seconds=5)
    )
    return run


def test_a_reaper_back_from_a_database_outage_declares_no_run_lost_before_a_lease(settings, clock):
    settings.TASUKU_RUN_LEASE_SECONDS = 20
    # The run's worker and this reaper were cut off by the same outage: the lease ran out
    # while nobody could renew it, nor see that nobody did.
    run = _expired_run("cut:1")
    outage.failed(OperationalError("server closed the connection unexpectedly"))
    clock.now += 30
    outage.answered()
    clock.now += 19
    assert runs.runs_reap()["lost"] == 0
    run.refresh_from_db()
    assert run.status == "running" and run.attempts == 1
    # Meanwhile its worker, back too, reclaims its lease: the same attempt goes on.
    assert runs.RUNS.renew(run.pk, 1, where={"worker": "cut:1"})

    # Connected a whole lease, the reaper saw no heartbeat of a run that had none.
    other = _expired_run("dead:2")
    clock.now += 1
    assert runs.runs_reap()["lost"] == 1
    other.refresh_from_db()
    assert other.status == "queued" and other.attempt_rows.get().outcome == "lost"
    run.refresh_from_db()
    assert run.status == "running"  # renewed: not expired


def test_a_worker_process_judges_no_lease_before_it_was_connected_for_one(settings, clock):
    """It may have been started in the middle of an outage (a process its cluster
    started again): what it first sees of the leases says nothing of their holders."""
    settings.TASUKU_RUN_LEASE_SECONDS = 20
    outage.OUTAGE.watch()
    _expired_run("cut:1")
    assert runs.runs_reap()["lost"] == 0  # not yet connected at all
    outage.answered()
    clock.now += 10
    assert runs.runs_reap()["lost"] == 0
    clock.now += 10
    assert runs.runs_reap()["lost"] == 1


def test_a_reaper_not_yet_trusted_looks_again_when_it_may(settings, clock):
    settings.TASUKU_REAP_SECONDS = 10
    settings.TASUKU_RUN_LEASE_SECONDS = 8
    _expired_run("cut:1")
    outage.failed(OperationalError("gone"))
    outage.answered()
    clock.now += 3
    started = timezone.now()
    # Not a look every SLACK at a lease it may not judge yet: when it may, 5 s on.
    wait = reaper.reaper_turn("a:1")
    assert 4.5 < wait <= 5.5
    due = ReaperTurn.objects.get().due_at
    assert timedelta(seconds=4.5) < due - started < timedelta(seconds=6)


def test_an_outage_is_logged_once_when_it_begins_and_once_when_it_ends(clock, caplog):
    for _ in range(5):
        outage.failed(OperationalError("server closed the connection unexpectedly"), "the reaper")
    clock.now += 30
    for _ in range(3):
        outage.answered()
    lines = [r.getMessage() for r in caplog.records if r.name == "tasuku.outage"]
    assert len(lines) == 2, lines
    assert "the database cannot be reached (the reaper: server closed" in lines[0]
    assert "the database answers again after 30.0 s" in lines[1]


# --- The runs' deadline counts running, not waiting --------------------------------------


def _at_publication(now):
    """A run whose engine has answered, its result kept, publishing."""
    run = ReviewRunFactory()
    held = runs.run_claim(run.pk, now=now)
    runs.run_stage(held, "publication")
    runs.run_result_recorded(run.pk, {"findings": []}, received=now)
    return run, held


def test_a_run_deferred_for_the_hours_write_budget_is_not_failed_by_the_deadline(settings):
    """The 200-pull-request benchmark: an installation past its hourly writes defers its
    reviews' publication for most of an hour. That wait is not the run's 45 minutes:
    neither while it waits, nor once it is due and waiting for a worker, nor when a worker
    takes it again; 45 minutes after it started again it is overdue as any run is."""
    from repos.github.errors import GitHubError
    from reviews.models import RunStatus

    deadline = timedelta(seconds=settings.TASUKU_RUN_DEADLINE_SECONDS)
    start = timezone.now() - timedelta(hours=2)
    run, held = _at_publication(start)
    budget = GitHubError(
        "Could not write to GitHub for installation 11 for 3100s: waiting for the write budget",
        permanent=False,
        retry_after=3100,
        code="github-write-budget",
    )
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(runs.timezone, "now", lambda: start + timedelta(seconds=5))
        assert runs.run_attempt_failed(held, budget, stage="publication") == RunStatus.QUEUED
    run.refresh_from_db()
    due = run.next_attempt_at
    assert due >= start + timedelta(seconds=3100)

    runs.runs_reap(now=start + deadline + timedelta(minutes=1))  # still deferred
    runs.runs_reap(now=due + timedelta(minutes=1))  # due, no worker free yet
    run.refresh_from_db()
    assert (run.status, run.error_code) == (RunStatus.QUEUED, "github-write-budget")

    again = due + timedelta(minutes=2)
    assert runs.run_claim(run.pk, now=again) is not None
    ReviewRun.objects.filter(pk=run.pk).update(lease_expires_at=again + 2 * deadline)  # alive
    runs.runs_reap(now=again + deadline - timedelta(minutes=1))
    run.refresh_from_db()
    assert run.status == RunStatus.RUNNING
    runs.runs_reap(now=again + deadline + timedelta(minutes=1))
    run.refresh_from_db()
    assert (run.status, run.error_code) == (RunStatus.FAILED, "run-deadline")


def test_a_write_waiting_its_turn_now_is_not_overdue_but_a_run_that_only_ran_is():
    from reviews.models import RunStatus

    start = timezone.now() - timedelta(hours=1)
    waiting, _ = _at_publication(start)
    running, _ = _at_publication(start)
    later = start + timedelta(minutes=46)
    ReviewRun.objects.filter(pk__in=(waiting.pk, running.pk)).update(
        lease_expires_at=later + timedelta(minutes=1)
    )
    runs.run_write_waited(
        waiting.pk, seconds=50, until=later + timedelta(seconds=30), why="the write budget"
    )
    runs.runs_reap(now=later)
    waiting.refresh_from_db()
    running.refresh_from_db()
    assert waiting.status == RunStatus.RUNNING
    assert (running.status, running.error_code) == (RunStatus.FAILED, "run-deadline")


def test_an_actions_result_waiting_for_a_worker_is_on_the_clock_from_the_result():
    """A run on GitHub Actions had its clock from the dispatch to the result (its own
    sweep); from the result on it is this one's, not from when it was first started."""
    from reviews.models import RunStatus

    start = timezone.now() - timedelta(hours=3)
    run = ReviewRunFactory()
    held = runs.run_claim(run.pk, now=start)
    assert runs.run_dispatch(held, reason="on GitHub Actions", dispatch={})
    received = start + timedelta(hours=2)
    assert runs.run_result_received(run.pk, {"findings": []}, received=received, reason="posted")
    runs.runs_reap(now=received + timedelta(minutes=44))
    run.refresh_from_db()
    assert run.status == RunStatus.QUEUED
    runs.runs_reap(now=received + timedelta(minutes=46))
    run.refresh_from_db()
    assert (run.status, run.error_code) == (RunStatus.FAILED, "run-deadline")
