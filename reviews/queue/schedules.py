"""Tasuku's periodic work, registered with django-q2's scheduler: after every `migrate`
(a post_migrate handler, so a deployment cannot forget it), or by
`manage.py setup_schedules` (repairs). The dotted paths are stored in django-q2's rows:
never move one without migrating those rows."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

# name -> (function, minutes between runs, seconds after the minute to start at)
# The run reaper is not among them: django-q2 schedules by the minute, and a run held by a
# killed worker is to be taken over within seconds, so every worker process runs it on a
# thread (reviews/queue/reaper.py). Its two former schedules ("tasuku: reap review runs" and
# "... (half past)") are removed from django-q2's rows by the next migrate, below.
SCHEDULES: dict[str, tuple[str, int, int]] = {
    "tasuku: sweep webhook deliveries": ("webhooks.tasks.deliveries_sweep", 1, 0),
    "tasuku: sweep review-pass tasks": ("reviews.tasks.tasks_sweep", 1, 15),
    # GitHub never redelivers by itself: ask for what it could not deliver.
    "tasuku: recover missed webhook deliveries": ("repos.tasks.deliveries_recover", 10, 45),
    # What the retention settings no longer keep (reviews/queue/retention.py), once a day.
    "tasuku: prune old records": ("reviews.tasks.data_prune", 24 * 60, 50),
}
# django-q2's scheduler looks for due schedules about every 30 s, and a busy cluster
# takes a while to pick the task up: a schedule is late only past its period and this.
SCHEDULER_SLACK = timedelta(seconds=90)


@dataclass(frozen=True)
class Ensured:
    name: str
    minutes: int
    created: bool


def schedules_ensure(using: str = "default") -> list[Ensured]:
    """Create or update every schedule in SCHEDULES, and remove Tasuku's schedules that
    are no longer used (idempotent). Returns what it did, per schedule."""
    from django.utils import timezone
    from django_q.models import Schedule

    now = timezone.now().replace(second=0, microsecond=0)
    done = []
    rows = Schedule.objects.using(using)
    for name, (func, minutes, offset) in SCHEDULES.items():
        values = {"func": func, "schedule_type": Schedule.MINUTES, "minutes": minutes,
                  "repeats": -1}  # fmt: skip
        _, created = rows.update_or_create(
            name=name,
            defaults=values,
            create_defaults={**values, "next_run": now + timedelta(minutes=1, seconds=offset)},
        )
        done.append(Ensured(name, minutes, created))
    rows.filter(name__startswith="tasuku: ").exclude(name__in=SCHEDULES).delete()
    return done


def schedules_missing(using: str = "default") -> list[str]:
    """The schedules Tasuku needs that are not registered (a deployment without them
    sweeps no lost delivery and prunes nothing)."""
    from django_q.models import Schedule

    present = set(
        Schedule.objects.using(using).filter(name__in=SCHEDULES).values_list("name", flat=True)
    )
    return [name for name in SCHEDULES if name not in present]


def schedule_late(next_run: datetime | None, minutes: int | None, now: datetime) -> bool:
    """Whether a schedule due at `next_run` is late: past its period and the scheduler's
    slack (django-q2 only looks every ~30 s, so a due time just passed is not late)."""
    if next_run is None:
        return False
    return now - next_run > timedelta(minutes=minutes or 1) + SCHEDULER_SLACK


def schedules_after_migrate(sender, using: str = "default", **kwargs) -> None:
    """post_migrate: register the schedules once the scheduler's table exists (skipped
    with TASUKU_AUTO_SCHEDULES=false)."""
    from django.conf import settings
    from django.db import connections
    from django_q.models import Schedule

    if not getattr(settings, "TASUKU_AUTO_SCHEDULES", True):
        return
    if Schedule._meta.db_table not in connections[using].introspection.table_names():
        return  # django-q2 is not migrated yet (a partial migrate)
    schedules_ensure(using)
