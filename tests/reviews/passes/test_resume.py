"""A later pass resumes the same reviewer's conversation, so it remembers what it read
and decided; when it cannot (another model, say), a fresh reviewer starts with a summary
of the previous pass, and the run page says which."""

from __future__ import annotations

import json

import pytest

from repos.models import Reviewer
from reviews.models import ReviewRun
from tests.fakes.models import ToolCall
from tests.gitworld import PAYMENTS
from tests.helpers import drain_queue
from tests.reviews.passes.conftest import earlier_ids, finding

pytestmark = pytest.mark.django_db

SHELL = finding("app/payments.py", 8, "Order id reaches a shell", blocking=True, severity="high")
FIXED = PAYMENTS.replace(
    '    cmd = f"refund --order {order_id}"\n    return subprocess.call(cmd, shell=True)\n',
    '    return subprocess.call(["refund", "--order", str(order_id)])\n',
)


def _texts(request) -> str:
    return json.dumps(request.messages)


def _two_passes(passes, second, *, between=None):
    passes.claude.script(
        ToolCall("read_file", {"path": "app/payments.py"}),
        ToolCall("submit_review", {"findings": [SHELL]}),
        second,
    )
    task = passes.create_task()
    assert passes.done(task, passes.world.pull.head_sha).status_code == 202
    drain_queue()
    if between:
        between(task)
    fixed = passes.world.push({"app/payments.py": FIXED})
    assert passes.done(task, fixed).status_code == 202
    drain_queue()
    return task


def _rule_resolved(seen):
    def step(request):
        seen.append(request)
        ids = earlier_ids(request)
        rulings = [{"id": i, "still_open": False, "reason": "a list now"} for i in ids.values()]
        return ToolCall("submit_review", {"findings": [], "rulings": rulings})

    return step


def test_pass_two_continues_the_conversation_of_pass_one(passes, staff_client):
    seen = []
    task = _two_passes(passes, _rule_resolved(seen))
    [request] = seen
    messages = request.messages
    said = _texts(request)
    # Pass 1's conversation, then pass 2's prompt: the model sees what it read and said.
    assert messages[0]["role"] == "user" and "Another pass" not in json.dumps(messages[0])
    assert '"name": "read_file"' in said and '"name": "submit_review"' in said
    assert "subprocess.call(cmd, shell=True)" in said  # the file it read in pass 1
    last = json.dumps(messages[-1])
    assert "Another pass: you reviewed this pull request before" in last
    assert "<<<DATA " in last  # this pass's data, fenced afresh
    # The boundary of pass 1's data is still declared as data.
    first_boundary = json.dumps(messages[0]).split("<<<DATA ")[1].split(">>>")[0]
    assert first_boundary in request.system
    run = ReviewRun.objects.filter(pass_link__review_pass__task=task).order_by("pk").last()
    assert run.pass_link.conversation_note.startswith("continues pass 1's conversation")
    page = staff_client.get(f"/runs/{run.pk}/").content.decode()
    assert (
        "Continues pass 1&#x27;s conversation" in page or "Continues pass 1's conversation" in page
    )
    task.refresh_from_db()
    assert task.state == "done"


def test_another_model_starts_fresh_with_a_summary_of_the_previous_pass(passes):
    seen = []

    def switch_model(task):
        # The operator moves the reviewer to another model between the passes (a task
        # chooses only among the reviewer's own models).
        Reviewer.objects.filter(slug="claude").update(model="claude-opus-5-1")

    task = _two_passes(passes, _rule_resolved(seen), between=switch_model)
    [request] = seen
    assert request.model == "claude-opus-5-1"
    assert len(request.messages) == 1  # a fresh conversation
    said = _texts(request)
    assert "What you concluded in the previous pass (a summary)" in said
    assert "Pass 1 reviewed head" in said
    run = ReviewRun.objects.filter(pass_link__review_pass__task=task).order_by("pk").last()
    assert run.pass_link.conversation_note == (
        "a fresh start: pass 1 used claude-sonnet-5-5, this pass claude-opus-5-1"
    )


def test_a_kept_conversation_is_bounded_and_long_reads_are_shortened():
    from sandbox.agent.resume import conversation_kept
    from sandbox.contract import MAX_CONVERSATION_CHARS

    big = "x" * 60_000
    messages = [{"role": "user", "content": [{"type": "text", "text": "review"}]}]
    for n in range(10):
        messages += [
            {"role": "assistant", "content": [{"type": "tool_use", "id": f"t{n}",
                                                "name": "read_file", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"t{n}",
                                           "content": big}]},
        ]  # fmt: skip
    kept = conversation_kept("anthropic", "m", messages, ("b1",))
    assert kept is not None and kept.shortened >= 3
    assert len(json.dumps(kept.messages)) <= MAX_CONVERSATION_CHARS
    assert "shortened when this conversation was kept" in json.dumps(kept.messages)
    assert messages[1]["content"][0]["id"] == "t0"  # the original is left as it was
    huge = [{"role": "user", "content": "y" * (MAX_CONVERSATION_CHARS + 10)}]
    assert conversation_kept("anthropic", "m", huge, ()) is None
