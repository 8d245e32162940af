"""Storing, processing and retrying webhook deliveries.

The delivery row is the ledger: its status, attempts, lease and next attempt time say
everything about it. django-q2 only rings the doorbell (`webhooks.tasks`); a doorbell
that is lost (a web process killed between commit and enqueue, a flushed broker) or
rung twice does no harm, because the sweeper rings again for anything overdue and a
worker must win a conditional update before it processes anything.
"""

from __future__ import annotations

import logging
import random
import traceback
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import F, Q
from django.utils import timezone
from django_q.tasks import async_task

from webhooks.models import DELIVERY_DUE_STATES, DeliveryStatus, WebhookDelivery
from webhooks.routing import route

logger = logging.getLogger(__name__)

MAX_ATTEMPTS = 3
# How long a worker may hold a delivery before the sweeper hands it to another.
LEASE = timedelta(minutes=5)
# A stored delivery not picked up this long after its doorbell rang gets another ring.
DOORBELL_GRACE = timedelta(minutes=2)
RING_AGAIN_AFTER = timedelta(minutes=10)
RETRY_BACKOFF = timedelta(seconds=30)
PROCESS_TASK = "webhooks.tasks.delivery_process"


@dataclass(frozen=True)
class Recorded:
    delivery: WebhookDelivery
    created: bool


def delivery_summary(event: str, payload: dict[str, Any]) -> dict[str, Any]:
    """The few fields stored beside the payload for listing and search."""
    repository = payload.get("repository") or {}
    installation = payload.get("installation") or {}
    number = None
    if isinstance(payload.get("pull_request"), dict):
        number = payload["pull_request"].get("number")
    elif isinstance(payload.get("issue"), dict) and payload["issue"].get("pull_request"):
        number = payload["issue"].get("number")
    elif event == "pull_request":
        number = payload.get("number")
    return {
        "action": str(payload.get("action") or "")[:64],
        "installation_id": installation.get("id") if isinstance(installation, dict) else None,
        "repository_full_name": str(repository.get("full_name") or "")[:200]
        if isinstance(repository, dict)
        else "",
        "pr_number": number if isinstance(number, int) and number > 0 else None,
    }


def delivery_record(
    *, hook_id: str, delivery_id: str, event: str, payload: dict[str, Any]
) -> Recorded:
    """Store a verified delivery and ring the doorbell once it is committed.

    GitHub sends a redelivery with the same delivery id: it is not stored again. If the
    stored copy had failed, a redelivery counts as a request to try it again.
    """
    now = timezone.now()
    fields = delivery_summary(event, payload)
    ping = event == "ping"
    try:
        with transaction.atomic():
            delivery = WebhookDelivery.objects.create(
                hook_id=hook_id,
                delivery_id=delivery_id,
                event=event,
                payload=payload,
                received_at=now,
                status=DeliveryStatus.IGNORED if ping else DeliveryStatus.RECEIVED,
                outcome="GitHub's test delivery: the webhook works" if ping else "",
                processed_at=now if ping else None,
                next_attempt_at=None if ping else now + DOORBELL_GRACE,
                **fields,
            )
            if not ping:
                transaction.on_commit(lambda: delivery_enqueue(delivery.pk))
    except IntegrityError:
        # The unique (hook id, delivery id) constraint decided: another copy of this
        # delivery, possibly arriving at the same moment, is already stored.
        existing = WebhookDelivery.objects.get(hook_id=hook_id, delivery_id=delivery_id)
        if existing.status == DeliveryStatus.FAILED:
            delivery_retry(existing)
        return Recorded(existing, created=False)
    return Recorded(delivery, created=True)


def delivery_enqueue(delivery_pk: int) -> None:
    """Ring the doorbell. Losing it is harmless: the sweeper rings again."""
    try:
        async_task(PROCESS_TASK, delivery_pk, task_name=f"delivery-{delivery_pk}")
    except Exception:
        logger.exception("could not enqueue delivery %s; the sweeper will", delivery_pk)


def delivery_claim(delivery_pk: int, *, now: datetime | None = None) -> WebhookDelivery | None:
    """Take a delivery for processing, or None if it is not ours to take.

    One conditional UPDATE decides between workers that got the same doorbell twice:
    only a due delivery, or one whose holder's lease has run out, can be claimed, and
    the row count says whether this worker won.
    """
    now = now or timezone.now()
    won = (
        WebhookDelivery.objects.filter(pk=delivery_pk)
        .filter(
            Q(status__in=DELIVERY_DUE_STATES)
            | Q(status=DeliveryStatus.PROCESSING, locked_until__lt=now)
        )
        .filter(attempts__lt=MAX_ATTEMPTS)
        .update(
            status=DeliveryStatus.PROCESSING,
            attempts=F("attempts") + 1,
            locked_until=now + LEASE,
            next_attempt_at=None,
        )
    )
    if not won:
        return None
    return WebhookDelivery.objects.get(pk=delivery_pk)


def delivery_process(delivery_pk: int) -> str:
    """Process one delivery.

    1. Claim it (or return: another worker has it, or it is finished).
    2. Route it to its handler (webhooks/routing.py), which records what it decided.
    3. Success: `processed` or `ignored` with the outcome in words.
       Failure: a permanent error fails it at once; a transient one is retried with
       backoff until MAX_ATTEMPTS attempts have been made, then it is `failed`.
    """
    delivery = delivery_claim(delivery_pk)
    if delivery is None:
        return "not claimed"
    try:
        outcome = route(delivery.event, delivery.payload, delivery_id=delivery.pk)
    except Exception as exc:
        return delivery_attempt_failed(delivery, exc)
    status = DeliveryStatus.IGNORED if outcome.ignored else DeliveryStatus.PROCESSED
    # Only the holder of this attempt may finish it (the lease may have been taken over).
    WebhookDelivery.objects.filter(
        pk=delivery.pk, status=DeliveryStatus.PROCESSING, attempts=delivery.attempts
    ).update(
        status=status,
        outcome=outcome.text,
        decision=outcome.decision,
        last_error="",
        locked_until=None,
        processed_at=timezone.now(),
    )
    return status


def delivery_attempt_failed(delivery: WebhookDelivery, exc: BaseException) -> str:
    permanent = bool(getattr(exc, "permanent", False))
    error = f"{type(exc).__name__}: {exc}"
    logger.warning(
        "delivery %s (%s) attempt %d failed: %s",
        delivery.delivery_id,
        delivery.event,
        delivery.attempts,
        error,
        exc_info=not hasattr(exc, "permanent"),
    )
    if not hasattr(exc, "permanent"):
        # An unexpected exception: keep where it happened for whoever reads the error.
        error += "\n\n" + "".join(traceback.format_exception(exc)[-6:])
    now = timezone.now()
    if permanent or delivery.attempts >= MAX_ATTEMPTS:
        status = DeliveryStatus.FAILED
        fields: dict[str, Any] = {"next_attempt_at": None, "processed_at": now}
    else:
        status = DeliveryStatus.RETRYING
        delay = RETRY_BACKOFF * (2 ** (delivery.attempts - 1))
        jitter = timedelta(seconds=random.uniform(0, delay.total_seconds() / 2))  # noqa: S311
        fields = {"next_attempt_at": now + delay + jitter}
    WebhookDelivery.objects.filter(
        pk=delivery.pk, status=DeliveryStatus.PROCESSING, attempts=delivery.attempts
    ).update(status=status, last_error=error[:20000], locked_until=None, **fields)
    return status


def delivery_retry(delivery: WebhookDelivery) -> bool:
    """An operator's retry of a failed delivery: three fresh attempts, starting now."""
    now = timezone.now()
    with transaction.atomic():
        updated = WebhookDelivery.objects.filter(
            pk=delivery.pk, status=DeliveryStatus.FAILED
        ).update(
            status=DeliveryStatus.RECEIVED,
            attempts=0,
            next_attempt_at=now + DOORBELL_GRACE,
            processed_at=None,
        )
        if updated:
            transaction.on_commit(lambda: delivery_enqueue(delivery.pk))
    return bool(updated)


def deliveries_sweep(*, now: datetime | None = None) -> dict[str, int]:
    """The periodic safety net (every minute, see `setup_schedules`).

    1. A delivery whose worker died holding it (lease expired) is retried, or failed
       when that was its last attempt.
    2. Deliveries due for a retry, and received ones whose doorbell was lost, are
       rung again (and not rung again for RING_AGAIN_AFTER).
    """
    now = now or timezone.now()
    expired = WebhookDelivery.objects.filter(status=DeliveryStatus.PROCESSING, locked_until__lt=now)
    failed = expired.filter(attempts__gte=MAX_ATTEMPTS).update(
        status=DeliveryStatus.FAILED,
        last_error="The worker stopped while processing this delivery (last attempt).",
        locked_until=None,
        processed_at=now,
    )
    requeued = expired.filter(attempts__lt=MAX_ATTEMPTS).update(
        status=DeliveryStatus.RETRYING,
        last_error="The worker stopped while processing this delivery.",
        locked_until=None,
        next_attempt_at=now,
    )
    due = list(
        WebhookDelivery.objects.filter(
            status__in=DELIVERY_DUE_STATES, next_attempt_at__lte=now
        ).values_list("pk", flat=True)[:500]
    )
    rung = 0
    for pk in due:
        # Conditional on still being due: two sweepers do not both ring.
        if WebhookDelivery.objects.filter(
            pk=pk, status__in=DELIVERY_DUE_STATES, next_attempt_at__lte=now
        ).update(next_attempt_at=now + RING_AGAIN_AFTER):
            delivery_enqueue(pk)
            rung += 1
    return {"failed": failed, "requeued": requeued, "rung": rung}
