"""GitHub's bad days, measured: requests per review, requests sent into a rate limit,
and the time from a limit's end (or an outage's) to the review being done.

    .venv/bin/python benchmarks/github_weather.py [--limit-seconds 20]
                                                  [--port 0] [--database postgres]

Starts the fake GitHub (tests/fakes) with one pull request and reviews it with the
`static` reviewer through the whole pipeline (`run_execute`), three times:

1. a clear day: the GitHub requests one review costs, by endpoint (writes apart);
2. a secondary rate limit on the review POST (403 + `Retry-After`) lasting
   `--limit-seconds`: how many requests Tasuku sent into the limit, and how long after
   the limit ended the review was published;
3. a check-run outage (every PATCH answers 502) lasting `--limit-seconds`: whether the
   review is published meanwhile, and how long after GitHub is back the check is
   completed.

Between tries the script does what the reaper does every 30 seconds in production —
rings what is due — once a second, so the recovery times here are Tasuku's own; add up
to 30 s for the reaper's period. GitHub's pacing between requests is off.

--database (benchmarks/isolation.py): by default a new PostgreSQL database of a unique
name, dropped at the end; one named that was there is emptied first and never dropped.
The fake GitHub listens on --port (default: a free port).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.isolation import arguments, own_database  # noqa: E402

APP_ID = 4242
INSTALLATION = 77
REPO = "bench/shop"
REPO_ID = 5007
WRITES = ("POST", "PATCH", "PUT", "DELETE")


def endpoint_of(method: str, path: str) -> str:
    path = re.sub(r"^/repos/[^/]+/[^/]+", "/repos/{r}", path)
    path = re.sub(r"/[0-9a-f]{40}(?=/|$)", "/{sha}", path)
    path = re.sub(r"\.git/.*$", ".git/…", path)
    return f"{method} " + re.sub(r"/\d+(?=/|$)", "/{n}", path)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--limit-seconds", type=float, default=20.0)
    arguments(parser, port="the fake GitHub's port")
    args = parser.parse_args()
    with own_database(args.database, script="github_weather", keep=args.keep_database) as db:
        os.environ["DATABASE_URL"] = db.url  # before Django reads it
        return run(args)


def run(args: argparse.Namespace) -> int:

    from tests.fakes.github import FakeGitHub, Pull, rsa_keypair

    fake = FakeGitHub(port=args.port).start()
    private, public = rsa_keypair()
    fake.add_app(APP_ID, public, "tasuku-bench")
    fake.add_installation(INSTALLATION, "bench")
    repo, git = fake.add_git_repo(REPO, installation_id=INSTALLATION, repo_id=REPO_ID)
    base = git.commit({"README.md": "# Shop\n", "app/__init__.py": ""}, branch="main")
    payments = (
        "import subprocess\n\n\ndef refund(order_id):\n"
        '    return subprocess.call(f"refund {order_id}", shell=True)\n'
    )
    pulls = {}
    for number in (1, 2, 3):
        head = git.commit({"app/payments.py": payments + f"# {number}\n"}, parent=base,
                          branch=f"pr{number}")  # fmt: skip
        pulls[number] = fake.add_pull(
            REPO, Pull(number=number, title="Refunds", head_sha=head, base_sha=base)
        )

    os.environ.update(
        DJANGO_SETTINGS_MODULE="tasuku.settings",
        GITHUB_API_URL=fake.url,
        GITHUB_APP_ID=str(APP_ID),
        GITHUB_APP_SLUG="tasuku-bench",
        GITHUB_PRIVATE_KEY=private,
        GITHUB_WEBHOOK_SECRET="bench",
        GITHUB_MAX_RATE_LIMIT_WAIT="5",
        LOG_LEVEL="ERROR",
        TASUKU_CHECKOUT_CACHE=tempfile.mkdtemp(prefix="tasuku-bench-mirrors-"),
    )
    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command
    from django.utils import timezone

    settings.GITHUB_SECONDS_BETWEEN_WRITES = "0"
    from repos.models import Installation, Repository, Reviewer
    from repos.selectors import effective_config
    from repos.services import installation_upsert, repository_upsert
    from reviews.checks.conclusions import conclusion_send
    from reviews.models import PullRequest, ReviewRun, RunStatus
    from reviews.pipeline.flow import run_execute

    call_command("migrate", verbosity=0)
    ReviewRun.objects.all().delete()
    PullRequest.objects.all().delete()
    Repository.objects.all().delete()
    Installation.objects.all().delete()
    Reviewer.objects.update_or_create(slug="static", defaults={"engine": "static", "runner": "local",
                                                               "enabled": True})  # fmt: skip
    installation = installation_upsert(github_id=INSTALLATION, account_login="bench",
                                       account_type="Organization")  # fmt: skip
    repository = repository_upsert(installation=installation, github_id=REPO_ID, full_name=REPO,
                                   default_branch="main")  # fmt: skip
    Repository.objects.filter(pk=repository.pk).update(enabled=True)
    repository.refresh_from_db()
    static = Reviewer.objects.get(slug="static")

    def queue(number: int) -> ReviewRun:
        pull = pulls[number]
        row = PullRequest.objects.create(
            repository=repository, number=number, title=pull.title, author_login="dev",
            author_type="User", head_sha=pull.head_sha, base_sha=base, head_ref=f"pr{number}",
            base_ref="main", state="open",
        )  # fmt: skip
        return ReviewRun.objects.create(
            pull_request=row, reviewer=static, head_sha=pull.head_sha, base_sha=base,
            trigger="opened", status=RunStatus.QUEUED,
            config=effective_config(repository).model_dump(mode="json"),
        )  # fmt: skip

    def reaper_tick(run: ReviewRun) -> None:
        """What the reaper does: ring a run that is due; send a check that is due."""
        run.refresh_from_db()
        now = timezone.now()
        if run.status == RunStatus.QUEUED and (run.next_attempt_at or now) <= now:
            run_execute(run.pk)
        elif run.check_due_at is not None and run.check_due_at <= now:
            conclusion_send(run.pk)

    def reviews_of(number: int) -> int:
        return sum(1 for r in fake.reviews_of(REPO, number) if r["user"]["type"] == "Bot")

    # 1. A clear day.
    fake.calls.clear()
    clear = queue(1)
    run_execute(clear.pk)
    clear.refresh_from_db()
    calls = list(fake.calls)
    api = [c for c in calls if ".git/" not in c.path]
    by_endpoint = Counter(endpoint_of(c.method, c.path) for c in calls)
    print(f"a clear day: run {clear.status}; {len(api)} API requests "
          f"({sum(1 for c in api if c.method in WRITES)} writes) and "
          f"{len(calls) - len(api)} git requests for one review")  # fmt: skip
    for endpoint, count in sorted(by_endpoint.items()):
        print(f"  {count:3d}  {endpoint}")

    # 2. A secondary rate limit on the review POST.
    window = args.limit_seconds
    # GitHub's clock: the limit ends by itself after `window` seconds.
    limit = fake.limits.secondary(window, method="POST", path=r"/pulls/\d+/reviews$")
    limited = queue(2)
    run_execute(limited.pk)
    ended = time.monotonic() + window
    while limited.status != RunStatus.COMPLETED and time.monotonic() - ended < window * 3 + 60:
        reaper_tick(limited)
        limited.refresh_from_db()
        time.sleep(0.5)
    into_limit = limit.refused
    recovered = time.monotonic() - ended
    print(f"a {window:.0f} s secondary rate limit on the review POST: {into_limit} request(s) "
          f"sent into it; run {limited.status} {recovered:.1f} s after it ended, "
          f"{reviews_of(2)} review(s) posted")  # fmt: skip

    # 3. A check-run outage.
    outage = fake.inject(10_000, status=502, method="PATCH", path=r"/check-runs/\d+$", skip=1)
    down = queue(3)
    run_execute(down.pk)
    down.refresh_from_db()
    published = reviews_of(3)
    started = time.monotonic()
    while time.monotonic() - started < window:
        reaper_tick(down)
        time.sleep(1)
    fake.injections.remove(outage)
    ended = time.monotonic()
    check = None
    while time.monotonic() - ended < window * 3 + 60:
        reaper_tick(down)
        check = next((c for c in fake.check_runs_of(REPO) if c.head_sha == pulls[3].head_sha), None)
        if check is not None and check.status == "completed":
            break
        time.sleep(0.5)
    down.refresh_from_db()
    print(f"a {window:.0f} s check-run outage: run {down.status} with {published} review posted "
          f"during it; the check {check.status if check else 'missing'} "
          f"({check.conclusion if check else '-'}) {time.monotonic() - ended:.1f} s after "
          f"GitHub was back, after {down.check_sends} resends")  # fmt: skip
    fake.stop()
    ok = (
        clear.status == limited.status == RunStatus.COMPLETED
        and reviews_of(2) == 1
        and check is not None
        and check.status == "completed"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
