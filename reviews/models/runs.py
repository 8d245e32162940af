"""A pull request as Tasuku knows it, its review runs and their attempts, and the
workers' heartbeats."""

from __future__ import annotations

from django.db import models

from repos.models import Repository, Reviewer, ReviewerRevision
from repos.policy import Trigger


class PullRequest(models.Model):
    """What Tasuku last learnt of a pull request (from webhooks or the API)."""

    repository = models.ForeignKey(
        Repository, on_delete=models.CASCADE, related_name="pull_requests"
    )
    number = models.PositiveIntegerField()
    github_id = models.BigIntegerField(null=True, blank=True)
    title = models.CharField(max_length=1024, blank=True)
    # The description as its author wrote it (untrusted: the engine sees it fenced as
    # data), bounded: GitHub's own limit is 65,536 characters.
    body = models.TextField(blank=True)
    author_login = models.CharField(max_length=100, blank=True)
    author_type = models.CharField(max_length=20, blank=True)
    state = models.CharField(max_length=10, default="open")
    draft = models.BooleanField(default=False)
    merged = models.BooleanField(default=False)
    head_sha = models.CharField(max_length=40, blank=True)
    head_ref = models.CharField(max_length=255, blank=True)
    base_sha = models.CharField(max_length=40, blank=True)
    base_ref = models.CharField(max_length=255, blank=True)
    # From a fork: its head branch is in another repository (named here; empty once that
    # fork is deleted). Its commits are read from the base's `refs/pull/<n>/head`, and
    # never run in the base repository's GitHub Actions, where its secrets are.
    from_fork = models.BooleanField(default=False)
    head_repository = models.CharField(max_length=200, blank=True)
    html_url = models.URLField(max_length=500, blank=True)
    changed_files = models.PositiveIntegerField(
        null=True, blank=True, help_text="As GitHub last counted them (admission's file limit)."
    )
    updated_at = models.DateTimeField(auto_now=True)
    # When GitHub says the state on record last changed (the `updated_at` of the closing
    # or reopening event that set it): an older such event delivered late changes nothing.
    state_changed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["repository", "-number"]
        constraints = [
            models.UniqueConstraint(fields=["repository", "number"], name="pull_request_unique")
        ]

    def __str__(self) -> str:
        return f"{self.repository.full_name}#{self.number}"


class RunStatus(models.TextChoices):
    QUEUED = "queued", "queued"
    RUNNING = "running", "running"
    COMPLETED = "completed", "completed"
    FAILED = "failed", "failed"
    CANCELLED = "cancelled", "cancelled"
    SKIPPED = "skipped", "skipped"  # admitted no review, but its check run says why
    # Handed to a GitHub Actions runner (the `actions` runner): no worker holds it; it
    # waits for the runner's result (reviews/actions/workflow.py).
    DISPATCHED = "dispatched", "dispatched"


RUN_FINAL_STATES = (RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.CANCELLED, RunStatus.SKIPPED)


class Stage(models.TextChoices):
    """Where a run failed; the dashboard groups failures by it."""

    ADMISSION = "admission", "admission"
    CLONE = "clone", "clone"
    SANDBOX = "sandbox", "sandbox"
    PROVIDER = "provider", "provider"
    VALIDATION = "validation", "validation"
    PUBLICATION = "publication", "publication"


class ReviewRun(models.Model):
    """One review of one head by one reviewer. The row is the queue entry: its status,
    attempts, lease and next attempt time are the whole truth about it (docs/architecture.md, *Durable queues*)."""

    pull_request = models.ForeignKey(PullRequest, on_delete=models.CASCADE, related_name="runs")
    reviewer = models.ForeignKey(Reviewer, on_delete=models.PROTECT, related_name="runs")
    head_sha = models.CharField(max_length=40)
    base_sha = models.CharField(max_length=40, blank=True)
    trigger = models.CharField(max_length=32, choices=[(t.value, t.value) for t in Trigger])
    # Who asked for this review and what they said with it (`@tasuku review <note>`):
    # untrusted, given to the engine fenced as data like the pull request's own text.
    requested_by = models.CharField(max_length=100, blank=True)
    requester_note = models.TextField(blank=True)
    status = models.CharField(max_length=16, choices=RunStatus.choices, default=RunStatus.QUEUED)
    stage = models.CharField(max_length=16, choices=Stage.choices, blank=True)
    # Why the run is skipped, cancelled or failed, in words a developer understands.
    reason = models.TextField(blank=True)
    # What its last error was, by identity (tasuku/errors.py): diagnostics groups by it.
    error_code = models.CharField(max_length=40, blank=True, default="")
    config = models.JSONField(default=dict, help_text="The effective configuration given to it.")
    # The reviewer's revision its configuration was made from (docs/reviewers.md,
    # *Revisions*); empty for a run made before revisions whose configuration matches none.
    reviewer_revision = models.ForeignKey(
        ReviewerRevision, on_delete=models.PROTECT, null=True, blank=True, related_name="runs"
    )
    check_run_id = models.BigIntegerField(null=True, blank=True)
    # What Tasuku last told GitHub the check concluded, as sent: what the pull request shows.
    check_conclusion = models.CharField(max_length=20, blank=True)
    check_title = models.CharField(max_length=255, blank=True)
    # The check run's final state waits here until GitHub accepts it (reviews/checks/conclusions.py):
    # the summary to send, when it is due again (empty once sent), tries and the last error.
    check_summary = models.TextField(blank=True)
    check_due_at = models.DateTimeField(null=True, blank=True, db_index=True)
    check_sends = models.PositiveSmallIntegerField(default=0)
    check_error = models.TextField(blank=True)
    # The status the check run was last given before its conclusion ("in_progress" when
    # it was created so: the pipeline's start then sends nothing; "": unknown).
    check_status = models.CharField(max_length=20, blank=True)
    # The run's writes to GitHub wait their turn in the installation's write budget
    # (repos/github/budget.py): the latest wait (until when, and why) and the seconds
    # waited in all, shown on the run page.
    write_wait_until = models.DateTimeField(null=True, blank=True)
    write_wait_reason = models.CharField(max_length=300, blank=True)
    write_waited = models.FloatField(default=0.0)
    delivery = models.ForeignKey(
        "webhooks.WebhookDelivery",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="runs",
    )
    attempts = models.PositiveSmallIntegerField(default=0)
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    worker = models.CharField(max_length=200, blank=True)
    rung_at = models.DateTimeField(null=True, blank=True, help_text="Last doorbell rung for it.")
    # The newer head that made this run stale, when it was cancelled for it.
    superseded_by = models.CharField(max_length=40, blank=True)
    # Someone asked for the run to stop while a worker holds it (a recall, a newer head,
    # an operator): the worker stops at its next step or GitHub call, and stops the
    # engine (reviews/queue/runs.py, `run_cancel_request`).
    cancel_requested_at = models.DateTimeField(null=True, blank=True)
    cancel_reason = models.TextField(blank=True)
    # What the workspace step removed (agent files, links out of the checkout) and which
    # changed files were not reviewed, with reasons.
    sanitised = models.JSONField(default=list, blank=True)
    reviewed = models.JSONField(default=list, blank=True, help_text="The changed files reviewed.")
    filtered = models.JSONField(default=list, blank=True)
    omitted = models.JSONField(
        default=list, blank=True, help_text="What of the reviewed files the engine was not shown."
    )
    # Set when only the changes since an earlier complete review were reviewed.
    incremental_since = models.CharField(max_length=40, blank=True)
    secondaries = models.JSONField(
        default=list,
        blank=True,
        help_text="The secondary repositories beside the checkout: each mounted, or why not.",
    )
    # A run of a review pass has its PassLink (`run.pass_link`, reviews/models/passes.py).
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # A run dispatched to the `actions` runner has its ActionsDispatch (`run.dispatch`,
    # reviews/models/actions.py): the workflow run, the job served to it.
    # The engine's result, whichever runner produced it (the actions runner posts it,
    # once): a retried attempt publishes it instead of running (and paying for) the
    # engine again, and a later run with the same job reuses it.
    runner_result = models.JSONField(
        null=True, blank=True, help_text="The ReviewResult the engine returned, kept."
    )
    job_digest = models.CharField(
        max_length=64, blank=True, db_index=True, help_text="What identifies the engine's job."
    )
    result_received_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            # Repeated triggers coalesce: at most one waiting run per PR and reviewer (and,
            # below, one running per PR). A second waiting run cannot slip in by a race.
            models.UniqueConstraint(
                fields=["pull_request", "reviewer"],
                condition=models.Q(status="queued"),
                name="run_one_queued_per_reviewer",
            ),
            # At most one running run per pull request: two claims racing for runs of the
            # same PR cannot both win, whatever the isolation level.
            models.UniqueConstraint(
                fields=["pull_request"],
                condition=models.Q(status="running"),
                name="run_one_running_per_pull_request",
            ),
        ]
        indexes = [
            models.Index(fields=["status", "created_at"], name="run_status_created"),
            # the reaper: expired leases and due retries
            models.Index(fields=["status", "lease_expires_at"], name="run_status_lease"),
            models.Index(fields=["status", "next_attempt_at"], name="run_status_due"),
            # The dashboard's pages, each index named for the page it serves
            # (benchmarks/dashboard.py times them at 100,000 runs): runs of the last
            # 24 h / 7 d by outcome, failures by stage, a pull request's runs.
            models.Index(fields=["created_at", "status"], name="overview_runs_recent"),
            models.Index(
                fields=["stage", "-finished_at"],
                condition=models.Q(status="failed"),
                name="diagnostics_failures",
            ),
            models.Index(fields=["pull_request", "-created_at"], name="pr_page_runs"),
            # /metrics: the run duration histogram, read from the index alone (PostgreSQL)
            models.Index(
                fields=["status"],
                include=["started_at", "finished_at"],
                name="metrics_run_durations",
            ),
        ]

    def __str__(self) -> str:
        return f"run {self.pk} of {self.pull_request} by {self.reviewer}"

    @property
    def check_name(self) -> str:
        return f"Tasuku · {self.reviewer.slug}"


class AttemptOutcome(models.TextChoices):
    RUNNING = "running", "running"
    SUCCEEDED = "succeeded", "succeeded"
    FAILED = "failed", "failed"  # an error; `error` and `stage` say which
    LOST = "lost", "lost"  # the worker stopped heartbeating (killed, crashed, partitioned)
    CANCELLED = "cancelled", "cancelled"
    SKIPPED = "skipped", "skipped"
    # GitHub rate-limited it: put off until the limit lifts, not counted as a try.
    DEFERRED = "deferred", "deferred"
    # Its worker was told to stop (SIGTERM, SIGINT) and handed the run back: not a try.
    INTERRUPTED = "interrupted", "interrupted"


class RunAttempt(models.Model):
    """One try at a run. Later tries add rows; none is ever overwritten by another."""

    run = models.ForeignKey(ReviewRun, on_delete=models.CASCADE, related_name="attempt_rows")
    number = models.PositiveSmallIntegerField()
    worker = models.CharField(max_length=200)
    started_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True, blank=True)
    outcome = models.CharField(
        max_length=16, choices=AttemptOutcome.choices, default=AttemptOutcome.RUNNING
    )
    stage = models.CharField(max_length=16, choices=Stage.choices, blank=True)
    error = models.TextField(blank=True)
    error_code = models.CharField(max_length=40, blank=True, default="")  # tasuku/errors.py
    # Each stage it went through: [{"stage", "start", "seconds"}], `start` in seconds
    # after `started_at`, `seconds` null while under way (reviews/queue/timeline.py).
    stage_times = models.JSONField(default=list, blank=True)

    class Meta:
        ordering = ["run", "number"]
        constraints = [models.UniqueConstraint(fields=["run", "number"], name="attempt_unique")]
        indexes = [
            # /metrics: the stage histogram reads the attempts that ended in its window,
            models.Index(fields=["finished_at"], name="metrics_stage_times"),
            # and counts the deferred ones: a few among a million attempts.
            models.Index(
                fields=["outcome"],
                condition=models.Q(outcome="deferred"),
                name="metrics_deferred_attempts",
            ),
        ]

    def __str__(self) -> str:
        return f"attempt {self.number} of run {self.run_id}"


class BudgetAlert(models.Model):
    """An installation's model spend reached 80 % of its monthly cap (once a month)."""

    installation = models.ForeignKey(
        "repos.Installation", on_delete=models.CASCADE, related_name="budget_alerts"
    )
    month = models.DateField(help_text="The first day of the month.")
    spent_usd = models.DecimalField(max_digits=12, decimal_places=4)
    cap_usd = models.DecimalField(max_digits=10, decimal_places=2)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-month"]
        constraints = [
            models.UniqueConstraint(
                fields=["installation", "month"], name="budget_alert_once_a_month"
            )
        ]

    def __str__(self) -> str:
        return f"{self.installation} at {self.spent_usd}/{self.cap_usd} in {self.month:%Y-%m}"


class WorkerHeartbeat(models.Model):
    """A worker process's sign of life: a thread in each worker process writes
    it every TASUKU_RUN_HEARTBEAT_SECONDS, busy or idle (reviews/queue/workers.py)."""

    name = models.CharField(max_length=200, unique=True, help_text="host:pid, as on attempts.")
    started_at = models.DateTimeField()
    beat_at = models.DateTimeField()
    tasks_done = models.PositiveIntegerField(default=0)
    task = models.CharField(max_length=200, blank=True, help_text="What it is running now.")
    task_started_at = models.DateTimeField(null=True, blank=True)
    stopped_at = models.DateTimeField(
        null=True, blank=True, help_text="When it stopped cleanly (a killed one never says)."
    )

    class Meta:
        ordering = ["name"]
        indexes = [models.Index(fields=["beat_at"], name="overview_worker_beats")]

    def __str__(self) -> str:
        return f"worker {self.name}"


class ReaperTurn(models.Model):
    """Whose turn it is to reap. Every worker process runs a reaper thread
    (reviews/queue/reaper.py); the one whose conditional update moves `due_at` on sweeps, the
    others wait until it is due again."""

    name = models.CharField(max_length=100, unique=True)
    due_at = models.DateTimeField(help_text="When the next sweep is due.")
    holder = models.CharField(
        max_length=200, blank=True, help_text="The worker (host:pid) that last took the turn."
    )
    ran_at = models.DateTimeField(null=True, blank=True)
    took_ms = models.PositiveIntegerField(default=0)
    result = models.JSONField(default=dict, blank=True)

    def __str__(self) -> str:
        return f"{self.name}: due {self.due_at:%H:%M:%S}"
