"""What a review found and what became of it: the review, its findings, dismissals,
replies on Tasuku's threads, notices and the findings' outcomes."""

from __future__ import annotations

from django.db import models

from repos.models import Repository, Reviewer
from reviews.models.runs import PullRequest, ReviewRun


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
    rules = models.CharField(
        max_length=100,
        blank=True,
        help_text="What decided the findings (the static engine's rules and checkers, as a "
        "digest): a finding the next review does not raise under other rules was not "
        "verified fixed.",
    )
    inspected_areas = models.JSONField(default=list)
    important_files = models.JSONField(default=list)
    validation = models.TextField(blank=True)
    context_sources = models.JSONField(default=list)
    confidence = models.FloatField(default=0)
    limitations = models.JSONField(default=list)
    # The coverage ledger (reviews/scope/coverage.py): every file the change touches,
    # reviewed (by what), excluded (by which rule) or not reviewed (why).
    coverage = models.JSONField(default=list, blank=True)
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
    walkthrough = models.TextField(
        blank=True, help_text="What the change does, in the model reviewer's words (untrusted)."
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
    narrowed = models.CharField(
        max_length=200, blank=True, help_text="How the validation gate narrowed its lines."
    )
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
    # Open, though a suppression comment the pull request added would have silenced it:
    # which one, in words (its words in backticks, and "on line 8").
    suppressed_in_pr = models.CharField(max_length=300, blank=True)
    published = models.BooleanField(
        default=False, help_text="Chosen for an inline comment (within the comment limit)."
    )
    # Its suggestion is a ```suggestion block GitHub applies with one click (whole lines
    # of one hunk on the new side, as the gate checked): what a fixes pull request takes.
    suggestion_applies = models.BooleanField(default=False)
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


class Dismissal(models.Model):
    """Someone who may decide about the code (write access, or the author where the
    policy allows) silenced a finding by an explicit act: `@<app> dismiss <reason>` in its
    thread, or resolving its thread while the problem was still there. Its fingerprint
    is never posted again on that pull request."""

    class How(models.TextChoices):
        COMMAND = "command", "dismiss command"
        RESOLVED = "resolved", "resolved the thread"
        # The model reviewer conceded to their reply (reviews/conversation/thinking.py); only the
        # reply of someone who may dismiss makes that a dismissal.
        CONCEDED = "conceded", "the reviewer conceded to their reply"

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
    # A model reviewer's reply job (reviews/conversation/thinking.py), asked once: its decision
    # (concede | explain) and text, what it cost, or why it gave no answer (the thread
    # then got the canned answer). Kept so a retried post does not ask the model again.
    decision = models.CharField(max_length=16, blank=True)
    model_answer = models.TextField(blank=True)
    model_error = models.TextField(blank=True, help_text="Why the model gave no answer.")
    model = models.CharField(max_length=100, blank=True)
    input_tokens = models.PositiveIntegerField(default=0)
    output_tokens = models.PositiveIntegerField(default=0)
    cost_usd = models.DecimalField(max_digits=10, decimal_places=4, default=0)
    steps = models.PositiveSmallIntegerField(default=0)
    asked_at = models.DateTimeField(null=True, blank=True, help_text="When the model was asked.")
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


class CommandComment(models.Model):
    """A comment whose command Tasuku acted on, and the delivery that did: a command is
    acted on once per comment, so a signed delivery captured and replayed under a new
    delivery id starts nothing (a retry of the same delivery still may)."""

    repository = models.ForeignKey(Repository, on_delete=models.CASCADE, related_name="+")
    comment_id = models.BigIntegerField()
    delivery_id = models.BigIntegerField(null=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["repository", "comment_id"], name="command_once")
        ]

    def __str__(self) -> str:
        return f"comment {self.comment_id} on {self.repository}"


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


class MemoryFold(models.Model):
    """One fold of what was learned into a repository's memory (reviews/memory/folds.py): after
    a review, or when a pull request closed. Its cost counts against the installation's
    monthly budget like a review's.

    The row is written when the fold is asked for and is its work (a durable queue,
    tasuku/durable.py: `reviews.memory.folds.FOLDS`): a lost doorbell is rung again by the
    sweeper, a fold whose worker died is taken over."""

    class Status(models.TextChoices):
        QUEUED = "queued"
        FOLDING = "folding"
        DONE = "done"
        FAILED = "failed"

    repository = models.ForeignKey(Repository, on_delete=models.CASCADE, related_name="+")
    review = models.ForeignKey(
        Review, null=True, blank=True, on_delete=models.SET_NULL, related_name="memory_folds"
    )
    pull_request = models.ForeignKey(
        PullRequest, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    model = models.CharField(max_length=100, blank=True)
    input_tokens = models.PositiveIntegerField(default=0)
    output_tokens = models.PositiveIntegerField(default=0)
    cost_usd = models.DecimalField(max_digits=10, decimal_places=4, default=0)
    changed = models.BooleanField(default=False)  # the memory was rewritten
    note = models.TextField(blank=True)  # why it was not, when it was not
    created_at = models.DateTimeField(auto_now_add=True)
    # The queue's columns (tasuku/durable.py); rows from before the queue are done.
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED)
    attempts = models.PositiveSmallIntegerField(default=0)
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    leased_until = models.DateTimeField(null=True, blank=True)
    rung_at = models.DateTimeField(null=True, blank=True)
    error = models.TextField(blank=True)  # why an attempt failed

    class Meta:
        indexes = [
            models.Index(fields=["repository", "created_at"]),
            models.Index(fields=["status", "next_attempt_at"], name="memoryfold_due"),
        ]

    def __str__(self) -> str:
        return f"memory fold of {self.repository_id} by {self.model or 'the tally'}"
