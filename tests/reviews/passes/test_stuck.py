"""Each way a task gets stuck, and each action an owner takes from there."""

from __future__ import annotations

import pytest

from reviews.models import AuthorMessage, PassStatus, ReviewRun, RunStatus, Stage, Task, TaskState
from tests.fakes.models import Fail, Hang, Loop, ToolCall
from tests.gitworld import PAYMENTS, REPO
from tests.helpers import drain_queue
from tests.reviews.passes.conftest import REVIEWER_BOT, earlier_ids, finding

pytestmark = pytest.mark.django_db

SHELL = finding("app/payments.py", 8, "Order id reaches a shell", blocking=True, severity="high")
CLEAN = ToolCall("submit_review", {"findings": []})

V1 = PAYMENTS.replace(
    '    cmd = f"refund --order {order_id}"\n    return subprocess.call(cmd, shell=True)\n',
    '    return subprocess.call(["refund", "--order", str(order_id)])\n',
)
V2 = V1.replace(
    '    return subprocess.call(["refund", "--order", str(order_id)])\n',
    '    code = subprocess.call(["refund", "--order", str(order_id)])\n'
    "    if code:\n        raise RuntimeError(code)\n    return code\n",
)


def ruling_all(*, still_open: bool = False, findings: list | None = None):
    """A reviewer step that rules on every earlier finding it is shown."""

    def step(request):
        rulings = [
            {"id": fid, "still_open": still_open, "reason": "looked again"}
            for fid in earlier_ids(request).values()
        ]
        return ToolCall("submit_review", {"findings": findings or [], "rulings": rulings})

    return step


def status(passes, task: Task) -> str:
    return passes.api.get(f"/api/tasks/{task.pk}").json()["status"]


def act(passes, task: Task, action: str, **extra):
    return passes.api.post(
        f"/api/tasks/{task.pk}/actions", {"action": action, **extra}, format="json"
    )


def test_max_passes_reached_with_a_finding_open_then_run_another_pass(passes):
    passes.claude.script(ToolCall("submit_review", {"findings": [SHELL]}), ruling_all())
    task = passes.create_task(max_passes=1)
    assert passes.done(task, passes.world.pull.head_sha).status_code == 202
    drain_queue()
    task.refresh_from_db()
    assert task.state == TaskState.STUCK
    assert status(passes, task) == (
        "Review stuck: 1 passes (the most allowed) and 1 blocking finding still open"
    )
    # Stuck, the author cannot start another pass on its own.
    refused = passes.done(task, passes.world.pull.head_sha)
    assert refused.status_code == 409 and "stuck" in refused.json()["error"]

    fixed = passes.world.push({"app/payments.py": V1})
    taken = act(passes, task, "run_another_pass")
    assert taken.status_code == 200, taken.json()
    drain_queue()
    task.refresh_from_db()
    assert task.extra_passes == 1
    assert [p.status for p in task.passes.order_by("number")] == [
        PassStatus.FINDINGS,
        PassStatus.CLEAN,
    ]
    assert task.state == TaskState.DONE  # no required checks: the clean pass is enough
    [approval] = [r for r in passes.reviews_by(REVIEWER_BOT) if r["state"] == "APPROVED"]
    assert approval["commit_id"] == fixed


def answer(passes, task: Task, finding: dict, text: str):
    return passes.api.post(
        f"/api/tasks/{task.pk}/answers",
        {"answers": [{"finding": finding["id"], "kind": "reply", "text": text}]},
        format="json",
    )


def test_two_passes_in_a_row_with_new_blocking_problems_wait_for_the_answers_then_stick(passes):
    world = passes.world
    exit_code = finding("app/payments.py", 7, "Refund's exit code is ignored",
                        blocking=True, severity="high")  # fmt: skip
    raises = finding("app/payments.py", 9, "A failed refund crashes the worker",
                     blocking=True, severity="high")  # fmt: skip
    loops = finding("app/payments.py", 10, "The refund is retried forever",
                    blocking=True, severity="high")  # fmt: skip
    passes.claude.script(
        ToolCall("submit_review", {"findings": [SHELL]}),
        ruling_all(findings=[exit_code]),
        ruling_all(findings=[raises, loops]),
    )
    task = passes.create_task(max_passes=5)
    assert passes.done(task, world.pull.head_sha).status_code == 202
    drain_queue()
    assert passes.done(task, world.push({"app/payments.py": V1})).status_code == 202
    drain_queue()
    task.refresh_from_db()
    assert task.state == TaskState.AUTHOR_FIXING  # one pass with a new problem is normal
    assert passes.done(task, world.push({"app/payments.py": V2})).status_code == 202
    drain_queue()

    # Two in a row: the author answers pass 3 first, and the status says what follows.
    task.refresh_from_db()
    why = "two passes in a row (passes 2 and 3) found new blocking problems in the author's fixes"
    assert task.state == TaskState.AUTHOR_FIXING
    assert status(passes, task) == (
        f"Waiting for the author's answers to pass 3 · then review stuck: {why}"
    )
    refused = passes.done(task, world.pull.head_sha)
    assert refused.status_code == 409
    assert refused.json()["error"].startswith("Answer the findings of pass 3 first")
    assert task.passes.count() == 3
    feedback = passes.api.get(f"/api/tasks/{task.pk}/feedback").json()
    by_title = {f["title"]: f for f in feedback["findings"] if f["blocking"]}
    assert set(by_title) == {"A failed refund crashes the worker", "The refund is retried forever"}
    assert answer(passes, task, by_title["The refund is retried forever"],
                  "It stops after three tries.").status_code == 202  # fmt: skip
    task.refresh_from_db()
    assert task.state == TaskState.AUTHOR_FIXING  # one answer of two: still waiting
    assert answer(passes, task, by_title["A failed refund crashes the worker"],
                  "The worker catches it.").status_code == 202  # fmt: skip
    task.refresh_from_db()
    assert task.state == TaskState.STUCK
    assert task.stuck_reason == why
    assert status(passes, task) == f"Review stuck: {why}"

    assert act(passes, task, "message_author").status_code == 400  # needs text
    taken = act(passes, task, "message_author", text="Handle the failure without raising.")
    assert taken.status_code == 200, taken.json()
    task.refresh_from_db()
    assert task.state == TaskState.AUTHOR_FIXING
    feedback = passes.api.get(f"/api/tasks/{task.pk}/feedback").json()
    assert feedback["messages"][-1]["text"] == "Handle the failure without raising."
    # The message reaches the author marked as its sender's: the task's owner here.
    assert feedback["messages"][-1]["sender"] == passes.user.username == "agent-owner"
    assert AuthorMessage.objects.filter(task=task, kind="message").get().sender == passes.user
    assert {f["title"] for f in feedback["findings"] if f["blocking"]} == set(by_title)


def test_the_reviewer_failing_then_return_as_is(passes, settings):
    task = passes.create_task()
    passes.claude.script(Fail(401, message="invalid x-api-key"), repeat_last=True)
    assert passes.done(task, passes.world.pull.head_sha).status_code == 202
    drain_queue()
    task.refresh_from_db()
    [run] = ReviewRun.objects.filter(pass_link__review_pass__task=task)
    assert (run.status, run.stage) == (RunStatus.FAILED, Stage.PROVIDER)
    assert task.state == TaskState.STUCK
    assert task.stuck_reason.startswith("the reviewer failed on acme/shop#7 at provider: ")
    assert status(passes, task).startswith("Review stuck: the reviewer failed")
    assert task.passes.get().status == PassStatus.FAILED

    assert act(passes, task, "return_as_is").status_code == 200
    task.refresh_from_db()
    assert task.state == TaskState.RETURNED
    assert status(passes, task) == "Returned as is"
    again = act(passes, task, "run_another_pass")
    assert again.status_code == 409 and again.json()["error"] == "The task is returned as is."


def test_the_reviewer_not_submitting_then_recall(passes):
    # The model keeps submitting something that is not a review; after its corrections
    # the run ends with an incomplete review and nothing published.
    passes.claude.script(ToolCall("submit_review", {"findings": "none"}), repeat_last=True)
    task = passes.create_task()
    assert passes.done(task, passes.world.pull.head_sha).status_code == 202
    drain_queue()
    task.refresh_from_db()
    assert task.state == TaskState.STUCK
    assert task.stuck_reason.startswith(
        "the reviewer did not submit a review of acme/shop#7: the model's submission"
    )
    assert not passes.reviews_by(REVIEWER_BOT)

    assert act(passes, task, "recall").status_code == 200
    task.refresh_from_db()
    assert task.state == TaskState.RECALLED
    assert status(passes, task) == "Recalled"
    assert passes.done(task, passes.world.pull.head_sha).status_code == 409


def test_heads_still_differing_after_being_told_then_run_another_pass(passes):
    world = passes.world
    passes.claude.script(CLEAN)
    task = passes.create_task()
    stale = world.pull.head_sha
    pushed = world.push({"app/payments.py": V1})  # on GitHub, not what the author reports

    told = passes.done(task, stale)
    assert told.status_code == 409
    body = told.json()
    assert body["told"].startswith(f"Not reviewed: {REPO}#7 is at {pushed[:12]} on GitHub")
    assert body["differing"] == [
        {"pull_request": f"{REPO}#7", "reported": stale, "on_github": pushed}
    ]
    feedback = passes.api.get(f"/api/tasks/{task.pk}/feedback").json()
    assert feedback["messages"][-1]["kind"] == "push_or_discard"
    assert feedback["messages"][-1]["sender"] == "Tasuku"  # its own notice, no person's
    assert status(passes, task) == "Author fixing · told to push"

    # Nothing uncommitted now, but the head still differs: stuck.
    again = passes.done(task, stale, uncommitted=False)
    assert again.status_code == 409
    task.refresh_from_db()
    assert task.state == TaskState.STUCK
    assert again.json()["stuck"].startswith("the author's heads still differ after being told")
    assert not ReviewRun.objects.filter(pass_link__review_pass__task=task).exists()

    # The owner has the pull request reviewed as it is on GitHub.
    assert act(passes, task, "run_another_pass").status_code == 200
    drain_queue()
    run = ReviewRun.objects.get(pass_link__review_pass__task=task)
    assert run.head_sha == pushed
    task.refresh_from_db()
    assert task.state == TaskState.DONE


def test_uncommitted_changes_are_told_once(passes):
    task = passes.create_task()
    told = passes.done(task, passes.world.pull.head_sha, uncommitted=True)
    assert told.status_code == 409
    assert told.json()["told"].startswith("Not reviewed: you have uncommitted changes.")
    assert AuthorMessage.objects.filter(task=task, kind="push_or_discard").count() == 1


def test_github_refusing_the_review_then_run_another_pass(passes):
    passes.claude.script(ToolCall("submit_review", {"findings": [SHELL]}), CLEAN)
    task = passes.create_task()
    passes.world.fake.inject(
        3,
        status=403,
        method="POST",
        path=r"/pulls/7/reviews$",
        body={"message": "Resource not accessible by integration", "status": "403"},
    )
    assert passes.done(task, passes.world.pull.head_sha).status_code == 202
    drain_queue()
    task.refresh_from_db()
    assert task.state == TaskState.STUCK
    assert task.stuck_reason.startswith("GitHub refused a post on acme/shop#7: ")
    assert "Resource not accessible by integration" in task.stuck_reason
    passes.world.fake.injections.clear()

    assert act(passes, task, "run_another_pass").status_code == 200
    drain_queue()
    task.refresh_from_db()
    assert task.passes.order_by("number").last().status in (PassStatus.CLEAN, PassStatus.FINDINGS)
    assert passes.reviews_by(REVIEWER_BOT)


def test_github_refusing_an_answer_makes_the_task_stuck(passes):
    passes.claude.script(ToolCall("submit_review", {"findings": [SHELL]}))
    task = passes.create_task()
    assert passes.done(task, passes.world.pull.head_sha).status_code == 202
    drain_queue()
    [shell] = passes.api.get(f"/api/tasks/{task.pk}/feedback").json()["findings"]
    passes.world.fake.inject(
        5, status=403, path=r"/pulls/7/(reviews|comments)",
        body={"message": "Resource not accessible by integration", "status": "403"},
    )  # fmt: skip
    answered = passes.api.post(
        f"/api/tasks/{task.pk}/answers",
        {"answers": [{"finding": shell["id"], "kind": "reply", "text": "Not reachable."}]},
        format="json",
    )
    assert answered.status_code == 202
    drain_queue()
    task.refresh_from_db()
    assert task.state == TaskState.STUCK
    assert task.stuck_reason.startswith("GitHub refused to post the author's answer on acme/shop#7")


def test_recall_cancels_a_pass_waiting_for_the_reviewer(passes):
    passes.claude.script(CLEAN)
    task = passes.create_task()
    assert passes.done(task, passes.world.pull.head_sha).status_code == 202
    assert status(passes, task) == "Waiting for a reviewer"
    assert act(passes, task, "recall").status_code == 200
    drain_queue()
    run = ReviewRun.objects.get(pass_link__review_pass__task=task)
    assert run.status == RunStatus.CANCELLED and run.reason == f"task {task.pk} recalled"
    assert task.passes.get().status == PassStatus.FAILED
    assert not passes.reviews_by(REVIEWER_BOT)
    assert not passes.claude.model_requests


def test_an_answer_github_would_not_take_for_a_while_is_posted_once_later(passes):
    from datetime import timedelta

    from django.utils import timezone

    from reviews.models import Answer
    from reviews.passes.answers import answers_sweep

    passes.claude.script(ToolCall("submit_review", {"findings": [SHELL]}))
    task = passes.create_task()
    assert passes.done(task, passes.world.pull.head_sha).status_code == 202
    drain_queue()
    [shell] = passes.api.get(f"/api/tasks/{task.pk}/feedback").json()["findings"]
    # GitHub answers 502 to every post for a while.
    outage = passes.world.fake.inject(20, status=502, method="POST", path=r"/pulls/7/")
    answered = passes.api.post(
        f"/api/tasks/{task.pk}/answers",
        {"answers": [{"finding": shell["id"], "kind": "reply", "text": "Not reachable."}]},
        format="json",
    )
    assert answered.status_code == 202
    drain_queue()
    answer = Answer.objects.get()
    assert answer.posting == Answer.Posting.QUEUED  # not lost, not failed
    # GitHub being unavailable is waited out, not counted as a failed try.
    assert "502" in answer.error and (answer.tries, answer.deferrals) == (0, 1)
    task.refresh_from_db()
    assert task.state != TaskState.STUCK
    passes.world.fake.injections.remove(outage)
    # The next try lands, but its answer is lost on the way back.
    passes.world.fake.inject(1, status=502, method="POST", path=r"/pulls/7/", after=True)

    def wait_over():  # as long ago as the wait was: the last doorbell is older
        past = timezone.now() - timedelta(seconds=1)
        Answer.objects.update(next_try_at=past, rung_at=past - timedelta(seconds=1))

    wait_over()
    assert answers_sweep() == 1
    drain_queue()
    wait_over()
    answers_sweep()
    drain_queue()
    answer.refresh_from_db()
    assert answer.posting == Answer.Posting.POSTED
    from tests.reviews.passes.conftest import AUTHOR_BOT

    posted = [c for c in passes.comments_by(AUTHOR_BOT) if "Not reachable." in c["body"]]
    assert len(posted) == 1  # the try whose answer was lost is found by its marker


def test_a_reviewer_whose_model_outlasts_its_time_makes_the_task_stuck_naming_it(passes, settings):
    # The engine keeps 20 s of its time to hand the result back: a 21 s limit leaves it
    # one second, and the model does not answer within it.
    settings.TASUKU_SANDBOX_TIMEOUT = 21
    passes.claude.script(Loop(Hang(60)))
    task = passes.create_task()
    assert passes.done(task, passes.world.pull.head_sha).status_code == 202
    drain_queue()
    [run] = ReviewRun.objects.filter(pass_link__review_pass__task=task)
    assert run.status == RunStatus.COMPLETED  # not retried as an unreachable provider
    task.refresh_from_db()
    assert task.state == TaskState.STUCK
    assert task.stuck_reason == (
        "the reviewer ran past its time on acme/shop#7 (stopped at the deadline (21 s) before "
        "the review was submitted); Run another pass to try again"
    )
    assert task.passes.get().status == PassStatus.FAILED
    assert not passes.reviews_by(REVIEWER_BOT)

    settings.TASUKU_SANDBOX_TIMEOUT = 600
    passes.claude.reset()
    passes.claude.script(CLEAN)
    assert act(passes, task, "run_another_pass").status_code == 200
    drain_queue()
    task.refresh_from_db()
    assert task.state == TaskState.DONE


def test_a_reviewer_stopping_at_its_own_deadline_makes_the_task_stuck_naming_it(passes, settings):
    from repos.models import Reviewer

    # The engine keeps 20 s of its time to hand the result back: a 21 s limit leaves it
    # one second of reading, and it never submits within it.
    settings.TASUKU_SANDBOX_TIMEOUT = 21
    Reviewer.objects.filter(slug="claude").update(step_limit=500)
    passes.claude.script(Loop(ToolCall("read_file", {"path": "app/payments.py"})))
    task = passes.create_task()
    assert passes.done(task, passes.world.pull.head_sha).status_code == 202
    drain_queue()
    task.refresh_from_db()
    assert task.state == TaskState.STUCK
    assert task.stuck_reason == (
        "the reviewer ran past its time on acme/shop#7 (stopped at the deadline (21 s) before "
        "the review was submitted); Run another pass to try again"
    )
    assert not passes.reviews_by(REVIEWER_BOT)


def test_a_reviewer_the_sandbox_stops_at_its_limit_makes_the_task_stuck_naming_it(
    passes, monkeypatch
):
    """An engine wedged past its own deadline (here: a model that never answers, and a
    sandbox whose wall limit comes first) is stopped by the sandbox: `sandbox-timeout`."""
    from sandbox.runners import local as local_runner

    limits = local_runner.Limits
    monkeypatch.setattr(
        local_runner, "Limits", lambda **given: limits(**{**given, "wall_seconds": 3})
    )
    passes.claude.script(Loop(Hang(60)))
    task = passes.create_task()
    assert passes.done(task, passes.world.pull.head_sha).status_code == 202
    drain_queue()
    [run] = ReviewRun.objects.filter(pass_link__review_pass__task=task)
    assert (run.status, run.error_code) == (RunStatus.FAILED, "sandbox-timeout")
    task.refresh_from_db()
    assert task.state == TaskState.STUCK
    assert task.stuck_reason == (
        "the reviewer ran past its time on acme/shop#7 (The anthropic engine did not finish "
        "within 3s and was stopped); Run another pass to try again"
    )
    assert task.passes.get().status == PassStatus.FAILED
    assert status(passes, task).startswith("Review stuck: the reviewer ran past its time")
    assert not passes.reviews_by(REVIEWER_BOT)


def test_a_pass_run_past_the_runs_deadline_makes_the_task_stuck_naming_it(passes):
    """A worker that keeps its lease but never finishes: the reaper ends the run at the
    runs' deadline (`run-deadline`), and the task is stuck with another pass offered."""
    from datetime import timedelta

    from django.utils import timezone

    from reviews.queue import runs
    from reviews.tasks import tasks_sweep

    passes.claude.script(CLEAN)
    task = passes.create_task()
    assert passes.done(task, passes.world.pull.head_sha).status_code == 202
    [run] = ReviewRun.objects.filter(pass_link__review_pass__task=task)
    assert runs.run_claim(run.pk, worker="wedged:1") is not None  # taken, then never ends
    ReviewRun.objects.filter(pk=run.pk).update(
        started_at=timezone.now() - timedelta(minutes=46),
        lease_expires_at=timezone.now() + timedelta(minutes=1),  # its heartbeat goes on
    )
    assert runs.runs_reap()["failed"] == 1
    drain_queue()
    tasks_sweep()  # the minute's sweep concludes a pass whose runs all ended
    run.refresh_from_db()
    assert (run.status, run.error_code) == (RunStatus.FAILED, "run-deadline")
    task.refresh_from_db()
    assert task.state == TaskState.STUCK
    assert task.stuck_reason == (
        "the reviewer ran past its time on acme/shop#7 (did not finish within 45 minutes of "
        "starting); Run another pass to try again"
    )
    assert not passes.claude.model_requests  # nothing reached the model meanwhile

    assert act(passes, task, "run_another_pass").status_code == 200
    drain_queue()
    task.refresh_from_db()
    assert task.state == TaskState.DONE


def test_a_task_handed_off_with_passes_off_is_done_when_the_author_says_so(passes):
    created = passes.api.post(
        "/api/tasks/",
        {"title": "Refunds", "author": {"name": "agent-7", "login": "agent-app[bot]"},
         "pull_requests": [f"{REPO}#7"]},
        format="json",
    )  # fmt: skip
    task = Task.objects.get(pk=created.json()["id"])
    # Not handed off yet: nothing to be done with it.
    assert passes.done(task, passes.world.pull.head_sha).status_code == 409
    assert status(passes, task) == "Not handed off"
    handed = passes.api.post(f"/api/tasks/{task.pk}/handoff", {"enabled": False}, format="json")
    assert handed.status_code == 200, handed.json()
    assert status(passes, task) == "Handed off · review passes off"

    done = passes.done(task, passes.world.pull.head_sha)
    assert done.status_code == 200, done.json()
    assert done.json()["done"] is True and done.json()["started_pass"] is None
    task.refresh_from_db()
    assert task.state == TaskState.DONE and task.done_at is not None
    assert status(passes, task) == "Done · review passes off"
    assert not ReviewRun.objects.filter(pass_link__review_pass__task=task).exists()
    assert not passes.reviews_by(REVIEWER_BOT)  # nothing reviewed, nothing approved
    assert not passes.claude.model_requests
    assert passes.done(task, passes.world.pull.head_sha).status_code == 409  # done already
