"""Register Tasuku's periodic work with django-q2's scheduler. Safe to run again."""

from __future__ import annotations

from datetime import timedelta

from django.core.management.base import BaseCommand
from django.utils import timezone
from django_q.models import Schedule

# name -> (function, minutes between runs, seconds after the minute to start at)
# The run reaper is registered twice, half a minute apart: django-q2 schedules by the
# minute, and a run held by a killed worker should be taken over within about a minute.
SCHEDULES: dict[str, tuple[str, int, int]] = {
    "tasuku: sweep webhook deliveries": ("webhooks.tasks.deliveries_sweep", 1, 0),
    "tasuku: reap review runs": ("reviews.tasks.runs_reap", 1, 0),
    "tasuku: reap review runs (half past)": ("reviews.tasks.runs_reap", 1, 30),
    "tasuku: sweep review-pass tasks": ("reviews.tasks.tasks_sweep", 1, 15),
    # GitHub never redelivers by itself: ask for what it could not deliver.
    "tasuku: recover missed webhook deliveries": ("repos.tasks.deliveries_recover", 10, 45),
}


class Command(BaseCommand):
    help = "Create or update Tasuku's periodic tasks (idempotent)."

    def handle(self, *args: object, **options: object) -> None:
        now = timezone.now().replace(second=0, microsecond=0)
        for name, (func, minutes, offset) in SCHEDULES.items():
            _, created = Schedule.objects.update_or_create(
                name=name,
                defaults={
                    "func": func,
                    "schedule_type": Schedule.MINUTES,
                    "minutes": minutes,
                    "repeats": -1,
                },
                create_defaults={
                    "func": func,
                    "schedule_type": Schedule.MINUTES,
                    "minutes": minutes,
                    "repeats": -1,
                    "next_run": now + timedelta(minutes=1, seconds=offset),
                },
            )
            verb = "created" if created else "up to date"
            self.stdout.write(f"schedule {name!r}: every {minutes} min, {verb}")
        stale = Schedule.objects.filter(name__startswith="tasuku: ").exclude(name__in=SCHEDULES)
        for schedule in stale:
            self.stdout.write(f"schedule {schedule.name!r}: no longer used, removed")
            schedule.delete()
