"""Webhook intake throughput and latency, against a bare HMAC + INSERT floor.

    .venv/bin/python benchmarks/webhook_intake.py [--duration 10] [--concurrency 1 8 32]
                                                  [--databases sqlite postgres]

For each database it serves two WSGI apps with the same gunicorn settings, one at a
time, and drives each from separate load processes with signed `pull_request.opened`
payloads (~27 KB, the recorded fixture):

- tasuku: the real app (`tasuku.wsgi`), POST /webhooks/github: size check, HMAC,
  one INSERT of the delivery, the queue doorbell after commit, 202.
- floor:  `benchmarks/floor_app.py`, the least a correct intake can do: HMAC and one
  INSERT of the same row into the same table, 202.

Closed loop at each concurrency: accepted requests/s, p50/p99 latency. Open loop at
100 requests/s (latency measured from each request's scheduled time, so queueing is
counted): p50/p99. After every phase, rows stored are compared with 202s answered.

PostgreSQL: DATABASE_URL's server (default postgres://postgres@127.0.0.1:5432/), a
database named tasuku_bench that this script creates and drops.
"""

from __future__ import annotations

import argparse
import http.client
import multiprocessing as mp
import os
import secrets
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from webhooks.signature import signature_for  # noqa: E402

PAYLOAD = ROOT / "tests" / "fixtures" / "github" / "pull_request__opened.json"
SECRET = "benchmark-secret"
PORT = 8765
GUNICORN = [
    "--workers",
    "4",
    "--worker-class",
    "gthread",
    "--threads",
    "2",
    "--log-level",
    "warning",
]


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


def drive(body: bytes, *, concurrency: int, duration: float, rate: float | None = None) -> dict:
    signature = signature_for(SECRET, body)
    processes = min(2, concurrency)
    threads = max(1, concurrency // processes)
    deadline = time.perf_counter() + duration + 0.5  # perf_counter is system-wide on Linux
    per_process_rate = rate / processes if rate else None
    with mp.get_context("fork").Pool(processes) as pool:
        parts = pool.map(
            _worker,
            [(PORT, body, signature, threads, deadline, per_process_rate)] * processes,
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


# --- servers ----------------------------------------------------------------------------


class Server:
    def __init__(self, app: str, env: dict[str, str]) -> None:
        self.app, self.env = app, env
        self.process: subprocess.Popen | None = None

    def __enter__(self) -> Server:
        command = [
            sys.executable,
            "-m",
            "gunicorn",
            self.app,
            "--bind",
            f"127.0.0.1:{PORT}",
            *GUNICORN,
        ]
        self.process = subprocess.Popen(command, cwd=ROOT, env=self.env)  # noqa: S603
        for _ in range(200):
            try:
                conn = http.client.HTTPConnection("127.0.0.1", PORT, timeout=1)
                conn.request("GET", "/static/tasuku.css")
                conn.getresponse().read()
                return self
            except OSError:
                time.sleep(0.05)
        raise RuntimeError(f"{self.app} did not start")

    def __exit__(self, *exc: object) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGTERM)
        self.process.wait(timeout=30)


def _manage(env: dict[str, str], *args: str) -> None:
    subprocess.run(  # noqa: S603
        [sys.executable, "manage.py", *args], cwd=ROOT, env=env, check=True, capture_output=True
    )


def _count_and_clear(database: str, dsn: str) -> int:
    if database == "sqlite":
        with sqlite3.connect(dsn) as conn:
            count = conn.execute("SELECT count(*) FROM webhooks_webhookdelivery").fetchone()[0]
            conn.execute("DELETE FROM webhooks_webhookdelivery")
            conn.execute("DELETE FROM django_q_ormq")
        return count
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        count = conn.execute("SELECT count(*) FROM webhooks_webhookdelivery").fetchone()[0]
        conn.execute("TRUNCATE webhooks_webhookdelivery CASCADE")
        conn.execute("TRUNCATE django_q_ormq")
    return count


def bench_database(database: str, args: argparse.Namespace, body: bytes, key: str) -> list[dict]:
    workdir = Path(tempfile.mkdtemp(prefix="tasuku-bench-"))
    if database == "sqlite":
        db_path = workdir / "bench.sqlite3"
        url, dsn = f"sqlite:///{db_path}", str(db_path)
    else:
        server = os.environ.get("BENCH_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432")
        import psycopg

        with psycopg.connect(f"{server}/postgres", autocommit=True) as conn:
            conn.execute("DROP DATABASE IF EXISTS tasuku_bench")
            conn.execute("CREATE DATABASE tasuku_bench")
        url = dsn = f"{server}/tasuku_bench"
    env = {
        **os.environ,
        "DATABASE_URL": url,
        "SECRET_KEY": secrets.token_urlsafe(40),
        "GITHUB_APP_ID": "1",
        "GITHUB_PRIVATE_KEY": key,
        "GITHUB_WEBHOOK_SECRET": SECRET,
        "GITHUB_APP_SLUG": "bench",
        "LOG_LEVEL": "WARNING",
        "BENCH_DATABASE": database,
        "BENCH_DSN": dsn,
    }
    _manage(env, "migrate", "--noinput")
    rows = []
    try:
        for label, app in (
            ("floor", "benchmarks.floor_app:application"),
            ("tasuku", "tasuku.wsgi"),
        ):
            with Server(app, env):
                drive(body, concurrency=4, duration=1.5)  # warm up (connections, imports)
                _count_and_clear(database, dsn)
                phases = [(c, None) for c in args.concurrency] + [(8, 100.0)]
                for concurrency, rate in phases:
                    result = drive(body, concurrency=concurrency, duration=args.duration, rate=rate)
                    stored = _count_and_clear(database, dsn)
                    rows.append(
                        {
                            "database": database,
                            "app": label,
                            "load": f"{rate:.0f}/s open" if rate else f"c={concurrency}",
                            **result,
                            "stored": stored,
                        }
                    )
                    print(_format(rows[-1]), flush=True)
    finally:
        if database == "postgres":
            import psycopg

            server = os.environ.get("BENCH_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432")
            with psycopg.connect(f"{server}/postgres", autocommit=True) as conn:
                conn.execute("DROP DATABASE IF EXISTS tasuku_bench WITH (FORCE)")
        shutil.rmtree(workdir, ignore_errors=True)
    return rows


def _format(row: dict) -> str:
    lost = row["accepted"] - row["stored"]
    return (
        f"{row['database']:<9} {row['app']:<7} {row['load']:<12} "
        f"{row['rps']:>8.0f} req/s  p50 {row['p50']:>6.1f} ms  p99 {row['p99']:>6.1f} ms  "
        f"202s {row['accepted']:>6}  stored {row['stored']:>6}  lost {lost}  errors {row['errors']}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=float, default=10.0)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 8, 32])
    parser.add_argument("--databases", nargs="+", default=["sqlite", "postgres"])
    args = parser.parse_args()
    body = PAYLOAD.read_bytes()
    key = _key_pem()
    print(f"payload {len(body)} bytes; {os.cpu_count()} CPUs; gunicorn {' '.join(GUNICORN)}")
    rows = []
    for database in args.databases:
        rows += bench_database(database, args, body, key)
    print("\nSummary: tasuku throughput as a share of the floor (closed loop)")
    for database in args.databases:
        for row in rows:
            if row["database"] != database or row["app"] != "tasuku" or "open" in row["load"]:
                continue
            floor = next(
                r for r in rows
                if r["database"] == database and r["app"] == "floor" and r["load"] == row["load"]
            )  # fmt: skip
            print(f"{database:<9} {row['load']:<6} {row['rps'] / floor['rps']:>6.0%} of the floor")
    lost = sum(r["accepted"] - r["stored"] for r in rows)
    print(f"deliveries lost (202 answered but not stored): {lost}")


if __name__ == "__main__":
    main()
