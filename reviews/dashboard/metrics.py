"""`/metrics`: Tasuku's figures in Prometheus' text format, read from the database.

Web and worker processes run on several hosts, so figures kept in one process's memory
would be a fraction of the truth: this collector reads the rows every process writes
(deliveries, runs, reviews, worker heartbeats, GitHub API usage) at scrape time, with
prometheus_client's custom-collector API on a registry of its own (never the global
one, whose process metrics would describe only the web process that answered).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

from django.conf import settings
from django.db.models import Count, DurationField, ExpressionWrapper, F, Min, Q, Sum
from django.utils import timezone
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeHistogramMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)

from repos.models import GitHubApiUsage, Installation, WriteBudget
from reviews.dashboard.selectors import broker_queue_size, day_start
from reviews.models import (
    AttemptOutcome,
    Review,
    ReviewRun,
    RunAttempt,
    RunStatus,
    WorkerHeartbeat,
)
from reviews.queue import timeline
from reviews.scope.budget import month_start
from webhooks.models import DeliveryStatus, WebhookDelivery

# Upper bounds (seconds) of the run duration histogram's buckets: a static review takes
# seconds, a model review minutes; the run deadline is 45 minutes.
DURATION_BUCKETS = (5, 15, 30, 60, 120, 300, 600, 1200, 2700)
# The stage histogram counts the stages of attempts that ended in the last hour, the
# latest STAGE_ATTEMPTS of them at most: a gauge histogram (what the stages took lately),
# not a counter since the beginning, because a counter would have to read every attempt
# ever kept (a million at a large installation) at each scrape. An hour is a few hundred
# attempts at a million runs a quarter, read through the `metrics_stage_times` index; the
# cap bounds a scrape in a burst (decoding 10,000 attempts' stage times takes ~0.15 s
# here), where the latest 2,000 still describe the hour. Take quantiles of its buckets
# as they are, not of their rate(). Its buckets span a fast admission (a GitHub read or
# two, tenths of a second) to the sandbox's 30-minute deadline, a step of 2-2.5x apart: a
# quantile is read within a bucket's width, and 15 buckets x 5 stages stay few series.
STAGE_WINDOW = timedelta(hours=1)
STAGE_ATTEMPTS = 2000
STAGE_BUCKETS = (0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1200, 1800)


class TasukuCollector:
    def collect(self) -> Iterator[Metric]:
        now = timezone.now()
        yield from self._deliveries()
        yield from self._runs(now)
        yield from self._durations()
        yield from self._stages(now)
        yield from self._github()
        yield from self._models(now)
        workers = GaugeMetricFamily(
            "tasuku_workers_alive",
            "Worker processes that heartbeated within three heartbeat intervals.",
        )
        silent = timedelta(seconds=3 * settings.TASUKU_RUN_HEARTBEAT_SECONDS)
        workers.add_metric([], WorkerHeartbeat.objects.filter(beat_at__gte=now - silent).count())
        yield workers

    def _deliveries(self) -> Iterator[Metric]:
        counts = dict(
            WebhookDelivery.objects.values_list("status").annotate(n=Count("*")).order_by()
        )
        stored = GaugeMetricFamily(
            "tasuku_webhook_deliveries",
            "Webhook deliveries stored, by status (received, processing, retrying, processed, "
            "ignored, failed).",
            labels=["status"],
        )
        for status in DeliveryStatus.values:
            stored.add_metric([status], counts.get(status, 0))
        yield stored
        received = CounterMetricFamily(
            "tasuku_webhook_deliveries_received", "Webhook deliveries received and stored."
        )
        received.add_metric([], sum(counts.values()))
        yield received

    def _runs(self, now) -> Iterator[Metric]:
        counts = dict(ReviewRun.objects.values_list("status").annotate(n=Count("*")).order_by())
        runs = GaugeMetricFamily(
            "tasuku_review_runs",
            "Review runs by status (outcome, for finished ones).",
            labels=["status"],
        )
        for status in RunStatus.values:
            runs.add_metric([status], counts.get(status, 0))
        yield runs
        created = CounterMetricFamily("tasuku_review_runs_created", "Review runs created.")
        created.add_metric([], sum(counts.values()))
        yield created

        queued = ReviewRun.objects.filter(status=RunStatus.QUEUED).aggregate(
            n=Count("*"),
            due=Count(
                "status", filter=Q(next_attempt_at__isnull=True) | Q(next_attempt_at__lte=now)
            ),
            oldest=Min("created_at"),
        )
        depth = GaugeMetricFamily("tasuku_review_queue_depth", "Review runs waiting (queued).")
        depth.add_metric([], queued["n"])
        yield depth
        due = GaugeMetricFamily(
            "tasuku_review_queue_due", "Queued review runs due now (not waiting for a retry)."
        )
        due.add_metric([], queued["due"])
        yield due
        oldest = GaugeMetricFamily(
            "tasuku_review_queue_oldest_age_seconds",
            "Age of the oldest queued review run (0: none).",
        )
        oldest.add_metric([], (now - queued["oldest"]).total_seconds() if queued["oldest"] else 0)
        yield oldest
        size = broker_queue_size()
        if size is not None:
            broker = GaugeMetricFamily(
                "tasuku_broker_queue_depth", "Tasks waiting in the worker queue (django-q2)."
            )
            broker.add_metric([], size)
            yield broker

    def _durations(self) -> Iterator[Metric]:
        """Start to finish of every completed or failed run, as a cumulative histogram
        (one aggregate query over the runs)."""
        duration = ExpressionWrapper(
            F("finished_at") - F("started_at"), output_field=DurationField()
        )
        finished = ReviewRun.objects.filter(
            status__in=(RunStatus.COMPLETED, RunStatus.FAILED),
            started_at__isnull=False,
            finished_at__isnull=False,
        ).annotate(duration=duration)
        aggregates = {
            f"le_{bound}": Count("started_at", filter=Q(duration__lte=timedelta(seconds=bound)))
            for bound in DURATION_BUCKETS
        }
        figures = finished.aggregate(n=Count("*"), total=Sum("duration"), **aggregates)
        buckets = [(str(float(b)), figures[f"le_{b}"]) for b in DURATION_BUCKETS]
        buckets.append(("+Inf", figures["n"]))
        total = figures["total"]
        if total is not None and not isinstance(total, timedelta):
            total = timedelta(microseconds=int(total))  # SQLite sums durations as microseconds
        histogram = HistogramMetricFamily(
            "tasuku_review_run_duration_seconds",
            "Time from a run's start to its end, for completed and failed runs.",
        )
        histogram.add_metric([], buckets, sum_value=total.total_seconds() if total else 0.0)
        yield histogram

    def _stages(self, now) -> Iterator[Metric]:
        """Each stage's duration, over the attempts that ended within STAGE_WINDOW."""
        recent = (
            RunAttempt.objects.filter(finished_at__gte=now - STAGE_WINDOW)
            .order_by("-finished_at")
            .values_list("stage_times", flat=True)[:STAGE_ATTEMPTS]
        )
        histogram = GaugeHistogramMetricFamily(
            "tasuku_stage_duration_seconds",
            f"How long each stage of a run took, over the attempts that ended in the last "
            f"{STAGE_WINDOW.total_seconds() / 3600:g} hour(s), the latest {STAGE_ATTEMPTS} at "
            "most (a stage a lost worker was in is not counted): quantiles of the buckets as "
            "they are, not of their rate.",
            labels=["stage"],
        )
        for stage, figures in timeline.histogram(recent, STAGE_BUCKETS).items():
            buckets = [
                (str(float(b)), n) for b, n in zip(STAGE_BUCKETS, figures.buckets, strict=True)
            ]
            buckets.append(("+Inf", figures.count))
            histogram.add_metric([stage], buckets, gsum_value=round(figures.total, 3))
        yield histogram

    def _github(self) -> Iterator[Metric]:
        logins = dict(Installation.objects.values_list("github_id", "account_login"))
        calls = CounterMetricFamily(
            "tasuku_github_api_calls",
            "Calls the GitHub gateway made (a paginated listing counts once), by App, "
            "installation (0: the App's own calls) and outcome.",
            labels=["app_id", "installation_id", "account", "outcome"],
        )
        remaining = GaugeMetricFamily(
            "tasuku_github_rate_limit_remaining",
            "Requests left in GitHub's rate limit window, as GitHub's latest answer said.",
            labels=["app_id", "installation_id", "account"],
        )
        limit = GaugeMetricFamily(
            "tasuku_github_rate_limit_limit",
            "GitHub's rate limit for the window, as its latest answer said.",
            labels=["app_id", "installation_id", "account"],
        )
        for usage in GitHubApiUsage.objects.order_by("app_id", "installation_id"):
            account = "app" if usage.installation_id == 0 else logins.get(usage.installation_id, "")
            labels = [usage.app_id, str(usage.installation_id), account]
            calls.add_metric([*labels, "ok"], usage.calls - usage.errors)
            calls.add_metric([*labels, "error"], usage.errors)
            if usage.rate_limit_remaining is not None:
                remaining.add_metric(labels, usage.rate_limit_remaining)
                limit.add_metric(labels, usage.rate_limit_limit or 0)
        yield calls
        yield remaining
        yield limit
        now = timezone.now()
        waiting = GaugeMetricFamily(
            "tasuku_github_rate_limited_seconds",
            "Seconds until GitHub's rate limit lets Tasuku's work for the installation go on "
            "(0 when it is not waiting).",
            labels=["installation_id", "account"],
        )
        for github_id, login, until in Installation.objects.values_list(
            "github_id", "account_login", "quiet_until"
        ):
            left = (until - now).total_seconds() if until and until > now else 0.0
            waiting.add_metric([str(github_id), login], left)
        yield waiting
        yield from self._write_budgets(now, logins)
        deferred = CounterMetricFamily(
            "tasuku_review_run_attempts_deferred",
            "Run attempts put off for GitHub's weather (a rate limit, GitHub unavailable).",
        )
        deferred.add_metric([], RunAttempt.objects.filter(outcome=AttemptOutcome.DEFERRED).count())
        yield deferred

    def _write_budgets(self, now, logins: dict[int, str]) -> Iterator[Metric]:
        """Each installation's write budget, shared by every process (repos/github/budget.py)."""
        labels = ["installation_id", "account"]
        writes = CounterMetricFamily(
            "tasuku_github_writes",
            "Writes to GitHub let through the installation's shared write budget.",
            labels=labels,
        )
        waits = CounterMetricFamily(
            "tasuku_github_write_waits",
            "Writes that waited their turn in the installation's write budget.",
            labels=labels,
        )
        waited = CounterMetricFamily(
            "tasuku_github_write_wait_seconds",
            "Seconds writes waited for their place in the installation's write budget.",
            labels=labels,
        )
        pauses = CounterMetricFamily(
            "tasuku_github_write_pauses",
            "Rate limits GitHub answered (Retry-After, a secondary limit) that paused every "
            "process's writes for the installation.",
            labels=labels,
        )
        minute = GaugeMetricFamily(
            "tasuku_github_writes_this_minute",
            "The installation's writes in the current clock minute (GitHub allows 80 a minute).",
            labels=labels,
        )
        hour = GaugeMetricFamily(
            "tasuku_github_writes_this_hour",
            "The installation's writes in the current clock hour (GitHub allows 500 an hour).",
            labels=labels,
        )
        flying = GaugeMetricFamily(
            "tasuku_github_writes_in_flight",
            "The installation's writes being sent now, from every process.",
            labels=labels,
        )
        paused = GaugeMetricFamily(
            "tasuku_github_write_paused_seconds",
            "Seconds until the installation's writes may go again after GitHub asked to wait.",
            labels=labels,
        )
        this_minute = now.replace(second=0, microsecond=0)
        this_hour = this_minute.replace(minute=0)
        epoch = now.timestamp()
        for row in WriteBudget.objects.order_by("app_id", "installation_id"):
            values = [str(row.installation_id), logins.get(row.installation_id, "")]
            writes.add_metric(values, row.writes)
            waits.add_metric(values, row.waits)
            waited.add_metric(values, row.waited_seconds)
            pauses.add_metric(values, row.pauses)
            minute.add_metric(values, row.minute_writes if row.minute_started == this_minute else 0)
            hour.add_metric(values, row.hour_writes if row.hour_started == this_hour else 0)
            flying.add_metric(values, sum(1 for t in (row.in_flight or {}).values() if t > epoch))
            left = (row.paused_until - now).total_seconds() if row.paused_until else 0.0
            paused.add_metric(values, max(0.0, left))
        yield from (writes, waits, waited, pauses, minute, hour, flying, paused)

    def _models(self, now) -> Iterator[Metric]:
        tokens = CounterMetricFamily(
            "tasuku_model_tokens",
            "Model tokens used by reviews, by model and direction.",
            labels=["model", "direction"],
        )
        cost = CounterMetricFamily(
            "tasuku_model_cost_usd",
            "What reviews cost in model spend (USD), by model.",
            labels=["model"],
        )
        rows = (
            Review.objects.exclude(model="")
            .values("model")
            .annotate(input=Sum("input_tokens"), output=Sum("output_tokens"), cost=Sum("cost_usd"))
            .order_by("model")
        )
        for row in rows:
            tokens.add_metric([row["model"], "input"], row["input"] or 0)
            tokens.add_metric([row["model"], "output"], row["output"] or 0)
            cost.add_metric([row["model"]], float(row["cost"] or 0))
        yield tokens
        yield cost
        spent = GaugeMetricFamily(
            "tasuku_budget_spent_usd",
            "This month's model spend per installation (USD).",
            labels=["installation_id", "account"],
        )
        cap = GaugeMetricFamily(
            "tasuku_budget_cap_usd",
            "Monthly budget per installation (USD), where one is set.",
            labels=["installation_id", "account"],
        )
        month = (
            Review.objects.filter(created_at__gte=day_start(month_start(now)))
            .values("pull_request__repository__installation")
            .annotate(total=Sum("cost_usd"))
            .order_by()
        )
        totals = {row["pull_request__repository__installation"]: row["total"] for row in month}
        for installation in Installation.objects.filter(
            Q(pk__in=totals) | Q(monthly_budget_usd__isnull=False)
        ):
            labels = [str(installation.github_id), installation.account_login]
            spent.add_metric(labels, float(totals.get(installation.pk) or 0))
            if installation.monthly_budget_usd is not None:
                cap.add_metric(labels, float(installation.monthly_budget_usd))
        yield spent
        yield cap


registry = CollectorRegistry(auto_describe=False)
registry.register(TasukuCollector())


def metrics_text() -> bytes:
    return generate_latest(registry)
