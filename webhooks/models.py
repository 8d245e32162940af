"""A GitHub webhook delivery, stored the moment it is verified."""

from __future__ import annotations

import zlib

from django.db import models


class DeliveryStatus(models.TextChoices):
    RECEIVED = "received", "received"  # stored; waiting for a worker
    PROCESSING = "processing", "processing"  # a worker holds it until `locked_until`
    RETRYING = "retrying", "retrying"  # an attempt failed; due again at `next_attempt_at`
    PROCESSED = "processed", "processed"
    IGNORED = "ignored", "ignored"
    FAILED = "failed", "failed"  # out of attempts; retried only by an operator


DELIVERY_FINAL_STATES = (DeliveryStatus.PROCESSED, DeliveryStatus.IGNORED, DeliveryStatus.FAILED)
DELIVERY_DUE_STATES = (DeliveryStatus.RECEIVED, DeliveryStatus.RETRYING)


class WebhookDelivery(models.Model):
    # GitHub reuses the delivery GUID for every hook subscribed to an event, and sends the
    # same GUID again on a redelivery, so the pair (hook id, GUID) names one delivery.
    hook_id = models.CharField(max_length=32, blank=True)
    delivery_id = models.CharField(max_length=64)
    event = models.CharField(max_length=64)
    action = models.CharField(max_length=64, blank=True)
    installation_id = models.BigIntegerField(null=True, blank=True)
    repository_full_name = models.CharField(max_length=200, blank=True)
    pr_number = models.PositiveIntegerField(null=True, blank=True)
    payload = models.JSONField()
    # The request body exactly as GitHub signed it (zlib-compressed: `raw_body`), and the
    # signature it came with: `payload` is parsed, and PostgreSQL's jsonb keeps neither
    # the bytes nor their order.
    body = models.BinaryField(default=b"", editable=False)
    signature = models.CharField(max_length=80, blank=True, editable=False)
    received_at = models.DateTimeField()

    status = models.CharField(
        max_length=16, choices=DeliveryStatus.choices, default=DeliveryStatus.RECEIVED
    )
    attempts = models.PositiveSmallIntegerField(default=0)
    # Attempts that met a GitHub rate limit and were put off until it lifted (not failures).
    deferrals = models.PositiveSmallIntegerField(default=0)
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    locked_until = models.DateTimeField(null=True, blank=True)
    rung_at = models.DateTimeField(null=True, blank=True, help_text="Last doorbell rung for it.")
    last_error = models.TextField(blank=True)
    # What processing decided, in words: "admitted: 1 run queued", "skipped: draft pull
    # request", "ignored: check_suite events are not used" ...
    outcome = models.TextField(blank=True)
    # For pull request events that reached admission: "admitted" or "skipped".
    decision = models.CharField(max_length=16, blank=True)
    processed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-received_at", "-id"]
        verbose_name_plural = "webhook deliveries"
        constraints = [
            models.UniqueConstraint(fields=["hook_id", "delivery_id"], name="delivery_unique")
        ]
        indexes = [
            # the sweeper and the status page look for due, stuck and failed deliveries
            models.Index(fields=["status", "next_attempt_at"], name="delivery_status_due"),
            # "why did PR owner/name#n not get reviewed?"
            models.Index(fields=["repository_full_name", "pr_number"], name="delivery_repo_pr"),
            models.Index(fields=["received_at"], name="delivery_received"),
            # the status page filtered by status, newest first
            models.Index(fields=["status", "-received_at"], name="status_page_deliveries"),
            # workflow diagnostics: admission decisions, newest first
            models.Index(
                fields=["-received_at"],
                condition=~models.Q(decision=""),
                name="diagnostics_admission",
            ),
        ]

    def __str__(self) -> str:
        label = f"{self.event}.{self.action}" if self.action else self.event
        return f"{label} {self.delivery_id}"

    @property
    def raw_body(self) -> bytes:
        """The body exactly as received (empty for a row stored before it was kept)."""
        return zlib.decompress(bytes(self.body)) if self.body else b""

    @property
    def final(self) -> bool:
        return self.status in DELIVERY_FINAL_STATES


class Redelivery(models.Model):
    """A delivery GitHub could not make to Tasuku (Tasuku was down, or answered an error)
    and that Tasuku asked GitHub to make again (repos/deliveries.py)."""

    guid = models.CharField(max_length=64, unique=True, help_text="X-GitHub-Delivery.")
    github_delivery_id = models.BigIntegerField(help_text="The attempt asked to be redone.")
    event = models.CharField(max_length=64, blank=True)
    action = models.CharField(max_length=64, blank=True)
    failed_status = models.CharField(
        max_length=200, blank=True, help_text="What GitHub recorded of the failed attempt."
    )
    asks = models.PositiveSmallIntegerField(default=0)
    asked_at = models.DateTimeField(null=True, blank=True)
    error = models.TextField(blank=True, help_text="Why asking failed, if it did.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-asked_at", "-id"]

    def __str__(self) -> str:
        return f"redelivery of {self.guid} ({self.event})"
