"""How long Tasuku keeps what it records (settings TASUKU_KEEP_*_DAYS; 0 keeps forever),
and the daily prune that applies it (`manage.py prune`, and a schedule).

What goes, and what stays:
- Webhook deliveries in a final state (processed, ignored, failed), after
  TASUKU_KEEP_DELIVERIES_DAYS (30): the status page's history. Runs keep their findings;
  their link to the delivery is cleared. Redelivery records go with them.
- Transcripts, after TASUKU_KEEP_TRANSCRIPTS_DAYS (90): the model's steps on a review,
  and a finished run's job and engine result (the largest rows). The review, its
  findings, costs and tokens stay.
- Attempts of finished runs, after TASUKU_KEEP_ATTEMPTS_DAYS (180).
- Review-pass tasks that ended (done, returned, recalled), after TASUKU_KEEP_TASKS_DAYS
  (365), with their passes, answers and comments, and their runs' pass links (the
  conversation note); their runs stay.
Findings, reviews, dismissals and outcomes are what the dashboard's figures are made of:
they are kept.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from reviews.models import RUN_FINAL_STATES, TASK_FINAL_STATES, Review, ReviewRun, RunAttempt, Task
from reviews.queue.runs import runs_results_forget
from webhooks.models import DELIVERY_FINAL_STATES, Redelivery, WebhookDelivery

BATCH = 1000


def _cutoff(days: int, now: datetime) -> datetime | None:
    return now - timedelta(days=days) if days and days > 0 else None


def _delete_in_batches(queryset) -> int:
    """Delete what `queryset` selects a batch at a time (a short lock each)."""
    model = queryset.model
    removed = 0
    while True:
        pks = list(queryset.values_list("pk", flat=True)[:BATCH])
        if not pks:
            return removed
        removed += model.objects.filter(pk__in=pks).delete()[1].get(model._meta.label, 0)


def data_prune(*, now: datetime | None = None, dry_run: bool = False) -> dict[str, int]:
    """Apply the retention settings; what was removed (or would be, with `dry_run`)."""
    now = now or timezone.now()
    done: dict[str, int] = {}
    cutoff = _cutoff(settings.TASUKU_KEEP_DELIVERIES_DAYS, now)
    if cutoff:
        old = WebhookDelivery.objects.filter(
            status__in=DELIVERY_FINAL_STATES, received_at__lt=cutoff
        )
        redeliveries = Redelivery.objects.filter(created_at__lt=cutoff)
        done["deliveries"] = old.count() if dry_run else _delete_in_batches(old)
        done["redeliveries"] = redeliveries.count() if dry_run else _delete_in_batches(redeliveries)
    cutoff = _cutoff(settings.TASUKU_KEEP_TRANSCRIPTS_DAYS, now)
    if cutoff:
        reviews = Review.objects.filter(created_at__lt=cutoff).exclude(transcript=[])
        runs = ReviewRun.objects.filter(status__in=RUN_FINAL_STATES, finished_at__lt=cutoff).filter(
            Q(dispatch__job__isnull=False) | Q(runner_result__isnull=False)
        )
        if dry_run:
            done["transcripts"], done["run_results"] = reviews.count(), runs.count()
        else:
            done["transcripts"] = reviews.update(transcript=[])
            done["run_results"] = runs_results_forget(runs)
    cutoff = _cutoff(settings.TASUKU_KEEP_ATTEMPTS_DAYS, now)
    if cutoff:
        attempts = RunAttempt.objects.filter(
            run__status__in=RUN_FINAL_STATES, run__finished_at__lt=cutoff
        )
        done["attempts"] = attempts.count() if dry_run else _delete_in_batches(attempts)
    cutoff = _cutoff(settings.TASUKU_KEEP_TASKS_DAYS, now)
    if cutoff:
        tasks = Task.objects.filter(state__in=TASK_FINAL_STATES, updated_at__lt=cutoff)
        done["tasks"] = tasks.count() if dry_run else _delete_in_batches(tasks)
    return done
