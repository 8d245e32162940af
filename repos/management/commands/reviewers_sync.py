"""`manage.py reviewers_sync [slug …]`: bring every reviewer that names a reviewers
repository (or the ones named) up to the tip of its branch or tag.

1. The reviewers: those named, else every one with a reviewers repository.
2. Each synced in turn (`repos.services.reviewer_sync`): one that fails changes nothing
   and does not stop the others.
3. One line each: its revision, new or unchanged, and the commit; an error exits
   non-zero naming every reviewer that failed.
"""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from repos.models import Reviewer
from repos.reviewer_sources import SourceError
from repos.reviewer_sync import reviewer_sync


class Command(BaseCommand):
    help = "Sync reviewers' rules, guidance and skills from their reviewers repositories."

    def add_arguments(self, parser) -> None:
        parser.add_argument("slugs", nargs="*", help="Only these reviewers (default: all).")

    def handle(self, *args: object, slugs: list[str], **options: object) -> None:
        reviewers = Reviewer.objects.exclude(source_url="").order_by("slug")
        if slugs:
            reviewers = Reviewer.objects.filter(slug__in=slugs).order_by("slug")
            unknown = sorted(set(slugs) - {r.slug for r in reviewers})
            if unknown:
                raise CommandError(f"No reviewer named {', '.join(unknown)}.")
        failed = []
        for reviewer in reviewers:
            try:
                revision, made = reviewer_sync(reviewer=reviewer)
            except SourceError as exc:
                failed.append(reviewer.slug)
                self.stderr.write(f"{reviewer.slug}: {exc}")
                continue
            said = "new revision" if made else "unchanged, revision"
            self.stdout.write(
                f"{reviewer.slug}: {said} {revision.number} ({revision.digest[:12]}) "
                f"at {reviewer.source_commit[:12]}"
            )
        if failed:
            raise CommandError(f"Not synced (nothing changed for them): {', '.join(failed)}.")
