"""A run can be stopped while it runs: a recall, a newer head or an operator asks, and the
worker stops at its next step or GitHub call — it posts nothing more, stops the engine,
and concludes the check run `cancelled` with the reason."""

from __future__ import annotations

import threading
import time

import pytest
from django.db import connection

from repos.models import Reviewer
from reviews.engines import boundary as engines
from reviews.models import ReviewRun, RunStatus, Task
from reviews.queue.runs import run_cancel_request
from tests.fakes.models import ANTHROPIC_TEST_KEY, Hang, ToolCall
from tests.gitworld import REPO, SHELL_TRUE_LINE, world_build
from tests.helpers import drain_queue, post_webhook, pull_request_payload

SHELL = {
    "path": "app/payments.py", "start_line": SHELL_TRUE_LINE, "end_line": SHELL_TRUE_LINE,
    "severity": "high", "category": "security", "title": "Order id reaches a shell",
    "body": "An order id like `1; rm -rf /` runs as a shell command.",
    "evidence": "refund('1; rm -rf /') runs rm.", "confidence": 0.95, "blocking": True,
}  # fmt: skip


def _reviewer() -> None:
    Reviewer.objects.update(default_for_new_repositories=False)
    Reviewer.objects.create(
        slug="claude", engine="anthropic", model="claude-sonnet-5-5",
        default_for_new_repositories=True,
    )  # fmt: skip


@pytest.fixture
def claude(settings, fake_anthropic):
    settings.ANTHROPIC_BASE_URL = fake_anthropic.base_url
    settings.ANTHROPIC_API_KEY = ANTHROPIC_TEST_KEY
    return fake_anthropic


def _token_call(call) -> bool:
    """A token minted for a post, or revoked after it: bookkeeping, not a post."""
    return call.path.endswith("/access_tokens") or call.path == "/installation/token"


def _calls_after(fake, mark: int) -> list:
    return [c for c in fake.calls[mark:] if c.method != "GET" and not _token_call(c)]


@pytest.mark.django_db
def test_an_operators_cancel_ends_the_run_cancelled_with_its_check(
    claude, fake_github, client, test_app, operator_client, monkeypatch
):
    _reviewer()
    world = world_build(fake_github)
    claude.script(ToolCall("submit_review", {"findings": [SHELL]}))
    real = engines.engine_run
    marks = {}

    def cancelled_while_reviewing(*args, **kwargs):
        run = ReviewRun.objects.get()
        marks["calls"] = len(fake_github.calls)
        answer = operator_client.post(f"/runs/{run.pk}/cancel")
        assert answer.status_code == 302
        return real(*args, **kwargs)

    monkeypatch.setattr(engines, "engine_run", cancelled_while_reviewing)
    body = pull_request_payload(fake_github, world.repo, world.pull, action="opened")
    assert (
        post_webhook(client, "pull_request", body, secret=test_app.webhook_secret).status_code
        == 202
    )
    drain_queue()
    run = ReviewRun.objects.get()
    assert run.status == RunStatus.CANCELLED and run.reason.startswith("cancelled by ")
    assert fake_github.reviews_of(REPO, 7) == []
    check = fake_github.check_runs_of(REPO)[-1]
    assert check.conclusion == "cancelled"
    assert run.reason in check.output["summary"]
    posted = [c for c in _calls_after(fake_github, marks["calls"]) if "check-runs" not in c.path]
    # Nothing of the review: only the check's conclusion, and the walkthrough (the pull
    # request's own status comment) saying the review was cancelled.
    assert all("Tasuku walkthrough" in (c.body or {}).get("body", "") for c in posted)
    assert all("cancelled" in c.body["body"].lower() for c in posted)


@pytest.mark.django_db
def test_a_push_stops_the_review_of_the_older_head(claude, fake_github, client, test_app,
                                                   monkeypatch):  # fmt: skip
    _reviewer()
    world = world_build(fake_github)
    claude.script(
        ToolCall("submit_review", {"findings": [SHELL]}),
        ToolCall("submit_review", {"findings": [SHELL]}),
    )
    real = engines.engine_run
    pushed = {}

    def pushed_while_reviewing(*args, **kwargs):
        if not pushed:
            before = world.push({"app/more.py": "VALUE = 1\n"})
            pushed["head"] = world.pull.head_sha
            body = pull_request_payload(fake_github, world.repo, world.pull,
                                        action="synchronize", before=before)  # fmt: skip
            post_webhook(client, "pull_request", body, secret=test_app.webhook_secret)
            drain_queue(only="webhooks.tasks.delivery_process")
        return real(*args, **kwargs)

    monkeypatch.setattr(engines, "engine_run", pushed_while_reviewing)
    body = pull_request_payload(fake_github, world.repo, world.pull, action="opened")
    post_webhook(client, "pull_request", body, secret=test_app.webhook_secret)
    drain_queue()
    old, new = ReviewRun.objects.order_by("pk")
    assert old.status == RunStatus.CANCELLED
    assert (old.superseded_by, old.reason) == (
        pushed["head"],
        f"stale: superseded by {pushed['head'][:12]}",
    )
    assert new.status == RunStatus.COMPLETED and new.head_sha == pushed["head"]
    reviews = fake_github.reviews_of(REPO, 7)
    assert [r["commit_id"] for r in reviews] == [pushed["head"]]  # nothing on the old head
    old_check = next(c for c in fake_github.check_runs_of(REPO) if c.head_sha == old.head_sha)
    assert old_check.conclusion == "cancelled"


@pytest.mark.django_db(transaction=True)
def test_a_cancel_stops_the_engine_at_once_not_at_its_deadline(
    claude, fake_github, client, test_app
):
    _reviewer()
    world = world_build(fake_github)
    claude.script(Hang(90, then=ToolCall("submit_review", {"findings": [SHELL]})))
    body = pull_request_payload(fake_github, world.repo, world.pull, action="opened")
    post_webhook(client, "pull_request", body, secret=test_app.webhook_secret)
    asked = {}

    def cancel_once_the_engine_waits() -> None:
        try:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                if claude.requests:  # the engine is waiting for its model
                    run = ReviewRun.objects.get()
                    asked["at"] = time.monotonic()
                    asked["done"] = run_cancel_request(run.pk, "cancelled by a test")
                    return
                time.sleep(0.1)
        finally:
            connection.close()

    canceller = threading.Thread(target=cancel_once_the_engine_waits)
    canceller.start()
    drain_queue()
    ended = time.monotonic()
    canceller.join(timeout=10)
    assert asked["done"] == "asked to stop"
    assert ended - asked["at"] < 20  # the heartbeat saw it within seconds, not at 90 s
    run = ReviewRun.objects.get()
    assert (run.status, run.reason) == (RunStatus.CANCELLED, "cancelled by a test")
    assert fake_github.reviews_of(REPO, 7) == []
    assert fake_github.check_runs_of(REPO)[-1].conclusion == "cancelled"
    attempt = run.attempt_rows.get()
    assert attempt.outcome == "cancelled"


@pytest.mark.django_db
def test_a_waiting_run_is_cancelled_at_once_and_an_ended_one_is_left_alone(
    claude, fake_github, client, test_app
):
    _reviewer()
    world = world_build(fake_github)
    body = pull_request_payload(fake_github, world.repo, world.pull, action="opened")
    post_webhook(client, "pull_request", body, secret=test_app.webhook_secret)
    drain_queue(only="webhooks.tasks.delivery_process")
    run = ReviewRun.objects.get()
    assert run_cancel_request(run.pk, "not wanted") == "cancelled"
    drain_queue()
    run.refresh_from_db()
    assert run.status == RunStatus.CANCELLED
    assert fake_github.check_runs_of(REPO)[-1].conclusion == "cancelled"
    assert run_cancel_request(run.pk, "again") == "already ended"
    assert Task.objects.count() == 0
