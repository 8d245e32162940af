"""A failing required check can be answered ("a flaky test"): it has an id in the
feedback, the author's reply is posted on the pull request as the author's App, and the
check counts as handled — the author is not asked again — until it fails on a new head.
An answered check is still not green: the task waits for it, it is never done on it."""

from __future__ import annotations

import pytest

from reviews.models import Answer, TaskState
from tests.fakes.models import ToolCall
from tests.gitworld import REPO
from tests.helpers import check_run_payload, drain_queue, post_webhook
from tests.reviews.passes.conftest import AUTHOR_BOT

pytestmark = pytest.mark.django_db


def _failing(world, head: str):
    return world.fake.ci_check_run(
        REPO, head, "ci/test", conclusion="failure", title="1 test failed",
        summary="test_timeout failed", text="FAILED tests/test_net.py::test_timeout - flaky",
    )  # fmt: skip


def _told(passes, check) -> None:
    post_webhook(passes.client, "check_run",
                 check_run_payload(passes.world.fake, passes.world.repo, check),
                 secret=passes.secret)  # fmt: skip
    drain_queue()


def test_a_failing_check_answered_with_a_reply_is_handled_until_it_fails_on_a_new_head(passes):
    world, api = passes.world, passes.api
    passes.claude.script(
        ToolCall("submit_review", {"findings": []}), ToolCall("submit_review", {"findings": []})
    )
    task = passes.create_task(required_checks=["ci/test"])
    head = world.pull.head_sha
    _failing(world, head)
    assert passes.done(task, head).status_code == 202
    drain_queue()
    task.refresh_from_db()
    assert task.state == TaskState.AUTHOR_FIXING
    [check] = api.get(f"/api/tasks/{task.pk}/feedback").json()["failing_checks"]
    assert (check["name"], check["head"], check["answer"]) == ("ci/test", head, None)
    assert api.get(f"/api/tasks/{task.pk}").json()["open_items"]["failing_checks"] == 1

    # Only real ids are answerable, and only with reply or fixed.
    bad = api.post(f"/api/tasks/{task.pk}/answers",
                   {"answers": [{"check": "1.check.nope", "kind": "reply", "text": "x"}]},
                   format="json")  # fmt: skip
    assert bad.status_code == 422
    skip = api.post(f"/api/tasks/{task.pk}/answers",
                    {"answers": [{"check": check["id"], "kind": "skip"}]}, format="json")  # fmt: skip
    assert skip.status_code == 400

    answered = api.post(
        f"/api/tasks/{task.pk}/answers",
        {"answers": [{"check": check["id"], "kind": "reply",
                      "text": "A flaky test: it times out on the shared runner, not here."}]},
        format="json",
    )  # fmt: skip
    assert answered.status_code == 202, answered.json()
    drain_queue()
    posted = world.fake.issue_comments_of(REPO, 7)[-1]
    assert posted["user"]["login"] == AUTHOR_BOT
    assert posted["body"].startswith(f"About the failing check `ci/test` on `{head[:7]}`:")
    assert "A flaky test" in posted["body"]

    # Handled: not asked again, and the task waits for the check instead of the author.
    body = api.get(f"/api/tasks/{task.pk}").json()
    assert body["open_items"]["failing_checks"] == 0
    task.refresh_from_db()
    assert task.state == TaskState.APPROVED
    [check] = api.get(f"/api/tasks/{task.pk}/feedback").json()["failing_checks"]
    assert check["answer"]["kind"] == "reply"
    again = api.post(f"/api/tasks/{task.pk}/answers",
                     {"answers": [{"check": check["id"], "kind": "reply", "text": "again"}]},
                     format="json")  # fmt: skip
    assert again.status_code == 409

    # A new head that fails the same check asks again, with a new id.
    pushed = world.push({"app/notes.py": "NOTE = 1\n"})
    assert passes.done(task, pushed).status_code == 202
    drain_queue()
    _told(passes, _failing(world, pushed))
    task.refresh_from_db()
    assert task.state == TaskState.AUTHOR_FIXING
    [fresh] = api.get(f"/api/tasks/{task.pk}/feedback").json()["failing_checks"]
    assert fresh["head"] == pushed and fresh["answer"] is None and fresh["id"] != check["id"]
    assert Answer.objects.exclude(check_name="").count() == 1

    # Green at last: done.
    _told(passes, world.fake.ci_check_run(REPO, pushed, "ci/test", conclusion="success"))
    task.refresh_from_db()
    assert task.state == TaskState.DONE
