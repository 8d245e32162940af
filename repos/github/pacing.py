"""The pace of an installation's writes to GitHub.

GitHub limits content creation ("no more than 80 content-generating requests per minute")
and asks an integration making many POST, PATCH, PUT or DELETE requests to wait a second
between them; reads it asks only to make one at a time. So every write the gateway makes
for an installation passes through `WritePacer.wait`, a token bucket (the generic cell
rate algorithm): `burst` writes go at once, then one every `interval` seconds. A review's
handful of writes (its check run's updates, the review, its walkthrough) go out without
waiting; a stream of them (a busy installation, a long reconciliation) settles at one a
second — with a burst of 6, at most 66 in any minute. Reads, and the App's own calls
(tokens minted), are not paced.

`WritePacer` is one process's bucket. What the gateway uses is the installation's budget
that every process and host shares (repos/github/budget.py: a row per installation),
whose arithmetic is below (`WriteLimits`, `place_find`): the minute as a bucket, the hour
as the times of its writes, and places kept for reviews in progress.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass


class WritePacer:
    def __init__(
        self,
        *,
        burst: int,
        interval: float,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.burst = max(1, burst)
        self.interval = interval
        self._clock = clock
        self._sleep = sleep
        self._lock = threading.Lock()
        # key -> the theoretical arrival time: when the bucket would be full again.
        self._tat: dict[Hashable, float] = {}

    def delay(self, key: Hashable) -> float:
        """Take the next write's place for `key`: how many seconds it must wait first.
        A place once given is kept, so callers waiting at once go one after another."""
        if self.interval <= 0:
            return 0.0
        with self._lock:
            now = self._clock()
            tat = max(self._tat.get(key, now), now)
            allowed = max(now, tat - (self.burst - 1) * self.interval)
            self._tat[key] = max(tat, allowed) + self.interval
            if len(self._tat) > 4096:  # keys long idle are full buckets: forget them
                self._tat = {k: v for k, v in self._tat.items() if v > now}
            return allowed - now

    def wait(self, key: Hashable) -> float:
        """Wait for the next write's turn for `key`; the seconds waited."""
        seconds = self.delay(key)
        if seconds > 0:
            self._sleep(seconds)
        return seconds

    def reset(self) -> None:
        with self._lock:
            self._tat.clear()


# --- The installation's shared budget: its pure arithmetic -------------------------------
#
# GitHub's secondary limits hold for the installation, whatever process or host sends:
# "no more than 80 content-generating requests per minute and no more than 500
# content-generating requests per hour", and no more than 100 concurrent requests. The
# budget every process shares (repos/github/budget.py, a row per installation) keeps the
# minute's pace as a bucket of the same algorithm as WritePacer (a burst, then one a
# second: at most burst + 60 in any minute, and the second between writes GitHub asks
# for), and the hour as the times of the writes it let through in the last hour (no more
# than the hour's share in any hour, whatever their shape). This is their arithmetic: no
# database, no clock of its own.

URGENT, BACKLOG = "urgent", "backlog"
HOUR = 3600.0


@dataclass(frozen=True)
class Bucket:
    """A bucket: `burst` writes at once, then one every `interval` seconds. In any
    `window` seconds it lets through at most burst + window / interval writes."""

    burst: int
    interval: float

    def earliest(self, tat: float, now: float, *, keep: int = 0) -> float:
        """When the next write may go, keeping `keep` places of the burst unused."""
        burst = max(1, self.burst - keep)
        return max(now, tat - (burst - 1) * self.interval)

    def after(self, tat: float, at: float) -> float:
        """The bucket's theoretical arrival time once a write went at `at`."""
        return max(tat, at) + self.interval


@dataclass(frozen=True)
class WriteLimits:
    """What an installation's writes may do, from GitHub's documented limits and the
    operator's pace: `share` of each documented limit is used (a margin for what GitHub
    counts that Tasuku does not see: a person's own writes through the App, clocks)."""

    burst: int = 6
    interval: float = 1.0
    per_minute: int = 80
    per_hour: int = 500
    at_once: int = 10
    share: float = 0.9
    # Places of the minute's burst that the backlog (sweeps, resends) leaves to reviews
    # in progress; of the hour's, a tenth.
    reserve: int = 2

    @property
    def minute(self) -> Bucket:
        allowed = max(2, int(self.per_minute * self.share))
        burst = max(1, min(self.burst, allowed - 1))
        return Bucket(burst=burst, interval=max(self.interval, 60.0 / (allowed - burst)))

    @property
    def hourly(self) -> int:
        """Writes in any hour, at most."""
        return max(1, int(self.per_hour * self.share))

    def keep(self, priority: str) -> tuple[int, int]:
        """The places of the minute's burst and of the hour that `priority` may not take."""
        if priority == URGENT:
            return 0, 0
        # At most a third of a small burst: a burst of 2 is all the backlog's too.
        return min(self.reserve, self.minute.burst // 3), max(self.reserve, self.hourly // 10)


@dataclass(frozen=True)
class Place:
    """A write's place in the budget: when it may go (`at`), and the budget after it."""

    at: float
    minute_tat: float
    hour_log: list[float]


def hour_earliest(log: list[float], now: float, allowed: int) -> float:
    """The earliest time from `now` at which one more write keeps every hour that holds
    it within `allowed`, given the writes of `log` (some may be places taken ahead).
    Every write after the candidate's hour began is counted, later ones too: a window
    that holds the candidate begins no earlier, so none holds more."""
    recent = sorted(t for t in log if t > now - HOUR)
    if len(recent) < allowed:
        return now
    return max(now, recent[len(recent) - allowed] + HOUR)


def place_find(
    limits: WriteLimits, minute_tat: float, hour_log: list[float], now: float, priority: str
) -> Place:
    """The earliest place of a write of `priority` in the minute's bucket and the hour."""
    keep_minute, keep_hour = limits.keep(priority)
    at = max(
        limits.minute.earliest(minute_tat, now, keep=keep_minute),
        hour_earliest(hour_log, now, limits.hourly - keep_hour),
    )
    kept = [t for t in hour_log if t > now - HOUR]
    return Place(
        at=at,
        minute_tat=limits.minute.after(minute_tat, at),
        hour_log=[*kept, round(at, 3)],
    )
