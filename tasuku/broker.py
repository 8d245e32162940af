"""django-q2's ORM broker with a lean enqueue (configured as Q_CLUSTER["broker_class"]).

Every webhook rings the doorbell once, inside the request's transaction. The stock ORM
broker builds an `OrmQ` model instance and compiles its INSERT on every call, which on
that hot path cost more than the INSERT itself (benchmarks/webhook_intake.py). Here the
statement is prepared once; dequeue, locking and acknowledgement are the stock broker's.
"""

from __future__ import annotations

from functools import cache

from django import db
from django.db import connections, transaction
from django.utils import timezone
from django_q.brokers.orm import ORM
from django_q.conf import Conf
from django_q.models import OrmQ


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
