"""What reaches the author: people's comments (who counts, held back while a thread is
being written, a comment after a clean pass), disputes ruled without a push, and new
blocking findings on code the author did not touch."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from reviews.models import Finding, PassStatus, TaskComment, TaskState
from tests.fakes.models import ToolCall
from tests.gitworld import PAYMENTS, REPO
from tests.helpers import (
    drain_queue,
    issue_comment_payload,
    post_webhook,
    pull_request_payload,
    pull_request_review_payload,
)
from tests.reviews.passes.conftest import AUTHOR_BOT, REVIEWER_BOT, earlier_ids, finding

pytestmark = pytest.mark.django_db

SHELL = finding("app/payments.py", 8, "Order id reaches a shell", blocking=True, severity="high")
CLEAN = ToolCall("submit_review", {"findings": []})
V1 = PAYMENTS.replace(
    '    cmd = f"refund --order {order_id}"\n    return subprocess.call(cmd, shell=True)\n',
    '    return subprocess.call(["refund", "--order", str(order_id)])\n',
)


def comment(passes, body: str, **kwargs) -> None:
    world = passes.world
    payload = issue_comment_payload(world.fake, world.repo, 7, body=body, **kwargs)
    answer = post_webhook(passes.client, "issue_comment", payload, secret=passes.secret)
    assert answer.status_code == 202
    drain_queue()


def feedback(passes, task) -> dict:
    return passes.api.get(f"/api/tasks/{task.pk}/feedback").json()


@pytest.fixture(autouse=True)
def maria_may_write(passes):
    """maria maintains acme/shop: write access, as GitHub's permission endpoint says."""
    passes.world.fake.add_collaborator(REPO, "maria", "write")


def test_comments_from_people_who_count_reach_the_author_others_are_counted(passes):
    passes.claude.script(CLEAN)
    task = passes.create_task(counted_bots=["lint-bot[bot]"])
    comment(passes, "Please also log the refund id.", login="maria", association="MEMBER")
    comment(passes, "+1 from a stranger", login="drive-by", association="NONE")
    comment(passes, "Lint: 2 warnings", login="lint-bot[bot]", association="NONE", user_type="Bot")
    comment(passes, "Deploy preview ready", login="preview[bot]", association="NONE",
            user_type="Bot")  # fmt: skip
    comment(passes, "I will handle it.", login=AUTHOR_BOT, association="NONE", user_type="Bot")
    comment(passes, "reviewer talk <!-- tasuku:summary -->", login=REVIEWER_BOT,
            association="NONE", user_type="Bot")  # fmt: skip
    body = feedback(passes, task)
    assert sorted((c["author"], c["body"]) for c in body["comments"]) == [
        ("lint-bot[bot]", "Lint: 2 warnings"),
        ("maria", "Please also log the refund id."),
    ]
    assert body["comments_not_routed"] == 2  # the stranger and the uncounted bot
    assert TaskComment.objects.filter(task=task).count() == 4  # the author's and Tasuku's: none


def test_write_access_decides_whose_comment_is_sent_not_the_association(passes):
    """GitHub's `author_association` says CONTRIBUTOR for an organisation member whose
    membership is private, and MEMBER for a member who may only read: the collaborator
    permission decides."""
    fake = passes.world.fake
    fake.add_collaborator(REPO, "private-maintainer", "maintain")
    fake.add_collaborator(REPO, "reader", "read")
    fake.add_collaborator(REPO, "triager", "triage")
    task = passes.create_task()
    comment(passes, "Keep the old endpoint.", login="private-maintainer",
            association="CONTRIBUTOR")  # fmt: skip
    comment(passes, "Rename it?", login="reader", association="MEMBER")
    comment(passes, "Needs a label.", login="triager", association="COLLABORATOR")
    body = feedback(passes, task)
    assert [(c["author"], c["association"]) for c in body["comments"]] == [
        ("private-maintainer", "CONTRIBUTOR")
    ]
    assert body["comments_not_routed"] == 2  # counted and kept, not sent
    assert set(TaskComment.objects.filter(counted=False).values_list("login", flat=True)) == {
        "reader", "triager"
    }  # fmt: skip
    assert passes.api.get(f"/api/tasks/{task.pk}").json()["open_items"]["comments"] == 1
    # One question to GitHub a person, whatever it is asked about again within the minute.
    asked = fake.requests("GET", r"/collaborators/private-maintainer/permission$")
    comment(passes, "And the changelog.", login="private-maintainer", association="CONTRIBUTOR")
    assert fake.requests("GET", r"/collaborators/private-maintainer/permission$") == asked
    assert len(feedback(passes, task)["comments"]) == 2


def test_a_comment_github_could_not_vouch_for_is_recorded_when_the_delivery_is_retried(
    passes, settings
):
    from tests.reviews.test_github_weather import sweep, time_passes

    task = passes.create_task()
    fake = passes.world.fake
    fake.inject(int(settings.GITHUB_MAX_ATTEMPTS), status=502, method="GET",
                path=r"/collaborators/maria/permission$")  # fmt: skip
    comment(passes, "Please also log the refund id.", login="maria", association="CONTRIBUTOR")
    assert not TaskComment.objects.exists()  # neither sent nor dropped: tried again
    time_passes()
    sweep()
    [routed] = feedback(passes, task)["comments"]
    assert routed["author"] == "maria"


def test_comments_are_held_back_until_the_thread_goes_quiet(passes, settings):
    settings.TASUKU_FEEDBACK_QUIET_SECONDS = 120
    task = passes.create_task()
    comment(passes, "First thought", login="maria")
    comment(passes, "Second thought", login="maria")
    body = feedback(passes, task)
    assert body["comments"] == [] and body["comments_held_back"] == 2
    assert body["ready_at"]
    # Two minutes later, both arrive together.
    TaskComment.objects.update(received_at=timezone.now() - timedelta(seconds=121))
    body = feedback(passes, task)
    assert [c["body"] for c in body["comments"]] == ["First thought", "Second thought"]
    assert body["comments_held_back"] == 0 and body["ready_at"] is None


def test_a_comment_after_a_clean_pass_keeps_the_task_from_done_until_answered(passes):
    world = passes.world
    passes.claude.script(CLEAN)
    task = passes.create_task(required_checks=["ci/test"])
    assert passes.done(task, world.pull.head_sha).status_code == 202
    drain_queue()
    task.refresh_from_db()
    assert task.state == TaskState.APPROVED
    assert passes.api.get(f"/api/tasks/{task.pk}").json()["status"] == (
        "Approved · waiting for 1 check"
    )
    review = world.fake.person_review(REPO, 7, login="maria", body="Can the refund be retried?")
    post_webhook(
        passes.client, "pull_request_review",
        pull_request_review_payload(world.fake, world.repo, world.pull, review),
        secret=passes.secret,
    )  # fmt: skip
    drain_queue()
    task.refresh_from_db()
    assert task.state == TaskState.AUTHOR_FIXING
    assert passes.api.get(f"/api/tasks/{task.pk}").json()["status"] == "Author fixing · 1 comment"
    world.fake.ci_check_run(REPO, world.pull.head_sha, "ci/test", conclusion="success")
    [routed] = feedback(passes, task)["comments"]
    assert routed["kind"] == "review" and routed["body"] == "Can the refund be retried?"
    answered = passes.api.post(
        f"/api/tasks/{task.pk}/answers",
        {"answers": [{"comment": routed["id"], "kind": "reply", "text": "Yes: it is idempotent."}]},
        format="json",
    )
    assert answered.status_code == 202, answered.json()
    drain_queue()
    task.refresh_from_db()
    assert task.state == TaskState.DONE
    [posted] = world.fake.issue_comments_of(REPO, 7)[-1:]
    assert posted["user"]["login"] == AUTHOR_BOT
    assert posted["body"].startswith("> Can the refund be retried?\n\nYes: it is idempotent.")

    # Done, then someone comments: not done until that is answered too.
    comment(passes, "One more: add a changelog entry.", login="maria")
    task.refresh_from_db()
    assert task.state == TaskState.AUTHOR_FIXING and task.done_at is None


def test_a_push_after_the_approval_needs_another_pass(passes):
    world = passes.world
    passes.claude.script(CLEAN, CLEAN)
    task = passes.create_task(required_checks=["ci/test"])
    assert passes.done(task, world.pull.head_sha).status_code == 202
    drain_queue()
    pushed = world.push({"README.md": "# Shop\n\nSells widgets, gadgets and refunds.\n"})
    post_webhook(
        passes.client, "pull_request",
        pull_request_payload(world.fake, world.repo, world.pull, action="synchronize"),
        secret=passes.secret,
    )  # fmt: skip
    drain_queue()
    world.fake.ci_check_run(REPO, pushed, "ci/test", conclusion="success")
    from reviews.passes.flow import task_evaluate

    task_evaluate(task)
    assert task.state == TaskState.AUTHOR_FIXING
    assert passes.api.get(f"/api/tasks/{task.pk}").json()["status"] == (
        "Author fixing · pushed since pass 1: report done for another pass"
    )
    assert passes.done(task, pushed).status_code == 202
    drain_queue()
    task.refresh_from_db()
    assert task.state == TaskState.DONE
    approvals = [r for r in passes.reviews_by(REVIEWER_BOT) if r["state"] == "APPROVED"]
    assert [a["commit_id"] for a in approvals] == [world.head, pushed]


def test_a_disputed_finding_is_ruled_on_without_a_push(passes):
    world = passes.world

    def accept(request):
        [fid] = earlier_ids(request).values()
        return ToolCall(
            "submit_review",
            {"findings": [], "rulings": [{"id": fid, "still_open": False,
                                           "reason": "order ids are integers from our own DB"}]},
        )  # fmt: skip

    passes.claude.script(ToolCall("submit_review", {"findings": [SHELL]}), accept)
    task = passes.create_task()
    assert passes.done(task, world.pull.head_sha).status_code == 202
    drain_queue()
    [shell] = feedback(passes, task)["findings"]
    passes.api.post(
        f"/api/tasks/{task.pk}/answers",
        {"answers": [{"finding": shell["id"], "kind": "reply",
                      "text": "order_id is an integer primary key, never user input."}]},
        format="json",
    )  # fmt: skip
    drain_queue()
    assert passes.done(task, world.pull.head_sha).status_code == 202  # no push
    drain_queue()
    assert "never user input" in str(passes.claude.last_request.messages)
    task.refresh_from_db()
    assert [p.status for p in task.passes.order_by("number")] == [
        PassStatus.FINDINGS,
        PassStatus.CLEAN,
    ]
    assert task.state == TaskState.DONE
    thread = passes.thread_of("app/payments.py", 8)
    assert thread["isResolved"]
    assert "the reviewer accepted the author's reasons" in thread["comments"][-1]["body"]
    assert "order ids are integers from our own DB" in thread["comments"][-1]["body"]


def test_new_blocking_findings_on_untouched_code_are_nits_unless_critical_with_why(passes):
    world = passes.world
    untouched = finding("deploy.sh", 3, "Unquoted target directory", blocking=True,
                        severity="high")  # fmt: skip
    critical = {
        **finding("app/payments.py", 3, "Live cloud key committed", blocking=True,
                  severity="critical"),
        "critical_why": "The key is live: it can be used by anyone who reads the repository.",
    }  # fmt: skip

    def second(request):
        [fid] = earlier_ids(request).values()
        return ToolCall(
            "submit_review",
            {"findings": [untouched, critical], "rulings": [{"id": fid, "still_open": False}]},
        )

    passes.claude.script(ToolCall("submit_review", {"findings": [SHELL]}), second)
    task = passes.create_task()
    assert passes.done(task, world.pull.head_sha).status_code == 202
    drain_queue()
    assert passes.done(task, world.push({"app/payments.py": V1})).status_code == 202
    drain_queue()
    second_pass = task.passes.get(number=2)
    assert (second_pass.blocking_open, second_pass.blocking_new, second_pass.nits_open) == (1, 1, 1)
    findings = {
        f.title: f for f in Finding.objects.filter(review__run__pass_link__review_pass=second_pass)
    }
    assert not findings["Unquoted target directory"].blocking
    assert findings["Live cloud key committed"].blocking


def test_tasukus_own_bot_is_named_when_github_can_say_and_none_when_it_cannot(
    settings, monkeypatch
):
    """A comment's author is checked against Tasuku's bot; when GitHub cannot name the
    App (not configured, a key that does not load, GitHub unreachable) no login is left
    out and the comment is recorded all the same. A bug is raised, never taken for that."""
    from repos import github
    from repos.github import GitHubError, GitHubNotConfigured
    from reviews.passes import events

    settings.GITHUB_APP_SLUG = "tasuku-test"
    assert events._tasuku_logins() == {"tasuku-test[bot]"}
    for error in (
        GitHubNotConfigured(["GITHUB_APP_ID"]),
        GitHubError("GitHub is down", permanent=False),
    ):

        def failing(error=error):
            raise error

        monkeypatch.setattr(github, "gateway", failing)
        assert events._tasuku_logins() == set()
    monkeypatch.setattr(github, "gateway", lambda: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        events._tasuku_logins()
