"""django-q2 entry points (doorbells): each takes an id and calls one service."""

from __future__ import annotations

from webhooks import services


def delivery_process(delivery_pk: int) -> str:
    return services.delivery_process(delivery_pk)


def deliveries_sweep() -> dict[str, int]:
    return services.deliveries_sweep()
