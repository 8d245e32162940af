"""Webhook latency while slow clients hold connections open (slowloris), with and
without the shipped nginx front (deploy/nginx/tasuku.conf).

    .venv/bin/python benchmarks/slow_clients.py [--duration 20] [--slow 0 8 16 32]
                                                [--port 0] [--database sqlite]

Tasuku's web process is started as `manage.py serve` starts it (gunicorn, 2 workers ×
4 threads) on a database of its own (--database, benchmarks/isolation.py: by default a
SQLite file made for the run), on --port (default: a free port; nginx on another), and
answers with the token it was started with before anything is measured. For each number of slow clients, each
sends a webhook's headers and then one byte of its body every 5 s (reconnecting when cut
off), while a probe posts signed deliveries one after another and times each. GitHub
gives up on a delivery after 10 s: the figure that matters is how many probes took
longer. Two fronts:

- direct: the probe and the slow clients talk to gunicorn itself. Tasuku cuts a body
  that has not arrived within TASUKU_WEBHOOK_READ_SECONDS (10 s) with 408, so a slow
  client holds a thread for at most that long, then reconnects.
- nginx: the same, through deploy/nginx/tasuku.conf (TLS left out; its timeouts and
  buffering as shipped), which reads each request whole before passing it on. Needs
  `nginx` on the PATH (Debian: nginx-light); skipped without it.
"""

from __future__ import annotations

import argparse
import http.client
import os
import re
import secrets
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.isolation import (  # noqa: E402
    Served,
    arguments,
    free_port,
    identity,
    migrate,
    own_database,
    port_or_free,
)
from benchmarks.webhook_intake import SECRET, _key_pem  # noqa: E402
from webhooks.signature import signature_for  # noqa: E402

GIVES_UP = 10.0  # seconds: GitHub's delivery timeout
BODY = b'{"zen": "Keep it logically awesome.", "hook_id": 1, "hook": {"type": "App"}}'


def gunicorn(env: dict[str, str], port: int) -> Served:
    # The same web settings as `manage.py serve`.
    settings = ["--workers", "2", "--threads", "4", "--graceful-timeout", "10",
                "--log-level", os.environ.get("BENCH_GUNICORN_LOG", "warning")]  # fmt: skip
    return Served("benchmarks.identity:tasuku", port=port, env=env, gunicorn=settings)


def nginx(workdir: Path, port: int, upstream: Served) -> subprocess.Popen | None:
    binary = shutil.which("nginx") or (
        "/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None
    )
    if binary is None:
        return None
    shipped = (ROOT / "deploy" / "nginx" / "tasuku.conf").read_text()
    # The shipped server block, on a local port without TLS; the redirect block dropped.
    server = shipped.split("# Plain HTTP only redirects")[0]
    server = re.sub(r"listen 443 ssl http2;", f"listen 127.0.0.1:{port};", server)
    server = re.sub(r"\n\s*(http2 on|ssl_certificate(_key)?\s[^;]*);", "", server)
    server = server.replace("server 127.0.0.1:8000;", f"server 127.0.0.1:{upstream.port};")
    (workdir / "tasuku.conf").write_text(server)
    (workdir / "nginx.conf").write_text(
        f"""daemon off;
worker_processes 1;
pid {workdir}/nginx.pid;
error_log {workdir}/error.log warn;
events {{ worker_connections 1024; }}
http {{
    access_log off;
    client_body_temp_path {workdir}/body;
    proxy_temp_path {workdir}/proxy;
    fastcgi_temp_path {workdir}/fastcgi;
    uwsgi_temp_path {workdir}/uwsgi;
    scgi_temp_path {workdir}/scgi;
    include {workdir}/tasuku.conf;
}}
"""
    )
    process = subprocess.Popen([binary, "-c", str(workdir / "nginx.conf"), "-p", str(workdir)])  # noqa: S603
    # Through nginx, the gunicorn started here must answer: not another server on the port.
    for _ in range(200):
        if process.poll() is not None:
            raise RuntimeError(f"nginx on port {port} exited (is the port taken?)")
        found = identity(port, timeout=1)
        if found and upstream._ours(found):
            return process
        time.sleep(0.05)
    raise RuntimeError(f"nginx on port {port} does not answer as the server started")


def slow_client(port: int, stop: threading.Event, cut: list[int]) -> None:
    """Headers, then one byte of the body every 5 s; reconnect when cut off."""
    headers = (
        b"POST /webhooks/github HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        b"X-GitHub-Event: ping\r\nX-GitHub-Delivery: slow\r\nX-Hub-Signature-256: sha256=00\r\n"
        b"Content-Length: 20000\r\n\r\n"
    )
    while not stop.is_set():
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
                sock.sendall(headers)
                while not stop.wait(5):
                    sock.sendall(b" ")
        except OSError:
            cut[0] += 1
            stop.wait(0.2)


def probe(port: int, duration: float) -> list[float]:
    """Signed deliveries one after another for `duration`: each one's seconds (a probe
    that got no 200 within 12 s counts as 12)."""
    latencies = []
    deadline = time.monotonic() + duration
    signature = signature_for(SECRET, BODY)
    while time.monotonic() < deadline:
        start = time.monotonic()
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=12)
            conn.request("POST", "/webhooks/github", body=BODY, headers={
                "Content-Type": "application/json", "X-GitHub-Event": "ping",
                "X-GitHub-Delivery": str(uuid.uuid4()), "X-GitHub-Hook-ID": "1",
                "X-Hub-Signature-256": signature,
            })  # fmt: skip
            response = conn.getresponse()
            response.read()
            conn.close()
            ok = response.status == 200
        except (OSError, http.client.HTTPException):
            ok = False
        elapsed = time.monotonic() - start
        latencies.append(elapsed if ok else max(elapsed, 12.0))
        time.sleep(max(0.0, 0.25 - elapsed))
    return latencies


def measure(port: int, slow: int, duration: float) -> dict:
    stop = threading.Event()
    cut = [0]
    clients = [threading.Thread(target=slow_client, args=(port, stop, cut), daemon=True)
               for _ in range(slow)]  # fmt: skip
    for client in clients:
        client.start()
    time.sleep(1.0 if slow else 0)  # let them take their connections
    latencies = sorted(probe(port, duration))
    stop.set()
    for client in clients:
        client.join(timeout=10)
    return {
        "probes": len(latencies),
        "p50": statistics.median(latencies) * 1000,
        "p99": latencies[min(len(latencies) - 1, int(0.99 * len(latencies)))] * 1000,
        "max": latencies[-1] * 1000,
        "late": sum(1 for x in latencies if x > GIVES_UP),
        "cut": cut[0],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=float, default=20.0)
    parser.add_argument("--slow", type=int, nargs="+", default=[0, 8, 16, 32])
    arguments(parser, database="sqlite")
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="tasuku-slow-"))
    with own_database(args.database, script="slow_clients", keep=args.keep_database) as db:
        env = {
            **{k: v for k, v in os.environ.items() if k != "DATABASE_URL"},
            "DATABASE_URL": db.url,
            "SECRET_KEY": secrets.token_urlsafe(40),
            "GITHUB_APP_ID": "1",
            "GITHUB_PRIVATE_KEY": _key_pem(),
            "GITHUB_WEBHOOK_SECRET": SECRET,
            "GITHUB_APP_SLUG": "bench",
            "LOG_LEVEL": "ERROR",
        }
        migrate(env)
        front = None
        with gunicorn(env, port_or_free(args.port)) as web:
            try:
                front_port = args.port + 1 if args.port else free_port()
                front = nginx(workdir, front_port, web)
                fronts = [("direct", web.port)] + ([("nginx", front_port)] if front else [])
                print(f"{os.cpu_count()} CPUs; gunicorn 2 workers x 4 threads on port {web.port}; "
                      f"probes for {args.duration:.0f} s each; GitHub gives up after "
                      f"{GIVES_UP:.0f} s" + ("" if front else "; nginx not found: direct only"))  # fmt: skip
                for label, port in fronts:
                    for slow in args.slow:
                        r = measure(port, slow, args.duration)
                        web.verify()
                        print(f"{label:<7} {slow:>3} slow clients: {r['probes']:>4} probes  "
                              f"p50 {r['p50']:>7.1f} ms  p99 {r['p99']:>8.1f} ms  max {r['max']:>8.1f} ms  "
                              f"over {GIVES_UP:.0f} s: {r['late']:>3}  slow connections cut: {r['cut']}",
                              flush=True)  # fmt: skip
            finally:
                if front is not None:
                    front.send_signal(signal.SIGQUIT)
                    try:
                        front.wait(timeout=15)
                    except subprocess.TimeoutExpired:
                        front.kill()
                shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
