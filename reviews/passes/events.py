"""GitHub events that matter to review passes: comments and reviews by people on a
task's pull requests (feedback for the author) and checks completing on their heads.
Each handler records what concerns a task; the other handlers of the same event (comment
commands, replies, check re-runs) run beside it (webhooks/routing.py)."""

from __future__ import annotations

from typing import Any

from django.utils.translation import ngettext

from repos import github
from repos.models import Repository
from reviews.passes.feedback import comment_record
from reviews.passes.flow import checks_changed
from webhooks.routing import Outcome


def _repository(payload: dict[str, Any]) -> Repository | None:
    repo_id = (payload.get("repository") or {}).get("id")
    return Repository.objects.filter(github_id=repo_id).first() if repo_id else None


def _tasuku_logins() -> set[str]:
    try:
        return {f"{github.gateway().app_slug()}[bot]"}
    except Exception:  # noqa: BLE001 (unconfigured: no bot of ours to leave out)
        return set()


def _recorded(recorded: int, what: str) -> Outcome:
    if not recorded:
        return Outcome.ignore(f"no task waits on this {what}")
    tasks = ngettext("%(count)d task", "%(count)d tasks", recorded) % {"count": recorded}
    return Outcome(f"{what} recorded for {tasks}")


def _comment_recorded(payload: dict[str, Any], number: Any, kind: str) -> int:
    """Record a newly created comment on pull request `number` for the tasks it concerns."""
    repository = _repository(payload)
    if payload.get("action") != "created" or not number or repository is None:
        return 0
    return comment_record(
        repository=repository, number=int(number), kind=kind,
        comment=payload.get("comment") or {}, tasuku_logins=_tasuku_logins(),
    )  # fmt: skip


def issue_comment_event(payload: dict[str, Any], *, delivery_id: int) -> Outcome:
    issue = payload.get("issue") or {}
    number = issue.get("number") if issue.get("pull_request") else None
    return _recorded(_comment_recorded(payload, number, "issue_comment"), "comment")


def review_comment_event(payload: dict[str, Any], *, delivery_id: int) -> Outcome:
    number = (payload.get("pull_request") or {}).get("number")
    return _recorded(_comment_recorded(payload, number, "review_comment"), "inline comment")


def pull_request_review_event(payload: dict[str, Any], *, delivery_id: int) -> Outcome:
    """A review submitted by someone: its body is feedback (its inline comments arrive
    as `pull_request_review_comment` events of their own)."""
    review = payload.get("review") or {}
    if payload.get("action") != "submitted" or not (review.get("body") or "").strip():
        return Outcome.ignore("a review without a body needs no action")
    pull = payload.get("pull_request") or {}
    repository = _repository(payload)
    if repository is None or not pull.get("number"):
        return Outcome.ignore("not a repository Tasuku knows")
    recorded = comment_record(
        repository=repository, number=int(pull["number"]), kind="review",
        comment=review, tasuku_logins=_tasuku_logins(),
    )  # fmt: skip
    if not recorded:
        return Outcome.ignore("reviews by others do not change what Tasuku reviews")
    return _recorded(recorded, "review")


def check_run_event(payload: dict[str, Any], *, delivery_id: int) -> Outcome:
    if payload.get("action") != "completed":
        return Outcome.ignore(f"check_run.{payload.get('action')} needs no action")
    check = payload.get("check_run") or {}
    return _checks(payload, check.get("head_sha") or "", f"check run {check.get('name', '')!r}")


def check_suite_event(payload: dict[str, Any], *, delivery_id: int) -> Outcome:
    if payload.get("action") != "completed":
        return Outcome.ignore(f"check_suite.{payload.get('action')} needs no action")
    suite = payload.get("check_suite") or {}
    return _checks(payload, suite.get("head_sha") or "", "check suite")


def status_event(payload: dict[str, Any], *, delivery_id: int) -> Outcome:
    return _checks(payload, payload.get("sha") or "", f"status {payload.get('context', '')!r}")


def _checks(payload: dict[str, Any], head_sha: str, what: str) -> Outcome:
    repository = _repository(payload)
    if repository is None or not head_sha:
        return Outcome.ignore("not a repository Tasuku knows")
    count = checks_changed(repository, head_sha)
    if not count:
        return Outcome.ignore(f"{what} completed on a head no task waits on")
    tasks = ngettext("%(count)d task", "%(count)d tasks", count) % {"count": count}
    return Outcome(f"{what} completed: {tasks} re-evaluated")
