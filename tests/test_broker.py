"""The doorbells the webhook intake writes with its delivery (tasuku/broker.py): the
package django-q2's own enqueue would have made, which its workers read."""

from __future__ import annotations

import pytest
from django.db import connection
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


# --- The worker's look at the queue (LeanOrmBroker.dequeue) ------------------------------


def _package(n: int) -> str:
    return SignedPackage.dumps(
        {
            "id": f"t{n}",
            "name": f"run-{n}",
            "func": "reviews.tasks.run_process",
            "args": (n,),
            "kwargs": {},
        }
    )


@pytest.mark.django_db(transaction=True)
def test_a_look_at_the_queue_claims_what_is_due_in_order_and_nothing_else(monkeypatch):
    from datetime import timedelta

    from django.utils import timezone
    from django_q.brokers import get_broker
    from django_q.conf import Conf
    from django_q.models import OrmQ

    from tasuku.broker import LeanOrmBroker

    broker = get_broker()
    assert isinstance(broker, LeanOrmBroker)
    first, second = broker.enqueue(_package(1)), broker.enqueue(_package(2))
    later = broker.enqueue(_package(3))
    OrmQ.objects.filter(pk=later).update(
        lock=timezone.now() + timedelta(minutes=5)
    )  # claimed elsewhere
    other = OrmQ.objects.create(key="another-cluster", payload=_package(4), lock=timezone.now())

    before = timezone.now()
    taken = []
    for _ in range(2):  # Conf.BULK (1) a look, oldest first
        taken += broker.dequeue()
    assert [pk for pk, _ in taken] == [first, second]
    assert [SignedPackage.loads(payload)["args"] for _, payload in taken] == [(1,), (2,)]
    for pk in (first, second):  # locked for `retry` seconds: no other worker takes them
        assert OrmQ.objects.get(pk=pk).lock >= before + timedelta(seconds=Conf.RETRY - 1)
    assert OrmQ.objects.get(pk=other.pk).lock <= timezone.now()  # another queue's, untouched

    slept = []
    monkeypatch.setattr("tasuku.broker.time.sleep", slept.append)
    assert broker.dequeue() is None  # nothing due: it waited one poll
    assert slept == [Conf.POLL]


@pytest.mark.django_db(transaction=True)
def test_of_two_workers_that_read_the_same_task_only_one_claims_it(monkeypatch):
    from django.utils import timezone
    from django_q.brokers import get_broker
    from django_q.models import OrmQ

    from tasuku import broker as module

    queue = get_broker()
    task = queue.enqueue(_package(5))
    _, claim = module._dequeue_sql("default")
    # The other worker claims it between this worker's read and its claim.
    raced = {"done": False}
    real_execute = type(connection.cursor()).execute

    def execute(self, sql, params=None):
        if sql == claim and not raced["done"]:
            raced["done"] = True
            with connection.cursor() as other:
                real_execute(other, claim, params)
        return real_execute(self, sql, params)

    monkeypatch.setattr(type(connection.cursor()), "execute", execute)
    assert queue.dequeue() == []  # read it, found it claimed: not taken twice
    assert raced["done"]
    monkeypatch.undo()
    monkeypatch.setattr("tasuku.broker.time.sleep", lambda seconds: None)
    assert queue.dequeue() is None  # still the other worker's
    assert OrmQ.objects.get(pk=task).lock > timezone.now()


@pytest.mark.skipif("connection.vendor != 'postgresql'")
@pytest.mark.django_db(transaction=True)
def test_a_connection_the_database_dropped_costs_one_look_not_the_worker(monkeypatch, caplog):
    """PostgreSQL ends the worker's connection (a restart, a failover, an idle timeout):
    that look fails and says so, and the next one opens a new connection. (The stock
    broker raised, and its pusher process stopped for ten seconds.)"""
    import psycopg
    from django_q.brokers import get_broker

    queue = get_broker()
    task = queue.enqueue(_package(6))
    monkeypatch.setattr("tasuku.broker.time.sleep", lambda seconds: None)
    connection.ensure_connection()
    pid = connection.connection.info.backend_pid
    settings = connection.settings_dict
    with psycopg.connect(
        host=settings["HOST"] or None, port=settings["PORT"] or None,
        user=settings["USER"] or None, dbname=settings["NAME"], autocommit=True,
    ) as admin:  # fmt: skip
        admin.execute("SELECT pg_terminate_backend(%s)", [pid])
    assert queue.dequeue() is None  # the look failed: said, and nothing raised
    assert "the database cannot be reached (the worker queue: " in caplog.text
    [(pk, payload)] = queue.dequeue()  # the next look opens a new connection
    assert pk == task and SignedPackage.loads(payload)["args"] == (6,)
    assert "the database answers again" in caplog.text
