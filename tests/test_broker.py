"""The doorbells the webhook intake writes with its delivery (tasuku/broker.py): the
package django-q2's own enqueue would have made, which its workers read."""

from __future__ import annotations

import pytest
from django_q.signals import pre_enqueue
from django_q.signing import SignedPackage
from django_q.tasks import async_task

from tasuku.broker import doorbell_row


class _Keep:
    """A broker that keeps what `async_task` would have sent."""

    list_key = "kept"

    def __init__(self) -> None:
        self.pack = ""

    def enqueue(self, pack: str) -> int:
        self.pack = pack
        return 0


@pytest.mark.django_db
@pytest.mark.parametrize("options", [{}, {"cached": 60, "ack_failures": True}])
def test_the_intakes_doorbell_is_the_package_django_q2_would_make(options):
    from django_q.conf import Conf

    for name, value in options.items():  # Conf is read once, at import
        setattr(Conf, {"cached": "CACHED", "ack_failures": "ACK_FAILURES"}[name], value)
    try:
        kept = _Keep()
        async_task(
            "webhooks.tasks.delivery_process", "1", "d-1", task_name="delivery-d-1", broker=kept
        )
        theirs = SignedPackage.loads(kept.pack)
        key, payload, lock = doorbell_row(
            "webhooks.tasks.delivery_process", "1", "d-1", name="delivery-d-1"
        )
        ours = SignedPackage.loads(payload)
    finally:
        Conf.CACHED, Conf.ACK_FAILURES = False, False
    assert set(ours) == set(theirs)
    for field in set(ours) - {"id", "started"}:
        assert ours[field] == theirs[field], field
    assert len(ours["id"]) == 32 and ours["id"] != theirs["id"]
    assert lock


@pytest.mark.django_db
def test_the_doorbell_is_announced_like_any_enqueue():
    seen = []

    def heard(sender, task, **kwargs):
        seen.append((sender, task["func"], task["args"]))

    pre_enqueue.connect(heard)
    try:
        doorbell_row("webhooks.tasks.delivery_process", "1", "d-2", name="delivery-d-2")
    finally:
        pre_enqueue.disconnect(heard)
    assert seen == [("django_q", "webhooks.tasks.delivery_process", ("1", "d-2"))]
