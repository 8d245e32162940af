"""Evaluations (`manage.py evaluate`, reviews/evaluation/replay.py): reviewers replayed over a
repository's history, each reviewed head kept as it is done — so a killed evaluation
continues where it stopped — and the grades people give its comments."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class EvaluationKind(models.TextChoices):
    HISTORY = "history", "merged pull requests"
    BUG_FIXES = "bug-fixes", "bug fixes put back"


class EvaluationStatus(models.TextChoices):
    QUEUED = "queued", "queued"  # on the worker queue (a repository Tasuku knows)
    RUNNING = "running", "running"
    DONE = "done", "done"
    STOPPED = "stopped", "stopped early"
    FAILED = "failed", "failed"  # on the worker queue: out of attempts


class Evaluation(models.Model):
    name = models.CharField(max_length=200, unique=True)
    repository_path = models.CharField(max_length=1000)
    kind = models.CharField(max_length=20, choices=EvaluationKind.choices)
    # What was asked: reviewers, count, skip, ref, heads, window, limits — a resumed
    # evaluation must ask the same.
    options = models.JSONField(default=dict)
    status = models.CharField(
        max_length=20, choices=EvaluationStatus.choices, default=EvaluationStatus.RUNNING
    )
    stopped_reason = models.CharField(max_length=500, blank=True)
    # A repository Tasuku knows, evaluated on the worker queue (a clone made with the
    # App's read token); null for a local path (`manage.py evaluate --repo`).
    repository = models.ForeignKey(
        "repos.Repository", null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # On the worker queue, a durable Queue's row (tasuku/durable.py, EVALUATIONS): held
    # under a lease its worker renews as it goes; the reaper's sweep hands it to another
    # worker when its holder is gone, and the new one goes on where it stopped.
    attempts = models.PositiveSmallIntegerField(default=0)
    leased_until = models.DateTimeField(null=True, blank=True)
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    rung_at = models.DateTimeField(null=True, blank=True)
    deferrals = models.PositiveIntegerField(default=0)
    units_total = models.PositiveIntegerField(default=0)  # pull requests, or fixes
    units_done = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return self.name


class EvaluationItem(models.Model):
    """One head one reviewer reviewed (or one fix put back): what the review cost and the
    comments it would have published, each with its outcome."""

    evaluation = models.ForeignKey(Evaluation, on_delete=models.CASCADE, related_name="items")
    reviewer = models.CharField(max_length=100)
    unit = models.CharField(max_length=40)  # the merge commit, or the fix commit
    at = models.PositiveIntegerField(default=0)  # which head of the pull request
    head = models.CharField(max_length=40)
    subject = models.CharField(max_length=300, blank=True)
    failure = models.TextField(blank=True)
    seconds = models.FloatField(default=0)
    input_tokens = models.PositiveIntegerField(default=0)
    output_tokens = models.PositiveIntegerField(default=0)
    cost_usd = models.DecimalField(max_digits=10, decimal_places=4, default=0)
    files = models.PositiveIntegerField(default=0)
    files_checked = models.PositiveIntegerField(default=0)
    # History: [{path, start_line, end_line, rule, severity, blocking, title, outcome,
    # decided_by}]. Bug fixes: {bug_lines, caught, on_the_bug, elsewhere}.
    comments = models.JSONField(default=list)
    bug = models.JSONField(default=dict, blank=True)
    run = models.ForeignKey(
        "reviews.ReviewRun", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["evaluation", "reviewer", "unit", "at"], name="evaluation_item_once"
            )
        ]
        ordering = ["pk"]

    def __str__(self) -> str:
        return f"{self.reviewer} at {self.head[:12]}"


class Grade(models.TextChoices):
    USEFUL = "useful", "useful"
    ACCEPTABLE = "acceptable", "acceptable"
    NOISE = "noise", "noise"


class EvaluationGrade(models.Model):
    """A person's grade of a comment, kept by what the comment is (its repository, head,
    place and rule) so that every evaluation that makes the same comment shows it."""

    repository_path = models.CharField(max_length=1000)
    head = models.CharField(max_length=40)
    path = models.CharField(max_length=1000)
    line = models.PositiveIntegerField()
    rule = models.CharField(max_length=200, blank=True)
    grade = models.CharField(max_length=20, choices=Grade.choices)
    note = models.CharField(max_length=500, blank=True)
    graded_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    graded_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["repository_path", "head", "path", "line", "rule"],
                name="evaluation_grade_once",
            )
        ]

    def __str__(self) -> str:
        return f"{self.path}:{self.line} {self.rule}: {self.grade}"
