"""The task board on the dashboard: tasks with their status rows, the stuck ones first,
and the four actions (for those allowed to act)."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.test import Client

from reviews.models import AuthorMessage, Task, TaskState
from tests.fakes.models import ToolCall
from tests.gitworld import REPO
from tests.helpers import drain_queue
from tests.reviews.passes.conftest import REVIEWER_BOT, finding

pytestmark = pytest.mark.django_db

SHELL = finding("app/payments.py", 8, "Order id reaches a shell", blocking=True, severity="high")


def operator(*, may_act: bool) -> Client:
    user = get_user_model().objects.create_user(
        "lead" if may_act else "viewer", password="pw", is_staff=True
    )
    if may_act:
        user.user_permissions.add(
            Permission.objects.get(codename="change_task", content_type__app_label="reviews")
        )
    browser = Client()
    browser.force_login(user)
    return browser


def test_the_board_lists_stuck_tasks_first_and_acts_on_them(passes):
    passes.claude.script(ToolCall("submit_review", {"findings": [SHELL]}))
    passes.open_pull(8)
    waiting = passes.create_task(number=8)
    stuck = passes.create_task(max_passes=1)
    Task.objects.filter(pk=waiting.pk).update(title="Waiting one")
    assert passes.done(stuck, passes.world.pull.head_sha).status_code == 202
    drain_queue()
    stuck.refresh_from_db()
    assert stuck.state == TaskState.STUCK

    lead = operator(may_act=True)
    page = lead.get("/tasks/").content.decode()
    first, second = page.index(f"#{stuck.pk} Refunds"), page.index(f"#{waiting.pk} Waiting one")
    assert first < second  # stuck first, though newer tasks sort first otherwise
    assert "Review stuck: 1 passes (the most allowed) and 1 blocking finding still open" in page
    assert "Handed off · waiting for the author" in page
    for action in ("run_another_pass", "message_author", "return_as_is", "recall"):
        assert f'value="{action}"' in page

    detail = lead.get(f"/tasks/{stuck.pk}/").content.decode()
    assert "Order id reaches a shell" in detail

    sent = lead.post(f"/tasks/{stuck.pk}/action",
                     {"action": "message_author", "text": "Use a list argv."}, follow=True)  # fmt: skip
    assert "Message author: done." in sent.content.decode()
    message = AuthorMessage.objects.get(task=stuck, kind="message")
    assert message.text == "Use a list argv."
    # Recorded as the lead's, and the author reads it as the lead's.
    assert message.sender == get_user_model().objects.get(username="lead")
    [said] = [m for m in passes.api.get(f"/api/tasks/{stuck.pk}/feedback").json()["messages"]
              if m["kind"] == "message"]  # fmt: skip
    assert (said["sender"], said["text"]) == ("lead", "Use a list argv.")
    assert (
        "from <strong>lead</strong>: Use a list argv."
        in lead.get(f"/tasks/{stuck.pk}/").content.decode()
    )
    stuck.refresh_from_db()
    assert stuck.state == TaskState.AUTHOR_FIXING

    empty = lead.post(f"/tasks/{stuck.pk}/action", {"action": "message_author"}, follow=True)
    assert "message_author needs `text`." in empty.content.decode()

    lead.post(f"/tasks/{waiting.pk}/action", {"action": "recall"})
    waiting.refresh_from_db()
    assert waiting.state == TaskState.RECALLED


def test_a_viewer_sees_the_board_but_cannot_act(passes):
    task = passes.create_task()
    viewer = operator(may_act=False)
    page = viewer.get("/tasks/").content.decode()
    assert f"#{task.pk} Refunds" in page and 'value="recall"' not in page
    refused = viewer.post(f"/tasks/{task.pk}/action", {"action": "recall"})
    assert refused.status_code == 403
    task.refresh_from_db()
    assert task.state == TaskState.OPEN
    anonymous = Client().get("/tasks/")
    assert anonymous.status_code == 302 and "/login" in anonymous["Location"]


def test_tasks_are_in_the_admin(passes, admin_client):
    task = passes.create_task()
    listing = admin_client.get("/admin/reviews/task/")
    assert listing.status_code == 200 and "Refunds" in listing.content.decode()
    assert admin_client.get(f"/admin/reviews/task/{task.pk}/change/").status_code == 200
    assert admin_client.get("/admin/authtoken/tokenproxy/").status_code == 200


def test_the_task_page_links_each_pull_requests_latest_review_on_github(passes):
    from tests.reviews.passes.test_stuck import ruling_all

    passes.claude.script(ToolCall("submit_review", {"findings": [SHELL]}), ruling_all())
    task = passes.create_task(max_passes=1)
    lead = operator(may_act=True)
    assert "none yet" in lead.get(f"/tasks/{task.pk}/").content.decode()

    assert passes.done(task, passes.world.pull.head_sha).status_code == 202
    drain_queue()
    fake = passes.world.fake

    def on_github(review: dict) -> str:  # the review's html_url, as GitHub gives it
        return f"{fake.url}/{REPO}/pull/7#pullrequestreview-{review['id']}"

    [commented] = passes.reviews_by(REVIEWER_BOT)
    page = lead.get(f"/tasks/{task.pk}/").content.decode()
    assert f'<a href="{on_github(commented)}" class="review-link">commented at' in page

    lead.post(f"/tasks/{task.pk}/action", {"action": "run_another_pass"})
    drain_queue()
    approval = next(r for r in fake.reviews_of(REPO, 7) if r["state"] == "APPROVED")
    page = lead.get(f"/tasks/{task.pk}/").content.decode()
    # The latest review is linked, the earlier one no longer is.
    assert f'<a href="{on_github(approval)}" class="review-link">approved at' in page
    assert on_github(commented) not in page
    # The API names it too, for the author.
    [pull] = passes.api.get(f"/api/tasks/{task.pk}").json()["pull_requests"]
    assert pull["latest_review"]["url"] == on_github(approval)
    assert pull["latest_review"]["approved"] is True
