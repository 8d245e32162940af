"""Reads for the dashboard's pages: a handful of queries each, sized for 100,000 runs
and 1,000,000 findings (benchmarks/dashboard.py times every page). The indexes they
lean on are named for their page (`overview_…`, `pr_page_…`, `run_page_…`,
`repositories_page_…`, `diagnostics_…` in reviews/models.py and webhooks/models.py)."""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import date, datetime, time, timedelta
from decimal import Decimal

from django.db.models import Count, F, Max, OuterRef, Q, Subquery, Sum
from django.db.models.functions import TruncDate
from django.urls import reverse
from django.utils import timezone

from repos import revisions
from repos.models import Installation, Repository, Reviewer, ReviewerRevision
from reviews.checks.diagnosis import STAGE_MEANING, STAGES, Advice, diagnose, known_causes
from reviews.dashboard.charts import Day
from reviews.memory.outcomes import Figures
from reviews.models import (
    BudgetAlert,
    Dismissal,
    Finding,
    FindingOutcome,
    FindingState,
    PullRequest,
    Review,
    ReviewRun,
    RunStatus,
    SandboxTestRun,
    TestsStatus,
    WorkerHeartbeat,
)
from reviews.scope.budget import ALERT_AT, BUDGET_SPENT, Budget, installation_budget, month_start
from sandbox.contract import Severity
from webhooks.models import WebhookDelivery

SEVERITY_RANK = {s.value: s.rank for s in Severity}
WINDOWS = {"24h": timedelta(hours=24), "7d": timedelta(days=7), "30d": timedelta(days=30)}


def day_start(day: date) -> datetime:
    return timezone.make_aware(datetime.combine(day, time.min))


# --- Overview ------------------------------------------------------------------------


def runs_by_status(now: datetime) -> list[dict]:
    """Runs created in the last 24 hours and 7 days, by status (one query)."""
    rows = (
        ReviewRun.objects.filter(created_at__gte=now - WINDOWS["7d"])
        .values("status")
        .annotate(
            week=Count("*"), day=Count("created_at", filter=Q(created_at__gte=now - WINDOWS["24h"]))
        )
        .order_by()
    )
    found = {row["status"]: row for row in rows}
    return [
        {
            "status": s,
            "day": found.get(s, {}).get("day", 0),
            "week": found.get(s, {}).get("week", 0),
        }
        for s in RunStatus.values
    ]


@dataclass
class StageFailures:
    stage: str
    meaning: str
    count: int
    last: ReviewRun | None = None
    advice: Advice | None = None  # for the most recent failure
    causes: list[tuple[Advice, int]] = field(default_factory=list)
    known: list[Advice] = field(default_factory=list)


def failures_by_stage(since: datetime, *, sample: int = 1) -> list[StageFailures]:
    """Failed runs since `since` per stage (all six, also when none failed there), each
    with its most recent failure and what probably caused it. With `sample` > 1, the
    latest `sample` failures of each stage are grouped by cause."""
    failed = ReviewRun.objects.filter(status=RunStatus.FAILED, finished_at__gte=since)
    counts = dict(failed.values_list("stage").annotate(n=Count("*")).order_by())
    stages = list(STAGES) + ([""] if counts.get("") else [])
    result = []
    for stage in stages:
        row = StageFailures(
            stage=stage,
            meaning=STAGE_MEANING.get(stage, ""),
            count=counts.get(stage, 0),
            known=known_causes(stage),
        )
        if row.count:
            at_stage = failed.filter(stage=stage).order_by("-finished_at", "-pk")
            row.last = at_stage.select_related("pull_request__repository", "reviewer").first()
            row.advice = diagnose(row.last.error_code)
            if sample > 1:
                codes = at_stage.values_list("error_code", flat=True)[:sample]
                row.causes = Counter(diagnose(code) for code in codes).most_common()
            else:
                row.causes = [(row.advice, 1)]
        result.append(row)
    return result


@dataclass(frozen=True)
class QueueState:
    queued: int
    due: int
    running: int
    oldest: ReviewRun | None
    broker: int | None  # tasks waiting in django-q2's queue (None: the broker did not say)

    @property
    def oldest_age(self) -> timedelta | None:
        return timezone.now() - self.oldest.created_at if self.oldest else None


def queue_state(now: datetime) -> QueueState:
    waiting = ReviewRun.objects.filter(status__in=(RunStatus.QUEUED, RunStatus.RUNNING))
    queued = Q(status=RunStatus.QUEUED)
    figures = waiting.aggregate(
        queued=Count("status", filter=queued),
        due=Count(
            "status",
            filter=queued & (Q(next_attempt_at__isnull=True) | Q(next_attempt_at__lte=now)),
        ),
        running=Count("status", filter=Q(status=RunStatus.RUNNING)),
    )
    oldest = (
        ReviewRun.objects.filter(status=RunStatus.QUEUED)
        .select_related("pull_request__repository", "reviewer")
        .order_by("created_at", "pk")
        .first()
    )
    return QueueState(
        queued=figures["queued"],
        due=figures["due"],
        running=figures["running"],
        oldest=oldest,
        broker=broker_queue_size(),
    )


def broker_queue_size() -> int | None:
    from django_q.brokers import get_broker

    try:
        return int(get_broker().queue_size())
    except Exception:  # a broker that cannot count (or is down) says nothing here
        return None


def worker_heartbeats(now: datetime, *, silent_after: timedelta) -> list[dict]:
    """Workers heard from in the last hour: the live ones first, then those that stopped
    cleanly ("stopped"), then those that went quiet ("silent": killed, or hung)."""
    rows = WorkerHeartbeat.objects.filter(beat_at__gte=now - timedelta(hours=1)).order_by(
        "-beat_at"
    )
    workers = [
        {
            "worker": w,
            "alive": w.stopped_at is None and w.beat_at >= now - silent_after,
            "stopped": w.stopped_at is not None,
            "ago": now - w.beat_at,
        }
        for w in rows
    ]
    workers.sort(key=lambda row: (not row["alive"], row["stopped"], row["worker"].name))
    return workers


@dataclass(frozen=True)
class Spend:
    installation: Installation
    spent: Decimal
    reviews: int
    cap: Decimal | None
    alerted: bool

    @property
    def share(self) -> Decimal | None:
        return self.spent / self.cap if self.cap else None

    @property
    def percent(self) -> int | None:
        share = self.share
        return int(share * 100) if share is not None else None

    @property
    def warn(self) -> bool:
        """The 80 % banner: recorded by the budget gate, or reached since."""
        share = self.share
        return self.alerted or (share is not None and share >= ALERT_AT)


def spend_by_installation(now: datetime) -> list[Spend]:
    """This month's recorded model spend of each installation against its cap."""
    start = month_start(now)
    rows = (
        Review.objects.filter(created_at__gte=day_start(start))
        .values("pull_request__repository__installation")
        .annotate(spent=Sum("cost_usd"), reviews=Count("*"))
        .order_by()
    )
    spent = {row["pull_request__repository__installation"]: row for row in rows}
    alerts = dict(
        BudgetAlert.objects.filter(month=start).values_list("installation_id", "spent_usd")
    )
    installations = Installation.objects.filter(
        Q(pk__in=spent) | Q(monthly_budget_usd__isnull=False) | Q(pk__in=alerts)
    ).order_by("account_login")
    result = []
    for installation in installations:
        row = spent.get(installation.pk, {})
        total = Decimal(row.get("spent") or 0)
        if installation.pk in alerts:
            total = max(total, Decimal(alerts[installation.pk]))
        result.append(
            Spend(
                installation=installation,
                spent=total,
                reviews=row.get("reviews", 0),
                cap=installation.monthly_budget_usd,
                alerted=installation.pk in alerts,
            )
        )
    return result


def reviews_per_day(now: datetime, *, days: int = 30) -> list[Day]:
    """Reviews and their cost per day for the last `days` days (today included)."""
    first = timezone.localdate(now) - timedelta(days=days - 1)
    rows = (
        Review.objects.filter(created_at__gte=day_start(first))
        .annotate(day=TruncDate("created_at"))
        .values("day")
        .annotate(n=Count("*"), cost=Sum("cost_usd"))
        .order_by()
    )
    found = {row["day"]: row for row in rows}
    series = []
    for offset in range(days):
        day = first + timedelta(days=offset)
        row = found.get(day, {})
        series.append(Day(day, row.get("n", 0), Decimal(row.get("cost") or 0)))
    return series


# --- Repositories ----------------------------------------------------------------------


def repository_rows(repositories: list[Repository]) -> list[dict]:
    """Per repository of a page: its last run and its figures (published, fixed,
    dismissed, acceptance: the counts of `reviews.memory.outcomes.figures`), in a few queries
    for the whole page, each bounded by the page's repositories."""
    ids = [r.pk for r in repositories]
    last_at = dict(
        ReviewRun.objects.filter(pull_request__repository__in=ids)
        .values_list("pull_request__repository")
        .annotate(last=Max("created_at"))
        .order_by()
    )
    last_runs: dict[int, ReviewRun] = {}
    for run in (
        ReviewRun.objects.filter(pull_request__repository__in=ids, created_at__in=last_at.values())
        .select_related("pull_request")
        .order_by("pk")
    ):
        if last_at.get(run.pull_request.repository_id) == run.created_at:
            last_runs[run.pull_request.repository_id] = run
    fates: dict[int, Counter] = defaultdict(Counter)
    for repository_id, fate, n in (
        FindingOutcome.objects.filter(repository__in=ids)
        .values_list("repository", "fate")
        .annotate(n=Count("*"))
        .order_by()
    ):
        fates[repository_id][fate] = n
    # Each problem posted on a pull request counts once, however many reviews carried
    # it: distinct fingerprints per pull request, read from the partial index
    # `repositories_page_published` alone, added up per repository.
    per_pull = (
        Finding.objects.filter(pull_request=OuterRef("pk"))
        .filter(Q(published=True) | Q(github_comment_id__isnull=False))
        .order_by()
        .values("pull_request")
        .annotate(n=Count("fingerprint", distinct=True))
        .values("n")
    )
    published: Counter = Counter()
    for repository_id, n in (
        PullRequest.objects.filter(repository__in=ids)
        .annotate(n=Subquery(per_pull))
        .values_list("repository", "n")
        .order_by()
    ):
        published[repository_id] += n or 0
    rows = []
    for repository in repositories:
        counts = fates[repository.pk]
        rows.append(
            {
                "repository": repository,
                "last": last_runs.get(repository.pk),
                "figures": Figures(
                    published=published[repository.pk],
                    fixed=counts[FindingOutcome.Fate.FIXED],
                    dismissed=counts[FindingOutcome.Fate.DISMISSED],
                    left_open=counts[FindingOutcome.Fate.OPEN],
                ),
            }
        )
    return rows


def reviewer_rows() -> list[dict]:
    """Per reviewer: what became of its published findings when their pull requests
    closed (fixed, dismissed, left open; from the outcomes) and its acceptance rate."""
    fates: dict[int, Counter] = defaultdict(Counter)
    for reviewer_id, fate, n in (
        FindingOutcome.objects.values_list("reviewer", "fate").annotate(n=Count("*")).order_by()
    ):
        fates[reviewer_id][fate] = n
    rows = []
    for reviewer in Reviewer.objects.order_by("slug"):
        counts = fates[reviewer.pk]
        rows.append(
            {
                "reviewer": reviewer,
                "figures": Figures(
                    published=sum(counts.values()),
                    fixed=counts[FindingOutcome.Fate.FIXED],
                    dismissed=counts[FindingOutcome.Fate.DISMISSED],
                    left_open=counts[FindingOutcome.Fate.OPEN],
                ),
            }
        )
    return rows


# --- A pull request ----------------------------------------------------------------------


@dataclass
class Problem:
    """One problem a reviewer raised on a pull request, across every push."""

    latest: Finding
    history: list[tuple[str, str]]  # (what happened, at which commit), oldest first


def problem_history(findings: list[Finding]) -> list[tuple[str, str]]:
    """ "opened in <sha>, still current in <sha>, resolved in <sha>" for one problem's
    findings (one per review that raised or carried it), oldest first."""
    steps: list[tuple[str, str]] = []
    for index, finding in enumerate(findings):
        head = finding.review.head_sha
        if finding.state == FindingState.SUPPRESSED:
            steps.append(("suppressed in", head))
        elif index == 0:
            steps.append(("opened in", finding.first_seen_sha or head))
            if finding.first_seen_sha and finding.first_seen_sha != head:
                steps.append(("still current in", head))
        else:
            steps.append(("still current in", head))
        if finding.state in (FindingState.RESOLVED, FindingState.OUTDATED) and (
            finding.resolved_in_sha
        ):
            steps.append((f"{finding.state} in", finding.resolved_in_sha))
    return steps


def pull_request_problems(
    pull_request: PullRequest, *, state: str = "", severity: str = "", reviewer: str = ""
) -> tuple[list[Problem], list[str]]:
    """The latest state of each problem (per reviewer and fingerprint) with its history,
    filtered on that latest state; and the slugs of the reviewers that raised any."""
    groups: dict[tuple[int, str], list[Finding]] = defaultdict(list)
    for finding in (
        Finding.objects.filter(pull_request=pull_request)
        .select_related("review__reviewer")
        .order_by("review__created_at", "pk")
    ):
        groups[(finding.review.reviewer_id, finding.fingerprint)].append(finding)
    problems = [
        Problem(latest=found[-1], history=problem_history(found)) for found in groups.values()
    ]
    reviewers = sorted({p.latest.review.reviewer.slug for p in problems})
    if state:
        problems = [p for p in problems if p.latest.state == state]
    if severity:
        problems = [p for p in problems if p.latest.severity == severity]
    if reviewer:
        problems = [p for p in problems if p.latest.review.reviewer.slug == reviewer]
    problems.sort(
        key=lambda p: (
            p.latest.state != FindingState.OPEN,
            -SEVERITY_RANK.get(p.latest.severity, 0),
            p.latest.path,
            p.latest.start_line,
        )
    )
    return problems, reviewers


# --- Search and windows ----------------------------------------------------------------


def since(window: str, now: datetime) -> tuple[str, datetime]:
    window = window if window in WINDOWS else "7d"
    return window, now - WINDOWS[window]


def repository_pull_requests(repository: Repository, *, limit: int = 50) -> list[dict]:
    """A repository's most recently updated pull requests with their latest run."""
    latest = (
        ReviewRun.objects.filter(pull_request=OuterRef("pk"))
        .order_by("-created_at", "-pk")
        .values("pk")[:1]
    )
    pulls = list(
        PullRequest.objects.filter(repository=repository)
        .annotate(latest_run=Subquery(latest))
        .order_by("-updated_at")[:limit]
    )
    runs = ReviewRun.objects.in_bulk([p.latest_run for p in pulls if p.latest_run])
    return [{"pull_request": p, "run": runs.get(p.latest_run)} for p in pulls]


def pull_request_dismissals(pull_request: PullRequest) -> list[dict]:
    """Who silenced which finding on the pull request, how, in what capacity and why."""
    titles = dict(
        Finding.objects.filter(pull_request=pull_request)
        .order_by("fingerprint", "-pk")
        .values_list("fingerprint", "title")
    )
    return [
        {
            "title": titles.get(d.fingerprint, d.fingerprint),
            "login": d.login,
            "how": d.get_how_display(),
            "role": d.role,
            "reason": d.reason,
            "at": d.created_at,
        }
        for d in Dismissal.objects.filter(pull_request=pull_request).order_by("created_at", "pk")
    ]


@dataclass(frozen=True)
class Step:
    """One step of a new install's way to its first review."""

    name: str
    done: bool
    said: str  # what is so, or what to do next
    link: str = ""  # where to do it
    link_text: str = ""


def first_steps(workers: list[dict], *, app_missing: list[str]) -> list[Step]:
    """The overview's checklist on a new install: the App connected, a webhook received,
    a worker alive, a first review — each done or with its next step. Reviews from the
    command line (local repositories) do not count as the App's first review."""
    deliveries = WebhookDelivery.objects.exclude(event="ping")
    app_review = ReviewRun.objects.filter(
        pull_request__repository__github_id__gte=0, status=RunStatus.COMPLETED
    ).exists()
    return [
        Step(
            "GitHub App connected",
            not app_missing,
            "Tasuku can talk to GitHub as its App."
            if not app_missing
            else f"Missing: {', '.join(app_missing)}. Create the App from the setup page "
            "(or try it all without GitHub: README, Try it without GitHub).",
            reverse("repos:setup_github"),
            "Set up the GitHub App",
        ),
        Step(
            "A webhook received",
            deliveries.exists(),
            "GitHub's deliveries arrive (the status page lists them)."
            if deliveries.exists()
            else "Install the App on a repository: GitHub then tells Tasuku, and the "
            "delivery shows on the status page. Nothing? GitHub must reach TASUKU_BASE_URL.",
            reverse("reviews:status"),
            "The status page",
        ),
        Step(
            "A worker alive",
            any(w["alive"] for w in workers),
            "A worker heartbeats: reviews will run."
            if any(w["alive"] for w in workers)
            else "No worker heartbeats: start one (`python manage.py worker`; `make run` "
            "starts one beside the web server).",
        ),
        Step(
            "A first review",
            app_review,
            "A pull request was reviewed through the App."
            if app_review
            else "Open a pull request on a repository the App is installed on; or review one "
            "now from the command line: `manage.py review <pull request URL>` (README).",
            reverse("reviews:repositories"),
            "Repositories",
        ),
    ]


@dataclass(frozen=True)
class RunRevision:
    """The reviewer's revision a run was given (None: not recorded, a run made before
    revisions whose configuration matched none), the reviewer's current one, and how
    the current one differs from the run's."""

    given: ReviewerRevision | None
    current: ReviewerRevision | None
    changes: list[revisions.Change]

    @property
    def differs(self) -> bool:
        return bool(self.given and self.current and self.given.digest != self.current.digest)


def run_revision(run: ReviewRun) -> RunRevision:
    given = run.reviewer_revision
    current = run.reviewer.revisions.order_by("-number").first()
    changes = []
    if given is not None and current is not None and given.digest != current.digest:
        changes = revisions.diff(given.definition, current.definition)
    return RunRevision(given=given, current=current, changes=changes)


@dataclass(frozen=True)
class BudgetStopped:
    """A pull request whose latest review by a reviewer was stopped by the monthly budget,
    with no push since: reviewable once its installation's budget allows."""

    run: ReviewRun
    budget: Budget

    @property
    def reviewable(self) -> bool:
        return not self.budget.exhausted


def budget_stopped(limit: int = 50) -> list[BudgetStopped]:
    """The open pull requests the budget stopped at their current head (the newest run of
    each reviewer), each with its installation's budget now."""
    # Stopped this month or the last (an older stop's pull request has moved on, or is
    # reviewed on its next push): the overview reads a few recent rows, not every run.
    since = timezone.now() - timedelta(days=62)
    stopped = (
        ReviewRun.objects.filter(
            finished_at__gte=since,
            status=RunStatus.COMPLETED,
            reason__startswith=BUDGET_SPENT,
            pull_request__state="open",
            head_sha=F("pull_request__head_sha"),
        )
        .select_related("pull_request__repository__installation", "reviewer")
        .order_by("-pk")
    )
    found: list[BudgetStopped] = []
    seen: set[tuple[int, int]] = set()
    budgets: dict[int, Budget] = {}
    for run in stopped[: limit * 4]:
        key = (run.pull_request_id, run.reviewer_id)
        if key in seen:
            continue
        seen.add(key)
        newer = ReviewRun.objects.filter(
            pull_request_id=run.pull_request_id, reviewer_id=run.reviewer_id, pk__gt=run.pk
        ).exists()
        if newer:
            continue  # reviewed (or being reviewed) again since
        installation = run.pull_request.repository.installation
        if installation.pk not in budgets:
            budgets[installation.pk] = installation_budget(installation)
        found.append(BudgetStopped(run, budgets[installation.pk]))
        if len(found) >= limit:
            break
    return found


@dataclass(frozen=True)
class TestsRow:
    """One head's run of the pull request's own tests, as the dashboard shows it."""

    __test__ = False

    row: SandboxTestRun
    headline: str
    failing: list[str]
    more: int


def tests_rows(pull_request: PullRequest, *, head_sha: str = "", limit: int = 20) -> list[TestsRow]:
    """The pull request's tests runs (reviews/pr_tests/suite.py), newest first; only its
    head's when `head_sha` is given. The headline is the one the check run carries."""
    from reviews.pr_tests.suite import Outcome, headline

    rows = SandboxTestRun.objects.filter(pull_request=pull_request).order_by("-created_at", "-pk")
    if head_sha:
        rows = rows.filter(head_sha=head_sha)
    found = []
    for row in rows[:limit]:
        if row.status in (TestsStatus.QUEUED, TestsStatus.RUNNING):
            said = "Queued" if row.status == TestsStatus.QUEUED else "Running"
        else:
            said = headline(Outcome(row.status, seconds=row.seconds,
                                    failed_tests=list(row.failed_tests or [])))  # fmt: skip
        names = list(row.failed_tests or [])
        found.append(TestsRow(row, said, names[:10], max(0, len(names) - 10)))
    return found
