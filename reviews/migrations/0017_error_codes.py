"""Failures are known by their error's code (tasuku/errors.py), recorded with the failed
run and its attempts. Rows recorded before carry only the error's words: they get their
code once, here, by the rules that read those words until now, so an upgraded install's
diagnostics keep grouping its old failures as they did. A row no rule knows keeps an
empty code (shown as an unknown cause). The rules are a copy: nothing else reads an
error's words any more."""

import re

from django.db import migrations, models

# (stages, pattern, code), first match wins: the specific before the general. An empty
# stages string: any stage.
RULES = (
    ("", r"worker stopped|No heartbeat", "worker-lost"),
    ("", r"did not finish within .* minutes of starting", "run-deadline"),
    ("sandbox", r"may not run workflows|the Actions permission", "actions-permission"),
    ("sandbox", r"no such workflow|workflow_dispatch. trigger|does not declare every input|"
                r"requires an input Tasuku does not send|workflow is disabled",
     "actions-workflow"),
    ("sandbox", r"GitHub Actions run ended .* without posting a result|"
                r"dispatched to GitHub Actions .* no result", "actions-no-result"),
    ("sandbox", r"GitHub Actions runner failed", "actions-runner-failed"),
    ("clone", r"access denied|authentication failed|could not read username|Contents: read",
     "clone-access"),
    ("clone", r"commit is not on GitHub|not our ref|remote ref", "clone-commit-gone"),
    ("clone", r"repository not found", "clone-not-found"),
    ("clone", r"timed out", "clone-timeout"),
    ("", r"rate limit", "github-rate-limit"),
    ("", r"GITHUB_APP_ID|private key|GitHub App is not configured|answered 401",
     "github-credentials"),
    ("publication admission", r"Resource not accessible by integration|answered 403|"
                              r"lack a permission", "github-permission"),
    ("publication", r"answered 422", "github-422"),
    ("admission", r"answered 404|not found, or the App cannot see it", "github-not-found"),
    ("", r"answered 5\d\d|network error|Could not reach|connection", "transient"),
    ("provider", r"refused the API key|API key|HTTP 401|HTTP 403", "provider-key"),
    ("provider", r"does not know the model|HTTP 404", "provider-model"),
    ("provider", r"bill|HTTP 402|credit|quota", "provider-billing"),
    ("provider", r"needs .*none was given", "provider-missing-key"),
    ("sandbox", r"Docker daemon is unreachable|Docker could not", "docker-unreachable"),
    ("sandbox", r"engine image .* is not on the Docker host", "docker-image"),
    ("sandbox", r"ran out of memory|memory or CPU limit", "sandbox-memory"),
    ("sandbox", r"did not finish within|timed out|deadline", "sandbox-timeout"),
    ("sandbox validation", r"not a ReviewResult|wrote more than|output", "engine-output"),
)  # fmt: skip
COMPILED = tuple((tuple(s.split()), re.compile(p, re.IGNORECASE), c) for s, p, c in RULES)
TRACEBACK = "\n\nTraceback (most recent call last):"
BATCH = 1000


def code_for(stage: str, error: str) -> str:
    """The code the rules give this error at this stage; "" when none knows it."""
    error = error or ""
    if TRACEBACK in error:
        return "internal-error"  # only an error without a code of its own had a traceback
    if error == "deadline exceeded":
        return "run-deadline"
    for stages, pattern, code in COMPILED:
        if stages and stage not in stages:
            continue
        if pattern.search(error):
            if code == "transient":  # one cause then, two codes now
                return "provider-unavailable" if stage == "provider" else "github-unavailable"
            return code
    return ""


def _batches(queryset):
    """The rows of `queryset` in batches by primary key: no cursor stays open while a
    batch is written."""
    after = 0
    while True:
        batch = list(queryset.filter(pk__gt=after).order_by("pk")[:BATCH])
        if not batch:
            return
        yield batch
        after = batch[-1].pk


def backfill(apps, schema_editor):
    RunAttempt = apps.get_model("reviews", "RunAttempt")
    ReviewRun = apps.get_model("reviews", "ReviewRun")

    attempts = (
        RunAttempt.objects.filter(outcome__in=("failed", "lost", "deferred"), error_code="")
        .exclude(error="")
        .only("pk", "stage", "error")
    )
    for batch in _batches(attempts):
        for attempt in batch:
            attempt.error_code = code_for(attempt.stage, attempt.error)
        RunAttempt.objects.bulk_update([a for a in batch if a.error_code], ["error_code"])

    # A failed run: by its reason; else by its last attempt that has a code (a bug's
    # reason is its bare message; its attempt's error has the traceback).
    runs = ReviewRun.objects.filter(status="failed", error_code="").only("pk", "stage", "reason")
    for batch in _batches(runs):
        last = dict(
            RunAttempt.objects.filter(run_id__in=[run.pk for run in batch])
            .exclude(error_code="")
            .order_by("run_id", "number")
            .values_list("run_id", "error_code")
        )  # each run's highest attempt number wins
        for run in batch:
            run.error_code = code_for(run.stage, run.reason) or last.get(run.pk, "")
        ReviewRun.objects.bulk_update([r for r in batch if r.error_code], ["error_code"])


class Migration(migrations.Migration):
    dependencies = [("reviews", "0016_answers_tries_reset")]

    operations = [
        migrations.AddField(
            model_name="reviewrun",
            name="error_code",
            field=models.CharField(blank=True, default="", max_length=40),
        ),
        migrations.AddField(
            model_name="runattempt",
            name="error_code",
            field=models.CharField(blank=True, default="", max_length=40),
        ),
        migrations.RunPython(backfill, migrations.RunPython.noop),
    ]
