"""A pull request retargeted to another base branch (`pull_request.edited` with
`changes.base`): its head is reviewed again in full against the new base, and what it
no longer changes is no longer its own — those findings are outdated, never "fixed"."""

from __future__ import annotations

import pytest

from reviews.models import Finding, ReviewRun, RunStatus
from tests.fakes.github import Pull
from tests.helpers import drain_queue, post_webhook, pull_request_payload

pytestmark = pytest.mark.django_db

INSTALLATION, REPO, NUMBER = 52, "acme/stack", 4
PAYMENTS = (
    "import subprocess\n\n\n"
    "def refund(order):\n"
    '    cmd = f"refund {order}"\n'
    "    return subprocess.call(cmd, shell=True)\n"  # line 6
)
DEPLOY = "#!/bin/bash\nset -e\nrm -rf $TARGET_DIR/\n"  # line 3
TOOLS = "def parse(text):\n    return eval(text)\n"  # line 2


@pytest.fixture
def world(fake_github):
    """A stacked branch: `payments` (its own pull request, not merged yet) and on top of
    it `tools`; the pull request of `tools` first targets main, so it shows both."""
    fake_github.add_installation(INSTALLATION, "acme")
    repo, git = fake_github.add_git_repo(REPO, installation_id=INSTALLATION, repo_id=7302)
    base = git.commit({"README.md": "# Stack\n"}, branch="main")
    lower = git.commit({"app/payments.py": PAYMENTS, "deploy.sh": DEPLOY}, parent=base,
                       branch="payments")  # fmt: skip
    head = git.commit({"app/tools.py": TOOLS}, parent=lower, branch="tools")
    pull = fake_github.add_pull(
        REPO, Pull(number=NUMBER, title="Tools", head_sha=head, base_sha=base, head_ref="tools")
    )

    class World:
        pass

    w = World()
    w.fake, w.repo, w.git, w.pull, w.lower = fake_github, repo, git, pull, lower
    return w


def send(world, client, test_app, action: str, **extra):
    body = pull_request_payload(world.fake, world.repo, world.pull, action=action, **extra)
    assert (
        post_webhook(client, "pull_request", body, secret=test_app.webhook_secret).status_code
        == 202
    )
    drain_queue()
    return body


def retarget(world, client, test_app, *, to: str, sha: str):
    changes = {"base": {"ref": {"from": world.pull.base_ref}, "sha": {"from": world.pull.base_sha}}}
    world.pull.base_ref, world.pull.base_sha = to, sha
    return send(world, client, test_app, "edited", changes=changes)


def threads(world) -> dict[tuple[str, int], dict]:
    return {
        (t["comments"][0]["path"], t["comments"][0]["line"]): t
        for t in world.fake.threads_of(REPO, NUMBER)
    }


def test_a_retargeted_pull_request_is_reviewed_against_its_new_base(world, client, test_app):
    send(world, client, test_app, "opened")
    first = ReviewRun.objects.get()
    assert first.status == RunStatus.COMPLETED, first.reason
    assert {f.path for f in Finding.objects.filter(review__run=first, state="open")} == {
        "app/payments.py", "app/tools.py", "deploy.sh",
    }  # fmt: skip

    # Retargeted onto the branch below it: payments and deploy are that branch's now.
    body = retarget(world, client, test_app, to="payments", sha=world.lower)
    second = ReviewRun.objects.order_by("-id").first()
    assert (second.trigger, second.status, second.head_sha, second.base_sha) == (
        "retarget", RunStatus.COMPLETED, world.pull.head_sha, world.lower,
    )  # fmt: skip
    # Still this pull request's: the eval in tools.py.
    assert Finding.objects.get(review__run=second, path="app/tools.py").state == "open"
    head = world.pull.head_sha[:7]
    found = threads(world)
    for path, line in (("app/payments.py", 6), ("deploy.sh", 3)):
        thread = found[(path, line)]
        reply = thread["comments"][-1]["body"].splitlines()[0]
        assert reply == (
            f"Outdated at {head}: `{path}:{line}` is no longer part of this pull request: "
            "its base is now `payments`, which has that code as it is."
        )
        assert thread["isResolved"]
    assert not found[("app/tools.py", 2)]["isResolved"]
    assert {
        f.state for f in Finding.objects.filter(review__run=first).exclude(path="app/tools.py")
    } == {"outdated"}
    assert world.fake.check_runs_of(REPO)[-1].conclusion == "failure"  # the eval stands

    # The same event again (a redelivery) reviews nothing twice.
    post_webhook(client, "pull_request", body, secret=test_app.webhook_secret)
    drain_queue()
    assert ReviewRun.objects.order_by("-id").first().pk == second.pk


def test_an_edited_title_is_not_a_retarget(world, client, test_app):
    send(world, client, test_app, "opened")
    send(world, client, test_app, "edited", changes={"title": {"from": "Old title"}})
    assert ReviewRun.objects.count() == 1


def test_a_retarget_of_a_draft_follows_the_draft_rule(world, client, test_app):
    send(world, client, test_app, "opened")
    world.pull.draft = True
    retarget(world, client, test_app, to="payments", sha=world.lower)
    assert ReviewRun.objects.count() == 1  # drafts are not reviewed by default
