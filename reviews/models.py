"""Pull requests and their review runs. The runs table is the queue."""

from __future__ import annotations

from django.db import models

from repos.models import Repository, Reviewer
from repos.policy import Trigger


class PullRequest(models.Model):
    """What Tasuku last learnt of a pull request (from webhooks or the API)."""

    repository = models.ForeignKey(
        Repository, on_delete=models.CASCADE, related_name="pull_requests"
    )
    number = models.PositiveIntegerField()
    github_id = models.BigIntegerField(null=True, blank=True)
    title = models.CharField(max_length=1024, blank=True)
    author_login = models.CharField(max_length=100, blank=True)
    author_type = models.CharField(max_length=20, blank=True)
    state = models.CharField(max_length=10, default="open")
    draft = models.BooleanField(default=False)
    merged = models.BooleanField(default=False)
    head_sha = models.CharField(max_length=40, blank=True)
    head_ref = models.CharField(max_length=255, blank=True)
    base_sha = models.CharField(max_length=40, blank=True)
    base_ref = models.CharField(max_length=255, blank=True)
    html_url = models.URLField(max_length=500, blank=True)
    changed_files = models.PositiveIntegerField(
        null=True, blank=True, help_text="As GitHub last counted them (admission's file limit)."
    )
    updated_at = models.DateTimeField(auto_now=True)

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
    # waits for the runner's result (reviews/actions.py).
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
    status = models.CharField(max_length=16, choices=RunStatus.choices, default=RunStatus.QUEUED)
    stage = models.CharField(max_length=16, choices=Stage.choices, blank=True)
    # Why the run is skipped, cancelled or failed, in words a developer understands.
    reason = models.TextField(blank=True)
    config = models.JSONField(default=dict, help_text="The effective configuration given to it.")
    check_run_id = models.BigIntegerField(null=True, blank=True)
    # What Tasuku last told GitHub the check concluded, as sent: what the pull request shows.
    check_conclusion = models.CharField(max_length=20, blank=True)
    check_title = models.CharField(max_length=255, blank=True)
    # The check run's final state waits here until GitHub accepts it (reviews/conclusions.py):
    # the summary to send, when it is due again (empty once sent), tries and the last error.
    check_summary = models.TextField(blank=True)
    check_due_at = models.DateTimeField(null=True, blank=True, db_index=True)
    check_sends = models.PositiveSmallIntegerField(default=0)
    check_error = models.TextField(blank=True)
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
    review_pass = models.ForeignKey(
        "reviews.ReviewPass", null=True, blank=True, on_delete=models.SET_NULL, related_name="runs"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # The `actions` runner: the workflow run Tasuku dispatched, the job it serves to that
    # run alone, and the result it posted back (accepted once).
    actions_run_id = models.BigIntegerField(null=True, blank=True, unique=True)
    actions_run_attempt = models.PositiveSmallIntegerField(null=True, blank=True)
    actions_run_url = models.URLField(max_length=500, blank=True)
    actions_workflow_ref = models.CharField(max_length=500, blank=True)
    dispatched_at = models.DateTimeField(null=True, blank=True)
    job = models.JSONField(null=True, blank=True, help_text="The ReviewJob served to the runner.")
    job_fetched_at = models.DateTimeField(null=True, blank=True)
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

    class Meta:
        ordering = ["run", "number"]
        constraints = [models.UniqueConstraint(fields=["run", "number"], name="attempt_unique")]

    def __str__(self) -> str:
        return f"attempt {self.number} of run {self.run_id}"


class ReviewState(models.TextChoices):
    COMPLETE = "complete", "complete"
    INCOMPLETE = "incomplete", "incomplete"  # budget or step ceiling: never an incremental base
    # Triaged trivial, the engine not run: its earlier findings carried, but it looked at
    # nothing, so it is never an incremental base (the next review covers its changes).
    TRIAGED = "triaged", "triaged, not reviewed in depth"


class Review(models.Model):
    """What one run concluded: its summary and where it was published."""

    run = models.OneToOneField(ReviewRun, on_delete=models.CASCADE, related_name="review")
    pull_request = models.ForeignKey(PullRequest, on_delete=models.CASCADE, related_name="reviews")
    reviewer = models.ForeignKey(Reviewer, on_delete=models.PROTECT, related_name="reviews")
    base_sha = models.CharField(max_length=40)
    head_sha = models.CharField(max_length=40)
    state = models.CharField(
        max_length=16, choices=ReviewState.choices, default=ReviewState.COMPLETE
    )
    incomplete_reason = models.TextField(blank=True)
    shortfall = models.TextField(
        blank=True, help_text="Why the head was not reviewed in full, when it was not."
    )
    incremental_since = models.CharField(max_length=40, blank=True)
    triage = models.JSONField(default=dict, blank=True)
    guidelines = models.JSONField(default=list, blank=True, help_text="Guideline packs used.")
    engine = models.CharField(max_length=40)
    inspected_areas = models.JSONField(default=list)
    important_files = models.JSONField(default=list)
    validation = models.TextField(blank=True)
    context_sources = models.JSONField(default=list)
    confidence = models.FloatField(default=0)
    limitations = models.JSONField(default=list)
    body = models.TextField(blank=True, help_text="The review body as posted on GitHub.")
    github_review_id = models.BigIntegerField(null=True, blank=True)
    github_review_url = models.URLField(max_length=500, blank=True)
    body_only = models.BooleanField(
        default=False, help_text="GitHub refused the inline anchors; findings are in the body."
    )
    approved = models.BooleanField(default=False, help_text="Posted as an approval.")
    # What happened on GitHub besides the review: replies, resolutions, dismissals, and
    # anything GitHub refused (with its reason).
    notes = models.JSONField(default=list, blank=True)
    input_tokens = models.PositiveIntegerField(default=0)
    output_tokens = models.PositiveIntegerField(default=0)
    cost_usd = models.DecimalField(max_digits=10, decimal_places=4, default=0)
    model = models.CharField(max_length=100, blank=True, help_text="The model that reviewed.")
    steps = models.PositiveIntegerField(default=0, help_text="Model calls (turns).")
    engine_seconds = models.FloatField(default=0, help_text="How long the engine ran.")
    transcript = models.JSONField(
        default=list, blank=True, help_text="What the model did: its text, tool calls, results."
    )
    rulings = models.JSONField(
        default=list, blank=True, help_text="The engine's word on earlier findings: still open?"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    published_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [
            # reviews and cost per day, and this month's spend per installation (the
            # included columns let PostgreSQL answer from the index alone)
            models.Index(
                fields=["created_at"],
                include=["pull_request", "cost_usd"],
                name="overview_reviews_daily",
            ),
            # /metrics: tokens and cost per model
            models.Index(
                fields=["model"],
                include=["input_tokens", "output_tokens", "cost_usd"],
                name="metrics_model_usage",
            ),
        ]

    def __str__(self) -> str:
        return f"review of {self.pull_request} at {self.head_sha[:7]}"


class FindingState(models.TextChoices):
    OPEN = "open", "open"
    SUPPRESSED = "suppressed", "suppressed"
    RESOLVED = "resolved", "resolved"
    OUTDATED = "outdated", "outdated"


class Finding(models.Model):
    """One problem a review raised; kept whether or not it was published."""

    review = models.ForeignKey(Review, on_delete=models.CASCADE, related_name="findings")
    pull_request = models.ForeignKey(PullRequest, on_delete=models.CASCADE, related_name="findings")
    path = models.CharField(max_length=1024)
    side = models.CharField(max_length=5, default="RIGHT")
    start_line = models.PositiveIntegerField()
    end_line = models.PositiveIntegerField()
    original_start_line = models.PositiveIntegerField(null=True, blank=True)
    original_end_line = models.PositiveIntegerField(null=True, blank=True)
    severity = models.CharField(max_length=10)
    category = models.CharField(max_length=64)
    title = models.CharField(max_length=200)
    body = models.TextField(blank=True)
    evidence = models.TextField(blank=True)
    # None: no fix offered; "" is a real suggestion (delete the lines).
    suggestion = models.TextField(null=True, blank=True)  # noqa: DJ001
    confidence = models.FloatField()
    blocking = models.BooleanField(default=False)
    rule = models.CharField(max_length=200, blank=True)
    fingerprint = models.CharField(max_length=64)
    code_digest = models.CharField(
        max_length=16, blank=True, help_text="A digest of the code at its first line."
    )
    state = models.CharField(max_length=16, choices=FindingState.choices, default=FindingState.OPEN)
    suppression_reason = models.TextField(blank=True)
    published = models.BooleanField(
        default=False, help_text="Chosen for an inline comment (within the comment limit)."
    )
    github_comment_id = models.BigIntegerField(null=True, blank=True)
    github_comment_url = models.URLField(max_length=500, blank=True)
    # History across pushes: the head where this problem was first raised, the newer
    # finding that carries it on, and the commit that resolved or outdated it.
    first_seen_sha = models.CharField(max_length=40, blank=True)
    carried_to = models.ForeignKey(
        "self", on_delete=models.SET_NULL, null=True, blank=True, related_name="carried_from"
    )
    resolved_in_sha = models.CharField(max_length=40, blank=True)
    resolution = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["review", "id"]
        indexes = [
            models.Index(fields=["pull_request", "fingerprint"], name="finding_pr_fingerprint"),
            # the run page: earlier findings a run closed
            models.Index(
                fields=["pull_request", "resolved_in_sha"],
                condition=~models.Q(resolved_in_sha=""),
                name="run_page_closed_findings",
            ),
            # the repositories page: problems posted, each counted once per pull request
            models.Index(
                fields=["pull_request", "fingerprint"],
                condition=models.Q(published=True) | models.Q(github_comment_id__isnull=False),
                name="repositories_page_published",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.severity} {self.path}:{self.start_line} {self.title}"


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
    """A worker process's sign of life: a thread in each `qcluster` worker process writes
    it every TASUKU_RUN_HEARTBEAT_SECONDS, busy or idle (reviews/workers.py)."""

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


class Dismissal(models.Model):
    """Someone who may decide about the code (write access, or the author where the
    policy allows) silenced a finding by an explicit act: `@<app> dismiss <reason>` in its
    thread, or resolving its thread while the problem was still there. Its fingerprint
    is never posted again on that pull request."""

    class How(models.TextChoices):
        COMMAND = "command", "dismiss command"
        RESOLVED = "resolved", "resolved the thread"

    pull_request = models.ForeignKey(
        PullRequest, on_delete=models.CASCADE, related_name="dismissals"
    )
    fingerprint = models.CharField(max_length=64)
    login = models.CharField(max_length=100)
    how = models.CharField(max_length=16, choices=How.choices, default=How.COMMAND)
    role = models.CharField(
        max_length=32, blank=True, help_text="What GitHub said they are: admin, write … or author."
    )
    reason = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["pull_request", "fingerprint"], name="dismissal_unique")
        ]

    def __str__(self) -> str:
        return f"{self.fingerprint} dismissed by {self.login} on {self.pull_request}"


class ThreadReply(models.Model):
    """A person's reply on one of Tasuku's threads, and Tasuku's answer to it."""

    class Status(models.TextChoices):
        QUEUED = "queued", "queued"
        ANSWERING = "answering", "answering"  # a worker holds it until `leased_until`
        ANSWERED = "answered", "answered"
        FAILED = "failed", "failed"

    finding = models.ForeignKey(Finding, on_delete=models.CASCADE, related_name="replies")
    github_comment_id = models.BigIntegerField(unique=True, help_text="The person's reply.")
    login = models.CharField(max_length=100)
    body = models.TextField()
    dismissal = models.BooleanField(default=False)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED)
    # A durable queue (tasuku/durable.py): failed tries, tries put off by GitHub's weather,
    # when it is due again, the answering worker's lease, its last doorbell.
    attempts = models.PositiveSmallIntegerField(default=0)
    deferrals = models.PositiveSmallIntegerField(default=0)
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    leased_until = models.DateTimeField(null=True, blank=True)
    rung_at = models.DateTimeField(null=True, blank=True)
    answer = models.TextField(blank=True)
    answer_comment_id = models.BigIntegerField(null=True, blank=True)
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"reply {self.github_comment_id} by {self.login}"


class Notice(models.Model):
    """Something Tasuku says once per pull request and person (a refused command)."""

    pull_request = models.ForeignKey(PullRequest, on_delete=models.CASCADE, related_name="notices")
    kind = models.CharField(max_length=32)
    login = models.CharField(max_length=100)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["pull_request", "kind", "login"], name="notice_once")
        ]

    def __str__(self) -> str:
        return f"{self.kind} to {self.login} on {self.pull_request}"


class FindingOutcome(models.Model):
    """What became of a published finding when its pull request closed."""

    class Fate(models.TextChoices):
        FIXED = "fixed", "fixed"
        DISMISSED = "dismissed", "dismissed"
        OPEN = "open", "left open"

    pull_request = models.ForeignKey(PullRequest, on_delete=models.CASCADE, related_name="outcomes")
    repository = models.ForeignKey(Repository, on_delete=models.CASCADE, related_name="outcomes")
    reviewer = models.ForeignKey(Reviewer, on_delete=models.CASCADE, related_name="outcomes")
    fingerprint = models.CharField(max_length=64)
    category = models.CharField(max_length=64)
    rule = models.CharField(max_length=200, blank=True)
    title = models.CharField(max_length=200)
    severity = models.CharField(max_length=10)
    fate = models.CharField(max_length=16, choices=Fate.choices)
    merged = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["pull_request", "reviewer", "fingerprint"], name="outcome_unique"
            )
        ]
        indexes = [models.Index(fields=["repository", "reviewer", "fate"], name="outcome_figures")]

    def __str__(self) -> str:
        return f"{self.title} on {self.pull_request}: {self.fate}"


# Review passes live in their own module; imported here so Django registers them.
from reviews.passes.models import (  # noqa: E402
    Answer,
    AnswerKind,
    AuthorMessage,
    PassStatus,
    ReviewPass,
    Task,
    TaskComment,
    TaskPullRequest,
    TaskState,
)

__all__ = [
    "Answer",
    "AnswerKind",
    "AuthorMessage",
    "PassStatus",
    "ReviewPass",
    "Task",
    "TaskComment",
    "TaskPullRequest",
    "TaskState",
]
