"""Queued reviews dispatched to GitHub Actions by several worker processes.

    .venv/bin/python benchmarks/dispatch.py [--runs 1000] [--workers 2] [--no-throttle]
                                            [--port 0] [--database postgres]

Starts the fake GitHub (tests/fakes) with one repository that has Tasuku's workflow
(docs/actions/tasuku.yml) on its default branch and `--runs` open pull requests, queues
one review run per pull request for a static reviewer on the `actions` runner, and lets
`--workers` worker processes take them through the pipeline (claim, clone, filters, job,
workflow dispatch) as django-q2's workers would, each walking the whole queue in its own
order so that they compete for every run. Prints runs per second, GitHub API calls per
run (by endpoint), and how many runs were dispatched more than once (must be 0).

--database (benchmarks/isolation.py): by default a new PostgreSQL database of a unique
name, dropped at the end; one named that was there is emptied first and never dropped.
SQLite works too (`--database sqlite`), with its single writer. The fake GitHub listens
on --port (default: a free port).
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import random
import re
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.isolation import arguments, own_database  # noqa: E402

APP_ID = 4242
INSTALLATION = 77
REPO = "bench/shop"


def endpoint_of(path: str) -> str:
    path = re.sub(r"^/repos/[^/]+/[^/]+", "/repos/{r}", path)
    path = re.sub(r"/[0-9a-f]{40}(?=/|$)", "/{sha}", path)
    return re.sub(r"/\d+(?=/|$)", "/{n}", path)


def worker(pks: list[int], seed: int, queue, throttle: bool) -> None:
    """One worker process: try every run, in its own order (a run already taken by the
    other worker is not claimed twice)."""
    import django

    django.setup()
    from django.conf import settings

    from reviews.pipeline.flow import run_execute

    if not throttle:
        settings.GITHUB_SECONDS_BETWEEN_WRITES = "0"

    random.Random(seed).shuffle(pks)
    outcomes: Counter[str] = Counter()
    for pk in pks:
        outcomes[run_execute(pk)] += 1
    queue.put(dict(outcomes))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument(
        "--no-throttle", action="store_true",
        help="drop the pauses Tasuku keeps between GitHub requests of one installation "
        "(0.25 s, and 1 s between writes, as GitHub asks): Tasuku's own cost, not GitHub's pace",
    )  # fmt: skip
    arguments(parser, port="the fake GitHub's port")
    args = parser.parse_args()
    with own_database(args.database, script="dispatch", keep=args.keep_database) as db:
        os.environ["DATABASE_URL"] = db.url  # before Django reads it
        return run(args)


def run(args: argparse.Namespace) -> int:

    from tests.fakes.github import FakeGitHub, Pull, rsa_keypair

    fake = FakeGitHub(port=args.port).start()
    private, public = rsa_keypair()
    fake.add_app(APP_ID, public, "tasuku-bench")
    fake.add_installation(INSTALLATION, "bench")
    repo, git = fake.add_git_repo(REPO, installation_id=INSTALLATION, repo_id=5005)
    git.commit({"README.md": "# Shop\n", "app/__init__.py": ""}, message="base", branch="main")
    workflow = fake.add_workflow(REPO, ".github/workflows/tasuku.yml",
                                 content=(ROOT / "docs" / "actions" / "tasuku.yml").read_text())  # fmt: skip
    base = workflow.commit
    # Each pull request has its own head commit, as real ones do (a check run is looked
    # up among its commit's check runs).
    heads = {}
    for number in range(1, args.runs + 1):
        heads[number] = git.commit(
            {"app/payments.py": "import subprocess\n\n\ndef refund(o):\n"
                                f"    return subprocess.call(f'refund {{o}} {number}', shell=True)\n"},
            parent=base, message=f"feature {number}", branch=f"feature-{number}",
        )  # fmt: skip
        fake.add_pull(
            REPO, Pull(number=number, title=f"PR {number}", head_sha=heads[number], base_sha=base)
        )

    os.environ.update(
        DJANGO_SETTINGS_MODULE="tasuku.settings",
        GITHUB_API_URL=fake.url,
        GITHUB_APP_ID=str(APP_ID),
        GITHUB_APP_SLUG="tasuku-bench",
        GITHUB_PRIVATE_KEY=private,
        GITHUB_WEBHOOK_SECRET="bench",
        LOG_LEVEL="WARNING",
    )
    import django

    django.setup()
    from django.core.management import call_command
    from django_q.models import OrmQ

    from repos.models import Installation, Repository, Reviewer
    from repos.selectors import effective_config
    from repos.services import installation_upsert, repository_upsert
    from reviews.models import PullRequest, ReviewRun, RunStatus

    call_command("migrate", verbosity=0)
    # Start empty (the reviewers the migrations made stay).
    ReviewRun.objects.all().delete()
    PullRequest.objects.all().delete()
    Repository.objects.all().delete()
    Installation.objects.all().delete()
    OrmQ.objects.all().delete()
    Reviewer.objects.update_or_create(slug="static", defaults={"engine": "static", "runner": "actions",
                                                               "enabled": True})  # fmt: skip
    installation = installation_upsert(github_id=INSTALLATION, account_login="bench",
                                       account_type="Organization")  # fmt: skip
    repository = repository_upsert(installation=installation, github_id=5005, full_name=REPO,
                                   default_branch="main")  # fmt: skip
    Repository.objects.filter(pk=repository.pk).update(enabled=True)
    config = effective_config(repository).model_dump(mode="json")
    static = Reviewer.objects.get(slug="static")
    pulls = PullRequest.objects.bulk_create(
        PullRequest(
            repository=repository,
            number=n,
            title=f"PR {n}",
            author_login="dev",
            author_type="User",
            head_sha=heads[n],
            base_sha=base,
            head_ref=f"feature-{n}",
            base_ref="main",
            state="open",
        )  # fmt: skip
        for n in range(1, args.runs + 1)
    )
    runs = ReviewRun.objects.bulk_create(
        ReviewRun(
            pull_request=p,
            reviewer=static,
            head_sha=p.head_sha,
            base_sha=base,
            trigger="opened",
            status=RunStatus.QUEUED,
            config=config,
        )  # fmt: skip
        for p in pulls
    )
    pks = [r.pk for r in runs]
    fake.calls.clear()
    print(f"{args.runs} queued runs, {args.workers} worker processes, fake GitHub at {fake.url}, "
          f"GitHub pacing {'off' if args.no_throttle else 'on'}")  # fmt: skip

    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    started = time.perf_counter()
    processes = [
        context.Process(target=worker, args=(list(pks), seed, queue, not args.no_throttle))
        for seed in range(args.workers)
    ]
    for process in processes:
        process.start()
    outcomes: Counter[str] = Counter()
    for _ in processes:
        outcomes.update(queue.get())
    for process in processes:
        process.join()
    elapsed = time.perf_counter() - started

    statuses = Counter(ReviewRun.objects.values_list("status", flat=True))
    dispatched = statuses.get(RunStatus.DISPATCHED, 0)
    per_run = Counter(r.inputs.get("tasuku_run") for r in fake.actions_runs_of(REPO))
    doubles = sum(1 for count in per_run.values() if count > 1)
    calls = list(fake.calls)
    by_endpoint = Counter(f"{c.method} {endpoint_of(c.path)}" for c in calls)
    print(f"run statuses: {dict(statuses)}; worker outcomes: {dict(outcomes)}")
    print(f"wall time {elapsed:.1f} s (process start-up included): "
          f"{dispatched / elapsed:.1f} runs dispatched per second")  # fmt: skip
    print(f"GitHub API calls: {len(calls)} in all, {len(calls) / max(args.runs, 1):.2f} per run")
    for endpoint, count in by_endpoint.most_common():
        print(f"  {count / max(args.runs, 1):6.2f}/run  {endpoint}")
    print(f"Actions runs created: {len(fake.actions_runs_of(REPO))}; runs dispatched more than "
          f"once: {doubles}")  # fmt: skip
    fake.stop()
    return 0 if doubles == 0 and dispatched == args.runs else 1


if __name__ == "__main__":
    sys.exit(main())
