"""Is the database answering, and is the worker queue moving? For /healthz (load
balancers) and the status page."""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import timedelta

from django.db import DEFAULT_DB_ALIAS, connections
from django.utils import timezone
from django.utils.translation import ngettext


@dataclass(frozen=True)
class Health:
    ok: bool
    detail: str
    milliseconds: float | None = None


def database_health(alias: str = DEFAULT_DB_ALIAS) -> Health:
    """One `SELECT 1` on the database; its error, in words, when it does not answer."""
    started = time.perf_counter()
    try:
        with connections[alias].cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    except Exception as exc:  # unreachable, refused, misconfigured: all mean "not healthy"
        connections[alias].close()  # the next request connects afresh
        return Health(False, f"{type(exc).__name__}: {str(exc).strip()[:300]}")
    elapsed = (time.perf_counter() - started) * 1000
    return Health(True, f"{connections[alias].vendor} answered", round(elapsed, 1))


def broker_health() -> Health:
    """django-q2's queue: how many tasks wait, and how long the oldest has waited. With
    the ORM broker the queue is a table in the database; a task waiting minutes means no
    worker is taking tasks."""
    from django_q.brokers import get_broker
    from django_q.conf import Conf
    from django_q.models import OrmQ

    started = time.perf_counter()
    try:
        broker = get_broker()
        if not broker.ping():
            return Health(False, "the broker did not answer")
        size = broker.queue_size()
        detail = ngettext("%(count)d task waiting", "%(count)d tasks waiting", size) % {
            "count": size
        }
        if Conf.ORM:
            # A waiting task's lock is when it was queued; a taken one's lies in the future.
            now = timezone.now()
            first = (
                OrmQ.objects.using(Conf.ORM)
                .filter(lock__lte=now)
                .order_by("lock")
                .values_list("lock", flat=True)
                .first()
            )
            if first is not None:
                waited = now - first
                detail += f", the oldest for {_duration(waited)}"
                if waited > timedelta(minutes=5):
                    return Health(False, detail + ": are the workers running?")
    except Exception as exc:  # a health probe reports any failure as unhealthy, never raises
        return Health(False, f"{type(exc).__name__}: {str(exc).strip()[:300]}")
    elapsed = (time.perf_counter() - started) * 1000
    return Health(True, detail, round(elapsed, 1))


def _duration(delta: timedelta) -> str:
    seconds = int(delta.total_seconds())
    if seconds < 120:
        return f"{seconds} s"
    if seconds < 7200:
        return f"{seconds // 60} min"
    return f"{seconds // 3600} h"


def static_health() -> Health:
    """Whether the static files are where the storage serves them from: with the manifest
    storage (production), a stylesheet that is not in the manifest means `collectstatic`
    was not run, and every admin page answers 500."""
    from django.contrib.staticfiles.storage import staticfiles_storage

    try:
        staticfiles_storage.url("tasuku.css")
    except ValueError as exc:
        return Health(False, f"{exc} (run `manage.py collectstatic`)")
    return Health(True, "collected")
