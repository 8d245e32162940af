"""django-q2 entry points of the repos app."""

from __future__ import annotations

from repos.deliveries import deliveries_recover as recover


def deliveries_recover() -> dict:
    """Every ten minutes: ask GitHub again for deliveries it could not make."""
    return recover()
