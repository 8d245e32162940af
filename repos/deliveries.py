"""Deliveries GitHub could not make, asked for again.

GitHub does not redeliver a webhook by itself: a delivery Tasuku never stored (it was
down, its database was, or a proxy answered an error) is lost unless someone asks. Every
ten minutes (`setup_schedules`) this reads the App's delivery log, newest first, back to
WINDOW, and for each event (`guid`) with no successful attempt that Tasuku never stored,
asks GitHub to deliver it again — at most MAX_ASKS_PER_SWEEP an hour's sweep, at most
MAX_ASKS per event, not again within ASK_AGAIN_AFTER. Each is a `Redelivery` row, listed
on the status page.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.db.models import F
from django.utils import timezone

from repos import github
from repos.github import GitHubError
from repos.github.hooks import HookDelivery
from webhooks.models import Redelivery, WebhookDelivery

logger = logging.getLogger(__name__)

# GitHub keeps deliveries for redelivery for three days; look back a little less.
WINDOW = timedelta(hours=70)
MAX_PAGES = 20
MAX_ASKS = 3
MAX_ASKS_PER_SWEEP = 50
ASK_AGAIN_AFTER = timedelta(minutes=30)


@dataclass
class Recovered:
    read: int = 0
    missing: int = 0
    asked: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def as_dict(self) -> dict:
        return {
            "read": self.read,
            "missing": self.missing,
            "asked": len(self.asked),
            "errors": len(self.errors),
        }


def deliveries_recover(now: datetime | None = None) -> dict:
    """Ask GitHub again for the deliveries it could not make (see the module's text)."""
    now = now or timezone.now()
    found = Recovered()
    try:
        attempts = _log(now)
    except GitHubError as exc:
        logger.warning("could not read the App's webhook deliveries: %s", exc)
        found.errors.append(str(exc))
        return found.as_dict()
    found.read = len(attempts)
    by_guid: dict[str, list[HookDelivery]] = {}
    for attempt in attempts:
        by_guid.setdefault(attempt.guid, []).append(attempt)
    failed = {g: a for g, a in by_guid.items() if not any(x.delivered for x in a)}
    stored = set(
        WebhookDelivery.objects.filter(delivery_id__in=list(failed)).values_list(
            "delivery_id", flat=True
        )
    )
    for guid, tries in failed.items():
        if guid in stored:
            continue  # Tasuku has it (an error answered after storing it is its own to retry)
        found.missing += 1
        if len(found.asked) >= MAX_ASKS_PER_SWEEP:
            break
        newest = max(tries, key=lambda a: (a.delivered_at, a.id))
        row, _ = Redelivery.objects.get_or_create(
            guid=guid,
            defaults={
                "github_delivery_id": newest.id,
                "event": newest.event,
                "action": newest.action or "",
            },
        )
        if row.asks >= MAX_ASKS or (row.asked_at and now - row.asked_at < ASK_AGAIN_AFTER):
            continue
        failed_status = f"{newest.status_code or 'no answer'}: {newest.status}"[:200]
        try:
            github.gateway().hook_redeliver(newest.id)
        except GitHubError as exc:
            Redelivery.objects.filter(pk=row.pk).update(
                error=str(exc)[:2000], failed_status=failed_status
            )
            found.errors.append(str(exc))
            if not exc.permanent:
                break  # GitHub is having a bad time: the next sweep tries again
            continue
        Redelivery.objects.filter(pk=row.pk).update(
            asks=F("asks") + 1,
            asked_at=now,
            github_delivery_id=newest.id,
            error="",
            failed_status=failed_status,
        )
        found.asked.append(guid)
    if found.asked:
        logger.info("asked GitHub to redeliver %d deliveries", len(found.asked))
    return found.as_dict()


def _log(now: datetime) -> list[HookDelivery]:
    gateway = github.gateway()
    since = now - WINDOW
    attempts: list[HookDelivery] = []
    cursor = ""
    for _ in range(MAX_PAGES):
        page, cursor = gateway.hook_deliveries(cursor=cursor)
        attempts.extend(a for a in page if a.delivered_at >= since)
        if not cursor or not page or min(a.delivered_at for a in page) < since:
            break
    return attempts
