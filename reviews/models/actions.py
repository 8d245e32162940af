"""The `actions` runner's record of a run it dispatched: the workflow run on GitHub
Actions, the job it serves to that workflow run alone, and when it was fetched. A row
exists only for a run dispatched to Actions (issue 37: the feature owns its columns)."""

from __future__ import annotations

from django.db import models

from reviews.models.runs import ReviewRun


class ActionsDispatch(models.Model):
    run = models.OneToOneField(
        ReviewRun, on_delete=models.CASCADE, primary_key=True, related_name="dispatch"
    )
    actions_run_id = models.BigIntegerField(
        null=True, blank=True, unique=True, help_text="The workflow run, once GitHub named it."
    )
    actions_run_attempt = models.PositiveSmallIntegerField(null=True, blank=True)
    actions_run_url = models.URLField(max_length=500, blank=True)
    actions_workflow_ref = models.CharField(max_length=500, blank=True)
    dispatched_at = models.DateTimeField(null=True, blank=True, db_index=True)
    job = models.JSONField(null=True, blank=True, help_text="The ReviewJob served to the runner.")
    job_fetched_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name = "GitHub Actions dispatch"

    def __str__(self) -> str:
        return f"dispatch of run {self.run_id}"
