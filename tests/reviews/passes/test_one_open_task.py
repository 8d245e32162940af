"""A pull request belongs to one open task: a second caller cannot open a task on it,
run passes on it, post as the author's App there or have it approved; and only a task's
owner acts on it."""

from __future__ import annotations

import threading

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from repos.models import Installation
from reviews.models import ApiScope, ReviewPass, Task, TaskComment, TaskPullRequest, TaskState
from tests.fakes.models import ToolCall
from tests.gitworld import REPO
from tests.helpers import drain_queue, issue_comment_payload, post_webhook
from tests.reviews.passes.conftest import REVIEWER_BOT

pytestmark = pytest.mark.django_db

CLEAN = ToolCall("submit_review", {"findings": []})


def second_user(passes) -> APIClient:
    """Another user whose token may name the same repositories."""
    user = get_user_model().objects.create_user("agent-owner-b")
    ApiScope.objects.create(user=user).installations.add(
        Installation.objects.get(github_id=passes.world.repo.installation_id)
    )
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=user).key}")
    return api


def create(api: APIClient, *pulls: str):
    return api.post(
        "/api/tasks/",
        {"title": "Take over", "author": {"name": "agent-9"}, "pull_requests": list(pulls)},
        format="json",
    )


def test_a_pull_request_in_an_open_task_cannot_be_named_by_a_second_task(passes):
    task = passes.create_task()
    other = second_user(passes)
    calls = len(passes.world.fake.calls)
    refused = create(other, f"{REPO}#7")
    assert refused.status_code == 409
    assert refused.json()["error"] == (
        f"{REPO}#7 is in task {task.pk}, which is open: a pull request belongs to one open "
        "task at a time (it is free again once that task is done, returned or recalled)."
    )
    assert refused.json()["details"] == {"task": task.pk, "pull_request": f"{REPO}#7"}
    assert len(passes.world.fake.calls) == calls  # refused before asking GitHub anything
    # The owner's own second task is refused alike, in any case of the name.
    assert create(passes.api, f"{REPO.upper()}#7").status_code == 409
    assert list(Task.objects.values_list("pk", flat=True)) == [task.pk]
    # And the second user cannot act on the first one's task: it is not told it exists.
    for url, body in (
        (f"/api/tasks/{task.pk}/handoff", {"enabled": True, "reviewer": {"slug": "claude"}}),
        (f"/api/tasks/{task.pk}/done", {"heads": {f"{REPO}#7": passes.world.pull.head_sha}}),
        (f"/api/tasks/{task.pk}/actions", {"action": "run_another_pass"}),
    ):
        assert other.post(url, body, format="json").status_code == 404, url
    assert not ReviewPass.objects.exists()


def test_once_its_task_is_recalled_the_pull_request_may_be_handed_off_again(passes):
    task = passes.create_task()
    other = second_user(passes)
    assert create(other, f"{REPO}#7").status_code == 409
    recalled = passes.api.post(f"/api/tasks/{task.pk}/actions", {"action": "recall"}, format="json")
    assert recalled.status_code == 200
    assert create(other, f"{REPO}#7").status_code == 201


def test_a_done_task_is_not_brought_back_once_another_task_has_its_pull_request(passes):
    world = passes.world
    world.fake.add_collaborator(REPO, "maria", "write")
    passes.claude.script(CLEAN, CLEAN)
    first = passes.create_task()
    assert passes.done(first, world.pull.head_sha).status_code == 202
    drain_queue()
    first.refresh_from_db()
    assert first.state == TaskState.DONE
    other = second_user(passes)
    taken = create(other, f"{REPO}#7")
    assert taken.status_code == 201, taken.json()
    second = Task.objects.get(pk=taken.json()["id"])

    payload = issue_comment_payload(world.fake, world.repo, 7, body="Log the refund id too.")
    assert post_webhook(passes.client, "issue_comment", payload, secret=passes.secret).status_code
    drain_queue()
    first.refresh_from_db()
    assert first.state == TaskState.DONE  # not open beside the second task
    assert [c.task_id for c in TaskComment.objects.all()] == [second.pk]
    approvals = [r for r in passes.reviews_by(REVIEWER_BOT) if r["state"] == "APPROVED"]
    assert len(approvals) == 1  # the first task's, and nothing of the second's yet


def test_of_two_open_tasks_made_before_the_rule_only_the_earlier_runs_passes(passes):
    first = passes.create_task()
    # (A second open task on the same pull request, as an older Tasuku could leave.)
    second = Task.objects.create(
        owner=first.owner, title="Duplicate", author_name="agent-9", passes_enabled=True,
        reviewer=first.reviewer, handed_off_at=first.handed_off_at,
    )  # fmt: skip
    [tpr] = first.pulls.all()
    TaskPullRequest.objects.create(
        task=second, repository=tpr.repository, number=tpr.number, pull_request=tpr.pull_request
    )
    refused = passes.done(second, passes.world.pull.head_sha)
    assert refused.status_code == 409
    assert refused.json()["error"].startswith(f"{REPO}#7 is in task {first.pk}, which is open")
    assert not ReviewPass.objects.filter(task=second).exists()
    passes.claude.script(CLEAN)
    assert passes.done(first, passes.world.pull.head_sha).status_code == 202


@pytest.mark.django_db(transaction=True)
def test_two_callers_naming_one_pull_request_at_once_make_one_task(passes, monkeypatch):
    from reviews.passes import handoff

    other = second_user(passes)
    both_checked = threading.Barrier(2, timeout=30)
    authored_check = handoff.pull_authored_check

    def slow_check(repository, number):
        authored_check(repository, number)
        both_checked.wait()  # each has passed every check before either makes its task

    monkeypatch.setattr(handoff, "pull_authored_check", slow_check)
    answers = {}

    def call(name: str, api: APIClient) -> None:
        try:
            answers[name] = create(api, f"{REPO}#7").status_code
        finally:
            connection.close()

    threads = [
        threading.Thread(target=call, args=args) for args in (("a", passes.api), ("b", other))
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert sorted(answers.values()) == [201, 409]
    assert Task.objects.count() == 1
