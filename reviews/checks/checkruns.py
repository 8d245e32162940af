"""A run's check run on GitHub, and the links it carries.

`run_check_ensure` creates the check run once (keyed by the run's id), whoever asks
first: admission, the pipeline or the conclusions outbox (reviews/checks/conclusions.py). It is
created `in_progress`: the review has begun for GitHub's reader, and the pipeline's start
sends nothing more (docs/performance.md, *Writes at the floor*).
"""

from __future__ import annotations

from django.conf import settings
from django.urls import reverse

from repos import github
from repos.github import CheckRunOutput, RepoRef
from repos.models import Installation
from reviews.models import ReviewRun
from reviews.queue import runs

# The button a concluded check run offers (GitHub's check run `actions`: a label of at
# most 20 characters, a description of 40, an identifier of 20). Pressing it sends
# `check_run.requested_action` with this identifier (reviews/intake/triggers.py).
REREVIEW = "rereview"
REREVIEW_ACTION = {
    "label": "Re-review",
    "description": "Review this commit again",
    "identifier": REREVIEW,
}


def dashboard_url(run: ReviewRun) -> str:
    return settings.TASUKU_BASE_URL + reverse("reviews:run", args=[run.pk])


def details_url(run: ReviewRun) -> str:
    """The check run's Details link: the GitHub Actions run that reviews it, if one
    does, else the run's page on the dashboard."""
    dispatch = getattr(run, "dispatch", None)  # a run dispatched to GitHub Actions
    return (dispatch.actions_run_url if dispatch else "") or dashboard_url(run)


def run_check_ensure(
    run: ReviewRun,
    *,
    created: bool,
    installation: Installation,
    output: CheckRunOutput | None = None,
    conclusion: str | None = None,
) -> int:
    """Make sure the run has its `Tasuku · <reviewer>` check run on GitHub.

    Keyed by the run id (the check run's `external_id`): a run that existed before this
    call may have had its check run created by an attempt that died before recording
    the id, so it is looked up first; a new run skips the lookup.
    """
    if run.check_run_id:
        return run.check_run_id
    repository = run.pull_request.repository
    gateway = github.gateway()
    repo = RepoRef.of(repository, installation)
    found = None
    if not created:
        found = gateway.check_run_find(
            repo, head_sha=run.head_sha, name=run.check_name, external_id=str(run.pk)
        )
    check = found or gateway.check_run_create(
        repo,
        name=run.check_name,
        head_sha=run.head_sha,
        external_id=str(run.pk),
        details_url=dashboard_url(run),
        # Created in progress, not queued: the pipeline's start then has nothing to send
        # (one write fewer per review); a run is taken at once unless the queue is busy.
        status="in_progress",
        conclusion=conclusion,
        output=output,
    )
    shown = "in_progress" if found is None and conclusion is None else ""
    # Only the first writer records the id; a concurrent duplicate attempt keeps it.
    created_with = conclusion and output is not None and not found
    runs.run_check_created(
        run.pk,
        check.id,
        shown=shown,
        conclusion=(conclusion or "") if created_with else "",
        title=output.title if created_with and output is not None else "",
    )
    run.check_status = shown
    run.check_run_id = check.id
    return check.id
