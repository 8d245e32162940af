"""A whole task through the review-pass API against the fake GitHub and a scripted
model: three passes, the author's answers, the reviewer App's approval, a failing
required check routed to the author, then done."""

from __future__ import annotations

import pytest

from reviews.models import Answer, Finding, ReviewRun, RunStatus, Task, TaskState
from tests.fakes.models import ToolCall
from tests.gitworld import PAYMENTS, REPO
from tests.helpers import check_run_payload, drain_queue, post_webhook
from tests.reviews.passes.conftest import (
    AUTHOR_BOT,
    REVIEWER_BOT,
    earlier_ids,
    finding,
)

pytestmark = pytest.mark.django_db

SHELL = finding("app/payments.py", 8, "Order id reaches a shell", blocking=True, severity="high")
KEY = finding("app/payments.py", 3, "Cloud key in source", blocking=True, severity="critical")
QUOTE = finding("deploy.sh", 3, "Unquoted target directory", blocking=False, severity="low")

PAYMENTS_FIXED_SHELL = PAYMENTS.replace(
    '    cmd = f"refund --order {order_id}"\n    return subprocess.call(cmd, shell=True)\n',
    '    return subprocess.call(["refund", "--order", str(order_id)])\n',
)
PAYMENTS_FIXED_ALL = PAYMENTS_FIXED_SHELL.replace(
    'AWS_ACCESS_KEY_ID = "AKIAZ2Q7WJ4KXN5BL3TP"\n', ""
)


def test_a_task_goes_from_two_blocking_findings_to_done(passes):
    world, api, claude = passes.world, passes.api, passes.claude
    seen = {}

    def pass_two(request):
        ids = earlier_ids(request)
        seen["pass two prompt"] = request
        return ToolCall(
            "submit_review",
            {
                "findings": [],
                "rulings": [
                    {"id": ids["Order id reaches a shell"], "still_open": False, "reason": "now a list"},
                    {"id": ids["Cloud key in source"], "still_open": True,
                     "reason": "an example key still trains people to commit keys and trips scanners"},
                ],
            },
        )  # fmt: skip

    def pass_three(request):
        ids = earlier_ids(request)
        seen["pass three prompt"] = request
        return ToolCall(
            "submit_review",
            {"findings": [], "rulings": [{"id": ids["Cloud key in source"], "still_open": False}]},
        )

    claude.script(
        ToolCall("submit_review", {"findings": [SHELL, KEY, QUOTE]}), pass_two, pass_three
    )
    task = passes.create_task(max_passes=3, required_checks=["ci/test"])

    # Pass 1: two blocking findings and a nit.
    started = passes.done(task, world.pull.head_sha)
    assert started.status_code == 202, started.json()
    assert started.json()["started_pass"] == 1
    drain_queue()
    body = api.get(f"/api/tasks/{task.pk}").json()
    assert body["status"] == "Author fixing · 2 blocking", body
    assert body["passes"][0]["status"] == "findings"
    assert (body["passes"][0]["blocking_open"], body["passes"][0]["nits_open"]) == (2, 1)
    [review] = passes.reviews_by(REVIEWER_BOT)
    assert review["state"] == "COMMENTED"
    feedback = api.get(f"/api/tasks/{task.pk}/feedback").json()
    by_title = {f["title"]: f for f in feedback["findings"]}
    assert set(by_title) == {
        "Order id reaches a shell",
        "Cloud key in source",
        "Unquoted target directory",
    }
    shell = by_title["Order id reaches a shell"]
    assert shell["blocking"] and shell["how_it_fails"] == SHELL["body"]
    assert (shell["path"], shell["line"]) == ("app/payments.py", 8)
    assert not by_title["Unquoted target directory"]["blocking"]

    # The author fixes the shell call, disputes the key, skips the nit.
    fixed = world.push({"app/payments.py": PAYMENTS_FIXED_SHELL})
    answered = api.post(
        f"/api/tasks/{task.pk}/answers",
        {"answers": [
            {"finding": shell["id"], "kind": "fixed", "commit": fixed},
            {"finding": by_title["Cloud key in source"]["id"], "kind": "reply",
             "text": "It is AWS's documented example key, not a credential."},
            {"finding": by_title["Unquoted target directory"]["id"], "kind": "skip"},
        ]},
        format="json",
    )  # fmt: skip
    assert answered.status_code == 202, answered.json()
    drain_queue()
    replies = passes.comments_by(AUTHOR_BOT)
    assert sorted(r["body"].splitlines()[0] for r in replies) == sorted([
        f"Fixed in {fixed[:12]}.",
        "It is AWS's documented example key, not a credential.",
        "Skipped (a nit).",
    ])  # fmt: skip
    assert all(r.get("in_reply_to_id") for r in replies)  # in the findings' threads

    # Pass 2 rules: the shell call resolved, the disputed key still open (and why).
    assert passes.done(task, fixed).status_code == 202
    drain_queue()
    prompt = str(seen["pass two prompt"].messages)
    assert "documented example key, not a credential" in prompt  # the answers reach the reviewer
    body = api.get(f"/api/tasks/{task.pk}").json()
    assert body["passes"][1]["status"] == "findings"
    assert (body["passes"][1]["blocking_open"], body["passes"][1]["blocking_new"]) == (1, 0)
    assert body["status"] == "Author fixing · 1 blocking"
    feedback = api.get(f"/api/tasks/{task.pk}/feedback").json()
    [key] = [f for f in feedback["findings"] if f["blocking"]]
    assert key["title"] == "Cloud key in source"
    assert key["ruling"] == {"still_open": True,
                             "reason": "an example key still trains people to commit keys and trips scanners"}  # fmt: skip
    shell_thread = passes.thread_of("app/payments.py", 8)
    assert shell_thread["isResolved"]

    # The author removes the key; pass 3 is clean and the reviewer App approves.
    fixed_all = world.push({"app/payments.py": PAYMENTS_FIXED_ALL})
    assert (
        api.post(
            f"/api/tasks/{task.pk}/answers",
            {"answers": [{"finding": key["id"], "kind": "fixed", "commit": fixed_all}]},
            format="json",
        ).status_code
        == 202
    )
    world.fake.ci_check_run(REPO, fixed_all, "ci/test", conclusion="failure",
                            title="2 tests failed", summary="test_refund failed",
                            text="FAILED tests/test_pay.py::test_refund - AssertionError\nFAILED x")  # fmt: skip
    assert passes.done(task, fixed_all).status_code == 202
    drain_queue()
    # Pass 3 resumes what the reviewer knew: its own ruling of pass 2 and the answer.
    prompt = str(seen["pass three prompt"].messages)
    assert "Your rulings on them in the previous pass" in prompt
    assert "still open: an example key still trains people to commit keys" in prompt
    approvals = [r for r in passes.reviews_by(REVIEWER_BOT) if r["state"] == "APPROVED"]
    assert len(approvals) == 1 and approvals[0]["commit_id"] == fixed_all
    # The author's App only ever replied (replies are one-comment COMMENTED reviews).
    by_author = [r for r in world.fake.reviews_of(REPO, 7) if r["user"]["login"] == AUTHOR_BOT]
    assert by_author and {r["state"] for r in by_author} == {"COMMENTED"}

    # A failing required check goes to the author.
    body = api.get(f"/api/tasks/{task.pk}").json()
    assert body["passes"][2]["status"] == "clean"
    assert body["status"] == "Author fixing · 1 failing check"
    feedback = api.get(f"/api/tasks/{task.pk}/feedback").json()
    [check] = feedback["failing_checks"]
    assert check["name"] == "ci/test" and check["title"] == "2 tests failed"
    assert "FAILED tests/test_pay.py::test_refund" in check["output"]

    # Re-run green: the check_run webhook makes the task done.
    green = world.fake.ci_check_run(REPO, fixed_all, "ci/test", conclusion="success")
    post_webhook(
        passes.client, "check_run", check_run_payload(world.fake, world.repo, green),
        secret=passes.secret,
    )  # fmt: skip
    drain_queue()
    task.refresh_from_db()
    assert task.state == TaskState.DONE
    assert api.get(f"/api/tasks/{task.pk}").json()["status"] == "Done · approved"
    assert Answer.objects.filter(posting=Answer.Posting.POSTED).count() == 4
    assert (
        ReviewRun.objects.filter(
            pass_link__review_pass__task=task, status=RunStatus.COMPLETED
        ).count()
        == 3
    )
    assert not Finding.objects.filter(
        review__run__pass_link__review_pass__number=3, blocking=True, state="open"
    ).exists()
    assert Task.objects.get(pk=task.pk).done_at is not None
