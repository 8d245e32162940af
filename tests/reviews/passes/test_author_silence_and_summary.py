"""An author that goes silent makes its task stuck; the status row while a pass is under
review; and the note a task comes back with, summing up its passes."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from reviews.engines import boundary as engines
from reviews.models import ReviewPass, Task, TaskState
from reviews.passes.flow import tasks_sweep
from tests.fakes.models import ToolCall
from tests.gitworld import PAYMENTS
from tests.helpers import drain_queue
from tests.reviews.passes.conftest import earlier_ids, finding

pytestmark = pytest.mark.django_db

SHELL = finding("app/payments.py", 8, "Order id reaches a shell", blocking=True, severity="high")
NIT = finding("app/payments.py", 7, "Refund could log the order", blocking=False, severity="low")
FIXED = PAYMENTS.replace(
    '    cmd = f"refund --order {order_id}"\n    return subprocess.call(cmd, shell=True)\n',
    '    return subprocess.call(["refund", "--order", str(order_id)])\n',
)


def _findings_pass(passes, **handoff) -> Task:
    passes.claude.script(ToolCall("submit_review", {"findings": [SHELL, NIT]}))
    task = passes.create_task(**handoff)
    assert passes.done(task, passes.world.pull.head_sha).status_code == 202
    drain_queue()
    task.refresh_from_db()
    assert task.state == TaskState.AUTHOR_FIXING
    return task


def _told_ago(task: Task, minutes: int) -> None:
    ReviewPass.objects.filter(task=task).update(
        finished_at=timezone.now() - timedelta(minutes=minutes)
    )


def test_an_author_silent_past_its_limit_makes_the_task_stuck(passes):
    task = _findings_pass(passes, author_silence_minutes=30)
    assert passes.api.get(f"/api/tasks/{task.pk}").json()["handoff"]["author_silence_minutes"] == 30
    _told_ago(task, 20)
    tasks_sweep()
    task.refresh_from_db()
    assert task.state == TaskState.AUTHOR_FIXING  # within the limit

    _told_ago(task, 45)
    tasks_sweep()
    task.refresh_from_db()
    assert task.state == TaskState.STUCK
    assert "has not answered, pushed or reported done since" in task.stuck_reason
    assert "30 minutes" in task.stuck_reason
    body = passes.api.get(f"/api/tasks/{task.pk}").json()
    assert body["status"].startswith("Review stuck: the author was told about feedback")

    # The owner's actions apply: a message sends it back to the author, and the clock
    # starts again from the message.
    taken = passes.api.post(
        f"/api/tasks/{task.pk}/actions",
        {"action": "message_author", "text": "Are you still on it?"},
        format="json",
    )
    assert taken.status_code == 200, taken.json()
    tasks_sweep()
    task.refresh_from_db()
    assert task.state == TaskState.AUTHOR_FIXING


def test_an_author_who_answered_or_pushed_is_not_silent(passes, settings):
    settings.TASUKU_AUTHOR_SILENCE_MINUTES = 30  # the site's default applies
    task = _findings_pass(passes)
    feedback = passes.api.get(f"/api/tasks/{task.pk}/feedback").json()
    nit = next(f for f in feedback["findings"] if not f["blocking"])
    _told_ago(task, 45)
    answered = passes.api.post(
        f"/api/tasks/{task.pk}/answers",
        {"answers": [{"finding": nit["id"], "kind": "skip"}]},
        format="json",
    )
    assert answered.status_code == 202, answered.json()
    tasks_sweep()
    task.refresh_from_db()
    assert task.state == TaskState.AUTHOR_FIXING
    # (The pull request is in one open task at a time: this one is handed back first.)
    returned = passes.api.post(
        f"/api/tasks/{task.pk}/actions", {"action": "return_as_is"}, format="json"
    )
    assert returned.status_code == 200, returned.json()

    other = _findings_pass(passes)
    _told_ago(other, 45)
    passes.world.push({"app/payments.py": FIXED})
    from reviews.intake.triggers import pull_request_refresh  # the push, as Tasuku learns it

    for tpr in other.pulls.select_related("repository__installation"):
        pull_request_refresh(tpr.repository.installation, tpr.repository, tpr.number)
    tasks_sweep()
    other.refresh_from_db()
    assert other.state == TaskState.AUTHOR_FIXING


def test_the_silence_limit_is_bounded(passes):
    passes.claude.script(ToolCall("submit_review", {"findings": []}))
    created = passes.api.post(
        "/api/tasks/",
        {"title": "t", "author": {"name": "a"}, "pull_requests": ["acme/shop#7"]},
        format="json",
    )
    handed = passes.api.post(
        f"/api/tasks/{created.json()['id']}/handoff",
        {"enabled": True, "reviewer": {"slug": "claude"}, "author_silence_minutes": 1},
        format="json",
    )
    assert handed.status_code == 400
    assert "author_silence_minutes" in handed.json()


def test_the_status_row_says_reviewing_and_the_pass_while_the_reviewer_works(passes, monkeypatch):
    seen = []
    real = engines.engine_run

    def during(reviewer, config, job, root, **kwargs):
        task = Task.objects.get()
        seen.append(passes.api.get(f"/api/tasks/{task.pk}").json()["status"])
        return real(reviewer, config, job, root, **kwargs)

    monkeypatch.setattr(engines, "engine_run", during)
    passes.claude.script(ToolCall("submit_review", {"findings": [SHELL]}))
    task = passes.create_task()
    assert passes.done(task, passes.world.pull.head_sha).status_code == 202
    assert passes.api.get(f"/api/tasks/{task.pk}").json()["status"] == "Waiting for a reviewer"
    drain_queue()
    assert seen == ["Reviewing · pass 1"]


def test_the_task_comes_back_with_a_note_summing_up_its_passes(passes):
    def pass_two(request):
        ids = earlier_ids(request)
        return ToolCall(
            "submit_review",
            {"findings": [], "rulings": [
                {"id": ids["Order id reaches a shell"], "still_open": False, "reason": "a list"}]},
        )  # fmt: skip

    passes.claude.script(ToolCall("submit_review", {"findings": [SHELL, NIT]}), pass_two)
    task = passes.create_task()
    assert passes.done(task, passes.world.pull.head_sha).status_code == 202
    drain_queue()
    feedback = passes.api.get(f"/api/tasks/{task.pk}/feedback").json()
    by_title = {f["title"]: f for f in feedback["findings"]}
    fixed = passes.world.push({"app/payments.py": FIXED})
    answered = passes.api.post(
        f"/api/tasks/{task.pk}/answers",
        {"answers": [
            {"finding": by_title["Order id reaches a shell"]["id"], "kind": "fixed",
             "commit": fixed},
            {"finding": by_title["Refund could log the order"]["id"], "kind": "skip"},
        ]},
        format="json",
    )  # fmt: skip
    assert answered.status_code == 202, answered.json()
    drain_queue()
    assert passes.done(task, fixed).status_code == 202
    drain_queue()

    body = passes.api.get(f"/api/tasks/{task.pk}").json()
    assert body["state"] == "done", body["status"]
    summary = body["summary"]
    assert summary["passes"] == 2 and summary["left_open"] == 0
    fates = {f["title"]: f["fate"] for f in summary["findings"]}
    assert fates["Order id reaches a shell"] == f"fixed in {fixed[:7]}"
    assert fates["Refund could log the order"] in (
        "skipped by the author (a nit)",
        f"fixed in {fixed[:7]}",  # the fix removed its line too
    ) or fates["Refund could log the order"].startswith("outdated")
    assert summary["note"].startswith("2 passes: pass 1: findings (1 blocking and 1 nits open")
    assert "2 findings raised, 2 settled, 0 left open." in summary["note"]
