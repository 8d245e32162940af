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
    delivery = models.ForeignKey(
        "webhooks.WebhookDelivery",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="runs",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            # A redelivered or repeated trigger for the same head never makes a second run.
            models.UniqueConstraint(
                fields=["pull_request", "reviewer", "head_sha", "trigger"], name="run_unique"
            )
        ]
        indexes = [models.Index(fields=["status", "created_at"], name="run_status_created")]

    def __str__(self) -> str:
        return f"run {self.pk} of {self.pull_request} by {self.reviewer}"

    @property
    def check_name(self) -> str:
        return f"Tasuku · {self.reviewer.slug}"
