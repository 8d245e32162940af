"""Webhook intake throughput and latency, against a bare HMAC + INSERT floor.

    .venv/bin/python benchmarks/webhook_intake.py [--duration 4] [--pairs 3] [--warmup 1.5]
        [--concurrency 1 8 32] [--databases sqlite postgres] [--port 0] [--database postgres]

For each database it serves two WSGI apps with the same gunicorn settings, side by side
on ports of their own (--port: Tasuku's, the floor's the next one; default: free ports),
and drives each from separate load processes with signed `pull_request.opened` payloads
(~27 KB, the recorded fixture):

- tasuku: the real app (`tasuku.wsgi`), POST /webhooks/github: size check, HMAC,
  one INSERT of the delivery, the queue doorbell after commit, 202.
- floor:  `benchmarks/floor_app.py`, the least a correct intake can do: HMAC and one
  INSERT of the same row into the same table, 202.

Both are served through benchmarks/identity.py, and each is asked for the random token
it was started with before it is measured and after every run: a server that held the
port first is never the one measured.

At each load the two are driven in turn, floor then Tasuku, --pairs times (A B A B …):
each pair's runs are seconds apart, so what drifts on the machine (another job, the
CPU's clock) moves both sides of the pair's ratio; the ratio given is the median of the
pairs'. Closed loop at each concurrency: accepted requests/s, p50/p99 latency. Open
loop at 100 requests/s (latency measured from each request's scheduled time, so
queueing is counted): p50/p99. After every run, rows stored are compared with 202s
answered (and removed).

PostgreSQL: --database (benchmarks/isolation.py): by default a new database of a
unique name on BENCH_POSTGRES_URL's server (postgres://postgres@127.0.0.1:5432),
dropped at the end; a database that was there is used — the deliveries it stores are
removed after each run — and never dropped. SQLite: a file of its own.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import multiprocessing as mp
import os
import secrets
import sqlite3
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.isolation import (  # noqa: E402
    Database,
    Served,
    arguments,
    free_port,
    migrate,
    own_database,
    port_or_free,
)
from webhooks.signature import signature_for  # noqa: E402

PAYLOAD = ROOT / "tests" / "fixtures" / "github" / "pull_request__opened.json"
SECRET = "benchmark-secret"


def gunicorn(workers: int) -> list[str]:
    return ["--workers", str(workers), "--worker-class", "gthread", "--threads", "2",
            "--log-level", "warning"]  # fmt: skip


def _key_pem() -> str:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption(),
    ).decode()


# --- load generation (runs in separate processes) ---------------------------------------


def _worker(args: tuple) -> list[tuple[float, float, int]]:
    """One load process: `threads` threads, closed loop until `deadline`, or open loop at
    `rate` requests/s per process. Returns (start, latency seconds, status) per request."""
    import threading

    port, body, signature, threads, deadline, rate = args
    results: list[tuple[float, float, int]] = []
    lock = threading.Lock()

    def loop(index: int) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        local = []
        interval = threads / rate if rate else 0.0
        next_at = time.perf_counter() + index * (interval / threads if rate else 0)
        while True:
            now = time.perf_counter()
            if now >= deadline:
                break
            if rate:
                if next_at > now:
                    time.sleep(next_at - now)
                start = next_at
                next_at += interval
            else:
                start = time.perf_counter()
            headers = {
                "Content-Type": "application/json",
                "X-GitHub-Event": "pull_request",
                "X-GitHub-Delivery": str(uuid.uuid4()),
                "X-GitHub-Hook-ID": "1",
                "X-Hub-Signature-256": signature,
            }
            try:
                conn.request("POST", "/webhooks/github", body=body, headers=headers)
                response = conn.getresponse()
                response.read()
                status = response.status
            except (OSError, http.client.HTTPException):
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
                status = 0
            local.append((start, time.perf_counter() - start, status))
        with lock:
            results.extend(local)

    pool = [threading.Thread(target=loop, args=(i,)) for i in range(threads)]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join()
    return results


def drive(
    port: int, body: bytes, *, concurrency: int, duration: float, rate: float | None = None
) -> dict:
    signature = signature_for(SECRET, body)
    processes = min(2, concurrency)
    threads = max(1, concurrency // processes)
    deadline = time.perf_counter() + duration + 0.5  # perf_counter is system-wide on Linux
    per_process_rate = rate / processes if rate else None
    with mp.get_context("fork").Pool(processes) as pool:
        parts = pool.map(
            _worker,
            [(port, body, signature, threads, deadline, per_process_rate)] * processes,
        )
    results = [r for part in parts for r in part]
    elapsed = max(s + lat for s, lat, _ in results) - min(s for s, _, _ in results)
    accepted = [latency for _, latency, status in results if status == 202]
    errors = sum(1 for _, _, status in results if status != 202)
    accepted.sort()

    def pct(p: float) -> float:
        if not accepted:
            return float("nan")
        return accepted[min(len(accepted) - 1, int(p * len(accepted)))] * 1000

    return {
        "accepted": len(accepted),
        "errors": errors,
        "rps": len(accepted) / max(elapsed, 1e-9),
        "p50": pct(0.50),
        "p99": pct(0.99),
        "mean": statistics.mean(accepted) * 1000 if accepted else float("nan"),
    }


# --- servers and runs --------------------------------------------------------------------


def _manage(env: dict[str, str], *args: str) -> None:
    subprocess.run(  # noqa: S603
        [sys.executable, "manage.py", *args], cwd=ROOT, env=env, check=True, capture_output=True
    )


def _count_and_clear(db: Database) -> int:
    """The rows the last run stored; then the tables emptied and the database's log
    checkpointed, so that every run starts from the same state. (A run writes hundreds
    of megabytes of log: without it, a checkpoint falls inside one run or another, and
    the run after it pays for every page it touches first.)"""
    if db.vendor == "sqlite":
        with sqlite3.connect(db.dsn) as conn:
            count = conn.execute("SELECT count(*) FROM webhooks_webhookdelivery").fetchone()[0]
            conn.execute("DELETE FROM webhooks_webhookdelivery")
            conn.execute("DELETE FROM django_q_ormq")
        with sqlite3.connect(db.dsn, isolation_level=None) as conn:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        return count
    import psycopg

    with psycopg.connect(db.dsn, autocommit=True) as conn:
        count = conn.execute("SELECT count(*) FROM webhooks_webhookdelivery").fetchone()[0]
        conn.execute("TRUNCATE webhooks_webhookdelivery CASCADE")
        conn.execute("TRUNCATE django_q_ormq")
        # A role without pg_checkpoint: the runs are noisier, nothing else.
        with contextlib.suppress(psycopg.errors.InsufficientPrivilege):
            conn.execute("CHECKPOINT")
    return count


def _median(values: list[float]) -> float:
    values = [v for v in values if v == v]  # not NaN
    return statistics.median(values) if values else float("nan")


def bench_database(given: str, args: argparse.Namespace, body: bytes, key: str) -> list[dict]:
    # `sqlite:///PATH` is a SQLite database of the caller's (one already migrated: the
    # suite's copy), `sqlite` a fresh one, `postgres` the one --database names.
    kind = "sqlite" if given.startswith("sqlite") else "postgres"
    spec = given if kind == "sqlite" else args.database
    with own_database(spec, script="webhook_intake", keep=args.keep_database) as db:
        env = {
            **{k: v for k, v in os.environ.items() if k != "DATABASE_URL"},
            "DATABASE_URL": db.url,
            "SECRET_KEY": secrets.token_urlsafe(40),
            "GITHUB_APP_ID": "1",
            "GITHUB_PRIVATE_KEY": key,
            "GITHUB_WEBHOOK_SECRET": SECRET,
            "GITHUB_APP_SLUG": "bench",
            "LOG_LEVEL": "WARNING",
            "BENCH_DATABASE": "sqlite" if db.vendor == "sqlite" else "postgres",
            "BENCH_DSN": db.dsn,
        }
        migrate(env)
        tasuku_port = port_or_free(args.port)
        floor_port = args.port + 1 if args.port else free_port()
        settings = gunicorn(args.gunicorn_workers)
        floor = Served("benchmarks.floor_app:application", port=floor_port, env=env,
                       gunicorn=settings)  # fmt: skip
        tasuku = Served("benchmarks.identity:tasuku", port=tasuku_port, env=env, gunicorn=settings)
        rows = []
        with floor, tasuku:
            servers = {"floor": floor, "tasuku": tasuku}
            print(f"{kind}: floor on port {floor.port}, tasuku on port {tasuku.port} "
                  "(each answered with its own token)", flush=True)  # fmt: skip
            for server in servers.values():
                # Connections opened, imports done, before anything is measured.
                drive(server.port, body, concurrency=4, duration=args.warmup)
            _count_and_clear(db)
            phases = [(c, None) for c in args.concurrency] + [(8, 100.0)]
            for concurrency, rate in phases:
                pairs = []
                for _ in range(args.pairs):
                    pair = {}
                    for label, server in servers.items():  # A B, A B, …
                        result = drive(server.port, body, concurrency=concurrency,
                                       duration=args.duration, rate=rate)  # fmt: skip
                        server.verify()
                        result["stored"] = _count_and_clear(db)
                        pair[label] = result
                    pairs.append(pair)
                rows.append(_summary(kind, concurrency, rate, pairs))
                print(_format(rows[-1]), flush=True)
    return rows


def _summary(kind: str, concurrency: int, rate: float | None, pairs: list[dict]) -> dict:
    row = {"database": kind, "load": f"{rate:.0f}/s open" if rate else f"c={concurrency}",
           "open": bool(rate), "pairs": pairs}  # fmt: skip
    for label in ("floor", "tasuku"):
        runs = [pair[label] for pair in pairs]
        row[label] = {
            "rps": _median([r["rps"] for r in runs]),
            "p50": _median([r["p50"] for r in runs]),
            "p99": _median([r["p99"] for r in runs]),
            "accepted": sum(r["accepted"] for r in runs),
            "stored": sum(r["stored"] for r in runs),
            "errors": sum(r["errors"] for r in runs),
        }
    row["ratios"] = [p["tasuku"]["rps"] / p["floor"]["rps"] for p in pairs if p["floor"]["rps"]]
    row["ratio"] = _median(row["ratios"])
    return row


def _format(row: dict) -> str:
    lines = []
    for label in ("floor", "tasuku"):
        r = row[label]
        lines.append(
            f"{row['database']:<9} {label:<7} {row['load']:<12} {r['rps']:>8.0f} req/s  "
            f"p50 {r['p50']:>6.1f} ms  p99 {r['p99']:>6.1f} ms  202s {r['accepted']:>6}  "
            f"stored {r['stored']:>6}  lost {r['accepted'] - r['stored']}  errors {r['errors']}"
        )
    if not row["open"]:
        per_pair = " ".join(f"{ratio:.0%}" for ratio in row["ratios"])
        lines.append(f"{'':<9} tasuku/floor by pair: {per_pair} -> median {row['ratio']:.0%}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=float, default=4.0, help="seconds of each run")
    parser.add_argument("--pairs", type=int, default=3, help="floor/Tasuku pairs at each load")
    parser.add_argument("--warmup", type=float, default=1.5,
                        help="seconds each server is driven before the runs (default 1.5)")  # fmt: skip
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 8, 32])
    parser.add_argument(
        "--databases", nargs="+", default=["sqlite", "postgres"],
        help="sqlite (a fresh one), sqlite:///PATH, postgres (see --database)",
    )  # fmt: skip
    parser.add_argument("--gunicorn-workers", type=int, default=4)
    arguments(parser)
    args = parser.parse_args()
    body = PAYLOAD.read_bytes()
    key = _key_pem()
    print(f"payload {len(body)} bytes; {os.cpu_count()} CPUs; gunicorn "
          f"{' '.join(gunicorn(args.gunicorn_workers))}; {args.pairs} pairs of "
          f"{args.duration:g} s runs at each load")  # fmt: skip
    rows = []
    for kind in args.databases:
        rows += bench_database(kind, args, body, key)
    print("\nSummary: tasuku throughput as a share of the floor (closed loop, median of pairs)")
    for row in rows:
        if not row["open"]:
            spread = f"{min(row['ratios']):.0%}-{max(row['ratios']):.0%}" if row["ratios"] else "-"
            print(f"{row['database']:<9} {row['load']:<6} {row['ratio']:>6.0%} of the floor "
                  f"(pairs {spread})")  # fmt: skip
    lost = sum(
        r[label]["accepted"] - r[label]["stored"] for r in rows for label in ("floor", "tasuku")
    )
    print(f"deliveries lost (202 answered but not stored): {lost}")


if __name__ == "__main__":
    main()
