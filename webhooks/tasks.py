"""django-q2 entry points (doorbells): each takes an id and calls one service."""

from __future__ import annotations

from webhooks import services


def delivery_process(delivery_pk: int | str, delivery_id: str | None = None) -> str:
    # The intake rings with GitHub's hook id and delivery id; the sweepers with the id.
    return services.delivery_process(delivery_pk, delivery_id)


def deliveries_sweep() -> dict[str, int]:
    return services.deliveries_sweep()
