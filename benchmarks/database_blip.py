"""A PostgreSQL outage longer than a run's lease, while the run's engine waits for its model.

    .venv/bin/python benchmarks/database_blip.py [--outage 30] [--database postgres]

Starts the fake GitHub and the fake Anthropic API (tests/fakes), a TCP proxy in front of
PostgreSQL (tests/dbproxy.py) and a worker cluster (`manage.py worker`, two worker
processes, the production lease, heartbeat and reaper period unless told otherwise) that
reaches its database only through the proxy. It queues a review by an `anthropic`
reviewer; once the engine is waiting for the model, the proxy is cut for `--outage`
seconds — new connections refused and open ones dropped, as when PostgreSQL is stopped —
and restored, and the model answers. The shared PostgreSQL server itself is never
stopped.

Prints the figures: the run's attempts (and whether one was declared lost), the model
calls, the tracebacks and warnings in the worker's log from the cut on, the time from
the restore to the lease renewed and to the review published.
"""

from __future__ import annotations

import argparse
import os
import secrets
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.isolation import arguments, own_database  # noqa: E402

APP_ID = 4344
INSTALLATION = 8181
REPO = "blip/shop"
REPO_ID = 918181
FINDING = {
    "path": "app/payments.py", "start_line": 2, "end_line": 2, "severity": "high",
    "category": "security", "title": "Order id reaches a shell",
    "body": "An order id like `1; rm -rf /` runs as a shell command.",
    "evidence": "refund('1; rm -rf /') runs rm.", "confidence": 0.95, "blocking": True,
}  # fmt: skip


class Cluster:
    def __init__(self, env: dict, log: Path) -> None:
        self.log_path = log
        self._log = open(log, "w")  # noqa: SIM115
        self.process = subprocess.Popen(  # noqa: S603
            [sys.executable, "manage.py", "worker"], cwd=ROOT, env=env, stdout=self._log,
            stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
        deadline = time.monotonic() + 60
        while "running." not in log.read_text():
            if time.monotonic() > deadline or self.process.poll() is not None:
                raise SystemExit(f"the worker cluster did not start; see {log}")
            time.sleep(0.2)

    def log(self) -> str:
        self._log.flush()
        return self.log_path.read_text()

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
    parser.add_argument("--outage", type=float, default=30.0, help="seconds the database is away")
    parser.add_argument("--lease", type=int, default=None, help="TASUKU_RUN_LEASE_SECONDS")
    parser.add_argument("--heartbeat", type=int, default=None, help="TASUKU_RUN_HEARTBEAT_SECONDS")
    parser.add_argument("--reap", type=int, default=None, help="TASUKU_REAP_SECONDS")
    arguments(parser, port=None)
    args = parser.parse_args()
    with own_database(args.database, script="database_blip", keep=args.keep_database) as db:
        if db.vendor != "postgresql":
            raise SystemExit("--database: a PostgreSQL database (the outage is of its server)")
        return _measure(args, db.url)


def _measure(args, database_url: str) -> int:
    from tests.dbproxy import DatabaseProxy
    from tests.fakes.github import FakeGitHub, Pull, rsa_keypair
    from tests.fakes.models import ANTHROPIC_TEST_KEY, FakeAnthropic, ToolCall

    parts = urlsplit(database_url)
    proxy = DatabaseProxy(parts.hostname or "127.0.0.1", parts.port or 5432).start()
    user = f"{parts.username}@" if parts.username else ""
    proxied = urlunsplit((parts.scheme, f"{user}127.0.0.1:{proxy.port}", parts.path, "", ""))

    fake = FakeGitHub().start()
    model = FakeAnthropic().start()
    answer = threading.Event()

    def model_waits(request):  # the engine's one model call, answered after the outage
        answer.wait(args.outage + 120)
        return ToolCall("submit_review", {"findings": [FINDING]})

    model.script(model_waits)
    private, public = rsa_keypair()
    fake.add_app(APP_ID, public, "tasuku-blip")
    fake.add_installation(INSTALLATION, "blip")
    _, git = fake.add_git_repo(REPO, installation_id=INSTALLATION, repo_id=REPO_ID)
    base = git.commit({"README.md": "# Shop\n", "app/__init__.py": ""}, branch="main")
    head = git.commit({"app/payments.py": "import subprocess\nsubprocess.call(order, shell=True)\n"},
                      parent=base, branch="refunds")  # fmt: skip
    pull = fake.add_pull(REPO, Pull(number=1, title="Refunds", head_sha=head, base_sha=base))
    env = {
        **{k: v for k, v in os.environ.items()
           if not k.startswith(("DJANGO_", "GITHUB_", "TASUKU_", "ANTHROPIC_"))},
        "DJANGO_SETTINGS_MODULE": "tasuku.settings",
        "DATABASE_URL": database_url,
        "SECRET_KEY": secrets.token_urlsafe(50),
        "GITHUB_API_URL": fake.url,
        "GITHUB_APP_ID": str(APP_ID),
        "GITHUB_APP_SLUG": "tasuku-blip",
        "GITHUB_PRIVATE_KEY": private,
        "GITHUB_WEBHOOK_SECRET": "blip",
        "ANTHROPIC_BASE_URL": model.base_url,
        "ANTHROPIC_API_KEY": ANTHROPIC_TEST_KEY,
        "TASUKU_WORKERS": "2",
        "TASUKU_AUTO_SCHEDULES": "false",
        "TASUKU_CHECKOUT_CACHE": tempfile.mkdtemp(prefix="tasuku-blip-mirrors-"),
        "TASUKU_WORKSPACE_ROOT": tempfile.mkdtemp(prefix="tasuku-blip-workspaces-"),
    }  # fmt: skip
    for variable, value in (("TASUKU_RUN_LEASE_SECONDS", args.lease),
                            ("TASUKU_RUN_HEARTBEAT_SECONDS", args.heartbeat),
                            ("TASUKU_REAP_SECONDS", args.reap)):  # fmt: skip
        if value is not None:
            env[variable] = str(value)
    os.environ.update({k: v for k, v in env.items() if k.startswith(("DJANGO_", "DATABASE_",
                       "SECRET_", "GITHUB_", "TASUKU_", "ANTHROPIC_"))})  # fmt: skip
    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command
    from django.db import transaction
    from django.utils import timezone

    from repos.models import Repository, Reviewer
    from repos.selectors import effective_config
    from repos.services import installation_upsert, repository_upsert
    from reviews.models import PullRequest, ReviewRun, RunStatus
    from reviews.queue.runs import run_ring

    call_command("migrate", verbosity=0)
    Reviewer.objects.update(default_for_new_repositories=False)
    reviewer, _ = Reviewer.objects.update_or_create(
        slug="claude", defaults={"engine": "anthropic", "model": "claude-sonnet-5-5",
                                 "runner": "local", "enabled": True,
                                 "default_for_new_repositories": True},
    )  # fmt: skip
    installation = installation_upsert(github_id=INSTALLATION, account_login="blip",
                                       account_type="Organization")  # fmt: skip
    repository = repository_upsert(installation=installation, github_id=REPO_ID, full_name=REPO,
                                   default_branch="main")  # fmt: skip
    Repository.objects.filter(pk=repository.pk).update(enabled=True)
    repository.refresh_from_db()
    lease = settings.TASUKU_RUN_LEASE_SECONDS
    print(f"lease {lease} s, heartbeat {settings.TASUKU_RUN_HEARTBEAT_SECONDS} s, reaper every "
          f"{settings.TASUKU_REAP_SECONDS} s; the database away for {args.outage:g} s "
          f"(through a proxy on port {proxy.port}; the server itself keeps running)")  # fmt: skip

    logs = Path(tempfile.mkdtemp(prefix="tasuku-blip-logs-"))
    worker_env = {**env, "DATABASE_URL": proxied}
    cluster = Cluster(worker_env, logs / "worker.log")
    try:
        with transaction.atomic():
            row = PullRequest.objects.create(
                repository=repository, number=1, title=pull.title, author_login="dev",
                author_type="User", head_sha=head, base_sha=base, head_ref="refunds",
                base_ref="main", state="open",
            )  # fmt: skip
            run = ReviewRun.objects.create(
                pull_request=row, reviewer=reviewer, head_sha=head, base_sha=base,
                trigger="opened", status=RunStatus.QUEUED,
                config=effective_config(repository).model_dump(mode="json"),
            )  # fmt: skip
            run_ring(run)
        _wait(lambda: model.requests, 120, "the engine to call its model", cluster)
        before = len(cluster.log().splitlines())
        proxy.cut()
        cut = time.monotonic()
        time.sleep(args.outage)
        run.refresh_from_db()
        expired = run.lease_expires_at is not None and run.lease_expires_at < timezone.now()
        proxy.restore()
        restored = time.monotonic()
        answer.set()
        _wait(lambda: ReviewRun.objects.filter(pk=run.pk, lease_expires_at__gt=timezone.now(),
                                               status=RunStatus.RUNNING).exists()
              or ReviewRun.objects.filter(pk=run.pk).exclude(status=RunStatus.RUNNING).exists(),
              60, "the lease to be renewed", cluster)  # fmt: skip
        renewed = time.monotonic() - restored
        _wait(lambda: ReviewRun.objects.filter(pk=run.pk, status__in=[
              RunStatus.COMPLETED, RunStatus.FAILED]).exists(), 120 + 3 * lease,
              "the run to end", cluster)  # fmt: skip
        ended = time.monotonic() - restored
        time.sleep(max(2.0, settings.TASUKU_REAP_SECONDS + 1.0))  # each process's next look
        run.refresh_from_db()
        attempts = list(run.attempt_rows.order_by("number").values_list("number", "outcome"))
        after = cluster.log().splitlines()[before:]
        tracebacks = sum("Traceback (most recent call last)" in line for line in after)
        warnings = [line for line in after if " WARNING " in line or " ERROR " in line]
        reviews = len(fake.reviews_of(REPO, 1))
        print(f"the lease ran out during the outage: {'yes' if expired else 'no'}")
        print(
            f"run {run.pk}: {run.status}; attempts {attempts}; "
            f"declared lost: {'yes' if any(o == 'lost' for _, o in attempts) else 'no'}"
        )
        print(f"model calls: {len(model.requests)}; reviews published: {reviews}")
        print(
            f"worker log from the cut on: {len(after)} lines, {len(warnings)} warnings, "
            f"{tracebacks} tracebacks"
        )
        for line in warnings:
            print(f"  {line[:160]}")
        print(
            f"after the restore: lease renewed in {renewed:.1f} s, run {run.status} in "
            f"{ended:.1f} s (the outage itself: {restored - cut:.1f} s)"
        )
        return 0 if run.status == RunStatus.COMPLETED and len(attempts) == 1 else 1
    finally:
        answer.set()
        cluster.stop()
        proxy.stop()
        model.stop()
        fake.stop()


def _wait(condition, timeout: float, what: str, cluster: Cluster):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.05)
    raise SystemExit(f"timed out waiting for {what}; the worker's log:\n{cluster.log()[-4000:]}")


if __name__ == "__main__":
    sys.exit(main())
