"""The dashboard's pages at volume: server time per page with 100,000 runs and
1,000,000 findings.

    .venv/bin/python benchmarks/dashboard.py [--runs 100000] [--findings 1000000]
        [--requests 15] [--reseed] [--database tasuku_dashboard_bench --keep-database]

--database names a database of its own (benchmarks/isolation.py; PostgreSQL for the real
figures, `sqlite` for a quick try). By default it is a new one, dropped at the end; name
one and keep it (`--database tasuku_dashboard_bench --keep-database`) to seed once and
time again later. The script migrates it and, when it holds no runs, seeds it
with bulk_create — 10 installations, 200 repositories, 20,000 pull requests, the runs
(five pushes per pull request over 90 days: mostly completed, some failed at each
stage, skipped, cancelled, a few queued and running), an attempt per run, a review per
completed run, the findings (carried across a pull request's pushes, published,
suppressed, resolved), a delivery per run with its admission decision, and the
outcomes of closed pull requests. Seeding the full volume takes a few minutes; a
database already seeded is reused (--reseed empties and seeds it again).

Then it times each page through Django's test client as a logged-in staff user (the
whole server side: middleware, queries, templates): one warm-up request, then
--requests more, and prints the median and p95 per page, with its query count.
Target: under 300 ms per page.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
from datetime import timedelta
from decimal import Decimal
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tasuku.settings")
from benchmarks.isolation import arguments, database_for_django  # noqa: E402

database_for_django("dashboard")  # before Django reads DATABASE_URL

import django  # noqa: E402

django.setup()

from django.contrib.auth import get_user_model  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import connection, reset_queries, transaction  # noqa: E402
from django.test import Client  # noqa: E402
from django.test.utils import (  # noqa: E402
    CaptureQueriesContext,
    override_settings,
    setup_test_environment,  # noqa: E402
)
from django.utils import timezone  # noqa: E402

from repos.models import Installation, Repository, RepositoryPolicy, Reviewer  # noqa: E402
from reviews.models import (  # noqa: E402
    BudgetAlert,
    Finding,
    FindingOutcome,
    PullRequest,
    Review,
    ReviewRun,
    RunAttempt,
    WorkerHeartbeat,
)
from webhooks.models import WebhookDelivery  # noqa: E402

INSTALLATIONS = 10
REPOSITORIES = 200
PUSHES = 5  # runs per pull request
FAILURES = [  # (stage, reason, error code: tasuku/errors.py)
    ("clone", "Could not fetch the head: access denied (remote: 403). The App may not read "
              "this repository: grant it Contents: read.", "clone-access"),
    ("clone", "Could not fetch the head: the commit is not on GitHub any more (not our ref).",
     "clone-commit-gone"),
    ("sandbox", "The static engine did not finish within 1800s and was stopped.",
     "sandbox-timeout"),
    ("provider", "The anthropic API refused the API key (HTTP 401): invalid x-api-key",
     "provider-key"),
    ("provider", "Could not reach the anthropic API: Connection error.", "provider-unavailable"),
    ("validation", "The claude engine's output is not a ReviewResult: Field required",
     "engine-output"),
    ("publication", "Could not post a review: GitHub answered 403 (Resource not accessible "
                    "by integration) — the App may lack a permission this needs",
     "github-permission"),
    ("admission", "Could not read pull request: GitHub answered 502 (Bad Gateway)",
     "github-unavailable"),
]  # fmt: skip
SEVERITIES = ["info", "low", "medium", "high", "critical"]
CATEGORIES = ["bug", "security", "performance", "style", "robustness"]


def seed(runs: int, findings: int, *, rng: random.Random) -> None:
    """Bulk-create the volume (see the module docstring)."""
    started = time.perf_counter()
    now = timezone.now()
    reviewers = [Reviewer.objects.get_or_create(slug="static", defaults={"engine": "static"})[0]]
    for slug, engine, model in (("claude", "anthropic", "claude-sonnet-4-5"),
                                ("gpt", "openai", "gpt-5")):  # fmt: skip
        reviewers.append(
            Reviewer.objects.get_or_create(slug=slug, defaults={"engine": engine, "model": model})[
                0
            ]
        )
    installations = Installation.objects.bulk_create(
        Installation(github_id=800_000 + n, account_login=f"org{n}", account_type="Organization",
                     monthly_budget_usd=Decimal("500") if n % 2 == 0 else None)
        for n in range(INSTALLATIONS)
    )  # fmt: skip
    repositories = Repository.objects.bulk_create(
        Repository(installation=installations[n % INSTALLATIONS], github_id=900_000 + n,
                   full_name=f"org{n % INSTALLATIONS}/service{n}", default_branch="main",
                   enabled=n % 25 != 0)
        for n in range(REPOSITORIES)
    )  # fmt: skip
    policies = RepositoryPolicy.objects.bulk_create(
        RepositoryPolicy(repository=r, comment_limit=10) for r in repositories
    )
    RepositoryPolicy.reviewers.through.objects.bulk_create(
        RepositoryPolicy.reviewers.through(
            repositorypolicy_id=p.pk, reviewer_id=reviewers[i % 3].pk
        )
        for i, p in enumerate(policies)
    )
    # Rows get the times given (pushes spread over 90 days), not "now": auto_now_add is
    # switched off for the seeding.
    for model in (ReviewRun, Review):
        model._meta.get_field("created_at").auto_now_add = False
    pull_count = max(runs // PUSHES, 1)
    per_review = findings / max(runs * 0.84, 1)  # about 85 % of runs complete with a review
    made = {"runs": 0, "reviews": 0, "findings": 0, "deliveries": 0}
    batch = 500  # pull requests per round
    for first in range(0, pull_count, batch):
        with transaction.atomic():
            _seed_pull_requests(range(first, min(first + batch, pull_count)), repositories,
                                reviewers, per_review, now=now, rng=rng, made=made)  # fmt: skip
        print(f"  seeded {made['runs']:,} runs, {made['reviews']:,} reviews, "
              f"{made['findings']:,} findings", end="\r", flush=True)  # fmt: skip
    BudgetAlert.objects.create(installation=installations[0], month=now.date().replace(day=1),
                               spent_usd=Decimal("412.5"), cap_usd=Decimal("500"))  # fmt: skip
    for n in range(4):
        WorkerHeartbeat.objects.create(name=f"worker-{n}:1{n}", started_at=now, beat_at=now)
    print(f"\nseeded {made} in {time.perf_counter() - started:.0f} s")


def _seed_pull_requests(numbers, repositories, reviewers, per_review, *, now, rng, made) -> None:  # noqa: C901
    pulls = PullRequest.objects.bulk_create(
        PullRequest(repository=repositories[n % len(repositories)], number=n // len(repositories) + 1,
                    title=f"Change {n}", author_login=f"dev{n % 40}", author_type="User",
                    state="closed" if n % 3 == 0 else "open", head_sha=f"{n:040x}",
                    base_sha=f"{n + 10**9:040x}", head_ref=f"feature-{n}", base_ref="main")
        for n in numbers
    )  # fmt: skip
    run_rows, attempt_rows, delivery_rows = [], [], []
    for pull in pulls:
        start = now - timedelta(days=rng.uniform(0, 90))
        reviewer = reviewers[pull.number % 3]
        for push in range(PUSHES):
            created = start + timedelta(hours=push * rng.uniform(1, 20))
            if created > now:
                created = now - timedelta(minutes=rng.uniform(1, 600))
            roll = rng.random()
            stage, reason, code = "", "", ""
            if roll < 0.85:
                status = "completed"
            elif roll < 0.91:
                status = "failed"
                stage, reason, code = rng.choice(FAILURES)
            elif roll < 0.95:
                status, reason = "skipped", "draft pull request"
            else:
                status, reason = "cancelled", "stale: the head moved"
            if push == PUSHES - 1 and pull.number % 97 == 0:
                status, stage, reason, code = "queued", "", "", ""
            elif push == PUSHES - 1 and pull.number % 991 == 1:
                status, stage, reason, code = "running", "sandbox", "", ""
            finished = created + timedelta(seconds=rng.uniform(5, 400))
            head = f"{pull.pk:020x}{push:020x}"
            run_rows.append(ReviewRun(
                pull_request=pull, reviewer=reviewer, head_sha=head, base_sha=pull.base_sha,
                trigger="opened" if push == 0 else "synchronize", status=status, stage=stage,
                reason=reason, error_code=code, attempts=1, created_at=created,
                started_at=created if status != "queued" else None,
                finished_at=finished if status not in ("queued", "running") else None,
                incremental_since=f"{pull.pk:020x}{push - 1:020x}" if push else "",
                worker="bench:1", reviewed=["app/main.py", "app/util.py"],
                filtered=[["package-lock.json", "lock file"]],
            ))  # fmt: skip
    runs = ReviewRun.objects.bulk_create(run_rows, batch_size=2000)
    made["runs"] += len(runs)
    review_rows = []
    for run in runs:
        attempt_rows.append(RunAttempt(
            run=run, number=1, worker="bench:1", started_at=run.created_at,
            finished_at=run.finished_at, stage=run.stage,
            outcome={"completed": "succeeded", "failed": "failed", "skipped": "skipped",
                     "cancelled": "cancelled"}.get(run.status, "running"),
            error=run.reason if run.status == "failed" else "",
            error_code=run.error_code if run.status == "failed" else "",
            stage_times=stage_times(run, rng),
        ))  # fmt: skip
        delivery_rows.append(WebhookDelivery(
            hook_id="1", delivery_id=f"bench-{run.pk}", event="pull_request",
            action="opened" if run.trigger == "opened" else "synchronize",
            installation_id=run.pull_request.repository.installation.github_id,
            repository_full_name=run.pull_request.repository.full_name,
            pr_number=run.pull_request.number, payload={}, received_at=run.created_at,
            status="processed", attempts=1,
            decision="skipped" if run.status == "skipped" else "admitted",
            outcome=(f"skipped {run.pull_request}: draft pull request" if run.status == "skipped"
                     else f"admitted {run.pull_request}: {run.trigger}"),
            processed_at=run.created_at,
        ))  # fmt: skip
        if run.status == "completed":
            model = run.reviewer.model
            review_rows.append(Review(
                run=run, pull_request=run.pull_request, reviewer=run.reviewer,
                base_sha=run.base_sha, head_sha=run.head_sha, engine=run.reviewer.engine,
                incremental_since=run.incremental_since, model=model,
                input_tokens=rng.randint(5_000, 90_000) if model else 0,
                output_tokens=rng.randint(500, 6_000) if model else 0,
                cost_usd=Decimal(rng.randint(1, 900)) / 1000 if model else 0,
                triage={"verdict": "substantive", "summary": "2 files with code changes"},
                inspected_areas=["app"], important_files=["app/main.py"],
                context_sources=["the checkout"], confidence=0.8, limitations=[],
                created_at=run.finished_at, published_at=run.finished_at,
            ))  # fmt: skip
    RunAttempt.objects.bulk_create(attempt_rows, batch_size=5000)
    WebhookDelivery.objects.bulk_create(delivery_rows, batch_size=5000)
    made["deliveries"] += len(delivery_rows)
    reviews = Review.objects.bulk_create(review_rows, batch_size=2000)
    made["reviews"] += len(reviews)
    finding_rows, outcome_rows = [], []
    by_pull: dict[int, list[Review]] = {}
    for review in reviews:
        by_pull.setdefault(review.pull_request_id, []).append(review)
    for pull_reviews in by_pull.values():
        pull_reviews.sort(key=lambda r: r.created_at)
        count = max(1, round(rng.gauss(per_review, 2)))
        fingerprints = [f"{pull_reviews[0].pull_request_id:016x}{i:016x}" for i in range(count)]
        for index, review in enumerate(pull_reviews):
            last = index == len(pull_reviews) - 1
            for i, fingerprint in enumerate(fingerprints):
                severity = SEVERITIES[i % 5]
                suppressed = severity == "info" or i >= 10
                state = "suppressed" if suppressed else "open"
                resolved = ""
                if not suppressed and not last and i % 4 == 0:
                    state, resolved = "resolved", pull_reviews[index + 1].head_sha
                finding_rows.append(Finding(
                    review=review, pull_request_id=review.pull_request_id,
                    path=f"app/module{i % 7}.py", start_line=10 + i, end_line=10 + i,
                    severity=severity, category=CATEGORIES[i % 5], title=f"Problem {i}",
                    body="What happens, and what goes wrong.", evidence="A trace.",
                    confidence=0.9, fingerprint=fingerprint, state=state,
                    suppression_reason=("below the minimum severity (low)" if severity == "info"
                                        else "over the comment limit (10)") if suppressed else "",
                    published=not suppressed, github_comment_id=(review.pk * 100 + i) if not suppressed else None,
                    first_seen_sha=pull_reviews[0].head_sha, resolved_in_sha=resolved,
                ))  # fmt: skip
        pull = pull_reviews[0].pull_request
        if pull.state == "closed":
            for i, fingerprint in enumerate(fingerprints[:5]):
                outcome_rows.append(FindingOutcome(
                    pull_request=pull, repository_id=pull.repository_id,
                    reviewer_id=pull_reviews[0].reviewer_id, fingerprint=fingerprint,
                    category=CATEGORIES[i % 5], title=f"Problem {i}", severity=SEVERITIES[i % 5],
                    fate=["fixed", "dismissed", "open"][i % 3], merged=True,
                ))  # fmt: skip
    Finding.objects.bulk_create(finding_rows, batch_size=5000)
    FindingOutcome.objects.bulk_create(outcome_rows, batch_size=5000)
    made["findings"] += len(finding_rows)


# Each stage's usual share of a run (a review's time is mostly the engine's).
STAGE_SHARES = (("admission", 0.02), ("clone", 0.15), ("sandbox", 0.7), ("validation", 0.03),
                ("publication", 0.1))  # fmt: skip


def stage_times(run, rng: random.Random, *, now=None) -> list[dict]:
    """The stage times of a seeded run's attempt: the stages it went through, sharing its
    length (the last one still under way while it runs)."""
    names = [name for name, _ in STAGE_SHARES]
    if run.status == "queued":
        return []
    if run.status == "completed":
        walked = names
    elif run.status in ("failed", "running"):
        at = {"provider": "sandbox"}.get(run.stage, run.stage)
        walked = names[: names.index(at) + 1] if at in names else names[:1]
    else:  # skipped or cancelled before the work
        walked = names[:1]
    end = run.finished_at or now or timezone.now()
    length = max((end - run.created_at).total_seconds(), 0.1)
    weights = [dict(STAGE_SHARES)[n] * rng.uniform(0.5, 1.5) for n in walked]
    out, start = [], 0.0
    for name, weight in zip(walked, weights, strict=True):
        seconds = round(length * weight / sum(weights), 3)
        out.append({"stage": name, "start": round(start, 3), "seconds": seconds})
        start += seconds
    if run.status == "running":
        out[-1]["seconds"] = None
    return out


def busy_hour(count: int, rng: random.Random) -> None:
    """`count` more attempts that ended within the last hour (on seeded runs, as their
    next try): what /metrics' stage histogram reads at a busy installation."""
    now = timezone.now()
    runs = list(ReviewRun.objects.filter(status="completed").order_by("-pk")[:count])
    rows = []
    for run in runs:
        run.finished_at = now - timedelta(seconds=rng.uniform(1, 3500))
        run.created_at = run.finished_at - timedelta(seconds=rng.uniform(5, 400))
        rows.append(RunAttempt(
            run=run, number=2, worker="bench:2", started_at=run.created_at,
            finished_at=run.finished_at, outcome="succeeded", stage_times=stage_times(run, rng),
        ))  # fmt: skip
    RunAttempt.objects.bulk_create(rows, batch_size=5000, ignore_conflicts=True)
    print(f"added {len(rows):,} attempts that ended within the last hour")


def empty() -> None:
    """Remove what seeding made (the database is the benchmark's own)."""
    models = (Finding, FindingOutcome, Review, RunAttempt, ReviewRun, WebhookDelivery,
              PullRequest, RepositoryPolicy, Repository, BudgetAlert, WorkerHeartbeat)  # fmt: skip
    if connection.vendor == "postgresql":
        tables = ", ".join(connection.ops.quote_name(m._meta.db_table) for m in models)
        with connection.cursor() as cursor:
            cursor.execute(f"TRUNCATE {tables} CASCADE")  # noqa: S608  (names from the models)
    else:
        for model in models:
            model.objects.all().delete()
    Installation.objects.filter(
        github_id__gte=800_000, github_id__lt=800_000 + INSTALLATIONS
    ).delete()


def pages() -> list[tuple[str, str]]:
    """The pages to time: those of the newest completed and failed runs and their pull
    request and repository, and the site-wide ones."""
    run = ReviewRun.objects.filter(status="completed", review__isnull=False).order_by("-pk").first()
    failed = ReviewRun.objects.filter(status="failed").order_by("-pk").first()
    pull = run.pull_request
    repo = pull.repository
    return [
        ("overview", "/"),
        ("repositories", "/repos/"),
        ("pull request", f"/repos/{repo.full_name}/pulls/{pull.number}/"),
        ("pull request, filtered", f"/repos/{repo.full_name}/pulls/{pull.number}/?state=open&severity=high"),
        ("run (completed)", f"/runs/{run.pk}/"),
        ("run (failed)", f"/runs/{failed.pk}/"),
        ("run status (live poll)", f"/runs/{run.pk}/status"),
        ("diagnostics", "/diagnostics/"),
        ("diagnostics, 30 days", "/diagnostics/?window=30d"),
        ("diagnostics, search", f"/diagnostics/?q={repo.full_name}%23{pull.number}"),
        ("status", "/status/"),
        ("status, failed only", "/status/?status=failed"),
        ("search (redirect)", f"/search/?q={repo.full_name}%23{pull.number}"),
        ("search (repository)", f"/search/?q={repo.full_name}"),
        ("metrics", "/metrics"),
        ("healthz", "/healthz"),
    ]  # fmt: skip


def time_pages(requests: int) -> None:
    setup_test_environment()
    user, _ = get_user_model().objects.get_or_create(
        username="bench-operator", defaults={"is_staff": True, "is_superuser": True}
    )
    client = Client()
    client.force_login(user)
    print(f"\n{'page':<26} {'median':>9} {'p95':>9} {'queries':>8}")
    for name, url in pages():
        client.get(url)  # warm-up: connection, template cache
        times = []
        for _ in range(requests):
            reset_queries()
            with CaptureQueriesContext(connection) as queries:
                started = time.perf_counter()
                response = client.get(url)
                times.append((time.perf_counter() - started) * 1000)
            assert response.status_code in (200, 302), (url, response.status_code)
        times.sort()
        p95 = times[min(len(times) - 1, round(0.95 * (len(times) - 1)))]
        flag = "" if p95 < 300 else "  over 300 ms"
        print(f"{name:<26} {statistics.median(times):>7.1f}ms {p95:>7.1f}ms "
              f"{len(queries.captured_queries):>8}{flag}")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=100_000)
    parser.add_argument("--findings", type=int, default=1_000_000)
    parser.add_argument("--requests", type=int, default=15)
    parser.add_argument("--reseed", action="store_true")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--busy-hour", type=int, default=0, metavar="N",
        help="add N attempts that ended within the last hour (the stage histogram's window)",
    )  # fmt: skip
    arguments(parser, port=None)
    args = parser.parse_args()

    print(f"database: {connection.vendor} {connection.settings_dict['NAME']}")
    call_command("migrate", verbosity=0)
    if args.reseed:
        empty()
    if not ReviewRun.objects.exists():
        seed(args.runs, args.findings, rng=random.Random(args.seed))
    if args.busy_hour:
        busy_hour(args.busy_hour, random.Random(args.seed))
    if connection.vendor == "postgresql":
        # As autovacuum leaves a table in steady state: statistics and a visibility map
        # (index-only scans rely on it).
        with connection.cursor() as cursor:
            cursor.execute("VACUUM ANALYZE")
    print(f"rows: {ReviewRun.objects.count():,} runs, {Finding.objects.count():,} findings, "
          f"{Review.objects.count():,} reviews, {WebhookDelivery.objects.count():,} deliveries, "
          f"{PullRequest.objects.count():,} pull requests")  # fmt: skip
    storages = {
        "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
        "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
    }
    # The periodic work a deployed node has registered (/healthz asks for it).
    from reviews.queue.schedules import schedules_ensure

    schedules_ensure()
    # The pages need no collected static files here; the manifest storage would.
    with override_settings(STORAGES=storages, TASUKU_METRICS_TOKEN=""):
        time_pages(args.requests)


if __name__ == "__main__":
    main()
