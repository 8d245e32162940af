"""Register Tasuku's periodic work with django-q2's scheduler. Safe to run again."""

from __future__ import annotations

from django.core.management.base import BaseCommand
from django_q.models import Schedule

# name -> (function, minutes between runs)
SCHEDULES: dict[str, tuple[str, int]] = {
    "tasuku: sweep webhook deliveries": ("webhooks.tasks.deliveries_sweep", 1),
}


class Command(BaseCommand):
    help = "Create or update Tasuku's periodic tasks (idempotent)."

    def handle(self, *args: object, **options: object) -> None:
        for name, (func, minutes) in SCHEDULES.items():
            _, created = Schedule.objects.update_or_create(
                name=name,
                defaults={
                    "func": func,
                    "schedule_type": Schedule.MINUTES,
                    "minutes": minutes,
                    "repeats": -1,
                },
            )
            verb = "created" if created else "up to date"
            self.stdout.write(f"schedule {name!r}: every {minutes} min, {verb}")
        stale = Schedule.objects.filter(name__startswith="tasuku: ").exclude(name__in=SCHEDULES)
        for schedule in stale:
            self.stdout.write(f"schedule {schedule.name!r}: no longer used, removed")
            schedule.delete()
