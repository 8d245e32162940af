"""The pull request's own tests, run after a review when the repository opts in
(reviews/pr_tests/suite.py): one row per pull request and head, a durable queue row."""

from __future__ import annotations

from django.db import models

from reviews.models.runs import PullRequest, ReviewRun


class TestsStatus(models.TextChoices):
    __test__ = False  # not a pytest test class, whatever its name

    QUEUED = "queued", "queued"
    RUNNING = "running", "running"  # a worker holds it until `leased_until`
    PASSED = "passed", "passed"
    FAILED = "failed", "failed"  # the tests ran and failed
    TIMED_OUT = "timed_out", "timed out"
    REFUSED = "refused", "refused"  # not run: the runner, or no command
    ERRORED = "errored", "errored"  # not run to the end: the sandbox or GitHub failed
    SUPERSEDED = "superseded", "superseded"  # a newer head came first


TESTS_FINAL_STATES = (
    TestsStatus.PASSED,
    TestsStatus.FAILED,
    TestsStatus.TIMED_OUT,
    TestsStatus.REFUSED,
    TestsStatus.ERRORED,
    TestsStatus.SUPERSEDED,
)


class SandboxTestRun(models.Model):
    """One run of a pull request's own tests at one head.

    A durable queue row (tasuku/durable.py, `reviews.pr_tests.suite.TESTS`): asked for by
    the first review of the head that completes, taken by one worker at a time, handed
    to another when its worker dies. Its result is a check run of its own and a line in
    the review's summary, posted on `head_sha` only."""

    __test__ = False

    pull_request = models.ForeignKey(
        PullRequest, on_delete=models.CASCADE, related_name="sandbox_tests"
    )
    head_sha = models.CharField(max_length=40)
    base_sha = models.CharField(max_length=40, blank=True)
    # The review run that asked for it: whose review's summary shows the result.
    run = models.ForeignKey(
        ReviewRun, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    config = models.JSONField(default=dict, help_text="The tests' configuration when asked.")
    status = models.CharField(max_length=16, choices=TestsStatus.choices, default="queued")
    attempts = models.PositiveSmallIntegerField(default=0)
    deferrals = models.PositiveSmallIntegerField(default=0)
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    leased_until = models.DateTimeField(null=True, blank=True)
    rung_at = models.DateTimeField(null=True, blank=True)
    # The outcome found, kept before it is reported: an attempt that dies reporting
    # leaves it for the next, which reports it without running the tests again.
    outcome = models.CharField(max_length=16, choices=TestsStatus.choices, blank=True)
    command = models.TextField(blank=True, help_text="The command run.")
    command_from = models.CharField(max_length=40, blank=True, help_text="Where it came from.")
    exit_code = models.IntegerField(null=True, blank=True)
    seconds = models.FloatField(null=True, blank=True)
    failed_tests = models.JSONField(default=list, blank=True)
    output = models.TextField(blank=True, help_text="The end of the tests' output.")
    reason = models.TextField(blank=True, help_text="Why it ended as it did.")
    check_run_id = models.BigIntegerField(null=True, blank=True)
    check_conclusion = models.CharField(max_length=20, blank=True)
    reported = models.BooleanField(default=False, help_text="Its result is on GitHub.")
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["pull_request", "head_sha"], name="sandbox_tests_one_per_head"
            )
        ]
        indexes = [models.Index(fields=["status", "next_attempt_at"])]

    def __str__(self) -> str:
        return f"tests of {self.pull_request} at {self.head_sha[:7]}"
