"""How soon a run held by a killed worker is taken over by another.

    .venv/bin/python benchmarks/reclaim.py [--kills 20] [--whole] [--database NAME]

Starts the fake GitHub (tests/fakes) and two worker clusters (`manage.py worker`, two
worker processes each, the production lease, heartbeat and reaper period unless told
otherwise), then `--kills` times: queues a review of a new pull request by the `static`
reviewer, lets the worker that claims it hang on a GitHub call (the check run's update,
which never answers), waits a random part of a heartbeat, and `kill -9`s

- the worker process holding the run (the default: a crash, the out-of-memory killer),
  whose cluster survives and sees it die; or, with `--whole`,
- every process of the cluster holding it (a host lost at once): only the other
  cluster's reaper can take the run over, once its lease has run out; the killed cluster
  is started again for the next kill.

Takeover is the time from the kill to the start of the run's next attempt (as the
database records it); each run must then complete with one review. Prints each takeover,
then the median and the worst.

The database: `--database NAME` on the PostgreSQL server `--postgres` names (default
postgres://postgres@127.0.0.1:5432); without it, a database of a unique name is created
and dropped at the end. A database this script did not create is never dropped (nor
emptied: the rows it adds are its own installation's). Before each kill the script checks
that the process it kills is one of the clusters it started, on this host.
"""

from __future__ import annotations

import argparse
import os
import random
import secrets
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

APP_ID = 4343
INSTALLATION = 7070 + random.randrange(1000, 9000)  # noqa: S311 - apart from any earlier run's
REPO = f"reclaim/shop-{INSTALLATION}"
REPO_ID = 900000 + INSTALLATION
HANG = r"/check-runs/\d+$"


def _admin(postgres: str):
    import psycopg

    return psycopg.connect(postgres.rstrip("/") + "/postgres", autocommit=True)


def _database_url(postgres: str, name: str) -> str:
    parts = urlsplit(postgres)
    return urlunsplit((parts.scheme, parts.netloc, f"/{name}", "", ""))


def _ppid(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return 0


def _under(pid: int, root: int) -> bool:
    """Whether `pid` is `root` or runs below it."""
    while pid > 1:
        if pid == root:
            return True
        pid = _ppid(pid)
    return False


class Cluster:
    def __init__(self, env: dict, log: Path) -> None:
        self.log_path = log
        self._log = open(log, "a")  # noqa: SIM115
        self.process = subprocess.Popen(  # noqa: S603
            [sys.executable, "manage.py", "worker"], cwd=ROOT, env=env, stdout=self._log,
            stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
        deadline = time.monotonic() + 60
        while "running." not in log.read_text().split("starting.")[-1]:
            if time.monotonic() > deadline or self.process.poll() is not None:
                raise SystemExit(f"a worker cluster did not start; see {log}")
            time.sleep(0.2)

    def holds(self, pid: int) -> bool:
        return self.process.poll() is None and _under(pid, self.process.pid)

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=40)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        self._log.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--kills", type=int, default=20)
    parser.add_argument("--whole", action="store_true",
                        help="kill every process of the holding cluster (a lost host)")  # fmt: skip
    parser.add_argument("--database", default="")
    parser.add_argument("--postgres", default="postgres://postgres@127.0.0.1:5432")
    parser.add_argument("--lease", type=int, default=None, help="TASUKU_RUN_LEASE_SECONDS")
    parser.add_argument("--heartbeat", type=int, default=None, help="TASUKU_RUN_HEARTBEAT_SECONDS")
    parser.add_argument("--reap", type=int, default=None, help="TASUKU_REAP_SECONDS")
    args = parser.parse_args()

    name = args.database or f"tasuku_bench_reclaim_{secrets.token_hex(4)}"
    with _admin(args.postgres) as admin:
        exists = admin.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone()
        created = not exists
        if created:
            admin.execute(f'CREATE DATABASE "{name}"')
    print(f"database {name} ({'created here' if created else 'existing: kept'})")
    clusters: list[Cluster] = []
    try:
        return _measure(args, _database_url(args.postgres, name), clusters)
    finally:
        for cluster in clusters:
            cluster.stop()
        if created:
            with _admin(args.postgres) as admin:
                admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            print(f"database {name} dropped")


def _measure(args, database_url: str, clusters: list[Cluster]) -> int:
    from tests.fakes.github import FakeGitHub, Pull, rsa_keypair

    fake = FakeGitHub().start()
    private, public = rsa_keypair()
    fake.add_app(APP_ID, public, "tasuku-reclaim")
    fake.add_installation(INSTALLATION, "reclaim")
    repo, git = fake.add_git_repo(REPO, installation_id=INSTALLATION, repo_id=REPO_ID)
    base = git.commit({"README.md": "# Shop\n", "app/__init__.py": ""}, branch="main")
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "GITHUB_"))},
        "DJANGO_SETTINGS_MODULE": "tasuku.settings",
        "DATABASE_URL": database_url,
        "SECRET_KEY": secrets.token_urlsafe(50),
        "GITHUB_API_URL": fake.url,
        "GITHUB_APP_ID": str(APP_ID),
        "GITHUB_APP_SLUG": "tasuku-reclaim",
        "GITHUB_PRIVATE_KEY": private,
        "GITHUB_WEBHOOK_SECRET": "reclaim",
        "TASUKU_WORKERS": "2",
        "TASUKU_CHECKOUT_CACHE": tempfile.mkdtemp(prefix="tasuku-reclaim-mirrors-"),
        "TASUKU_WORKSPACE_ROOT": tempfile.mkdtemp(prefix="tasuku-reclaim-workspaces-"),
    }
    for variable, value in (("TASUKU_RUN_LEASE_SECONDS", args.lease),
                            ("TASUKU_RUN_HEARTBEAT_SECONDS", args.heartbeat),
                            ("TASUKU_REAP_SECONDS", args.reap)):  # fmt: skip
        if value is not None:
            env[variable] = str(value)
    os.environ.update(
        {
            k: v
            for k, v in env.items()
            if k.startswith(("DJANGO_", "DATABASE_", "SECRET_", "GITHUB_", "TASUKU_"))
        }
    )
    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command
    from django.db import transaction

    from repos.models import Repository, Reviewer
    from repos.selectors import effective_config
    from repos.services import installation_upsert, repository_upsert
    from reviews.models import PullRequest, ReviewRun, RunAttempt, RunStatus
    from reviews.queue.runs import run_ring

    call_command("migrate", verbosity=0)
    Reviewer.objects.update_or_create(slug="static", defaults={"engine": "static", "runner": "local",
                                                               "enabled": True})  # fmt: skip
    installation = installation_upsert(github_id=INSTALLATION, account_login="reclaim",
                                       account_type="Organization")  # fmt: skip
    repository = repository_upsert(installation=installation, github_id=REPO_ID, full_name=REPO,
                                   default_branch="main")  # fmt: skip
    Repository.objects.filter(pk=repository.pk).update(enabled=True)
    repository.refresh_from_db()
    static = Reviewer.objects.get(slug="static")
    print(f"lease {settings.TASUKU_RUN_LEASE_SECONDS} s, heartbeat "
          f"{settings.TASUKU_RUN_HEARTBEAT_SECONDS} s, reaper every {settings.TASUKU_REAP_SECONDS} s; "
          f"killing {'the whole cluster' if args.whole else 'the worker process'} holding the run")  # fmt: skip

    logs = Path(tempfile.mkdtemp(prefix="tasuku-reclaim-logs-"))
    clusters.extend(Cluster(env, logs / f"cluster-{i}.log") for i in range(2))
    host = socket.gethostname()
    takeovers: list[float] = []
    for number in range(1, args.kills + 1):
        head = git.commit({"app/payments.py": f"import subprocess\nsubprocess.call('x', shell=True)  # {number}\n"},
                          parent=base, branch=f"pr{number}")  # fmt: skip
        pull = fake.add_pull(
            REPO, Pull(number=number, title="Refunds", head_sha=head, base_sha=base)
        )
        # The first update of its check run never answers: the worker holds the run there.
        hang = fake.inject(1, status=None, delay=3600, disconnect=True, method="PATCH", path=HANG)
        with transaction.atomic():
            row = PullRequest.objects.create(
                repository=repository, number=number, title=pull.title, author_login="dev",
                author_type="User", head_sha=head, base_sha=base, head_ref=f"pr{number}",
                base_ref="main", state="open",
            )  # fmt: skip
            run = ReviewRun.objects.create(
                pull_request=row, reviewer=static, head_sha=head, base_sha=base,
                trigger="opened", status=RunStatus.QUEUED,
                config=effective_config(repository).model_dump(mode="json"),
            )  # fmt: skip
            run_ring(run)
        first = _wait(
            lambda run=run: RunAttempt.objects.filter(run=run, number=1).first(), 60, "a claim"
        )
        _wait(lambda hang=hang: hang.count == 0, 60, "the worker to hang")
        time.sleep(random.uniform(0, settings.TASUKU_RUN_HEARTBEAT_SECONDS))  # noqa: S311
        worker_host, pid = first.worker.rsplit(":", 1)
        holder = next((c for c in clusters if c.holds(int(pid))), None)
        if worker_host != host or holder is None:
            raise SystemExit(f"run {run.pk} is held by {first.worker}: not a process started here")
        killed = time.time()
        if args.whole:
            os.killpg(holder.process.pid, signal.SIGKILL)
        else:
            os.kill(int(pid), signal.SIGKILL)
        second = _wait(lambda run=run: RunAttempt.objects.filter(run=run, number=2).first(), 120,
                       "another worker to take the run over")  # fmt: skip
        took = second.started_at.timestamp() - killed
        takeovers.append(took)
        _wait(lambda run=run: ReviewRun.objects.filter(pk=run.pk, status=RunStatus.COMPLETED).exists(), 120,
              "the run to complete")  # fmt: skip
        reviews = len(fake.reviews_of(REPO, number))
        print(f"kill {number:2d}: taken over after {took:5.1f} s by {second.worker}; "
              f"completed with {reviews} review")  # fmt: skip
        if reviews != 1:
            raise SystemExit(f"run {run.pk}: {reviews} reviews posted")
        if args.whole:
            holder.process.wait()
            holder._log.close()
            clusters[clusters.index(holder)] = Cluster(env, holder.log_path)
    print(f"takeover after kill -9 ({len(takeovers)} kills, "
          f"{'whole cluster' if args.whole else 'worker process'}): "
          f"median {statistics.median(takeovers):.1f} s, worst {max(takeovers):.1f} s")  # fmt: skip
    fake.stop()
    return 0


def _wait(condition, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.05)
    raise SystemExit(f"timed out waiting for {what}")


if __name__ == "__main__":
    sys.exit(main())
