"""Stage times: each attempt records when each stage started and how long it took, the
run page draws them, and /metrics counts them as a histogram."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from reviews.dashboard.metrics import STAGE_BUCKETS, STAGE_WINDOW
from reviews.models import AttemptOutcome, ReviewRun, RunAttempt, RunStatus
from reviews.queue import runs, timeline
from sandbox.errors import CloneError
from tests.factories import ReviewRunFactory
from tests.gitworld import world_build
from tests.helpers import drain_queue, post_webhook, pull_request_payload

# --- The pure part -----------------------------------------------------------------------


def test_entering_a_stage_ends_the_one_before_and_the_end_closes_the_last():
    stages = timeline.stage_enter([], "admission", 0.01)
    stages = timeline.stage_enter(stages, "clone", 0.4)
    stages = timeline.stage_enter(stages, "clone", 0.9)  # the same stage again: one span
    stages = timeline.stage_enter(stages, "sandbox", 2.5)
    assert stages == [
        {"stage": "admission", "start": 0.01, "seconds": 0.39},
        {"stage": "clone", "start": 0.4, "seconds": 2.1},
        {"stage": "sandbox", "start": 2.5, "seconds": None},
    ]
    closed = timeline.stages_close(stages, 7.25)
    assert closed[-1] == {"stage": "sandbox", "start": 2.5, "seconds": 4.75}
    assert timeline.stages_close(closed, 9.0) == closed  # closed once
    lost = timeline.stages_close(stages, 200.0, lost=True)
    assert lost[-1]["lost"] is True and stages[-1]["seconds"] is None  # never mutated


def test_a_clock_behind_the_attempts_start_gives_no_negative_time():
    started = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
    assert timeline.offset(started, started - timedelta(seconds=2)) == 0.0
    assert timeline.offset(started, started + timedelta(milliseconds=1500)) == 1.5


def test_the_timeline_places_each_bar_at_its_start_and_sizes_it_by_its_duration():
    started = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
    stages = [
        {"stage": "admission", "start": 0.0, "seconds": 0.002},
        {"stage": "clone", "start": 0.002, "seconds": 2.498},
        {"stage": "sandbox", "start": 2.5, "seconds": 7.5},
    ]
    drawn = timeline.timeline(stages, started, started + timedelta(seconds=10), started)
    assert drawn.seconds == 10.0
    admission, clone, sandbox = drawn.spans
    assert admission.width == timeline.MIN_WIDTH  # 2 ms is still seen
    assert (clone.left, clone.width) == (0.02, 24.98)
    assert (sandbox.left, sandbox.width) == (25.0, 75.0)
    assert sandbox.started_at == started + timedelta(seconds=2.5)
    assert drawn.accounted == pytest.approx(10.0)


def test_a_stage_under_way_is_drawn_up_to_now():
    started = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
    stages = [
        {"stage": "admission", "start": 0.0, "seconds": 1.0},
        {"stage": "clone", "start": 1.0, "seconds": None},
    ]
    drawn = timeline.timeline(stages, started, None, started + timedelta(seconds=4))
    clone = drawn.spans[-1]
    assert clone.under_way and clone.seconds == 3.0 and (clone.left, clone.width) == (25.0, 75.0)


def test_the_histogram_counts_finished_stages_by_bucket_and_skips_open_and_lost_ones():
    attempts = [
        [{"stage": "admission", "start": 0, "seconds": 0.1},
         {"stage": "clone", "start": 0.1, "seconds": 3.0},
         {"stage": "sandbox", "start": 3.1, "seconds": 4000.0}],
        [{"stage": "admission", "start": 0, "seconds": 0.3},
         {"stage": "clone", "start": 0.3, "seconds": 50.0, "lost": True}],
        [{"stage": "admission", "start": 0, "seconds": None}],
        [],
    ]  # fmt: skip
    found = timeline.histogram(attempts, (0.1, 1, 10))
    assert found["admission"].buckets == [1, 2, 2] and found["admission"].count == 2
    assert found["admission"].total == pytest.approx(0.4)
    assert found["clone"].buckets == [0, 0, 1] and found["clone"].count == 1
    assert found["sandbox"].buckets == [0, 0, 0] and found["sandbox"].count == 1
    assert found["publication"].count == 0  # every stage has its series


# --- Recorded as the run moves ------------------------------------------------------------


@pytest.mark.django_db
class TestRecorded:
    def test_each_stage_is_recorded_on_the_attempt_and_the_last_closed_when_it_completes(self):
        run = ReviewRunFactory()
        held = runs.run_claim(run.pk, worker="w:1")
        for stage in ("admission", "clone", "sandbox"):
            runs.run_stage(held, stage)
        attempt = RunAttempt.objects.get(run=run)
        assert [s["stage"] for s in attempt.stage_times] == ["admission", "clone", "sandbox"]
        assert attempt.stage_times[-1]["seconds"] is None
        assert runs.run_finish(held, status=RunStatus.COMPLETED)
        attempt.refresh_from_db()
        assert all(s["seconds"] is not None for s in attempt.stage_times)
        # The stages run back to back, from the first one's start (an offset from the
        # attempt's start: the claim came before it) to the attempt's end.
        first = attempt.stage_times[0]["start"]
        length = (attempt.finished_at - attempt.started_at).total_seconds() - first
        assert first >= 0
        assert sum(s["seconds"] for s in attempt.stage_times) == pytest.approx(length, abs=0.05)

    def test_a_failed_attempt_closes_the_stage_it_failed_in_and_the_next_attempt_starts_anew(
        self,
    ):
        run = ReviewRunFactory()
        held = runs.run_claim(run.pk, worker="w:1")
        runs.run_stage(held, "admission")
        runs.run_stage(held, "clone")
        error = CloneError("GitHub answered 502", permanent=False)
        assert runs.run_attempt_failed(held, error, stage="clone") == RunStatus.QUEUED
        ReviewRun.objects.filter(pk=run.pk).update(next_attempt_at=None)
        again = runs.run_claim(run.pk, worker="w:2")
        runs.run_stage(again, "admission")
        first, second = RunAttempt.objects.filter(run=run).order_by("number")
        assert first.outcome == AttemptOutcome.FAILED
        assert [(s["stage"], s["seconds"] is None) for s in first.stage_times] == [
            ("admission", False),
            ("clone", False),
        ]
        assert [s["stage"] for s in second.stage_times] == ["admission"]

    def test_a_lost_worker_s_stage_is_closed_by_the_reaper_and_marked_lost(self):
        run = ReviewRunFactory()
        held = runs.run_claim(run.pk, worker="dead:1")
        runs.run_stage(held, "sandbox")
        later = timezone.now() + runs.lease_length() + timedelta(seconds=1)
        runs.runs_reap(now=later)
        attempt = RunAttempt.objects.get(run=run)
        assert attempt.outcome == AttemptOutcome.LOST
        [sandbox] = attempt.stage_times
        assert sandbox["lost"] is True
        assert sandbox["seconds"] >= runs.lease_length().total_seconds()

    def test_a_cancelled_run_closes_its_stage(self):
        run = ReviewRunFactory()
        held = runs.run_claim(run.pk, worker="w:1")
        runs.run_stage(held, "clone")
        runs.run_finish(held, status=RunStatus.CANCELLED, reason="recalled")
        [clone] = RunAttempt.objects.get(run=run).stage_times
        assert clone["seconds"] is not None and "lost" not in clone

    def test_a_worker_that_lost_the_run_writes_no_stage(self):
        run = ReviewRunFactory()
        held = runs.run_claim(run.pk, worker="dead:1")
        runs.run_stage(held, "clone")
        later = timezone.now() + runs.lease_length() + timedelta(seconds=1)
        runs.runs_reap(now=later)
        taken = runs.run_claim(run.pk, worker="alive:2", now=later)
        with pytest.raises(runs.LeaseLost):
            runs.run_stage(held, "sandbox")
        runs.run_stage(taken, "admission")
        first, second = RunAttempt.objects.filter(run=run).order_by("number")
        assert [s["stage"] for s in first.stage_times] == ["clone"]
        assert [s["stage"] for s in second.stage_times] == ["admission"]


# --- A whole review, its page, and /metrics -------------------------------------------------


@pytest.fixture
def reviewed(db, fake_github, client, test_app):
    world = world_build(fake_github)
    body = pull_request_payload(world.fake, world.repo, world.pull, action="opened")
    response = post_webhook(client, "pull_request", body, secret=test_app.webhook_secret)
    assert response.status_code == 202
    drain_queue()
    run = ReviewRun.objects.get()
    assert run.status == RunStatus.COMPLETED, run.reason
    return run


def test_a_reviews_attempt_has_every_stage_it_went_through_adding_up_to_its_length(reviewed):
    attempt = RunAttempt.objects.get(run=reviewed)
    assert [s["stage"] for s in attempt.stage_times] == list(timeline.PIPELINE_STAGES)
    assert all(s["seconds"] >= 0 and "lost" not in s for s in attempt.stage_times)
    starts = [s["start"] for s in attempt.stage_times]
    assert starts == sorted(starts)
    for before, after in zip(attempt.stage_times, attempt.stage_times[1:], strict=False):
        assert before["start"] + before["seconds"] == pytest.approx(after["start"], abs=0.002)
    length = (attempt.finished_at - attempt.started_at).total_seconds()
    accounted = sum(s["seconds"] for s in attempt.stage_times)
    # What no stage holds: claiming the run before the first stage (a few milliseconds).
    assert 0 <= length - accounted < max(0.25, 0.05 * length), (length, accounted)


def test_the_run_page_shows_each_attempts_timeline(reviewed, staff_client):
    page = staff_client.get(f"/runs/{reviewed.pk}/").content.decode()
    start = page.index('id="timeline-1"')
    table = page[start : page.index("</table>", start)]
    for stage in timeline.PIPELINE_STAGES:
        assert f"<td>{stage}</td>" in table
    assert table.count('class="span"') == len(timeline.PIPELINE_STAGES)
    lefts = [float(x) for x in re.findall(r"margin-left: ([0-9.]+)%", table)]
    widths = [float(x) for x in re.findall(r"width: ([0-9.]+)%", table)]
    # in order, from the attempt's start: before the first stage only the claim, as above
    attempt = RunAttempt.objects.get(run=reviewed)
    length = (attempt.finished_at - attempt.started_at).total_seconds()
    assert lefts == sorted(lefts) and lefts[0] < 100 * max(0.25, 0.05 * length) / length
    # The stages fill the rest of the attempt: from the first stage's start to its end
    # (the claim's share, bounded above, varies with the machine's load).
    assert 100 - lefts[0] - 1 <= sum(widths) <= 100 + timeline.MIN_WIDTH * len(widths)


def _samples(text: str) -> dict[tuple[str, tuple], float]:
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


@pytest.mark.django_db
def test_metrics_has_a_stage_histogram_of_the_attempts_that_ended_in_its_window(staff_client):
    now = timezone.now()

    def attempt(ended_ago: timedelta, stages: list[dict], outcome=AttemptOutcome.SUCCEEDED):
        run = ReviewRunFactory(status=RunStatus.COMPLETED)
        number = RunAttempt.objects.filter(run=run).count() + 1
        RunAttempt.objects.create(
            run=run, number=number, worker="w:1", started_at=now - ended_ago - timedelta(minutes=5),
            finished_at=now - ended_ago, outcome=outcome, stage_times=stages,
        )  # fmt: skip

    attempt(timedelta(minutes=1), [{"stage": "admission", "start": 0, "seconds": 0.2},
                                   {"stage": "clone", "start": 0.2, "seconds": 4.0},
                                   {"stage": "sandbox", "start": 4.2, "seconds": 95.0}])  # fmt: skip
    attempt(timedelta(minutes=30), [{"stage": "admission", "start": 0, "seconds": 0.05},
                                    {"stage": "clone", "start": 0.05, "seconds": 40.0}],
            outcome=AttemptOutcome.FAILED)  # fmt: skip
    attempt(timedelta(minutes=2), [{"stage": "clone", "start": 0, "seconds": 300, "lost": True}],
            outcome=AttemptOutcome.LOST)  # fmt: skip
    attempt(STAGE_WINDOW + timedelta(minutes=5), [{"stage": "clone", "start": 0, "seconds": 1}])
    running = ReviewRunFactory(status=RunStatus.RUNNING)
    RunAttempt.objects.create(run=running, number=1, worker="w:2", started_at=now,
                              stage_times=[{"stage": "admission", "start": 0, "seconds": None}])  # fmt: skip

    got = _samples(staff_client.get("/metrics").content.decode())

    def bucket(stage: str, le: str) -> float:
        return got[("tasuku_stage_duration_seconds_bucket", (("le", le), ("stage", stage)))]

    assert bucket("admission", "0.1") == 1 and bucket("admission", "0.25") == 2
    assert bucket("admission", "+Inf") == 2
    assert bucket("clone", "2.5") == 0 and bucket("clone", "5.0") == 1
    # Neither the lost worker's clone nor the one that ended before the window.
    assert bucket("clone", "60.0") == 2 and bucket("clone", "+Inf") == 2
    assert bucket("sandbox", "60.0") == 0 and bucket("sandbox", "120.0") == 1
    assert bucket("publication", "+Inf") == 0
    assert len([k for k in got if k[0] == "tasuku_stage_duration_seconds_bucket"]) == 5 * (
        len(STAGE_BUCKETS) + 1
    )
    assert got[("tasuku_stage_duration_seconds_gcount", (("stage", "clone"),))] == 2
    assert got[("tasuku_stage_duration_seconds_gsum", (("stage", "clone"),))] == pytest.approx(44)


@pytest.mark.django_db
def test_in_a_burst_metrics_reads_the_latest_attempts_only(staff_client, monkeypatch):
    from reviews.dashboard import metrics

    monkeypatch.setattr(metrics, "STAGE_ATTEMPTS", 2)
    now = timezone.now()
    for minutes, seconds in ((1, 1.0), (2, 2.0), (3, 60.0)):  # the oldest took a minute
        RunAttempt.objects.create(
            run=ReviewRunFactory(status=RunStatus.COMPLETED), number=1, worker="w:1",
            started_at=now - timedelta(minutes=10), finished_at=now - timedelta(minutes=minutes),
            outcome=AttemptOutcome.SUCCEEDED,
            stage_times=[{"stage": "clone", "start": 0, "seconds": seconds}],
        )  # fmt: skip
    got = _samples(staff_client.get("/metrics").content.decode())
    assert got[("tasuku_stage_duration_seconds_gcount", (("stage", "clone"),))] == 2
    assert got[("tasuku_stage_duration_seconds_gsum", (("stage", "clone"),))] == pytest.approx(3)
