"""The run queue: claims, one running run per pull request, leases and heartbeats,
retries with backoff, the reaper, attempts kept."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from reviews.models import AttemptOutcome, ReviewRun, RunAttempt, RunStatus
from reviews.queue import heartbeat, runs
from sandbox.errors import CloneError
from tasuku import lifecycle
from tests.factories import PullRequestFactory, ReviewerFactory, ReviewRunFactory
from tests.helpers import queued_tasks

pytestmark = pytest.mark.django_db


def test_one_claim_wins():
    run = ReviewRunFactory()
    first = runs.run_claim(run.pk, worker="a:1")
    second = runs.run_claim(run.pk, worker="b:2")
    assert first is not None and second is None
    run.refresh_from_db()
    assert (run.status, run.attempts, run.worker) == (RunStatus.RUNNING, 1, "a:1")
    assert run.lease_expires_at > timezone.now()
    assert RunAttempt.objects.get(run=run).outcome == AttemptOutcome.RUNNING


def test_a_second_run_of_the_same_pull_request_waits_and_is_rung_when_the_first_ends():
    pull_request = PullRequestFactory()
    first = ReviewRunFactory(pull_request=pull_request)
    second = ReviewRunFactory(  # admitted: its check run exists
        pull_request=pull_request, reviewer=ReviewerFactory(slug="other"), check_run_id=77
    )
    held = runs.run_claim(first.pk, worker="a:1")
    assert runs.run_claim(second.pk, worker="b:2") is None  # waits; it is not lost
    second.refresh_from_db()
    assert second.status == RunStatus.QUEUED

    assert runs.run_finish(held, status=RunStatus.COMPLETED)
    assert ("reviews.tasks.run_process", (second.pk,)) in queued_tasks()
    assert runs.run_claim(second.pk, worker="b:2") is not None


def test_runs_of_different_pull_requests_run_side_by_side():
    a, b = ReviewRunFactory(), ReviewRunFactory()
    assert runs.run_claim(a.pk, worker="a:1") and runs.run_claim(b.pk, worker="b:1")


def test_the_database_refuses_a_second_running_run_of_a_pull_request():
    from django.db import IntegrityError, transaction

    pull_request = PullRequestFactory()
    ReviewRunFactory(pull_request=pull_request, status=RunStatus.RUNNING)
    other = ReviewRunFactory(pull_request=pull_request, reviewer=ReviewerFactory(slug="x"))
    with pytest.raises(IntegrityError), transaction.atomic():
        ReviewRun.objects.filter(pk=other.pk).update(status=RunStatus.RUNNING)


def test_a_heartbeat_renews_the_lease_while_the_run_is_held():
    run = ReviewRunFactory()
    held = runs.run_claim(run.pk, worker="a:1")
    ReviewRun.objects.filter(pk=run.pk).update(
        lease_expires_at=timezone.now() + timedelta(seconds=1)
    )
    beat = heartbeat.Heartbeat(held)
    assert beat.beat()
    run.refresh_from_db()
    assert run.lease_expires_at > timezone.now() + timedelta(seconds=30)
    beat.check()


def test_a_worker_whose_run_was_taken_over_learns_it_lost_the_lease():
    run = ReviewRunFactory()
    held = runs.run_claim(run.pk, worker="a:1")
    later = timezone.now() + runs.lease_length() + timedelta(seconds=1)
    runs.runs_reap(now=later)  # the worker looked dead
    beat = heartbeat.Heartbeat(held)
    assert not beat.beat()
    with pytest.raises(runs.LeaseLost):
        beat.check()
    with pytest.raises(runs.LeaseLost):
        runs.run_stage(held, "clone")
    assert not runs.run_finish(held, status=RunStatus.COMPLETED)


def test_a_transient_failure_is_retried_with_exponential_backoff_then_fails_after_three_attempts():
    run = ReviewRunFactory()
    delays = []
    for attempt in (1, 2, 3):
        ReviewRun.objects.filter(pk=run.pk).update(next_attempt_at=None)
        held = runs.run_claim(run.pk, worker="w:1")
        assert held.attempt == attempt
        before = timezone.now()
        status = runs.run_attempt_failed(
            held, CloneError("GitHub answered 502", permanent=False), stage="clone"
        )
        run.refresh_from_db()
        if attempt < 3:
            assert status == RunStatus.QUEUED
            delays.append((run.next_attempt_at - before).total_seconds())
        else:
            assert status == RunStatus.FAILED
    assert 30 <= delays[0] <= 46 and 60 <= delays[1] <= 91  # 30 s, 60 s, with jitter
    assert (run.status, run.stage) == (RunStatus.FAILED, "clone")
    assert list(run.attempt_rows.values_list("number", "outcome")) == [
        (1, "failed"),
        (2, "failed"),
        (3, "failed"),
    ]
    assert runs.run_claim(run.pk) is None


def test_a_permanent_failure_fails_the_run_at_once():
    run = ReviewRunFactory()
    held = runs.run_claim(run.pk)
    error = CloneError("access denied: grant Contents: read", permanent=True)
    assert runs.run_attempt_failed(held, error, stage="clone") == RunStatus.FAILED
    run.refresh_from_db()
    assert run.reason == "access denied: grant Contents: read"
    assert run.attempt_rows.get().stage == "clone"


def test_an_unexpected_exception_is_transient_and_keeps_its_traceback():
    run = ReviewRunFactory()
    held = runs.run_claim(run.pk)
    try:
        raise KeyError("surprise")
    except KeyError as exc:
        assert runs.run_attempt_failed(held, exc, stage="validation") == RunStatus.QUEUED
    assert "Traceback" in run.attempt_rows.get().error or "KeyError" in run.attempt_rows.get().error


class TestReaper:
    def test_it_requeues_a_run_whose_worker_stopped_heartbeating_and_records_the_lost_attempt(self):
        run = ReviewRunFactory()
        held = runs.run_claim(run.pk, worker="dead:1")
        runs.run_stage(held, "sandbox")
        later = timezone.now() + runs.lease_length() + timedelta(seconds=1)

        result = runs.runs_reap(now=later)

        assert result["requeued"] == 1
        assert queued_tasks(runs.PROCESS_TASK) == [(runs.PROCESS_TASK, (run.pk,))]  # rung at once
        assert runs.runs_reap(now=later)["rung"] == 0  # and not rung twice
        run.refresh_from_db()
        assert run.status == RunStatus.QUEUED
        attempt = run.attempt_rows.get()
        assert (attempt.outcome, attempt.stage) == (AttemptOutcome.LOST, "sandbox")
        assert "dead:1" in attempt.error
        assert runs.run_claim(run.pk, worker="alive:2", now=later).attempt == 2
        assert run.attempt_rows.count() == 2

    def test_it_leaves_a_run_whose_lease_is_current(self):
        run = ReviewRunFactory()
        runs.run_claim(run.pk)
        assert runs.runs_reap()["lost"] == 0

    def test_a_lost_last_attempt_fails_the_run_and_concludes_its_check(self):
        run = ReviewRunFactory(attempts=2)
        runs.run_claim(run.pk)
        later = timezone.now() + runs.lease_length() + timedelta(seconds=1)
        assert runs.runs_reap(now=later)["failed"] == 1
        run.refresh_from_db()
        assert run.status == RunStatus.FAILED
        assert ("reviews.tasks.run_conclude", (run.pk,)) in queued_tasks()

    def test_a_run_not_finished_45_minutes_after_it_started_is_failed(self):
        run = ReviewRunFactory()
        runs.run_claim(run.pk)
        ReviewRun.objects.filter(pk=run.pk).update(
            started_at=timezone.now() - timedelta(minutes=46),
            lease_expires_at=timezone.now() + timedelta(minutes=1),
        )
        assert runs.runs_reap()["failed"] == 1
        run.refresh_from_db()
        assert run.status == RunStatus.FAILED
        assert run.reason == "did not finish within 45 minutes of starting"

    def test_it_rings_again_for_a_queued_run_whose_doorbell_was_lost_but_not_every_time(self):
        run = ReviewRunFactory()
        assert runs.runs_reap()["rung"] == 1
        assert runs.runs_reap()["rung"] == 0
        later = timezone.now() + runs.RING_AGAIN_AFTER + timedelta(seconds=1)
        assert runs.runs_reap(now=later)["rung"] == 1
        assert (
            queued_tasks("reviews.tasks.run_process")
            == [("reviews.tasks.run_process", (run.pk,))] * 2
        )

    def test_it_rings_for_a_retry_once_it_is_due(self):
        run = ReviewRunFactory()
        held = runs.run_claim(run.pk)
        runs.run_attempt_failed(held, CloneError("502", permanent=False), stage="clone")
        assert runs.runs_reap()["rung"] == 0  # not due yet
        run.refresh_from_db()
        assert runs.runs_reap(now=run.next_attempt_at + timedelta(seconds=1))["rung"] == 1


def test_an_operator_retry_gives_a_failed_run_three_fresh_attempts_and_keeps_the_old_ones():
    run = ReviewRunFactory()
    held = runs.run_claim(run.pk)
    runs.run_attempt_failed(held, CloneError("denied", permanent=True), stage="clone")
    run.refresh_from_db()
    assert runs.run_retry(run)
    assert not runs.run_retry(run)  # only failed runs retry
    again = runs.run_claim(run.pk)
    assert again.attempt == 1
    assert list(run.attempt_rows.values_list("number", "outcome")) == [
        (1, "failed"),
        (2, "running"),
    ]


class TestStopping:
    """A worker told to stop (tasuku/lifecycle.py) hands its run back."""

    @pytest.fixture(autouse=True)
    def fresh_stop(self):
        lifecycle._reset()
        yield
        lifecycle._reset()

    def test_a_released_run_waits_due_at_once_its_attempt_given_back_and_rung(self):
        run = ReviewRunFactory()
        held = runs.run_claim(run.pk, worker="a:1")
        assert runs.run_release(held, stage="sandbox") == RunStatus.QUEUED
        run.refresh_from_db()
        assert (run.status, run.attempts, run.worker, run.lease_expires_at) == (
            RunStatus.QUEUED, 0, "", None)  # fmt: skip
        assert run.next_attempt_at is None and run.reason.startswith("interrupted: ")
        attempt = run.attempt_rows.get()
        assert (attempt.outcome, attempt.stage, attempt.error_code) == (
            AttemptOutcome.INTERRUPTED, "sandbox", "worker-stopped")  # fmt: skip
        assert queued_tasks(runs.PROCESS_TASK) == [(runs.PROCESS_TASK, (run.pk,))]
        again = runs.run_claim(run.pk, worker="b:2")
        assert again.attempt == 1  # the interrupted try did not count
        assert runs.run_release(held, stage="sandbox") == "lost"  # no longer a:1's

    def test_the_heartbeat_stops_the_engine_and_hands_back_but_lets_publication_finish(self):
        run = ReviewRunFactory()
        held = runs.run_claim(run.pk, worker="a:1")
        stopped = []
        with heartbeat.Heartbeat(held) as beat:
            beat.at("publication")
            beat.stopper(lambda: stopped.append("engine"))
            lifecycle.stop_begin("a test")
            assert beat.stopping and stopped == []
            beat.check()  # publication goes on while the bound allows
            beat.at("validation")
            with pytest.raises(heartbeat.WorkerStopping):
                beat.check()
            assert stopped == ["engine"]
            with pytest.raises(heartbeat.WorkerStopping):  # no engine starts now
                beat.stopper(lambda: stopped.append("another"))

    def test_a_dead_worker_processs_runs_are_handed_on_at_once_and_no_other(self):
        mine, theirs = ReviewRunFactory(), ReviewRunFactory()
        runs.run_claim(mine.pk, worker="host:41")
        runs.run_claim(theirs.pk, worker="host:42")
        assert runs.runs_release_worker("host:41") == 1
        mine.refresh_from_db()
        theirs.refresh_from_db()
        assert (mine.status, theirs.status) == (RunStatus.QUEUED, RunStatus.RUNNING)
        assert mine.attempt_rows.get().outcome == AttemptOutcome.LOST
        assert runs.runs_release_worker("host:41") == 0


def test_the_heartbeats_lines_name_the_run_it_beats_for(settings, monkeypatch):
    """The heartbeat's thread writes its lines in the run's log context (tasuku/logs.py):
    a thread does not inherit its creator's context unless it is given it."""
    import logging
    import time

    from tasuku.logs import ContextFilter, log_context

    run = ReviewRunFactory()
    held = runs.run_claim(run.pk, worker="a:1")
    settings.TASUKU_RUN_HEARTBEAT_SECONDS = 600  # no beat due: the loop only polls
    monkeypatch.setattr(heartbeat, "CANCEL_POLL_SECONDS", 0.01)

    def broken(run_pk):
        raise RuntimeError("the cancel poll broke")

    monkeypatch.setattr(heartbeat, "run_cancel_pending", broken)
    records: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.addFilter(ContextFilter())
    handler.emit = records.append  # type: ignore[method-assign]
    logging.getLogger("reviews.queue.heartbeat").addHandler(handler)
    try:
        with log_context(run=run.pk, attempt=held.attempt), heartbeat.Heartbeat(held):
            deadline = time.monotonic() + 5
            while not records and time.monotonic() < deadline:
                time.sleep(0.01)
    finally:
        logging.getLogger("reviews.queue.heartbeat").removeHandler(handler)
    assert records, "the heartbeat wrote nothing"
    assert (records[0].run, records[0].attempt) == (run.pk, held.attempt)
