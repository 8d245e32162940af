"""The walkthrough: one comment per pull request that explains the change and how each
reviewer's review of it went (reviews/publication/walkthrough.py), and the outbox that keeps it up
to date on GitHub."""

from __future__ import annotations

from django.db import models

from reviews.models.runs import PullRequest


class Walkthrough(models.Model):
    """A pull request's walkthrough comment: what it should say and whether GitHub has it.

    A durable queue row (tasuku/durable.py): a run asks for the comment to be brought up
    to date (`version` goes up, the row is due); one sender at a time holds it, renders
    the body from the rows as they are then, and edits Tasuku's comment (found by its
    signed marker) or creates it. GitHub's weather defers the row, a refusal fails it
    with the reason — never the review."""

    class Status(models.TextChoices):
        DUE = "due", "due"
        SENDING = "sending", "sending"  # a worker holds it until `leased_until`
        SENT = "sent", "sent"
        FAILED = "failed", "failed"

    pull_request = models.OneToOneField(
        PullRequest, on_delete=models.CASCADE, related_name="walkthrough"
    )
    # What changed in the whole pull request at `change["head_sha"]` (files by status,
    # lines added and removed, what the filters took out, triage's risk areas), written
    # by the run that looked at that head.
    change = models.JSONField(default=dict, blank=True)
    # The run each reviewer's section speaks for: {reviewer id: run id}, the newest.
    runs = models.JSONField(default=dict, blank=True)
    # Raised by every request to bring the comment up to date; the sender records what it
    # sent, so a request made while it sent is sent too.
    version = models.PositiveIntegerField(default=0)
    sent_version = models.PositiveIntegerField(default=0)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.DUE)
    attempts = models.PositiveSmallIntegerField(default=0)
    deferrals = models.PositiveSmallIntegerField(default=0)
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    leased_until = models.DateTimeField(null=True, blank=True)
    rung_at = models.DateTimeField(null=True, blank=True)
    comment_id = models.BigIntegerField(null=True, blank=True)
    comment_url = models.URLField(max_length=500, blank=True)
    body = models.TextField(blank=True, help_text="The comment as last sent to GitHub.")
    # Set before the first create is sent: only then can a comment be on GitHub that
    # `comment_id` does not name, so only then does a sender look for one first.
    create_tried = models.BooleanField(default=False)
    error = models.TextField(blank=True, help_text="Why GitHub does not have it (yet).")
    # When it was last asked for: GitHub's weather defers a send for a day at most from then.
    requested_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"walkthrough of {self.pull_request}"
