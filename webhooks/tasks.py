"""django-q2 entry points (doorbells): each takes an id and calls one service."""

from __future__ import annotations

import logging

from django.conf import settings
from django.utils.module_loading import import_string

from tasuku.broker import queue_idle
from webhooks import services

logger = logging.getLogger(__name__)


def delivery_process(delivery_pk: int | str, delivery_id: str | None = None) -> str:
    # The intake rings with GitHub's hook id and delivery id; the sweepers with the id.
    services.follow_ups_take()  # what an earlier task of this process left, if anything
    status = services.delivery_process(delivery_pk, delivery_id)
    # The review this delivery queued is started here and now when this worker has
    # nothing else waiting: no second trip through the queue, no poll between them. Its
    # doorbell stays rung; whichever worker claims the run first reviews it.
    for path, pk in services.follow_ups_take()[:1]:
        if settings.TASUKU_INLINE_FIRST_RUN and queue_idle():
            logger.info("delivery %s: starting %s(%s) at once", delivery_pk, path, pk)
            import_string(path)(pk)
    return status


def deliveries_sweep() -> dict[str, int]:
    return services.deliveries_sweep()
