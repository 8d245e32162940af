"""A later pass reviews only what changed since the previous pass, is asked to rule on
every earlier blocking finding (those on code it no longer reviews too), and its rulings
settle them."""

from __future__ import annotations

import json

import pytest

from reviews.models import Finding, ReviewRun
from tests.fakes.models import ToolCall
from tests.gitworld import PAYMENTS
from tests.helpers import drain_queue
from tests.reviews.passes.conftest import earlier_ids, finding

pytestmark = pytest.mark.django_db

SHELL = finding("app/payments.py", 8, "Order id reaches a shell", blocking=True, severity="high")
QUOTE = finding("deploy.sh", 3, "Unquoted target directory", blocking=True, severity="high")
# The author reworks the shell call's lines, and it still goes through a shell.
REWORKED = PAYMENTS.replace(
    '    cmd = f"refund --order {order_id}"\n    return subprocess.call(cmd, shell=True)\n',
    '    cmd = "refund --order " + str(order_id)\n'
    "    return subprocess.call(cmd, shell=True, timeout=30)\n",
)


def test_a_later_pass_reviews_the_increment_and_rules_on_every_earlier_blocking_finding(passes):
    world = passes.world
    seen = []

    def pass_two(request):
        seen.append(request)
        ids = earlier_ids(request)
        return ToolCall(
            "submit_review",
            {"findings": [], "rulings": [
                {"id": ids[SHELL["title"]], "still_open": True, "reason": "still a shell string"},
                {"id": ids[QUOTE["title"]], "still_open": True, "reason": "not touched"},
            ]},
        )  # fmt: skip

    passes.claude.script(ToolCall("submit_review", {"findings": [SHELL, QUOTE]}), pass_two)
    task = passes.create_task()
    assert passes.done(task, world.pull.head_sha).status_code == 202
    drain_queue()
    first_head = world.pull.head_sha
    reworked = world.push({"app/payments.py": REWORKED})
    assert passes.done(task, reworked).status_code == 202
    drain_queue()

    # Pass 2 reviews what changed since pass 1's head, and nothing else.
    run = ReviewRun.objects.filter(pass_link__review_pass__task=task).order_by("pk").last()
    assert run.pass_link.review_pass.number == 2 and run.incremental_since == first_head
    assert run.reviewed == ["app/payments.py"]
    [request] = seen
    asked = json.dumps(request.messages[-1])
    assert f"only the changes since commit {first_head[:12]}" in asked
    assert "Files to review:\\n- app/payments.py [modified]" in asked
    assert "TARGET_DIR" not in asked  # deploy.sh's lines are not this pass's diff
    assert "the pull request as a whole touches: README.md, app/payments.py, deploy.sh." in asked
    # It is asked to rule on every earlier blocking finding, deploy.sh's included.
    assert set(earlier_ids(request)) == {SHELL["title"], QUOTE["title"]}
    # Its rulings settle them: the shell call's lines changed, and it still stands open
    # because the reviewer ruled so.
    still = Finding.objects.filter(review__run=run, state="open", blocking=True)
    assert set(still.values_list("title", flat=True)) == {SHELL["title"], QUOTE["title"]}
    assert not passes.thread_of("app/payments.py", 8)["isResolved"]
    feedback = passes.api.get(f"/api/tasks/{task.pk}/feedback").json()
    rulings = {f["title"]: f["ruling"] for f in feedback["findings"]}
    assert rulings[SHELL["title"]] == {"still_open": True, "reason": "still a shell string"}
    assert passes.api.get(f"/api/tasks/{task.pk}").json()["status"] == "Author fixing · 2 blocking"
