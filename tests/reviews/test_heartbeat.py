"""A run's heartbeat (reviews/queue/heartbeat.py) while the database is away: it keeps trying at
every look, says so once for the process, and reclaims the lease when the database answers
— unless the run was taken meanwhile."""

from __future__ import annotations

import time
from types import SimpleNamespace

import pytest
from django.db import OperationalError

from reviews.queue import heartbeat
from reviews.queue.runs import Held
from tasuku import outage


class Renewals:
    """`RUNS.renew` of a database away for the first `away` tries, then answering
    `answer` (whether the run is still this attempt's)."""

    def __init__(self, away: int, answer: bool) -> None:
        self.away, self.answer = away, answer
        self.calls: list[float] = []

    def __call__(self, *args, **kwargs) -> bool:
        self.calls.append(time.monotonic())
        if len(self.calls) <= self.away:
            raise OperationalError("server closed the connection unexpectedly")
        return self.answer


@pytest.fixture
def beating(settings, monkeypatch):
    settings.TASUKU_RUN_HEARTBEAT_SECONDS = 1  # a look every second, a beat every second

    def start(renewals: Renewals) -> heartbeat.Heartbeat:
        # The run queue's renewal, as the database answers it (the heartbeat's only write).
        monkeypatch.setattr(heartbeat, "RUNS", SimpleNamespace(renew=renewals))
        monkeypatch.setattr(heartbeat, "run_cancel_pending", lambda run_pk: "")
        return heartbeat.Heartbeat(Held(run_pk=7, attempt=1, worker="vm:1"))

    return start


def _until(condition, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.05)


def test_a_heartbeat_cut_off_keeps_trying_and_reclaims_the_lease_without_a_traceback(
    beating, caplog
):
    renewals = Renewals(away=3, answer=True)
    with beating(renewals) as beat:
        _until(lambda: len(renewals.calls) >= 5)
        beat.check()  # the run goes on: nothing was lost
    assert not beat.lost
    assert len(renewals.calls) >= 5  # tried at every look while away, then beat again
    assert not any(r.exc_info for r in caplog.records), caplog.text
    said = [r.getMessage() for r in caplog.records if r.name == "tasuku.outage"]
    assert len(said) == 2, said  # away once, back once
    assert "run 7's heartbeat" in said[0] and "answers again" in said[1]
    assert "run 7: lease renewed, the run goes on" in caplog.text
    assert not outage.OUTAGE.down


def test_a_heartbeat_back_from_an_outage_finds_the_run_taken_and_stops_it(beating):
    renewals = Renewals(away=2, answer=False)
    with beating(renewals) as beat:
        _until(lambda: beat.lost)
        with pytest.raises(heartbeat.LeaseLost):
            beat.check()
    assert len(renewals.calls) == 3  # no beat after the one that found the run taken
