"""Whether this process can reach its database, as its background threads find it.

A database that goes away for a while (a restart, a failover, a network blip) is not
the end of a run: its engine goes on, its heartbeat renews the lease as soon as the
database answers again, and the run is only declared lost by a reaper that could reach
the database for a whole lease and saw no heartbeat meanwhile (docs/operations.md,
*A database outage*). So:

- The threads that talk to the database on their own (a run's heartbeat, the worker's
  heartbeat, the reaper, the queue's poll) report each failure to reach it (`failed`)
  and each answer (`answered`). The process logs one warning when the database goes away
  and one when it answers again, not a traceback per try.
- `trusted(lease)`: whether this process has been connected for at least `lease`
  without a break. A process that was cut off itself saw no heartbeat of anyone's and
  must not judge a lease by it; a worker process also waits a lease after its start
  (`watch`), since it may have been started during the blip. A process that never
  called `watch` (the web process, a test) is trusted until it sees a failure.
- `wait`: a thread about to write after a long call (the engine's) gets a fresh
  connection, and waits a while for the database rather than failing the run.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable

from django.db import InterfaceError, OperationalError, connection

logger = logging.getLogger(__name__)

# What a database that cannot be reached raises (the server gone, the connection dropped).
UNREACHABLE = (OperationalError, InterfaceError)


class Outage:
    """One process's view of its database: down since when, connected since when."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.lock = threading.Lock()
        self.down_since: float | None = None
        # Since when the database answered without a break: a process starts trusted
        # (the epoch of its clock) unless `watch` says otherwise.
        self.connected_since: float | None = float("-inf")
        self.outages = 0

    def watch(self) -> None:
        """A worker process: trust no lease judgment before it has been connected for
        one (it may have started during an outage)."""
        with self.lock:
            self.connected_since = None

    def failed(self, exc: BaseException, who: str = "") -> None:
        """The database could not be reached: one warning for the outage, not per try."""
        with self.lock:
            first = self.down_since is None
            if first:
                self.down_since = self.clock()
                self.outages += 1
            self.connected_since = None
        if first:
            logger.warning(
                "process %d: the database cannot be reached (%s%s); runs go on, and their "
                "leases are renewed when it answers again",
                os.getpid(),
                f"{who}: " if who else "",
                str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__,
            )

    def answered(self) -> None:
        with self.lock:
            down_since, self.down_since = self.down_since, None
            if self.connected_since is None:
                self.connected_since = self.clock()
        if down_since is not None:
            logger.warning(
                "process %d: the database answers again after %.1f s",
                os.getpid(),
                self.clock() - down_since,
            )

    @property
    def down(self) -> bool:
        return self.down_since is not None

    def connected_for(self) -> float:
        """Seconds this process has been connected without a break (0 while cut off)."""
        with self.lock:
            since = self.connected_since
        return 0.0 if since is None else self.clock() - since

    def trusted(self, lease: float) -> bool:
        """Whether this process may judge that a lease of `lease` seconds ran out
        unrenewed: it has been connected for at least that long."""
        return self.connected_for() >= lease

    def untrusted_for(self, lease: float) -> float:
        """Seconds until `trusted(lease)`, if the database keeps answering."""
        return max(0.0, lease - self.connected_for())


OUTAGE = Outage()


def failed(exc: BaseException, who: str = "") -> None:
    OUTAGE.failed(exc, who)


def answered() -> None:
    OUTAGE.answered()


def trusted(lease: float) -> bool:
    return OUTAGE.trusted(lease)


def wait(timeout: float, *, who: str = "", give_up: Callable[[], bool] = lambda: False) -> bool:
    """Make sure this thread's connection works, waiting up to `timeout` seconds (trying
    every second) for the database to answer — unless `give_up()` says to stop waiting.
    Whether it answers. Inside a transaction nothing is done (its connection cannot be
    replaced)."""
    if connection.in_atomic_block:
        return True
    deadline = time.monotonic() + timeout
    while True:
        try:
            # A connection idle through an outage is dead without knowing it: the health
            # check on its next use (CONN_HEALTH_CHECKS) replaces it.
            connection.close_if_unusable_or_obsolete()
            with connection.cursor() as cursor:
                cursor.execute("SELECT 1")
        except UNREACHABLE as exc:
            connection.close()
            failed(exc, who)
            if time.monotonic() >= deadline or give_up():
                return False
            time.sleep(1.0)
            continue
        answered()
        return True
