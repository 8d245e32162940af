"""django-q2 entry points (doorbells): each takes an id and calls one service."""

from __future__ import annotations

import logging

from django.conf import settings

from tasuku.broker import queue_idle
from webhooks import services
from webhooks.routing import follow_up

logger = logging.getLogger(__name__)


def delivery_process(delivery_pk: int | str, delivery_id: str | None = None) -> str:
    # The intake rings with GitHub's hook id and delivery id; the sweepers with the id.
    handled = services.delivery_handle(delivery_pk, delivery_id)
    # The review this delivery queued is started here and now when this worker has
    # nothing else waiting: no second trip through the queue, no poll between them. Its
    # doorbell stays rung; whichever worker claims the run first reviews it.
    for task, pk in handled.then[:1]:
        if settings.TASUKU_INLINE_FIRST_RUN and queue_idle():
            logger.info("delivery %s: starting %s(%s) at once", delivery_pk, task, pk)
            follow_up(task)(pk)
    return handled.status


def deliveries_sweep() -> dict[str, int]:
    return services.deliveries_sweep()
