"""A held run's heartbeat: it renews the lease while the run executes, and stops the run
when someone asks (a cancel) or when its worker is told to stop (tasuku/lifecycle.py)."""

from __future__ import annotations

import contextvars
import logging
import threading
import time

from django.conf import settings
from django.db import connection

from reviews.models import ReviewRun, Stage
from reviews.queue.runs import RUNS, Held, LeaseLost, RunCancelled
from tasuku import lifecycle, outage

logger = logging.getLogger(__name__)


class WorkerStopping(Exception):
    """This worker is stopping (SIGTERM, SIGINT: tasuku/lifecycle.py): the run is handed
    back (`run_release`), its attempt recorded as interrupted, not failed."""

    permanent = True
    stage = ""


# A run in publication when its worker is told to stop goes on while at least this much
# of the stop's bound is left; past it, it is handed back like any other.
PUBLISH_MARGIN = 6.0


class Heartbeat:
    """Renew the lease every TASUKU_RUN_HEARTBEAT_SECONDS while the run executes, and
    watch for a request to cancel it (every CANCEL_POLL_SECONDS).

    `with Heartbeat(held) as beat: ... beat.check()`: when a renewal finds the run no
    longer held, `check()` raises LeaseLost so the pipeline stops at its next step; when
    someone asked the run to stop, it raises RunCancelled, and whatever was registered
    with `stopper` (the engine's runner) is told to stop at once. `guard()` asks the
    database afresh: the gateway calls it before each GitHub call of the run.

    When the worker is told to stop (tasuku/lifecycle.py) the same stoppers are called
    and `check()` raises WorkerStopping — except in publication, which may finish while
    PUBLISH_MARGIN of the stop's bound is left.
    """

    def __init__(self, held: Held) -> None:
        self.held = held
        self.lost = False
        self.cancelled = ""  # the reason, once someone asked the run to stop
        self.stopping = False  # the worker was told to stop
        self.stage = ""  # as the pipeline last recorded it (`at`)
        self._halted = False
        self._stoppers: list = []
        self._stop = threading.Event()
        # In the log context of the run it beats for (tasuku/logs.py): a thread does not
        # inherit its creator's.
        self._thread = threading.Thread(
            target=contextvars.copy_context().run,
            args=(self._loop,),
            name=f"heartbeat-run-{held.run_pk}",
            daemon=True,
        )

    def __enter__(self) -> Heartbeat:
        self._thread.start()
        lifecycle.on_stop(self._interrupt)
        return self

    def __exit__(self, *exc: object) -> None:
        lifecycle.off_stop(self._interrupt)
        self._stop.set()
        self._thread.join(timeout=5)

    def at(self, stage: str) -> None:
        self.stage = stage

    def beat(self) -> bool:
        held = self.held
        renewed = RUNS.renew(held.run_pk, held.attempt, where={"worker": held.worker})
        if not renewed:
            self.lost = True
        return bool(renewed)

    def _loop(self) -> None:
        interval = settings.TASUKU_RUN_HEARTBEAT_SECONDS
        poll = min(interval, CANCEL_POLL_SECONDS)
        beat_due = time.monotonic() + interval
        cut_off = False
        try:
            while not self._stop.wait(poll):
                try:
                    if self.stopping and not self._may_finish():
                        self._halt()
                    if not self.cancelled and (reason := run_cancel_pending(self.held.run_pk)):
                        self._cancel(reason)
                    # Cut off, the beat is owed: it is tried at every look until the
                    # database answers, and reclaims the lease if nobody took the run.
                    if cut_off or time.monotonic() >= beat_due:
                        if not self.beat():
                            return
                        beat_due = time.monotonic() + interval
                        if cut_off:
                            logger.info("run %s: lease renewed, the run goes on", self.held.run_pk)
                    cut_off = False
                    outage.answered()
                except outage.UNREACHABLE as exc:
                    # The database is away (tasuku/outage.py): the engine goes on; one
                    # warning for the process, not a traceback per look.
                    cut_off = True
                    outage.failed(exc, f"run {self.held.run_pk}'s heartbeat")
                    connection.close()  # a fresh connection at the next look
                except Exception:  # the heartbeat thread must outlive a failed beat
                    logger.exception("heartbeat of run %s failed; retrying", self.held.run_pk)
        finally:
            connection.close()  # this thread's own database connection

    def stopper(self, stop) -> None:
        """`stop()` is called when the run is cancelled or the worker stops (an engine's
        runner stopping it). Raises, rather than let an engine start, when either came
        first."""
        self._stoppers.append(stop)
        if self.cancelled or self._halted:
            self._stop_all()
        self.check()

    def _cancel(self, reason: str) -> None:
        self.cancelled = reason
        logger.info("run %s: cancel requested (%s); stopping it", self.held.run_pk, reason)
        self._stop_all()

    def _interrupt(self) -> None:
        """The worker is stopping (called on the thread that read the signal)."""
        self.stopping = True
        logger.info("run %s: the worker is stopping at %s", self.held.run_pk, self.stage)
        if not self._may_finish():
            self._halt()

    def _may_finish(self) -> bool:
        return self.stage == Stage.PUBLICATION and lifecycle.seconds_left() > PUBLISH_MARGIN

    def _halt(self) -> None:
        if self._halted:
            return
        self._halted = True
        self._stop_all()
        # What the run started that no stopper knows: a git fetch mid-clone. (A stop sent
        # to the whole group reached it already.)
        lifecycle.children_terminate()

    def _stop_all(self) -> None:
        for stop in self._stoppers:
            try:
                stop()
            except Exception:  # one stopper's error must not keep the others from stopping
                logger.exception("run %s: could not stop its engine", self.held.run_pk)

    def check(self) -> None:
        if self.lost:
            raise LeaseLost(f"run {self.held.run_pk}: lease lost")
        if self.cancelled:
            raise RunCancelled(self.cancelled)
        if self.stopping and not self._may_finish():
            self._halt()
            raise WorkerStopping(f"run {self.held.run_pk}: the worker is stopping")

    def guard(self) -> None:
        """`check()` with the database asked afresh: right before a GitHub call, a cancel
        requested a moment ago still stops it."""
        if not self.cancelled and (reason := run_cancel_pending(self.held.run_pk)):
            self._cancel(reason)
        self.check()


CANCEL_POLL_SECONDS = 2


def run_cancel_pending(run_pk: int) -> str:
    """Why someone asked the run to stop ("" when nobody did)."""
    row = (
        ReviewRun.objects.filter(pk=run_pk, cancel_requested_at__isnull=False)
        .values_list("cancel_reason", flat=True)
        .first()
    )
    return (row or "cancelled") if row is not None else ""
