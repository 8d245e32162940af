"""One write budget per installation, shared by every process and host
(repos/github/budget.py): GitHub's per-minute and per-hour content-creation limits, a
cap on writes in flight, and a wait GitHub asked of one process honoured by all; a
review's writes before the backlog's."""

from __future__ import annotations

import threading
import time

import pytest

from repos import github
from repos.github import GitHubError, RepoRef
from repos.github.budget import BACKLOG, URGENT, SharedBudget, writes_for
from repos.github.pacing import WriteLimits, place_find
from repos.models import WriteBudget
from tests.fakes.github import Pull

KEY = ("4242", 11)
HEAD = "a" * 40


class Clock:
    """A clock both "processes" read, moved by their sleeps."""

    def __init__(self) -> None:
        self.now = 1_800_000_000.0
        self.lock = threading.Lock()

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        with self.lock:
            self.now += seconds


def most_in_any(times: list[float], window: float) -> int:
    times = sorted(times)
    most, start = 0, 0
    for end, t in enumerate(times):
        while t - times[start] >= window:
            start += 1
        most = max(most, end - start + 1)
    return most


# --- The arithmetic (no database) -----------------------------------------------------


def stream(limits: WriteLimits, count: int, priority: str = URGENT) -> list[float]:
    minute_tat, hour_log = 0.0, []
    now, sent = 1000.0, []
    for _ in range(count):
        place = place_find(limits, minute_tat, hour_log, now, priority)
        now = max(now, place.at)
        minute_tat, hour_log = place.minute_tat, place.hour_log
        sent.append(now)
        now += 0.01  # the write itself
    return sent


def test_a_stream_of_writes_never_passes_githubs_minute_or_hour_limit():
    limits = WriteLimits()  # 6 at once, one a second; GitHub's 80 a minute, 500 an hour
    sent = stream(limits, 1500)
    assert sent[5] - sent[0] < 0.1  # the burst goes at once
    assert most_in_any(sent, 60) <= 72  # 90 % of 80
    assert most_in_any(sent, 3600) <= 450  # 90 % of 500
    # The hour's 450 go at the minute's pace (about 7 minutes); the next write waits for
    # the first to leave the hour, and every hour after holds 450 again.
    assert sent[449] - sent[0] < 60 * 8
    assert sent[450] - sent[0] == pytest.approx(3600, abs=1)
    assert sent[899] - sent[0] < 3600 + 60 * 8


def test_the_backlog_leaves_part_of_the_burst_to_reviews():
    limits = WriteLimits(burst=6, interval=1.0)
    backlog = stream(limits, 5, priority=BACKLOG)
    assert backlog[3] - backlog[0] < 0.1  # four at once ...
    assert backlog[4] - backlog[3] >= 0.9  # ... then the reserve is not the backlog's


# --- Shared through the database ----------------------------------------------------


def budget(clock: Clock, **limits) -> SharedBudget:
    return SharedBudget(
        WriteLimits(**{"burst": 3, "interval": 1.0, **limits}),
        max_wait=120,
        clock=clock,
        sleep=clock.sleep,
    )


@pytest.mark.django_db
def test_two_processes_share_one_installations_budget():
    clock = Clock()
    one, other = budget(clock), budget(clock)  # two processes' budgets: one row
    with writes_for(URGENT):
        waits = [(one if i % 2 else other).wait(KEY) for i in range(7)]
    # Three at once between them, then one a second between them — not three each.
    assert waits[:3] == [0.0, 0.0, 0.0]
    assert waits[3:] == pytest.approx([1.0, 1.0, 1.0, 1.0])
    row = WriteBudget.objects.get(app_id="4242", installation_id=11)
    assert row.writes == 7 and row.waits == 4


@pytest.mark.django_db
def test_a_retry_after_seen_by_one_process_makes_the_other_wait():
    clock = Clock()
    one, other = budget(clock), budget(clock)
    one.pause(KEY, 30, "GitHub: You have exceeded a secondary rate limit")
    started = clock()
    with other.writing(KEY):
        pass
    assert clock() - started == pytest.approx(30.0)
    row = WriteBudget.objects.get()
    assert row.pauses == 1 and "secondary rate limit" in row.pause_reason


@pytest.mark.django_db
def test_a_wait_longer_than_the_longest_is_handed_to_the_callers_queue():
    clock = Clock()
    shared = budget(clock)
    shared.pause(KEY, 600, "GitHub: retry-after 600")
    with pytest.raises(GitHubError) as raised:
        shared.wait(KEY)
    assert not raised.value.permanent
    assert raised.value.code == "github-rate-limit"
    assert raised.value.retry_after == pytest.approx(600)


@pytest.mark.django_db
def test_writes_in_flight_are_capped_and_a_dead_holders_place_comes_back():
    clock = Clock()
    shared = SharedBudget(
        WriteLimits(burst=10, interval=0.01, at_once=2),
        max_wait=5,
        hold_for=3,
        clock=clock,
        sleep=clock.sleep,
    )
    first, second = shared.writing(KEY), shared.writing(KEY)
    first.__enter__()
    second.__enter__()  # two in flight: never released (their process died)
    started = clock()
    with shared.writing(KEY):
        pass
    # The third waited for the holds to run out.
    assert clock() - started >= 3.0


@pytest.mark.django_db
def test_a_review_in_progress_writes_before_the_backlog():
    clock = Clock()
    shared = budget(clock, burst=3, reserve=1)
    with writes_for(URGENT):
        for _ in range(3):
            shared.wait(KEY)  # the burst spent by reviews
    row = WriteBudget.objects.get()
    # A backlog write finds no place now and takes none ahead ...
    place = place_find(shared.limits, row.minute_tat, row.hour_log, clock(), BACKLOG)
    assert place.at > clock()
    before = row.minute_tat
    with writes_for(URGENT):
        waited = shared.wait(KEY)  # ... so the next review's write is next
    assert waited == pytest.approx(1.0)
    assert WriteBudget.objects.get().minute_tat == pytest.approx(before + 1.0)


# --- Threads with connections of their own (processes, as far as the database knows) ---


@pytest.mark.django_db(transaction=True)
def test_writers_on_separate_connections_never_pass_the_shared_pace():
    from django.db import connections

    shared = SharedBudget(
        WriteLimits(burst=2, interval=0.1, per_minute=10_000, per_hour=100_000),
        max_wait=30,
    )
    sent: list[float] = []
    lock = threading.Lock()
    errors: list[BaseException] = []

    def writer() -> None:
        try:
            with writes_for(URGENT):
                for _ in range(5):
                    with shared.writing(KEY), lock:
                        sent.append(time.monotonic())
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=writer) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors
    assert len(sent) == 20
    # 2 at once, then one every 0.1 s across all four: 20 writes take at least 1.7 s, and
    # no 0.5 s holds more than 2 + 5.
    sent.sort()
    assert sent[-1] - sent[0] >= 1.7 - 0.05
    assert most_in_any(sent, 0.5) <= 7
    row = WriteBudget.objects.get()
    assert row.writes == 20 and row.in_flight == {}


@pytest.mark.django_db(transaction=True)
def test_a_secondary_limit_met_by_one_gateway_holds_every_gateways_writes(fake_github, settings):
    settings.GITHUB_SECONDS_BETWEEN_WRITES = "0.01"
    settings.GITHUB_WRITE_BURST = "10"
    settings.GITHUB_MAX_ATTEMPTS = "1"
    fake_github.add_installation(11, "acme")
    fake_github.add_repo("acme/widgets", installation_id=11, repo_id=501)
    fake_github.add_pull(
        "acme/widgets", Pull(number=5, title="x", head_sha=HEAD, base_sha="b" * 40)
    )
    where = RepoRef(installation_id=11, repository_id=501, full_name="acme/widgets")
    one, other = github.gateway(), github.gateway()
    fake_github.limits.secondary(2, method="POST", path=r"/check-runs$")
    with pytest.raises(GitHubError) as raised:
        one.check_run_create(
            where, name="Tasuku · static", head_sha=HEAD, external_id="1", details_url="http://t/1"
        )
    assert raised.value.code == "github-rate-limit"
    row = WriteBudget.objects.get(installation_id=11)
    assert row.paused_until is not None
    started = time.monotonic()
    other.check_run_create(
        where, name="Tasuku · static", head_sha=HEAD, external_id="2", details_url="http://t/2"
    )
    # The other gateway sent nothing into the limit: it waited it out.
    assert time.monotonic() - started >= 1.0
    refused = [c for c in fake_github.requests("POST", r"/check-runs$") if c.status == 403]
    assert len(refused) == 1


@pytest.mark.django_db
def test_a_backlog_write_that_finds_no_place_is_deferred_without_quieting_the_installation():
    from datetime import timedelta

    from django.utils import timezone

    from repos.models import Installation
    from tasuku import durable
    from tasuku.durable import WRITE_BUDGET

    Installation.objects.create(github_id=11, account_login="acme")
    clock = Clock()
    shared = budget(clock, burst=1, interval=30.0)
    with writes_for(URGENT):
        shared.wait(KEY)
        shared.wait(KEY)  # reviews have taken the places of the next half minute
    with pytest.raises(GitHubError) as raised:
        shared.wait(KEY)  # the backlog's
    assert raised.value.code == WRITE_BUDGET and raised.value.retry_after is not None
    queue = durable.Queue(
        model="webhooks.WebhookDelivery",
        task="webhooks.tasks.delivery_process",
        name="delivery",
        waiting=("received",),
        working="processing",
        failed="failed",
    )
    now = timezone.now()
    verdict = queue.verdict(
        raised.value, attempt=1, deferrals=0, since=now - timedelta(seconds=1), installation=11
    )
    assert verdict.kind == durable.DEFERRED
    # Only this work waits: the installation's reviews go on.
    assert Installation.objects.get(github_id=11).quiet_until is None


def test_a_wait_for_the_budget_is_not_stretched_like_a_limit_github_answered_again():
    from datetime import UTC, datetime

    from sandbox.errors import StageError
    from tasuku import durable

    now = datetime.now(UTC)
    own = GitHubError("waiting", permanent=False, retry_after=2.0, code="github-write-budget")
    theirs = GitHubError("limited", permanent=False, retry_after=2.0, code="github-rate-limit")
    try:
        raise StageError("publication", permanent=False, stage="publication") from own
    except StageError as wrapped:
        assert not durable.quiets(wrapped)
    wait, _ = durable.deferral(own, deferrals=3, since=now, now=now)
    assert wait.total_seconds() < 10
    wait, _ = durable.deferral(theirs, deferrals=3, since=now, now=now)
    assert wait.total_seconds() >= 240


@pytest.mark.django_db
def test_the_shared_budget_lets_no_more_than_450_writes_through_in_an_hour():
    clock = Clock()
    shared = SharedBudget(WriteLimits(), max_wait=120, clock=clock, sleep=clock.sleep)
    started = clock()
    sent = []
    with writes_for(URGENT):
        for _ in range(450):
            shared.wait(KEY)
            sent.append(clock())
        with pytest.raises(GitHubError) as raised:
            shared.wait(KEY)  # the 451st: not before the hour's first write leaves it
    assert most_in_any(sent, 60) <= 66
    assert sent[-1] - started < 8 * 60
    assert raised.value.code == "github-write-budget"
    assert raised.value.retry_after == pytest.approx(3600 - (clock() - started), abs=2)
    row = WriteBudget.objects.get()
    assert len(row.hour_log) == 450 and row.hour_writes <= 450


@pytest.mark.django_db
def test_a_read_is_not_paced_but_waits_out_a_pause_github_asked_for():
    clock = Clock()
    shared = budget(clock)
    with writes_for(URGENT):
        for _ in range(10):
            shared.wait(KEY)  # the writes' pace is spent ...
    assert shared.read_wait(KEY) == 0.0  # ... reads do not wait for it
    shared.pause(KEY, 20, "GitHub: retry-after 20")
    assert shared.read_wait(KEY) == pytest.approx(20.0)
    shared.pause(KEY, 600, "GitHub: retry-after 600")
    with pytest.raises(GitHubError) as raised:
        shared.read_wait(KEY)
    assert raised.value.code == "github-rate-limit"


@pytest.mark.django_db
def test_a_write_waiting_its_turn_stops_when_its_run_is_stopped():
    clock = Clock()
    shared = budget(clock)
    shared.pause(KEY, 50, "GitHub: retry-after 50")

    class Stopping(Exception):
        pass

    def guard() -> None:
        if clock() - started > 3:
            raise Stopping

    started = clock()
    with pytest.raises(Stopping), shared.writing(KEY, guard=guard):
        pass
    assert clock() - started < 5  # not the 50 s the pause had left
