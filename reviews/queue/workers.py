"""Worker heartbeats: every worker process (`manage.py worker`) says it is alive, busy or idle.

django-q2 keeps its own cluster statistics in a cache, which with the ORM broker is
per process and invisible to the web process; so each worker process starts a thread
when it spawns (django-q2's `post_spawn` signal) that writes its `WorkerHeartbeat` row
every TASUKU_RUN_HEARTBEAT_SECONDS on its own database connection, with the task it is
running (`pre_execute` / `post_execute_in_worker`). The overview shows the rows.
"""

from __future__ import annotations

import logging
import multiprocessing.util
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.db import Error as DBError
from django.db import connection
from django.db.models import F
from django.utils import timezone

from repos.services import github_usage_flush
from reviews.models import WorkerHeartbeat
from reviews.queue.runs import worker_name
from tasuku import outage

logger = logging.getLogger(__name__)

# Rows of workers silent this long are removed (recycled or stopped processes).
FORGET_AFTER = timedelta(days=1)


@dataclass
class _Now:
    """What this process is doing, as its heartbeat thread reports it."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    task: str = ""
    task_started_at: datetime | None = None
    done: int = 0


_now = _Now()
_started = threading.Event()
_stopping = threading.Event()


def silent_after() -> timedelta:
    """A worker not heard from for this long is shown as silent."""
    return timedelta(seconds=3 * settings.TASUKU_RUN_HEARTBEAT_SECONDS)


def heartbeat_write(name: str, *, started_at: datetime, now: datetime | None = None) -> None:
    """Write (or create) this worker's row with what it is doing now."""
    now = now or timezone.now()
    with _now.lock:
        task, task_started_at, done = _now.task, _now.task_started_at, _now.done
        _now.done = 0
    updated = WorkerHeartbeat.objects.filter(
        name=name
    ).update(
        beat_at=now,
        stopped_at=None,  # (a new process may have an old one's name)
        task=task[:200],
        task_started_at=task_started_at,
        tasks_done=F("tasks_done") + done,
    )
    if not updated:
        WorkerHeartbeat.objects.update_or_create(
            name=name,
            defaults={
                "started_at": started_at,
                "beat_at": now,
                "task": task[:200],
                "task_started_at": task_started_at,
                "tasks_done": done,
            },
        )


def _beat_loop(name: str, started_at: datetime) -> None:
    interval = settings.TASUKU_RUN_HEARTBEAT_SECONDS
    failing = False
    try:
        while not _stopping.is_set():
            try:
                heartbeat_write(name, started_at=started_at)
                outage.answered()
                heartbeats_prune()
                github_usage_flush()
                failing = False
            except outage.UNREACHABLE as exc:
                # The database is away: one warning for the process (tasuku/outage.py).
                outage.failed(exc, f"worker heartbeat of {name}")
                connection.close()  # a broken connection is reopened on the next beat
            except Exception as exc:
                # The whole error once, then one line per beat until it passes.
                if failing:
                    logger.warning("worker heartbeat of %s still failing: %s", name, exc)
                else:
                    logger.exception("worker heartbeat of %s failed; trying again", name)
                failing = True
                connection.close()  # a broken connection is reopened on the next beat
            time.sleep(interval)
    finally:
        connection.close()


def heartbeats_prune(now: datetime | None = None) -> int:
    """Forget the rows of workers not heard from for FORGET_AFTER (recycled, stopped or
    killed processes): how many were removed."""
    cutoff = (now or timezone.now()) - FORGET_AFTER
    return WorkerHeartbeat.objects.filter(beat_at__lt=cutoff).delete()[0]


def heartbeat_start(**kwargs: object) -> None:
    """`post_spawn` receiver: start this worker process's heartbeat thread (once), and
    say when the process stops cleanly (run as a multiprocessing child exits)."""
    if _started.is_set():
        return
    _started.set()
    name = worker_name()
    threading.Thread(
        target=_beat_loop,
        args=(name, timezone.now()),
        name="tasuku-worker-heartbeat",
        daemon=True,
    ).start()
    multiprocessing.util.Finalize(None, heartbeat_stopped, args=(name,), exitpriority=10)


def heartbeat_stopped(name: str) -> None:
    """This worker process is stopping cleanly: its row says so (not "silent")."""
    _stopping.set()  # no beat after this one
    try:
        # The process's connection may have died in an outage while it was idle: the
        # health check of its next use replaces it (CONN_HEALTH_CHECKS).
        if not connection.in_atomic_block:
            connection.close_if_unusable_or_obsolete()
        now = timezone.now()
        WorkerHeartbeat.objects.filter(name=name).update(
            stopped_at=now, beat_at=now, task="", task_started_at=None
        )
    except outage.UNREACHABLE as exc:  # the database is away: the row then reads "silent"
        logger.warning("worker %s could not record that it stopped: %s", name, exc)
    except DBError:  # the database may be gone too: the row then reads "silent"
        logger.warning("worker %s could not record that it stopped", name, exc_info=True)


def task_started(func: object = None, task: dict | None = None, **kwargs: object) -> None:
    """`pre_execute` receiver."""
    label = (task or {}).get("name") or getattr(func, "__name__", "") or str(func)
    with _now.lock:
        _now.task, _now.task_started_at = str(label), timezone.now()


def task_finished(**kwargs: object) -> None:
    """`post_execute_in_worker` receiver."""
    with _now.lock:
        _now.task, _now.task_started_at = "", None
        _now.done += 1
