"""A busy installation: N pull requests at once, reviewed by 4 worker processes, within
GitHub's secondary limits.

    .venv/bin/python benchmarks/busy_installation.py [--pulls 200] [--clusters 2]
                                                     [--workers 2] [--database postgres]

Starts the fake GitHub (which refuses, as GitHub documents, an installation's 81st
content-generating request in a minute, its 501st in an hour and its 101st at once, with
a 403 and `retry-after`), Tasuku's web app under gunicorn and --clusters worker clusters
(`manage.py worker`, --workers processes each: 2 x 2, as two hosts would run them) on a
database of their own (benchmarks/isolation.py), then sends --pulls signed
`pull_request.opened` webhooks for as many pull requests of one installation (three files
each; the `static` reviewer), as fast as it can, and waits until every one has its review,
its completed check run and its walkthrough.

It prints the secondary limits the fake refused a request for (must be 0), the
deliveries lost (answered 202 and not processed, or with no review: must be 0), the
writes at the peak minute and hour (the fake's count of content-generating requests),
the writes and requests at once at most, the time in all, and what the installation's
write budget waited. GitHub's pacing is on, as deployed. Every installation's writes
share one budget: 90 % of GitHub's 80 a minute (6 at once, then one a second) and 500
an hour, so 200 pull requests (4 writes each) take a little over an hour: 450 writes in
the first hour, the rest when the first leave it.
"""

from __future__ import annotations

import argparse
import os
import secrets
import shutil
import sys
import tempfile
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.isolation import (  # noqa: E402
    Served,
    arguments,
    migrate,
    own_database,
    port_or_free,
)
from benchmarks.latency import APP_ID, Worker, db_label, post, wait, worker_env  # noqa: E402

WRITES = ("POST", "PATCH", "PUT", "DELETE")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pulls", type=int, default=200, help="pull requests (default 200)")
    parser.add_argument("--clusters", type=int, default=2,
                        help="worker clusters, as hosts (default 2)")  # fmt: skip
    parser.add_argument("--workers", type=int, default=2,
                        help="worker processes per cluster (default 2: 4 in all)")  # fmt: skip
    parser.add_argument("--timeout", type=float, default=3 * 3600,
                        help="seconds for every review to be done")  # fmt: skip
    parser.add_argument("--github-port", type=int, default=0, help="the fake GitHub's port")
    arguments(parser, port="Tasuku's web port")
    args = parser.parse_args()
    with own_database(args.database, script="busy", keep=args.keep_database) as db:
        os.environ["DATABASE_URL"] = db.url
        return run(args)


def most_in_any(times: list[float], window: float) -> int:
    times = sorted(times)
    most, start = 0, 0
    for end, t in enumerate(times):
        while t - times[start] >= window:
            start += 1
        most = max(most, end - start + 1)
    return most


def content_generating(call) -> bool:
    """A request GitHub's secondary limits count as content (as the fake counts it)."""
    from tests.fakes.github.limits import content_generating as counted

    return (
        call.auth == "token"
        and ".git/" not in call.path
        and counted(call.method, call.path, call.body)
    )


def run(args: argparse.Namespace) -> int:  # noqa: C901, PLR0915
    from tests.fakes.github import FakeGitHub, Pull, rsa_keypair
    from tests.gitworld import HEAD_FILES, INSTALLATION, REPO, world_build

    fake = FakeGitHub(port=args.github_port).start()
    private, public = rsa_keypair()
    fake.add_app(APP_ID, public, "tasuku-bench")
    world = world_build(fake, clock=int(time.time()))
    secret = secrets.token_hex(16)
    work = Path(tempfile.mkdtemp(prefix="tasuku-busy-"))
    env = worker_env(fake.url, private, secret, work, args.workers)
    os.environ.update({k: env[k] for k in ("DJANGO_SETTINGS_MODULE", "SECRET_KEY")})
    migrate(env)
    import django

    django.setup()
    from repos.models import Repository, WriteBudget
    from reviews.models import ReviewRun, RunStatus, Walkthrough, WorkerHeartbeat
    from webhooks.models import DeliveryStatus, WebhookDelivery

    pulls = []
    for index in range(args.pulls):
        number = 100 + index
        head = world.git.commit(
            {**HEAD_FILES, "app/payments.py": HEAD_FILES["app/payments.py"] + f"# {number}\n"},
            parent=world.base, message=f"feature {number}", branch=f"feature{number}",
        )  # fmt: skip
        pulls.append(fake.add_pull(REPO, Pull(number=number, title="Add refunds", head_sha=head,
                                              base_sha=world.base)))  # fmt: skip

    web_log = open(work / "web.log", "w")  # noqa: SIM115
    web = Served("benchmarks.identity:tasuku", port=port_or_free(args.port), env=env,
                 gunicorn=["--workers", "2", "--threads", "4", "--log-level", "warning"],
                 log=web_log)  # fmt: skip
    clusters: list[Worker] = []
    try:
        with web:
            started = datetime.now(UTC)
            clusters = [Worker(env, work / f"worker{i}.log") for i in range(args.clusters)]
            wait(lambda: all(any(c.ours(name) for name in WorkerHeartbeat.objects.filter(
                beat_at__gte=started).values_list("name", flat=True)) for c in clusters),
                timeout=180, what="every cluster's first heartbeat", every=0.2)  # fmt: skip
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
            wait(lambda: Repository.objects.filter(full_name=REPO, enabled=True).exists(),
                 timeout=60, what="the repository to be installed", every=0.1)  # fmt: skip
            print(f"Tasuku web on port {web.port}, {args.clusters} worker clusters x "
                  f"{args.workers} processes, the fake GitHub at {fake.url} (GitHub's documented "
                  f"secondary limits enforced); database {db_label()}; {args.pulls} pull "
                  "requests of one installation", flush=True)  # fmt: skip
            with fake.lock:
                fake.calls.clear()
            t0 = time.time()
            answered = 0
            for pull in pulls:
                status, _ = post(url, secret, "pull_request", {
                    "action": "opened", "number": pull.number,
                    "pull_request": fake._pull_json(world.repo, pull), "repository": repo_json,
                    "installation": {"id": INSTALLATION},
                })  # fmt: skip
                answered += status == 202
            sent = time.time() - t0
            print(f"  {answered} webhooks answered 202 in {sent:.1f} s", flush=True)

            numbers = {p.number for p in pulls}
            heads = {p.head_sha for p in pulls}

            def progress() -> tuple[int, int, int]:
                reviewed = sum(1 for n in numbers if any(
                    r["user"]["type"] == "Bot" for r in fake.reviews_of(REPO, n)))  # fmt: skip
                checked = sum(1 for c in fake.check_runs_of(REPO)
                              if c.head_sha in heads and c.status == "completed")  # fmt: skip
                walked = Walkthrough.objects.filter(
                    pull_request__number__in=numbers, status=Walkthrough.Status.SENT
                ).count()
                return reviewed, checked, walked

            deadline = time.monotonic() + args.timeout
            last_print = 0.0
            while time.monotonic() < deadline:
                reviewed, checked, walked = progress()
                if min(reviewed, checked, walked) >= len(pulls):
                    break
                if time.monotonic() - last_print > 30:
                    last_print = time.monotonic()
                    print(f"  {time.time() - t0:7.0f} s: {reviewed} reviews, {checked} checks "
                          f"completed, {walked} walkthroughs", flush=True)  # fmt: skip
                time.sleep(1.0)
            done = time.time() - t0
            reviewed, checked, walked = progress()
            web.verify()
    except BaseException:
        for log in sorted(work.glob("*.log")):
            print(f"--- {log.name} ---\n{log.read_text()[-3000:]}", file=sys.stderr)
        raise
    finally:
        for cluster in clusters:
            cluster.stop()
        web_log.close()
        fake.stop()

    with fake.lock:
        calls = list(fake.calls)
    content = [c.at for c in calls if content_generating(c)]
    api = [c for c in calls if ".git/" not in c.path and c.auth == "token"]
    deliveries = WebhookDelivery.objects.filter(event="pull_request")
    processed = deliveries.filter(status=DeliveryStatus.PROCESSED).count()
    completed = ReviewRun.objects.filter(
        pull_request__number__in=numbers, status=RunStatus.COMPLETED
    ).count()
    lost = len(pulls) - min(processed, reviewed, checked, completed)
    budget = WriteBudget.objects.filter(installation_id=INSTALLATION).first()
    hits = Counter(h.limit for h in fake.limits.hits)
    print()
    print(f"{'pull requests':<44} {len(pulls):>10}")
    print(f"{'secondary limits hit (must be 0)':<44} {len(fake.limits.hits):>10}"
          + (f"  {dict(hits)}" if hits else ""))  # fmt: skip
    print(f"{'deliveries lost (must be 0)':<44} {lost:>10}  ({processed} processed, "
          f"{completed} runs completed, {reviewed} reviews, {checked} checks completed, "
          f"{walked} walkthroughs)")  # fmt: skip
    print(f"{'writes (content-generating requests)':<44} {len(content):>10}  "
          f"({len(content) / max(1, len(pulls)):.2f} a review)")  # fmt: skip
    print(f"{'writes at the peak minute (GitHub: 80)':<44} {most_in_any(content, 60):>10}")
    print(f"{'writes at the peak hour (GitHub: 500)':<44} {most_in_any(content, 3600):>10}")
    print(f"{'requests at once, at most (GitHub: 100)':<44} "
          f"{fake.limits.most_in_flight.get(INSTALLATION, 0):>10}")  # fmt: skip
    print(f"{'API requests (installation tokens)':<44} {len(api):>10}")
    print(f"{'time in all (first webhook to the last one done)':<44} {done:>9.0f}s  "
          f"({len(pulls) / (done / 60):.1f} reviews a minute)")  # fmt: skip
    if budget is not None:
        print(f"{'writes that waited for the budget':<44} {budget.waits:>10}  "
              f"({budget.waited_seconds:.0f} s in all; {budget.pauses} pauses GitHub asked for)")  # fmt: skip
    shutil.rmtree(work, ignore_errors=True)
    return 0 if not fake.limits.hits and not lost else 1


if __name__ == "__main__":
    sys.exit(main())
