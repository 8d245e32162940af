"""Storing, processing and retrying webhook deliveries.

The delivery row is the ledger: its status, attempts, lease and next attempt time say
everything about it. django-q2 only rings the doorbell (`webhooks.tasks`); a doorbell
that is lost (a web process killed between commit and enqueue, a flushed broker) or
rung twice does no harm, because the sweeper rings again for anything overdue and a
worker must win a conditional update before it processes anything.
"""

from __future__ import annotations

import logging
import time
import traceback
import zlib
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import cache
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.db import DEFAULT_DB_ALIAS, connection, connections, transaction
from django.db.models import Subquery
from django.utils import timezone

from tasuku import durable
from tasuku.broker import doorbell_row, doorbell_table, ring
from tasuku.errors import code_of, error_id
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

# The delivery queue (tasuku/durable.py). A received delivery is taken at once; its
# `next_attempt_at` says when the sweeper rings again if its doorbell was lost.
DELIVERIES = durable.Queue(
    model="webhooks.WebhookDelivery",
    task=PROCESS_TASK,
    name="delivery",
    waiting=DELIVERY_DUE_STATES,
    fresh=(DeliveryStatus.RECEIVED,),
    working=DeliveryStatus.PROCESSING,
    failed=DeliveryStatus.FAILED,
    lease="locked_until",
    installation="installation_id",
    max_attempts=MAX_ATTEMPTS,
    lease_for=lambda: LEASE,
    retry_base=RETRY_BACKOFF,
    ring_again=RING_AGAIN_AFTER,
)


@dataclass(frozen=True)
class Recorded:
    delivery_pk: int
    created: bool


def delivery_summary(event: str, payload: dict[str, Any]) -> dict[str, Any]:
    """The few fields stored beside the payload for listing and search."""
    repository = payload.get("repository")
    installation = payload.get("installation")
    number = None
    if isinstance(payload.get("pull_request"), dict):
        number = payload["pull_request"].get("number")
    elif isinstance(payload.get("issue"), dict) and payload["issue"].get("pull_request"):
        number = payload["issue"].get("number")
    elif event == "pull_request":
        number = payload.get("number")
    installation_id = installation.get("id") if isinstance(installation, dict) else None
    full_name = repository.get("full_name") if isinstance(repository, dict) else ""

    def whole(value: Any, bound: int) -> int | None:  # `true` is no number
        ok = isinstance(value, int) and not isinstance(value, bool) and 0 < value < bound
        return value if ok else None

    return {
        "action": str(payload.get("action") or "")[:64],
        "installation_id": whole(installation_id, 2**63),
        "repository_full_name": str(full_name or "")[:200],
        "pr_number": whole(number, 2**31),
    }


def delivery_record(
    *,
    hook_id: str,
    delivery_id: str,
    event: str,
    text: str,
    payload: dict[str, Any],
    body: bytes | None = None,
    signature: str = "",
) -> Recorded:
    """Store a verified delivery (its JSON `text` as GitHub signed it, parsed as
    `payload`; `body`, the bytes, kept exactly, with their `signature`) and ring the
    doorbell with it.

    GitHub sends a redelivery with the same delivery id: it is not stored again. If the
    stored copy had failed, a redelivery counts as a request to try it again.
    """
    now = timezone.now()
    ping = event == "ping"
    values = {
        "hook_id": hook_id,
        "delivery_id": delivery_id,
        "event": event,
        **delivery_summary(event, payload),
        "payload": text,
        "body": zlib.compress(text.encode() if body is None else body, 1),
        "signature": signature[:80],
        "received_at": now,
        "status": DeliveryStatus.IGNORED if ping else DeliveryStatus.RECEIVED,
        "attempts": 0,
        "deferrals": 0,
        "next_attempt_at": None if ping else now + DOORBELL_GRACE,
        "locked_until": None,
        "rung_at": None if ping else now,
        "last_error": "",
        "outcome": "GitHub's test delivery: the webhook works" if ping else "",
        "decision": "",
        "processed_at": now if ping else None,
    }
    # The doorbell names the delivery by GitHub's ids, known before the row exists, so
    # that one statement writes both: both or neither, in one round trip.
    doorbell = (
        None
        if ping
        else doorbell_row(PROCESS_TASK, hook_id, delivery_id, name=f"delivery-{delivery_id}")
    )
    pk = _delivery_insert(values, doorbell)
    if pk is None:
        # The unique (hook id, delivery id) constraint decided: another copy of this
        # delivery, possibly arriving at the same moment, is already stored.
        existing = WebhookDelivery.objects.get(hook_id=hook_id, delivery_id=delivery_id)
        if existing.status == DeliveryStatus.FAILED:
            delivery_retry(existing)
        return Recorded(existing.pk, created=False)
    if doorbell is None and not ping:
        doorbell_ring(pk)  # another broker (Redis): rung once the row is committed
    return Recorded(pk, created=True)


def _delivery_insert(values: dict[str, Any], doorbell: tuple[str, str, str] | None) -> int | None:
    """INSERT one delivery, and its doorbell with it; its id, or None when a copy of it
    is stored already (nothing is written then).

    Written as one prepared statement instead of `objects.create()`: this is the webhook
    hot path, and the ORM's per-call SQL compilation and the re-serialisation of the
    payload (stored here as the raw JSON text GitHub signed) cost more than the INSERT
    itself (benchmarks/webhook_intake.py). On PostgreSQL the delivery and its queue row
    are one statement (a data-modifying WITH) in autocommit: one round trip, no BEGIN
    and COMMIT; SQLite, in the same process, writes both in one transaction. The column
    list comes from the model, so a new field not given a value here fails loudly.
    """
    insert = _delivery_insert_sql(connection.vendor)
    if values.keys() != insert.columns:
        missing = sorted(insert.columns ^ values.keys())
        raise ImproperlyConfigured(f"_delivery_insert: columns out of step: {missing}")
    params = [values[name] for name in insert.order]
    adapt = connection.ops.adapt_datetimefield_value
    for index in insert.datetimes:
        if params[index] is not None:
            params[index] = adapt(params[index])
    if insert.payload is not None:
        # jsonb cannot hold NUL; GitHub JSON-escapes it, so the escape is replaced.
        params[insert.payload] = params[insert.payload].replace("\\u0000", "\\ufffd")
    if doorbell is None:
        with connection.cursor() as cursor:
            cursor.execute(insert.sql, params)
            row = cursor.fetchone()
        return row[0] if row else None
    if insert.with_doorbell:
        return _server_bound(insert.with_doorbell, [*params, *doorbell])
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(insert.sql, params)
        row = cursor.fetchone()
        if row is None:
            return None
        cursor.execute(insert.doorbell, list(doorbell))
        return row[0]


# Whether the intake's statement is prepared on each database connection (see
# `_server_bound`); false for the rest of the process once a pooler in front refused it.
_prepare = True


def _pooler_refusals() -> tuple[type[Exception], ...]:
    # psycopg is loaded on PostgreSQL only (its backend's): a SQLite process never imports it.
    import psycopg

    return (
        psycopg.errors.InvalidSqlStatementName,  # not prepared on the connection it reached
        psycopg.errors.DuplicatePreparedStatement,  # prepared there already, by another client
        psycopg.errors.ProtocolViolation,  # that name is another client's statement there
    )


def _server_bound(sql: str, params: list[Any]) -> int | None:
    """Run the intake's statement on PostgreSQL with its parameters bound by the server,
    prepared once per connection.

    Django's cursors bind client-side: the 27 KB payload would be escaped into the
    statement's text, and the compressed body spelled out in hex, before it is sent —
    about a fifth of the request's time (benchmarks/webhook_intake.py). Sent as
    parameters, the bytes go as they are; prepared, the database parses and plans the
    statement once per connection rather than for every delivery (a fifth of the
    database's own time on each). A transaction-mode pooler that does not keep prepared
    statements (PgBouncer before 1.21, or without `max_prepared_statements`) refuses
    one: the statement is sent again unprepared — nothing was written — and never
    prepared again by this process. Errors are Django's, as from any cursor, and the
    statement is in Django's query log when it keeps one."""
    global _prepare
    db = connections[DEFAULT_DB_ALIAS]
    db.ensure_connection()
    started = time.monotonic()
    prepare = _prepare  # as sent: another thread may turn it off meanwhile
    with db.wrap_database_errors:
        try:
            row = _execute(db, sql, params, prepare=prepare)
        except _pooler_refusals() as exc:
            if not prepare or db.in_atomic_block:
                raise
            _prepare = False
            logger.warning(
                "the database (or a pooler in front of it) refused a prepared statement (%s); "
                "the webhook intake sends its statement unprepared from now on",
                exc,
            )
            row = _execute(db, sql, params, prepare=False)
    if db.queries_logged:
        db.queries_log.append({"sql": sql, "time": f"{time.monotonic() - started:.3f}"})
    return row[0] if row else None


def _execute(db: Any, sql: str, params: list[Any], *, prepare: bool) -> tuple[Any, ...] | None:
    import psycopg

    with psycopg.Cursor(db.connection) as cursor:
        # prepare=True: at its first use on a connection (None would wait for the fifth);
        # ignored where the connection's prepare_threshold is None (settings.py).
        cursor.execute(sql, params, prepare=prepare)
        return cursor.fetchone()


@dataclass(frozen=True)
class _Insert:
    sql: str  # the delivery's INSERT
    doorbell: str  # the doorbell's INSERT (its key, payload and lock)
    with_doorbell: str  # both as one statement ("" where the database cannot)
    order: tuple[str, ...]  # the parameters' names, in order
    columns: frozenset[str]
    datetimes: tuple[int, ...]  # positions of values the database adapts
    payload: int | None  # position of the JSON text cast to jsonb


@cache
def _delivery_insert_sql(vendor: str) -> _Insert:
    quote = connection.ops.quote_name
    fields = [f for f in WebhookDelivery._meta.concrete_fields if not f.primary_key]
    postgres = vendor == "postgresql"
    placeholders = ["%s::jsonb" if f.attname == "payload" and postgres else "%s" for f in fields]
    unique = ", ".join(
        quote(WebhookDelivery._meta.get_field(n).column) for n in ("hook_id", "delivery_id")
    )
    # Names come from the model's metadata, quoted; values are parameters. A copy already
    # stored (the unique hook id and delivery id) writes nothing and returns no row.
    sql = (
        f"INSERT INTO {quote(WebhookDelivery._meta.db_table)} "  # noqa: S608
        f"({', '.join(quote(f.column) for f in fields)}) "
        f"VALUES ({', '.join(placeholders)}) ON CONFLICT ({unique}) DO NOTHING "
        f"RETURNING {quote(WebhookDelivery._meta.pk.column)}"
    )
    table, key, payload, lock = doorbell_table()
    enqueue = f"INSERT INTO {table} ({key}, {payload}, {lock}) "  # noqa: S608 (quoted names)
    both = (
        f"WITH stored AS ({sql}), rung AS ({enqueue}SELECT %s, %s, %s FROM stored) "  # noqa: S608
        "SELECT * FROM stored"
    )
    order = tuple(f.attname for f in fields)
    return _Insert(
        sql=sql,
        doorbell=enqueue + "VALUES (%s, %s, %s)",
        with_doorbell=both if postgres else "",
        order=order,
        columns=frozenset(order),
        datetimes=tuple(
            i for i, f in enumerate(fields) if f.get_internal_type() == "DateTimeField"
        ),
        payload=order.index("payload") if postgres else None,
    )


def doorbell_ring(delivery_pk: int) -> None:
    """Ring for a delivery written in the current transaction (see tasuku.broker.ring);
    the writer sets the row's `rung_at` (the hot path writes it in its INSERT)."""
    ring(PROCESS_TASK, delivery_pk, name=f"delivery-{delivery_pk}")


def delivery_enqueue(delivery_pk: int) -> None:
    DELIVERIES.ring_now(delivery_pk)


def delivery_claim(delivery_pk: int, *, now: datetime | None = None) -> WebhookDelivery | None:
    """Take a delivery for processing, or None if it is not ours to take (another worker
    holds it, it is finished or not yet due, or its installation is waiting out a GitHub
    rate limit: then it waits for the reset, its attempt not spent). One conditional
    UPDATE decides between workers that got the same doorbell twice (DELIVERIES.claim)."""
    if DELIVERIES.claim(delivery_pk, now=now) is None:
        return None
    return WebhookDelivery.objects.get(pk=delivery_pk)


@dataclass(frozen=True)
class Handled:
    """A processed delivery's status, and the work it made that its worker may start at
    once (`Outcome.then`: a queued review run, say; see webhooks/tasks.py)."""

    status: str
    then: tuple[tuple[str, int], ...] = ()


def delivery_process(delivery_pk: int | str, delivery_id: str | None = None) -> str:
    """`delivery_handle`'s status."""
    return delivery_handle(delivery_pk, delivery_id).status


def delivery_handle(delivery_pk: int | str, delivery_id: str | None = None) -> Handled:
    """Process one delivery (by its id, or — as the intake rings — by GitHub's hook id and
    delivery id).

    1. Claim it (or return: another worker has it, or it is finished).
    2. Route it to its handler (webhooks/routing.py), which records what it decided.
    3. Success: `processed` or `ignored` with the outcome in words.
       Failure: a permanent error fails it at once; a transient one is retried with
       backoff until MAX_ATTEMPTS attempts have been made, then it is `failed`.
    """
    if delivery_id is None:
        handled = DeliveryJob.run(int(delivery_pk))
        return Handled(handled) if handled == durable.NOT_CLAIMED else handled
    # Found by GitHub's ids within the claim's UPDATE (no read of its id first).
    stored = WebhookDelivery.objects.filter(hook_id=delivery_pk, delivery_id=delivery_id)
    handled = DeliveryJob.run(Subquery(stored.values("pk")[:1]))
    if handled != durable.NOT_CLAIMED:
        return handled
    return Handled(handled if stored.exists() else "no such delivery")


class DeliveryJob(durable.Job):
    """Route the delivery to its handler, which records what it decided. A task boundary:
    every failure is recorded on the delivery and retried or failed."""

    queue = DELIVERIES
    since = "received_at"

    def context(self) -> dict[str, Any]:
        row = self.row
        return {"delivery": row.delivery_id, "event": row.event, "attempt": self.attempt,
                "installation": row.installation_id}  # fmt: skip

    def work(self) -> Handled:
        delivery = self.row
        outcome = route(delivery.event, delivery.payload, delivery_id=delivery.pk)
        status = DeliveryStatus.IGNORED if outcome.ignored else DeliveryStatus.PROCESSED
        self.finish(status, outcome=outcome.text, decision=outcome.decision, last_error="",
                    processed_at=timezone.now())  # fmt: skip
        return Handled(status, outcome.then)

    def failure_fields(self, exc: BaseException, verdict: durable.Verdict) -> dict[str, Any]:
        error = f"{type(exc).__name__}: {exc}"
        if not hasattr(exc, "permanent"):
            # An unexpected exception: keep where it happened for whoever reads the error.
            error += "\n\n" + "".join(traceback.format_exception(exc)[-6:])
        # GitHub's weather (a rate limit, GitHub unavailable) defers: the attempt is given back.
        done = {"processed_at": timezone.now()} if verdict.kind == durable.FAILED else {}
        return {"last_error": error[:20000], **done}

    def log_failure(self, exc: BaseException, verdict: durable.Verdict) -> None:
        logger.warning(
            "delivery %s (%s) attempt %d failed: %s: %s",
            self.row.delivery_id, self.row.event, self.attempt, type(exc).__name__, exc,
            exc_info=not hasattr(exc, "permanent"), extra={"error_id": error_id(code_of(exc))},
        )  # fmt: skip

    def failed(self, exc: BaseException, verdict: durable.Verdict) -> Handled:
        failed = verdict.kind == durable.FAILED
        return Handled(DeliveryStatus.FAILED if failed else DeliveryStatus.RETRYING)


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
            rung_at=now,
            processed_at=None,
        )
        if updated:
            doorbell_ring(delivery.pk)
    return bool(updated)


def deliveries_sweep(*, now: datetime | None = None) -> dict[str, int]:
    """The periodic safety net (every minute, see `setup_schedules`).

    1. A delivery whose worker died holding it (lease expired) is retried, or failed
       when that was its last attempt.
    2. Deliveries due for a retry, and received ones whose doorbell was lost, are
       rung again (and not rung again for RING_AGAIN_AFTER).
    """
    now = now or timezone.now()
    result = DELIVERIES.sweep_lost(
        now=now,
        lost={"last_error": "The worker stopped while processing this delivery."},
        lost_last={
            "last_error": "The worker stopped while processing this delivery (last attempt).",
            "processed_at": now,
        },
    )
    return {**result, "rung": DELIVERIES.ring_due(now=now)}
