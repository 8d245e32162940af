"""Connector calls, as Tasuku made them: its own record of what a run's engine asked of
the team's systems (the engine's transcript says the same from its side; this one is
written by Tasuku, shown on the run page even when the engine failed)."""

from __future__ import annotations

from django.db import models

from reviews.models.runs import ReviewRun


class ConnectorCall(models.Model):
    class Status(models.TextChoices):
        OK = "ok"
        REFUSED = "refused"  # by Tasuku: invalid input, not allowed, the run ended …
        FAILED = "failed"  # by the system: an error, too slow, too large

    run = models.ForeignKey(ReviewRun, on_delete=models.CASCADE, related_name="connector_calls")
    attempt = models.PositiveIntegerField(default=0)  # 0: the GitHub Actions runner's
    name = models.CharField(max_length=100)
    input = models.CharField(max_length=500, blank=True)  # summarised
    status = models.CharField(max_length=10, choices=Status.choices)
    detail = models.CharField(max_length=1000, blank=True)  # why it was refused or failed
    duration_ms = models.PositiveIntegerField(default=0)
    bytes = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at", "pk"]

    def __str__(self) -> str:
        return f"{self.name} ({self.status}) for run {self.run_id}"
