"""The floor for webhook intake: a bare WSGI app that verifies the HMAC and INSERTs the
same row into the same table as Tasuku, and nothing else. Served by
`benchmarks/webhook_intake.py`; not part of the product.

BENCH_DATABASE is `sqlite` (BENCH_DSN a file path) or `postgres` (BENCH_DSN a URL).
Wrapped as Tasuku is (benchmarks/identity.py), so the benchmark knows which server
answers.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import sqlite3
import threading
import zlib
from datetime import UTC, datetime

from benchmarks.identity import wrap

SECRET = os.environ["GITHUB_WEBHOOK_SECRET"].encode()
DATABASE = os.environ["BENCH_DATABASE"]
DSN = os.environ["BENCH_DSN"]
INSERT = (
    "INSERT INTO webhooks_webhookdelivery (hook_id, delivery_id, event, action, installation_id,"
    " repository_full_name, pr_number, payload, body, signature, received_at, status, attempts,"
    " deferrals, last_error, outcome, decision) VALUES ({p}, {p}, {p}, {p}, {p}, {p}, {p}, {j},"
    " {p}, {p}, {p}, 'received', 0, 0, '', '', '')"
)
_local = threading.local()


def _connection():
    conn = getattr(_local, "conn", None)
    if conn is None:
        if DATABASE == "sqlite":
            conn = sqlite3.connect(DSN, timeout=20, isolation_level=None)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
        else:
            import psycopg

            conn = psycopg.connect(DSN, autocommit=True)
        _local.conn = conn
    return conn


def intake(environ, start_response):
    length = int(environ.get("CONTENT_LENGTH") or 0)
    body = environ["wsgi.input"].read(length)
    expected = "sha256=" + hmac.new(SECRET, body, hashlib.sha256).hexdigest()
    if not hmac.compare_digest(expected, environ.get("HTTP_X_HUB_SIGNATURE_256", "")):
        start_response("401 Unauthorized", [("Content-Length", "0")])
        return [b""]
    payload = json.loads(body)
    params = (
        environ.get("HTTP_X_GITHUB_HOOK_ID", ""),
        environ["HTTP_X_GITHUB_DELIVERY"],
        environ["HTTP_X_GITHUB_EVENT"],
        payload.get("action", ""),
        (payload.get("installation") or {}).get("id"),
        (payload.get("repository") or {}).get("full_name", ""),
        (payload.get("pull_request") or {}).get("number"),
        body.decode(),
        # The body as GitHub signed it, kept as Tasuku keeps it (zlib, level 1).
        zlib.compress(body, 1),
        environ.get("HTTP_X_HUB_SIGNATURE_256", "")[:80],
        datetime.now(UTC).isoformat(),
    )
    conn = _connection()
    if DATABASE == "sqlite":
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.execute(INSERT.format(p="?", j="?"), params)
        except BaseException:
            conn.execute("ROLLBACK")  # a failed INSERT must not hold the write lock
            raise
        conn.execute("COMMIT")
    else:
        conn.execute(INSERT.format(p="%s", j="%s::jsonb"), params)
    start_response("202 Accepted", [("Content-Type", "application/json"), ("Content-Length", "2")])
    return [b"{}"]


application = wrap(intake)
