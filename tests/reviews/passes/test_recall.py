"""Recall stops a review in flight, and Return as is waits for it to end."""

from __future__ import annotations

import pytest

from reviews.engines import boundary as engines
from reviews.models import ReviewRun, RunStatus, TaskState
from tests.fakes.models import ToolCall
from tests.gitworld import REPO
from tests.helpers import drain_queue
from tests.reviews.passes.conftest import finding


def _token_call(call) -> bool:
    """A token minted for a post, or revoked after it: bookkeeping, not a post."""
    return call.path.endswith("/access_tokens") or call.path == "/installation/token"


def _calls_after(fake, mark: int) -> list:
    return [c for c in fake.calls[mark:] if c.method != "GET" and not _token_call(c)]


@pytest.mark.django_db
def test_a_recall_during_a_running_pass_posts_nothing_after_it(passes, monkeypatch):
    shell = finding("app/payments.py", 8, "Order id reaches a shell", blocking=True,
                    severity="high")  # fmt: skip
    passes.claude.script(ToolCall("submit_review", {"findings": [shell]}))
    task = passes.create_task()
    real = engines.engine_run
    marks = {}

    def recalled_while_reviewing(*args, **kwargs):
        marks["calls"] = len(passes.world.fake.calls)
        # The owner recalls the task while the reviewer works.
        assert (
            passes.api.post(
                f"/api/tasks/{task.pk}/actions", {"action": "recall"}, format="json"
            ).status_code
            == 200
        )
        return real(*args, **kwargs)

    monkeypatch.setattr(engines, "engine_run", recalled_while_reviewing)
    assert passes.done(task, passes.world.pull.head_sha).status_code == 202
    drain_queue()

    [run] = ReviewRun.objects.filter(pass_link__review_pass__task=task)
    assert run.status == RunStatus.CANCELLED
    assert run.reason == f"task {task.pk} recalled"
    assert _calls_after(passes.world.fake, marks["calls"]) == []  # no review, no reply
    assert passes.world.fake.reviews_of(REPO, 7) == []
    task.refresh_from_db()
    assert task.state == TaskState.RECALLED
    assert task.passes.get().status == "failed"


@pytest.mark.django_db
def test_return_as_is_is_refused_while_a_review_runs_and_taken_after(
    passes, monkeypatch, admin_client
):
    shell = finding("app/payments.py", 8, "Order id reaches a shell", blocking=True,
                    severity="high")  # fmt: skip
    passes.claude.script(ToolCall("submit_review", {"findings": [shell]}))
    task = passes.create_task()
    seen = {}
    real = engines.engine_run

    def returned_while_reviewing(*args, **kwargs):
        seen["api"] = passes.api.post(
            f"/api/tasks/{task.pk}/actions", {"action": "return_as_is"}, format="json"
        )
        seen["page"] = admin_client.get(f"/tasks/{task.pk}/").content.decode()
        return real(*args, **kwargs)

    monkeypatch.setattr(engines, "engine_run", returned_while_reviewing)
    assert passes.done(task, passes.world.pull.head_sha).status_code == 202
    drain_queue()
    refused = seen["api"]
    assert refused.status_code == 409
    assert refused.json()["error"].startswith("A review is running (pass 1)")
    # Not offered on the task's page while it runs; Recall is.
    assert 'value="return_as_is"' not in seen["page"] and 'value="recall"' in seen["page"]
    task.refresh_from_db()
    assert task.state == TaskState.AUTHOR_FIXING

    # The review over, Return as is is offered and taken.
    assert 'value="return_as_is"' in admin_client.get(f"/tasks/{task.pk}/").content.decode()
    taken = passes.api.post(
        f"/api/tasks/{task.pk}/actions", {"action": "return_as_is"}, format="json"
    )
    assert taken.status_code == 200, taken.json()
    task.refresh_from_db()
    assert task.state == TaskState.RETURNED
