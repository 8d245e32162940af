"""GitHub events that matter to review passes: comments and reviews by people on a
task's pull requests (feedback for the author) and checks completing on their heads.
Each handler records what concerns a task; the other handlers of the same event (comment
commands, replies, check re-runs) run beside it (webhooks/routing.py)."""

from __future__ import annotations

from django.utils.translation import ngettext

from repos import github
from repos.github import GitHubError
from repos.models import Repository
from reviews.passes.feedback import comment_record
from reviews.passes.flow import checks_changed
from webhooks import payloads
from webhooks.routing import Outcome


def _repository(payload: payloads.RepositoryEvent) -> Repository | None:
    repo_id = payload.repository.id
    return Repository.objects.filter(github_id=repo_id).first() if repo_id else None


def _tasuku_logins() -> set[str]:
    try:
        return {f"{github.gateway().app_slug()}[bot]"}
    except GitHubError:  # unconfigured, a key that does not load, GitHub unreachable: no
        # bot of ours to leave out
        return set()


def _recorded(recorded: int, what: str) -> Outcome:
    if not recorded:
        return Outcome.ignore(f"no task waits on this {what}")
    tasks = ngettext("%(count)d task", "%(count)d tasks", recorded) % {"count": recorded}
    return Outcome(f"{what} recorded for {tasks}")


def _comment_recorded(
    payload: payloads.IssueCommentEvent | payloads.PullRequestReviewCommentEvent,
    number: int | None,
    kind: str,
) -> int:
    """Record a newly created comment on pull request `number` for the tasks it concerns."""
    repository = _repository(payload)
    if payload.action != "created" or not number or repository is None:
        return 0
    return comment_record(
        repository=repository,
        number=number,
        kind=kind,
        comment=payload.comment,
        tasuku_logins=_tasuku_logins(),
    )


def issue_comment_event(payload: payloads.IssueCommentEvent, *, delivery_id: int) -> Outcome:
    number = payload.issue.number if payload.issue.is_pull_request else None
    return _recorded(_comment_recorded(payload, number, "issue_comment"), "comment")


def review_comment_event(
    payload: payloads.PullRequestReviewCommentEvent, *, delivery_id: int
) -> Outcome:
    number = payload.pull_request.number
    return _recorded(_comment_recorded(payload, number, "review_comment"), "inline comment")


def pull_request_review_event(
    payload: payloads.PullRequestReviewEvent, *, delivery_id: int
) -> Outcome:
    """A review submitted by someone: its body is feedback (its inline comments arrive
    as `pull_request_review_comment` events of their own)."""
    review = payload.review
    if payload.action != "submitted" or not (review.body or "").strip():
        return Outcome.ignore("a review without a body needs no action")
    number = payload.pull_request.number
    repository = _repository(payload)
    if repository is None or not number:
        return Outcome.ignore("not a repository Tasuku knows")
    recorded = comment_record(
        repository=repository,
        number=number,
        kind="review",
        comment=review,
        tasuku_logins=_tasuku_logins(),
    )
    if not recorded:
        return Outcome.ignore("reviews by others do not change what Tasuku reviews")
    return _recorded(recorded, "review")


def check_run_event(payload: payloads.CheckRunEvent, *, delivery_id: int) -> Outcome:
    if payload.action != "completed":
        return Outcome.ignore(f"check_run.{payload.action} needs no action")
    check = payload.check_run
    return _checks(payload, check.head_sha, f"check run {check.name!r}")


def check_suite_event(payload: payloads.CheckSuiteEvent, *, delivery_id: int) -> Outcome:
    if payload.action != "completed":
        return Outcome.ignore(f"check_suite.{payload.action} needs no action")
    return _checks(payload, payload.check_suite.head_sha, "check suite")


def status_event(payload: payloads.StatusEvent, *, delivery_id: int) -> Outcome:
    return _checks(payload, payload.sha, f"status {payload.context!r}")


def _checks(payload: payloads.RepositoryEvent, head_sha: str, what: str) -> Outcome:
    repository = _repository(payload)
    if repository is None or not head_sha:
        return Outcome.ignore("not a repository Tasuku knows")
    count = checks_changed(repository, head_sha)
    if not count:
        return Outcome.ignore(f"{what} completed on a head no task waits on")
    tasks = ngettext("%(count)d task", "%(count)d tasks", count) % {"count": count}
    return Outcome(f"{what} completed: {tasks} re-evaluated")
