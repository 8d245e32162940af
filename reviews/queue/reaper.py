"""The reaper, run by every worker process on a thread of its own (started when django-q2
spawns the process, like its heartbeat); each turn one of them sweeps: whichever's
conditional UPDATE of the `ReaperTurn` row moves it on, so many worker hosts never reap
at once, and a reaper whose host died is replaced a period later.

A turn is due every TASUKU_REAP_SECONDS, and also the moment the earliest lease of a
running run runs out: a killed worker's run is handed on within about a second of the
end of its lease (TASUKU_RUN_LEASE_SECONDS after its last heartbeat), not a period
later. A worker process that dies under its cluster is noticed sooner still: the cluster
hands its runs on at once (`worker_lost_release`).

A reaper back from a database outage (or a worker process just started) declares no run
lost before it has been connected for a whole lease (tasuku/outage.py): the run's own
worker, cut off by the same outage, renews its lease meanwhile.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable
from datetime import datetime, timedelta

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.db.models import Min
from django.utils import timezone

from reviews.models import ReaperTurn, ReviewRun, RunStatus
from reviews.queue.runs import lease_length, runs_release_worker, worker_name
from tasuku import lifecycle, outage

logger = logging.getLogger(__name__)

RUNS_REAPER = "runs"
# Past a lease's end before its run counts as expired (`lease_expires_at__lt=now`).
SLACK = timedelta(milliseconds=300)
JITTER = 0.25  # seconds: many worker processes do not all look at the same instant

_started = threading.Event()


def period() -> timedelta:
    return timedelta(seconds=settings.TASUKU_REAP_SECONDS)


# What a turn sweeps: the runs and every durable queue above them (reviews/tasks.py,
# `runs_reap`), registered by the app's ready() so the queue names no feature.
_sweeps: Callable[[], dict] | None = None


def sweep_register(sweep: Callable[[], dict]) -> None:
    global _sweeps
    _sweeps = sweep


def _sweep() -> dict:
    if _sweeps is None:
        raise RuntimeError("no sweep registered for the reaper (reviews.apps registers it)")
    return _sweeps()


def reaper_turn(
    holder: str, *, now: datetime | None = None, sweep: Callable[[], dict] = _sweep
) -> float:
    """Sweep if the turn is due and this process wins it. Seconds until the next look."""
    now = now or timezone.now()
    due = ReaperTurn.objects.filter(name=RUNS_REAPER).values_list("due_at", flat=True).first()
    if due is None:
        try:
            with transaction.atomic():
                ReaperTurn.objects.create(name=RUNS_REAPER, due_at=now)
        except IntegrityError:
            pass  # another process made it first
        due = now
    if due > now:
        return min(period(), due - now).total_seconds()
    # Race: every worker process on every host finds the turn due at about the same
    # moment. The first UPDATE moves it a period on and wins; the others find it no
    # longer due. A winner that dies mid-sweep leaves it due again a period later.
    won = ReaperTurn.objects.filter(name=RUNS_REAPER, due_at__lte=now).update(
        due_at=now + period(), holder=holder
    )
    if not won:
        return 0.0  # look again at when the winner set it
    started = time.monotonic()
    result = sweep()
    after = timezone.now()
    following = after + period()
    expiry = ReviewRun.objects.filter(
        status=RunStatus.RUNNING, lease_expires_at__isnull=False
    ).aggregate(first=Min("lease_expires_at"))["first"]
    if expiry is not None:
        following = max(after + SLACK, min(following, expiry + SLACK))
        # A reaper back from an outage judges no lease before it has watched one whole
        # (tasuku/outage.py): its next look is when it may.
        if waiting := outage.OUTAGE.untrusted_for(lease_length().total_seconds()):
            following = max(following, min(after + period(), after + timedelta(seconds=waiting)))
    ReaperTurn.objects.filter(name=RUNS_REAPER, holder=holder).update(
        due_at=following,
        ran_at=now,
        took_ms=int((time.monotonic() - started) * 1000),
        result={k: v for k, v in result.items() if isinstance(v, int)},
    )
    return (following - after).total_seconds()


def _loop(holder: str) -> None:
    try:
        while not lifecycle.stopping():
            try:
                wait = reaper_turn(holder)
                outage.answered()
            except outage.UNREACHABLE as exc:
                outage.failed(exc, "the reaper")  # one warning for the outage, not one a turn
                connection.close()  # a broken connection is opened anew next time
                wait = settings.TASUKU_REAP_SECONDS
            except Exception:  # the reaper thread must outlive a failed turn
                logger.exception("the reaper's turn in %s failed; trying again", holder)
                connection.close()  # a broken connection is opened anew next time
                wait = settings.TASUKU_REAP_SECONDS
            lifecycle.wait(wait + random.uniform(0, JITTER))  # noqa: S311
    finally:
        connection.close()


def reaper_start(**kwargs: object) -> None:
    """`post_spawn` receiver: start this worker process's reaper thread (once)."""
    if _started.is_set():
        return
    _started.set()
    # A worker process may start in the middle of an outage: it judges no lease before
    # it has been connected for one.
    outage.OUTAGE.watch()
    threading.Thread(target=_loop, args=(worker_name(),), name="tasuku-reaper", daemon=True).start()


def worker_lost_release(sender: object = None, name: str = "", **kwargs: object) -> None:
    """`tasuku.lifecycle.worker_lost` receiver (in the cluster's sentinel)."""
    if name:
        runs_release_worker(name)
    connection.close()  # the sentinel forks workers: no connection to share with them


def reaper_last() -> ReaperTurn | None:
    """The reaper's row, for the status page (None before any worker ran)."""
    return ReaperTurn.objects.filter(name=RUNS_REAPER).first()
