"""A pull request's one-click fixes proposed as a pull request of Tasuku's (reviews/publication/fixes.py):
one row per pull request, the outbox that keeps the branch and its pull request up to date."""

from __future__ import annotations

from django.db import models

from reviews.models.runs import PullRequest


class FixProposal(models.Model):
    """The fixes pull request of one pull request, for a repository that opted in.

    A durable queue row (tasuku/durable.py): a review asks for it to be brought up to date
    (`version` goes up, the row is due); one sender at a time holds it, reads the open
    findings whose suggestion GitHub would apply with one click, commits them on
    Tasuku's branch (`branch`, never the author's) over the pull request's head, and
    opens or edits the pull request into the head branch — or closes it when nothing is
    left to fix. GitHub's weather defers the row, a refusal fails it with the reason."""

    class Status(models.TextChoices):
        DUE = "due", "due"
        SENDING = "sending", "sending"  # a worker holds it until `leased_until`
        SENT = "sent", "sent"
        FAILED = "failed", "failed"

    pull_request = models.OneToOneField(
        PullRequest, on_delete=models.CASCADE, related_name="fix_proposal"
    )
    branch = models.CharField(max_length=255, help_text="Tasuku's branch: tasuku/fix/pr-<N>.")
    # The review that last asked (its summary links to the pull request of fixes).
    review = models.ForeignKey(
        "reviews.Review", on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    version = models.PositiveIntegerField(default=0)
    sent_version = models.PositiveIntegerField(default=0)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.DUE)
    attempts = models.PositiveSmallIntegerField(default=0)
    deferrals = models.PositiveSmallIntegerField(default=0)
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    leased_until = models.DateTimeField(null=True, blank=True)
    rung_at = models.DateTimeField(null=True, blank=True)
    requested_at = models.DateTimeField(null=True, blank=True)
    # What GitHub has: the head the fixes were made over, the commit on the branch, the
    # pull request (its state: open, closed, "declined" — closed unmerged by someone, not
    # proposed again — or "" before one exists).
    head_sha = models.CharField(max_length=40, blank=True)
    commit_sha = models.CharField(max_length=40, blank=True)
    number = models.PositiveIntegerField(null=True, blank=True)
    url = models.URLField(max_length=500, blank=True)
    state = models.CharField(max_length=10, blank=True)
    # The findings whose fix the commit applies, and those left out, with why:
    # [{"fingerprint", "path", "start_line", "end_line", "title", "why"?}]
    applied = models.JSONField(default=list, blank=True)
    left_out = models.JSONField(default=list, blank=True)
    outcome = models.TextField(blank=True, help_text="What the last send did, in words.")
    error = models.TextField(blank=True, help_text="Why GitHub does not have it (yet).")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"fixes of {self.pull_request}"
