"""Remove what the retention settings no longer keep (reviews/queue/retention.py); the daily
schedule does the same."""

from __future__ import annotations

from django.conf import settings
from django.core.management.base import BaseCommand

from reviews.queue.retention import data_prune


class Command(BaseCommand):
    help = "Remove old deliveries, transcripts, attempts and finished tasks (TASUKU_KEEP_*_DAYS)."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--dry-run", action="store_true", help="count, remove nothing")

    def handle(self, *args: object, dry_run: bool, **options: object) -> None:
        kept = ", ".join(
            f"{what} {days or 'forever'}{' days' if days else ''}"
            for what, days in (
                ("deliveries", settings.TASUKU_KEEP_DELIVERIES_DAYS),
                ("transcripts", settings.TASUKU_KEEP_TRANSCRIPTS_DAYS),
                ("attempts", settings.TASUKU_KEEP_ATTEMPTS_DAYS),
                ("finished tasks", settings.TASUKU_KEEP_TASKS_DAYS),
            )
        )
        self.stdout.write(f"Kept: {kept}.")
        verb = "would remove" if dry_run else "removed"
        for what, count in data_prune(dry_run=dry_run).items():
            self.stdout.write(f"{what}: {verb} {count}")
