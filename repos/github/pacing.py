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

The bucket is the process's, shared by every client and token of the installation (a
token per repository, a client per token). Worker processes do not share one: each keeps
its own pace.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable


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
