"""One write budget per installation, shared by every process and host.

GitHub's secondary limits hold for the installation, not for the process that sends: 80
content-generating requests a minute, 500 an hour, 100 requests at once, and a
`Retry-After` (or a spent quota) that every further request should honour. So every
write the gateway makes for an installation takes its place in one row
(`repos.models.WriteBudget`), under a row lock (SELECT ... FOR UPDATE on PostgreSQL;
SQLite's write lock, its transactions begun IMMEDIATE): the buckets of both windows
(repos/github/pacing.py, `place_find`: the minute's bucket, the hour's writes), the
writes in flight, and the wait GitHub last
asked for, which any process that saw it recorded (`budget_pause`).

Reads are not paced, but wait out such a pause too (`read_wait`).

A write of a review in progress (`writes_for(URGENT)`, set by the pipeline and by
admission) takes the next place, even a few seconds ahead, and sleeps until it; a write of
the backlog (sweeps, resends, the walkthrough's outbox: the default) takes a place only
when one is free now and the reserve of the burst is left, and otherwise looks again
shortly: places taken ahead by reviews are never its. A wait longer than the gateway's
longest (`max_wait`) is not slept through: the call fails as rate-limited, with the
seconds left, and the caller's queue defers its work (tasuku/durable.py).
"""

from __future__ import annotations

import logging
import os
import random
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import UTC, datetime

from repos.github.errors import GitHubError
from repos.github.pacing import BACKLOG, URGENT, WriteLimits, place_find

logger = logging.getLogger(__name__)

__all__ = ["BACKLOG", "URGENT", "SharedBudget", "budget_pause", "writes_for"]

# How long a backlog write looks away before it asks again, at most.
BACKLOG_LOOK = 1.0
# How long a write whose places are all in flight waits before it asks again.
AT_ONCE_LOOK = 0.05
# How long a backlog write looks for a place before its queue defers it: a worker is not
# held from reviews for longer.
BACKLOG_WAIT = 15.0

_priority: ContextVar[str] = ContextVar("tasuku_write_priority", default=BACKLOG)
# Told of each wait (seconds, until as epoch seconds, why): the run page shows it.
_on_wait: ContextVar[Callable[[float, float, str], None] | None] = ContextVar(
    "tasuku_write_on_wait", default=None
)


@contextmanager
def writes_for(
    priority: str, *, on_wait: Callable[[float, float, str], None] | None = None
) -> Iterator[None]:
    """The writes made inside the block are `priority`'s (URGENT: a review in progress),
    and `on_wait` is told when one of them waits."""
    token = _priority.set(priority)
    told = _on_wait.set(on_wait) if on_wait is not None else None
    try:
        yield
    finally:
        _priority.reset(token)
        if told is not None:
            _on_wait.reset(told)


def write_priority() -> str:
    return _priority.get()


def _rows():
    from django.apps import apps

    return apps.get_model("repos", "WriteBudget").objects


def _moment(epoch: float) -> datetime:
    return datetime.fromtimestamp(epoch, UTC)


def _epoch(moment: datetime | None) -> float:
    return moment.timestamp() if moment is not None else 0.0


@dataclass(frozen=True)
class Turn:
    """What the budget said: go at `at` (held: a place in flight taken), or look again at
    `at` (nothing taken); `why` a waiter's reason."""

    at: float
    taken: bool
    held: bool
    why: str = ""
    paused: bool = False


def budget_pause(
    key: tuple[str, int], seconds: float, reason: str, *, clock: Callable[[], float] = time.time
) -> None:
    """GitHub asked the installation to wait `seconds` (a Retry-After, a spent quota, a
    secondary limit): no process writes for it until then (a later wait already
    recorded stands)."""
    from django.db import transaction

    app_id, installation_id = key
    until = clock() + max(0.0, seconds)
    with transaction.atomic():
        row, _ = (
            _rows()
            .select_for_update()
            .get_or_create(app_id=app_id, installation_id=installation_id)
        )
        if _epoch(row.paused_until) >= until:
            return
        row.paused_until = _moment(until)
        row.pause_reason = reason[:2000]
        row.pauses += 1
        row.save(update_fields=["paused_until", "pause_reason", "pauses", "updated_at"])
    logger.warning(
        "GitHub: installation %s: no writes for %.0fs (%s)", installation_id, seconds, reason
    )


class SharedBudget:
    """The installations' write budgets under one set of limits (the gateway's policy).

    `writing(key)` is a write's turn: it waits for a place and holds it while the
    block runs; `wait(key)` takes a place and holds nothing (WritePacer's interface)."""

    def __init__(
        self,
        limits: WriteLimits,
        *,
        max_wait: float,
        hold_for: float = 60.0,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.limits = limits
        self.max_wait = max_wait
        self.hold_for = hold_for
        self._clock = clock
        self._sleep = sleep

    # -- the row's one update ------------------------------------------------------------
    def _turn(self, key: tuple[str, int], priority: str, holder: str, *, hold: bool) -> Turn:
        from django.db import transaction

        app_id, installation_id = key
        limits = self.limits
        with transaction.atomic():
            row, _ = (
                _rows()
                .select_for_update()
                .get_or_create(app_id=app_id, installation_id=installation_id)
            )
            now = self._clock()
            paused = _epoch(row.paused_until)
            if paused > now:
                return Turn(at=paused, taken=False, held=False, why=row.pause_reason, paused=True)
            flying = {h: t for h, t in (row.in_flight or {}).items() if t > now}
            place = place_find(limits, row.minute_tat, row.hour_log or [], now, priority)
            if place.at > now and priority != URGENT:
                # The backlog never takes a place ahead: reviews may want it first.
                return Turn(at=place.at, taken=False, held=False, why="the write budget")
            if place.at - now > self.max_wait:
                return Turn(at=place.at, taken=False, held=False, why="the write budget")
            goes_now = place.at <= now
            if goes_now and hold and len(flying) >= limits.at_once:
                return Turn(
                    at=now + AT_ONCE_LOOK,
                    taken=False,
                    held=False,
                    why=f"{limits.at_once} writes at once",
                )
            row.minute_tat, row.hour_log = place.minute_tat, place.hour_log
            self._count(row, place.at)
            if not goes_now:
                row.waits += 1
                row.waited_seconds += place.at - now
            held = goes_now and hold
            if held:
                flying[holder] = now + self.hold_for
            row.in_flight = flying
            row.save()
        return Turn(at=place.at, taken=True, held=held, why="the write budget")

    def _count(self, row, at: float) -> None:
        moment = _moment(at)
        minute = moment.replace(second=0, microsecond=0)
        hour = minute.replace(minute=0)
        if row.minute_started != minute:
            row.minute_started, row.minute_writes = minute, 0
        if row.hour_started != hour:
            row.hour_started, row.hour_writes = hour, 0
        row.minute_writes += 1
        row.hour_writes += 1
        row.writes += 1

    def _hold(self, key: tuple[str, int], holder: str) -> Turn:
        """A place taken ahead has come: hold it among the writes in flight (after any
        pause GitHub asked for meanwhile)."""
        from django.db import transaction

        app_id, installation_id = key
        with transaction.atomic():
            row = _rows().select_for_update().get(app_id=app_id, installation_id=installation_id)
            now = self._clock()
            paused = _epoch(row.paused_until)
            if paused > now:
                return Turn(at=paused, taken=True, held=False, why=row.pause_reason, paused=True)
            flying = {h: t for h, t in (row.in_flight or {}).items() if t > now}
            if len(flying) >= self.limits.at_once:
                return Turn(at=now + AT_ONCE_LOOK, taken=True, held=False, why="writes at once")
            flying[holder] = now + self.hold_for
            row.in_flight = flying
            row.save(update_fields=["in_flight", "updated_at"])
        return Turn(at=now, taken=True, held=True)

    def _release(self, key: tuple[str, int], holder: str) -> None:
        from django.db import transaction

        app_id, installation_id = key
        with transaction.atomic():
            row = (
                _rows()
                .select_for_update()
                .filter(app_id=app_id, installation_id=installation_id)
                .first()
            )
            if row is None or holder not in (row.in_flight or {}):
                return
            now = self._clock()
            row.in_flight = {h: t for h, t in row.in_flight.items() if h != holder and t > now}
            row.save(update_fields=["in_flight", "updated_at"])

    # -- a write's turn ------------------------------------------------------------------
    def _waited(self, seconds: float, until: float, why: str) -> None:
        told = _on_wait.get()
        if told is not None and seconds > 0:
            try:
                told(seconds, until, why)
            except Exception:  # noqa: BLE001 - showing a wait never fails the write
                logger.exception("could not record a write's wait")

    def _give_up(
        self, key: tuple[str, int], until: float, why: str, *, paused: bool
    ) -> GitHubError:
        """A wait longer than `max_wait`, handed to the caller's queue: GitHub's own
        (`paused`: a rate limit, which quiets the installation's queues) or a place in
        the budget (`github-write-budget`: only that work waits)."""
        left = max(0.0, until - self._clock())
        return GitHubError(
            f"Could not write to GitHub for installation {key[1]} for {left:.0f}s: "
            f"waiting for {why}",
            permanent=False,
            retry_after=left,
            code="github-rate-limit" if paused else "github-write-budget",
        )

    def _nap(self, seconds: float, guard: Callable[[], None] | None) -> None:
        """Sleep, a second at a time, asking `guard` (a run's: cancelled, or its worker
        stopping) after each: a write's wait never holds up a stop."""
        left = seconds
        while left > 0:
            step = min(left, 1.0)
            self._sleep(step)
            left -= step
            if guard is not None:
                guard()

    def _take(
        self,
        key: tuple[str, int],
        holder: str,
        *,
        hold: bool,
        guard: Callable[[], None] | None = None,
    ) -> float:
        """Wait for the write's turn (held among the writes in flight when `hold`); the
        seconds waited."""
        priority = _priority.get()
        started = self._clock()
        taken = False
        while True:
            turn = (
                self._hold(key, holder) if taken else self._turn(key, priority, holder, hold=hold)
            )
            taken = taken or turn.taken
            now = self._clock()
            if turn.held or (turn.taken and not hold and turn.at <= now):
                return now - started
            limit = self.max_wait if priority == URGENT or turn.paused else BACKLOG_WAIT
            if turn.at - started > limit and (turn.paused or not taken):
                raise self._give_up(
                    key, turn.at, turn.why or "the write budget", paused=turn.paused
                )
            pause = max(0.0, turn.at - now)
            if not turn.taken and not turn.paused and priority != URGENT:
                pause = min(pause, BACKLOG_LOOK) + random.uniform(0, 0.05)  # noqa: S311
            if pause >= 0.2 or turn.paused:
                self._waited(pause, now + pause, turn.why)
            self._nap(pause, guard)
            if turn.taken and not hold and not turn.paused:
                return self._clock() - started

    @contextmanager
    def writing(
        self, key: tuple[str, int], *, guard: Callable[[], None] | None = None
    ) -> Iterator[float]:
        """The write's turn, held while the block runs: yields the seconds waited."""
        holder = (
            f"{socket.gethostname()}:{os.getpid()}:{threading.get_ident()}:{uuid.uuid4().hex[:8]}"
        )
        waited = self._take(key, holder, hold=True, guard=guard)
        try:
            yield waited
        finally:
            try:
                self._release(key, holder)
            except Exception:  # noqa: BLE001 - the hold ends by itself (`hold_for`)
                logger.exception("could not release a write's place")

    def wait(self, key: tuple[str, int], *, guard: Callable[[], None] | None = None) -> float:
        """Take the write's place and wait for it; the seconds waited."""
        return self._take(key, "", hold=False, guard=guard)

    def read_wait(self, key: tuple[str, int], *, guard: Callable[[], None] | None = None) -> float:
        """A read is not paced, but waits out a pause GitHub asked of any process (one
        indexed read of the row); the seconds waited."""
        app_id, installation_id = key
        found = (
            _rows()
            .filter(app_id=app_id, installation_id=installation_id)
            .values_list("paused_until", "pause_reason")
            .first()
        )
        if found is None or found[0] is None:
            return 0.0
        until, why = _epoch(found[0]), found[1]
        left = until - self._clock()
        if left <= 0:
            return 0.0
        if left > self.max_wait:
            raise self._give_up(key, until, why, paused=True)
        self._waited(left, until, why)
        self._nap(left, guard)
        return left

    def pause(self, key: tuple[str, int], seconds: float, reason: str) -> None:
        budget_pause(key, seconds, reason, clock=self._clock)
