"""A review pass never takes the author's own suppression comment for a fix: the author
under review cannot silence its blocking findings with `# noqa`, whatever the policy."""

from __future__ import annotations

import pytest

from repos.models import Repository
from reviews.models import Finding
from tests.gitworld import PAYMENTS, REPO
from tests.helpers import drain_queue
from tests.reviews.passes.conftest import REVIEWER_BOT

pytestmark = pytest.mark.django_db

SILENCED = PAYMENTS.replace(
    '"AKIAZ2Q7WJ4KXN5BL3TP"', '"AKIAZ2Q7WJ4KXN5BL3TP"  # pragma: allowlist secret'
).replace("shell=True)", "shell=True)  # noqa: S602")


@pytest.mark.parametrize("honoured", [False, True], ids=["policy off", "policy honours them"])
def test_a_pass_never_approves_over_the_authors_own_suppression_of_a_blocking_finding(
    passes, honoured
):
    policy = Repository.objects.get(full_name=REPO).policy
    policy.honour_pr_suppressions = honoured
    policy.save()
    task = passes.create_task(max_passes=3, reviewer={"slug": "static"})
    assert passes.done(task, passes.world.pull.head_sha).status_code == 202
    drain_queue()
    first = Finding.objects.filter(state="open", blocking=True).values_list("rule", flat=True)
    assert {"ruff:S602", "detect-secrets:AWS Access Key"} <= set(first)

    quiet = passes.world.push({"app/payments.py": SILENCED}, message="silence it")
    assert passes.done(task, quiet).status_code == 202
    drain_queue()

    assert not [r for r in passes.reviews_by(REVIEWER_BOT) if r["state"] == "APPROVED"]
    task.refresh_from_db()
    assert task.state != "done"
    still = Finding.objects.filter(review__head_sha=quiet, state="open", blocking=True).values_list(
        "rule", "suppressed_in_pr"
    )
    rules = {rule for rule, _ in still}
    assert {"ruff:S602", "detect-secrets:AWS Access Key"} <= rules
    assert all(said for _, said in still)  # each says which pragma it ignored
