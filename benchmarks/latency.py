"""Webhook to published review: how long a small pull request waits, stage by stage.

    .venv/bin/python benchmarks/latency.py [--warm 3] [--gap 6] [--no-throttle] [--port 0]
                                           [--github-port 0] [--database postgres]

Starts the fake GitHub (tests/fakes, as `tests.fakes.serve` runs it standalone) with the
demo's repository, and Tasuku as it is deployed: the web app under gunicorn (2 workers
x 4 threads, as `manage.py serve`; on --port, answering with the token it was started
with) and a worker (`manage.py worker`, as deployed), on a database of their own (--database,
benchmarks/isolation.py). Then, one pull request at a time (three files: Python, shell,
Markdown; the `static` reviewer), it sends the signed `pull_request.opened` webhook and
waits for the review on the fake GitHub:

- cold: the first pull request after the worker started (no installation token yet, no
  mirror of the repository, nothing imported for an engine yet);
- warm: --warm more pull requests of the same size, one after the other, each --gap
  seconds after the last one's review was complete: a worker idle when its pull
  request arrives, its installation's write pace back to a full burst (the default gap,
  6 s, is GITHUB_WRITE_BURST writes at one a second). `--gap 0` sends each at once: a
  busy installation, whose writes wait their turn.

For each: the webhook's answer, the wait until the run was queued and until a worker
took it, each stage of the run (its attempt's stage times), the time to the review on
GitHub and to the completed check, and the GitHub requests the review cost (the fake
counts them: API requests, writes among them, git). GitHub's pacing is on, as deployed
(an installation's writes: 6 at once, then one a second; reads unpaced); --no-throttle
measures Tasuku's own time.
The periodic sweeps are off, so every request counted is the review's.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.isolation import (  # noqa: E402
    Served,
    arguments,
    descends_from,
    migrate,
    own_database,
    port_or_free,
)

APP_ID = 4242
WRITES = ("POST", "PATCH", "PUT", "DELETE")
STAGES = ("admission", "clone", "sandbox", "validation", "publication")


def worker_env(
    fake_url: str,
    private_key: str,
    secret: str,
    work: Path,
    workers: int,
    settings_module: str = "tasuku.settings",
) -> dict[str, str]:
    """The environment of a Tasuku that talks to the fake GitHub at `fake_url` as the
    benchmark's App (this process's own GITHUB_ and TASUKU_ settings left out)."""
    return {
        **{k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "TASUKU_"))},
        "DATABASE_URL": os.environ["DATABASE_URL"],
        "DJANGO_SETTINGS_MODULE": settings_module,
        "SECRET_KEY": secrets.token_urlsafe(40),
        "GITHUB_API_URL": fake_url,
        "GITHUB_APP_ID": str(APP_ID),
        "GITHUB_APP_SLUG": "tasuku-bench",
        "GITHUB_PRIVATE_KEY": private_key,
        "GITHUB_WEBHOOK_SECRET": secret,
        "LOG_LEVEL": "WARNING",
        "TASUKU_CHECKOUT_CACHE": str(work / "mirrors"),
        "TASUKU_AUTO_SCHEDULES": "false",
        "TASUKU_ENABLE_NEW_REPOSITORIES": "true",
        "TASUKU_WORKERS": str(workers),
    }


def post(url: str, secret: str, event: str, payload: dict) -> tuple[int, float]:
    """A signed delivery to Tasuku: (status, seconds to the answer)."""
    from webhooks.signature import signature_for

    body = json.dumps(payload).encode()
    request = urllib.request.Request(  # noqa: S310  (the server this script started)
        f"{url}/webhooks/github", data=body, method="POST",
        headers={"Content-Type": "application/json", "X-GitHub-Event": event,
                 "X-GitHub-Delivery": str(uuid.uuid4()), "X-GitHub-Hook-ID": "1",
                 "X-Hub-Signature-256": signature_for(secret, body),
                 "User-Agent": "GitHub-Hookshot/benchmark"},
    )  # fmt: skip
    started = time.perf_counter()
    try:
        with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310
            status = response.status
    except urllib.error.HTTPError as exc:
        status = exc.code
    return status, time.perf_counter() - started


def wait(condition, *, timeout: float, what: str, every: float = 0.01):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(every)
    raise SystemExit(f"timed out after {timeout:.0f} s waiting for {what}")


class Worker:
    """`manage.py worker`, as deployed, in a process group of its own, and stopped as
    systemd stops it: SIGTERM to every process of the group. (django-q2's own `manage.py
    qcluster` ignored that for 20 s, the wait below, and then was killed.)"""

    def __init__(self, env: dict[str, str], log: Path) -> None:
        self.log = open(log, "w")  # noqa: SIM115
        self.process = subprocess.Popen(  # noqa: S603
            [sys.executable, "manage.py", "worker"], cwd=ROOT, env=env,
            stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip

    def ours(self, name: str) -> bool:
        """Whether a heartbeat's worker (`host:pid`) is a process of this cluster."""
        return descends_from(int(name.rsplit(":", 1)[-1]), self.process.pid)

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        self.log.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--warm", type=int, default=3, help="pull requests after the first")
    parser.add_argument("--gap", type=float, default=6.0,
                        help="seconds between a review and the next pull request (idle)")  # fmt: skip
    parser.add_argument("--no-throttle", action="store_true",
                        help="no pauses between GitHub requests: Tasuku's own time")  # fmt: skip
    parser.add_argument("--github-port", type=int, default=0, help="the fake GitHub's port")
    parser.add_argument("--timeout", type=float, default=300, help="seconds for one review")
    parser.add_argument("--workers", type=int, default=2,
                        help="worker processes (TASUKU_WORKERS; each caches its own tokens)")  # fmt: skip
    arguments(parser, port="Tasuku's web port")
    args = parser.parse_args()
    with own_database(args.database, script="latency", keep=args.keep_database) as db:
        os.environ["DATABASE_URL"] = db.url
        return run(args)


def run(args: argparse.Namespace) -> int:  # noqa: C901
    from tests.fakes.github import FakeGitHub, Pull, rsa_keypair
    from tests.gitworld import HEAD_FILES, INSTALLATION, REPO, world_build

    fake = FakeGitHub(port=args.github_port).start()
    private, public = rsa_keypair()
    fake.add_app(APP_ID, public, "tasuku-bench")
    world = world_build(fake, clock=int(time.time()))
    secret = secrets.token_hex(16)
    work = Path(tempfile.mkdtemp(prefix="tasuku-latency-"))
    env = worker_env(
        fake.url, private, secret, work, args.workers,
        "benchmarks.unpaced_settings" if args.no_throttle else "tasuku.settings",
    )  # fmt: skip
    os.environ.update({k: env[k] for k in ("DJANGO_SETTINGS_MODULE", "SECRET_KEY")})
    migrate(env)
    import django

    django.setup()
    from reviews.models import ReviewRun, RunAttempt, RunStatus, WorkerHeartbeat

    web_log = open(work / "web.log", "w")  # noqa: SIM115
    web = Served("benchmarks.identity:tasuku", port=port_or_free(args.port), env=env,
                 gunicorn=["--workers", "2", "--threads", "4", "--log-level", "warning"],
                 log=web_log)  # fmt: skip
    worker = None
    try:
        with web:
            started = datetime.now(UTC)
            worker = Worker(env, work / "worker.log")
            wait(lambda: any(worker.ours(name) for name in WorkerHeartbeat.objects.filter(
                beat_at__gte=started).values_list("name", flat=True)),
                timeout=120, what="the worker's first heartbeat", every=0.2)  # fmt: skip
            url = f"http://127.0.0.1:{web.port}"
            repo_json = fake._repo_json(world.repo)
            installation = {
                "id": INSTALLATION, "account": fake._user_json("acme", "Organization", 1000),
                "repository_selection": "selected",
                "permissions": fake.installations[INSTALLATION].permissions,
            }  # fmt: skip
            status, _ = post(url, secret, "installation", {
                "action": "created", "installation": installation, "repositories": [repo_json],
            })  # fmt: skip
            assert status in (200, 202), status
            from repos.models import Repository

            wait(lambda: Repository.objects.filter(full_name=REPO, enabled=True).exists(),
                 timeout=60, what="the repository to be installed", every=0.1)  # fmt: skip
            pacing = (
                "off"
                if args.no_throttle
                else "on (an installation's writes: 6 at once, then one a second)"
            )
            print(f"Tasuku web on port {web.port} (answered with its token), a worker "
                  f"(pid {worker.process.pid}, {args.workers} processes), the fake GitHub at {fake.url}; database "
                  f"{db_label()}; GitHub pacing {pacing}; {args.gap:g} s between reviews")  # fmt: skip

            results = []
            for index in range(1 + args.warm):
                if index == 0:
                    pull = world.pull
                else:
                    time.sleep(args.gap)
                    number = 100 + index
                    head = world.git.commit(
                        {**HEAD_FILES, "app/payments.py": HEAD_FILES["app/payments.py"]
                         + f"# pull request {number}\n"},
                        parent=world.base, message=f"feature {number}", branch=f"feature{number}",
                    )  # fmt: skip
                    pull = fake.add_pull(REPO, Pull(number=number, title="Add refunds",
                                                    head_sha=head, base_sha=world.base))  # fmt: skip
                results.append(review(fake, url, secret, world, pull, repo_json, args.timeout,
                                      ReviewRun, RunAttempt, RunStatus))  # fmt: skip
                web.verify()
                label = "cold" if index == 0 else f"warm {index}"
                print(f"  {label:<7} " + line(results[-1]), flush=True)
            report(results)
    except BaseException:
        for log in ("web.log", "worker.log"):
            if (work / log).exists():
                print(f"--- {log} ---\n{(work / log).read_text()[-4000:]}", file=sys.stderr)
        raise
    finally:
        if worker is not None:
            worker.stop()
        web_log.close()
        fake.stop()
        shutil.rmtree(work, ignore_errors=True)
    return 0


def db_label() -> str:
    return os.environ["DATABASE_URL"].rsplit("/", 1)[-1]


def review(fake, url, secret, world, pull, repo_json, timeout, ReviewRun, RunAttempt, RunStatus):  # noqa: N803
    """One pull request from its webhook to its review and completed check."""
    from benchmarks.github_weather import endpoint_of
    from tests.gitworld import INSTALLATION, REPO

    with fake.lock:
        fake.calls.clear()
    payload = {
        "action": "opened", "number": pull.number,
        "pull_request": fake._pull_json(world.repo, pull), "repository": repo_json,
        "installation": {"id": INSTALLATION},
    }  # fmt: skip
    sent = datetime.now(UTC)
    t0 = time.perf_counter()
    status, answered = post(url, secret, "pull_request", payload)
    assert status == 202, status

    def bot_review():
        return any(r["user"]["type"] == "Bot" for r in fake.reviews_of(REPO, pull.number))

    def check_done():
        return any(c.head_sha == pull.head_sha and c.status == "completed"
                   for c in fake.check_runs_of(REPO))  # fmt: skip

    reviewed = checked = None
    deadline = time.monotonic() + timeout
    while (reviewed is None or checked is None) and time.monotonic() < deadline:
        now = time.perf_counter() - t0
        if reviewed is None and bot_review():
            reviewed = now
        if checked is None and check_done():
            checked = now
        time.sleep(0.01)
    if reviewed is None or checked is None:
        raise SystemExit(f"pull request {pull.number}: no review and completed check "
                         f"within {timeout:.0f} s")  # fmt: skip
    row = wait(lambda: ReviewRun.objects.filter(
        pull_request__number=pull.number, status__in=(RunStatus.COMPLETED, RunStatus.FAILED)
    ).first(), timeout=60, what="the run to end", every=0.05)  # fmt: skip
    # What follows the review (the walkthrough's last edit) is its cost too: until quiet.
    count, quiet_since = -1, time.monotonic()
    while time.monotonic() - quiet_since < 1.0 and time.monotonic() < deadline:
        with fake.lock:
            now_count = len(fake.calls)
        if now_count != count:
            count, quiet_since = now_count, time.monotonic()
        time.sleep(0.05)
    with fake.lock:
        calls = list(fake.calls)
    attempt = RunAttempt.objects.filter(run=row).order_by("-number").first()
    stages = {s["stage"]: s["seconds"] for s in attempt.stage_times if s["seconds"] is not None}
    api = [c for c in calls if ".git/" not in c.path]
    return {
        "status": row.status,
        "answered": answered,
        "queued": (row.created_at - sent).total_seconds(),
        "claimed": (attempt.started_at - row.created_at).total_seconds(),
        "stages": stages,
        "reviewed": reviewed,
        "checked": checked,
        "api": len(api),
        "writes": sum(1 for c in api if c.method in WRITES),
        "tokens": sum(1 for c in api if c.path.endswith("/access_tokens")),
        "git": len(calls) - len(api),
        "fetches": sum(1 for c in calls if c.path.endswith(".git/git-upload-pack")),
        "endpoints": Counter(endpoint_of(c.method, c.path) for c in calls),
    }


def line(r: dict) -> str:
    stages = "  ".join(f"{s} {r['stages'].get(s, 0):.2f}" for s in STAGES)
    return (f"review {r['reviewed']:.2f} s, check {r['checked']:.2f} s | webhook "
            f"{r['answered'] * 1000:.0f} ms, to the run {r['queued']:.2f}, to a worker "
            f"{r['claimed']:.2f} | {stages} | GitHub: {r['api']} API ({r['writes']} writes, "
            f"{r['tokens']} tokens), {r['git']} git")  # fmt: skip


def report(results: list[dict]) -> None:
    cold, warm = results[0], results[1:]

    def median(key, stage=None):
        if not warm:
            return float("nan")
        return statistics.median((r["stages"].get(stage, 0.0) if stage else r[key]) for r in warm)

    print(f"\n{'seconds':<34} {'cold':>8} {'warm (median of ' + str(len(warm)) + ')':>20}")
    rows = [
        ("webhook answered", cold["answered"], median("answered")),
        ("webhook -> run queued", cold["queued"], median("queued")),
        ("run queued -> taken by a worker", cold["claimed"], median("claimed")),
        *((f"  stage: {s}", cold["stages"].get(s, 0.0), median(None, s)) for s in STAGES),
        ("webhook -> review on GitHub", cold["reviewed"], median("reviewed")),
        ("webhook -> check run completed", cold["checked"], median("checked")),
    ]
    for label, a, b in rows:
        print(f"{label:<34} {a:>8.3f} {b:>20.3f}")
    print(f"{'GitHub API requests (writes)':<34} {cold['api']:>4} ({cold['writes']:>2}) "
          f"{median('api'):>13.0f} ({median('writes'):.0f})")  # fmt: skip
    print(f"{'  of them installation tokens':<34} {cold['tokens']:>8} {median('tokens'):>20.0f}")
    print(f"{'git requests':<34} {cold['git']:>8} {median('git'):>20.0f}")
    print(f"{'  of them fetches':<34} {cold['fetches']:>8} {median('fetches'):>20.0f}")
    if warm:
        # A review's floor (docs/performance.md): the check run created in progress, the
        # review, the walkthrough posted once, the check completed; the pull request read
        # once; git's two fetches. A review with inline comments also reads them once.
        print(f"a warm review's writes {median('writes'):.0f} (floor 4); requests "
              f"{median('api'):.0f} API + {median('fetches'):.0f} git fetches = "
              f"{median('api') + median('fetches'):.0f} (floor 7; 8 with inline comments)")  # fmt: skip
    print("GitHub requests of the cold review, by endpoint:")
    for endpoint, count in sorted(cold["endpoints"].items()):
        print(f"  {count:3d}  {endpoint}")
    if warm:
        changed = Counter()
        for endpoint in set(cold["endpoints"]) | set(warm[-1]["endpoints"]):
            changed[endpoint] = warm[-1]["endpoints"][endpoint] - cold["endpoints"][endpoint]
        fewer = {e: n for e, n in changed.items() if n}
        if fewer:
            print("the last warm review against the cold one: " + ", ".join(
                f"{e} {n:+d}" for e, n in sorted(fewer.items())))  # fmt: skip
    failed = [r for r in results if r["status"] != "completed"]
    if failed:
        print(f"{len(failed)} review(s) did not complete")


if __name__ == "__main__":
    sys.exit(main())
