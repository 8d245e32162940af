"""django-q2's ORM broker with a lean enqueue (configured as Q_CLUSTER["broker_class"]).

Every webhook rings the doorbell once, inside the request's transaction. The stock ORM
broker builds an `OrmQ` model instance and compiles its INSERT on every call, which on
that hot path cost more than the INSERT itself (benchmarks/webhook_intake.py). Here the
statement is built once.

A worker looks at the queue every `poll` seconds while it is empty (settings.Q_CLUSTER),
so how often it looks is how long a delivery waits for it. The stock dequeue closed
stale connections before every look, which with health checks on costs a `SELECT 1`
besides the query, and compiled the query each time; here a look is one statement built
once, on a connection kept open, and a connection the database dropped is closed and
opened again at the next look (the stock pusher process would stop for ten seconds and
be restarted). Claiming a task is the stock broker's conditional update; locking (a
claimed task's lock moved `retry` seconds ahead) and acknowledgement are the stock
broker's.
"""

from __future__ import annotations

import logging
import time
import uuid
from functools import cache

from django import db
from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, InterfaceError, OperationalError, connections, transaction
from django.utils import timezone
from django_q.brokers import Broker, get_broker
from django_q.brokers.orm import ORM
from django_q.conf import Conf
from django_q.models import OrmQ
from django_q.signals import pre_enqueue
from django_q.signing import SignedPackage
from django_q.tasks import async_task

from tasuku import outage

logger = logging.getLogger(__name__)


@cache
def _insert_sql(alias: str) -> str:
    quote = connections[alias].ops.quote_name
    meta = OrmQ._meta
    columns = ", ".join(quote(meta.get_field(name).column) for name in ("key", "payload", "lock"))
    # Names come from the model's metadata, quoted; values are parameters.
    return (
        f"INSERT INTO {quote(meta.db_table)} ({columns}) VALUES (%s, %s, %s) "  # noqa: S608
        f"RETURNING {quote(meta.pk.column)}"
    )


@cache
def _dequeue_sql(alias: str) -> tuple[str, str]:
    """The due tasks' SELECT and the UPDATE that claims one (the stock broker's queries)."""
    quote = connections[alias].ops.quote_name
    meta = OrmQ._meta
    table, pk = quote(meta.db_table), quote(meta.pk.column)
    key, payload, lock = (quote(meta.get_field(name).column) for name in ("key", "payload", "lock"))
    # Names come from the model's metadata, quoted; values are parameters.
    select = (
        f"SELECT {pk}, {payload} FROM {table} WHERE {key} = %s AND {lock} < %s "  # noqa: S608
        f"ORDER BY {pk} LIMIT %s"
    )
    # Claimed only while still due: a claim moves the lock `retry` seconds ahead, so of two
    # workers that read the same task one updates it and the other finds it claimed.
    claim = f"UPDATE {table} SET {lock} = %s WHERE {pk} = %s AND {lock} < %s"  # noqa: S608
    return select, claim


class LeanOrmBroker(ORM):
    def enqueue(self, task: str) -> int:
        alias = Conf.ORM
        if transaction.get_autocommit(using=alias):
            # As the stock broker does outside a transaction: a long-lived process (the
            # worker) must not enqueue on a connection the database has dropped.
            db.close_old_connections()
        connection = connections[alias]
        lock = connection.ops.adapt_datetimefield_value(timezone.now())
        with connection.cursor() as cursor:
            cursor.execute(_insert_sql(alias), [self.list_key or Conf.CLUSTER_NAME, task, lock])
            return cursor.fetchone()[0]

    def dequeue(self) -> list[tuple[int, str]] | None:
        """The due tasks, each claimed for this worker (id, signed package); None after
        waiting `poll` seconds when there are none (as the stock broker)."""
        alias = Conf.ORM
        connection = connections[alias]
        select, claim = _dequeue_sql(alias)
        adapt = connection.ops.adapt_datetimefield_value
        now = timezone.now()
        try:
            with connection.cursor() as cursor:
                cursor.execute(select, [self.list_key, adapt(now), Conf.BULK])
                due = cursor.fetchall()
                claimed = []
                for pk, payload in due:
                    cursor.execute(claim, [adapt(self.timeout(None)), pk, adapt(now)])
                    if cursor.rowcount:  # else another worker was faster
                        claimed.append((pk, payload))
        except (OperationalError, InterfaceError) as exc:
            if not connection.in_atomic_block:
                connection.close()  # opened again at the next look
            # One warning for an outage, not one a look (tasuku/outage.py).
            outage.failed(exc, "the worker queue")
            due, claimed = [], []
        else:
            outage.answered()
        if due:
            return claimed
        time.sleep(Conf.POLL)  # an empty queue: look again in a moment
        return None


# --- Doorbells -------------------------------------------------------------------------
# A task carries one row id; the row itself holds the state (docs/architecture.md, *Durable queues*).


@cache
def _broker() -> Broker:
    return get_broker()


def _shares_the_database() -> bool:
    return settings.Q_CLUSTER.get("orm") == DEFAULT_DB_ALIAS and not settings.Q_CLUSTER.get("sync")


def doorbell_row(task: str, *args: object, name: str) -> tuple[str, str, str] | None:
    """The queue row (key, payload, lock) that rings `task(*args)`, for a statement that
    writes it together with the row it rings for — one round trip, both or neither (the
    webhook intake). None when the doorbells are not in Tasuku's database: ring after.

    The payload is django-q2's own package, signed by its `SignedPackage`, with what
    `async_task` puts in it for a task of a name, a function and arguments; built here
    because `async_task` spends as much again on a human-readable id nobody reads and on
    log lines, on the intake's hot path (tests/test_broker.py holds the two alike)."""
    if not _shares_the_database():
        return None
    now = timezone.now()
    package: dict[str, object] = {
        "id": uuid.uuid4().hex,
        "name": name,
        "func": task,
        "args": args,
        **_options(),
        "kwargs": {},
        "started": now,
    }
    pre_enqueue.send(sender="django_q", task=package)
    lock = connections[Conf.ORM].ops.adapt_datetimefield_value(now)
    return (_broker().list_key or Conf.CLUSTER_NAME, SignedPackage.dumps(package), lock)


def _options() -> dict[str, object]:
    """The cluster's settings `async_task` copies into every package it makes."""
    options: dict[str, object] = {}
    if Conf.CACHED:
        options["cached"] = Conf.CACHED
    if Conf.ACK_FAILURES:
        options["ack_failure"] = Conf.ACK_FAILURES
    return options


def doorbell_table() -> tuple[str, str, str, str]:
    """The quoted table and columns (key, payload, lock) of django-q2's ORM queue."""
    quote = connections[Conf.ORM].ops.quote_name
    meta = OrmQ._meta
    return (
        quote(meta.db_table),
        *(quote(meta.get_field(name).column) for name in ("key", "payload", "lock")),
    )


def queue_idle(most: int = 1) -> bool:
    """Whether at most `most` doorbells wait (the one for the work about to be started
    here, say): a worker with nothing else to do may start work at once."""
    try:
        return _broker().queue_size() <= most
    except Exception:  # a broker that cannot say: not idle, as far as anyone knows
        return False


def ring(task: str, pk: int, *, name: str) -> None:
    """Ring the doorbell for a row written in the current transaction.

    With the ORM broker on Tasuku's own database (the default) the queue entry is written
    in the same transaction: it commits with the row or not at all, and no worker can see
    it before the row is committed. Any other broker (Redis) is rung after commit; the
    sweepers cover a ring lost in between.
    """
    if _shares_the_database():
        async_task(task, pk, task_name=name, broker=_broker())
    else:
        transaction.on_commit(lambda: ring_now(task, pk, name=name))


def ring_now(task: str, pk: int, *, name: str) -> bool:
    """Ring outside any row's transaction. Losing the ring is harmless (the sweepers
    ring again), so a broker error is logged, not raised."""
    try:
        async_task(task, pk, task_name=name, broker=_broker())
    except Exception:  # a lost ring is rung again by the sweepers (see above)
        logger.exception("could not enqueue %s(%s); the sweeper will", task, pk)
        return False
    return True
