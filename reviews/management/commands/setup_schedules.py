"""Register Tasuku's periodic work with django-q2's scheduler. Safe to run again; `migrate`
does it too (reviews/queue/schedules.py)."""

from __future__ import annotations

from django.core.management.base import BaseCommand

from reviews.queue.schedules import SCHEDULES, schedules_ensure


class Command(BaseCommand):
    help = "Create or update Tasuku's periodic tasks (idempotent; migrate also does it)."

    def handle(self, *args: object, **options: object) -> None:
        from django_q.models import Schedule

        before = set(
            Schedule.objects.filter(name__startswith="tasuku: ").values_list("name", flat=True)
        )
        for done in schedules_ensure():
            verb = "created" if done.created else "up to date"
            self.stdout.write(f"schedule {done.name!r}: every {done.minutes} min, {verb}")
        for name in sorted(before - set(SCHEDULES)):
            self.stdout.write(f"schedule {name!r}: no longer used, removed")
