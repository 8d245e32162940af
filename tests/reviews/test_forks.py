"""Pull requests from forks: the head branch is in another repository (or in none, once
the fork is deleted). Its commits are read from the base repository, where GitHub keeps
them (`refs/pull/<n>/head`); they are never run in the base repository's GitHub Actions."""

from __future__ import annotations

import pytest

from repos.models import Reviewer
from reviews.models import Finding, PullRequest, ReviewRun, RunStatus
from tests.gitworld import HEAD_FILES, REPO, SHELL_TRUE_LINE, world_build
from tests.helpers import drain_queue, post_webhook, pull_request_payload

pytestmark = pytest.mark.django_db


def fork_world(fake_github, head_repo: str | None):
    """The pull request's head commit exists in the base repository's objects only (as
    GitHub's refs/pull/<n>/head): on none of its branches."""
    world = world_build(fake_github)
    head = world.git.commit(HEAD_FILES, parent=world.base, message="from the fork")
    world.repo.commits.add(head)
    world.pull.head_sha, world.head = head, head
    world.pull.head_ref = "patch-1"
    world.pull.head_repo = head_repo
    return world


def opened(world, client, test_app) -> ReviewRun:
    body = pull_request_payload(world.fake, world.repo, world.pull, action="opened")
    assert (
        post_webhook(client, "pull_request", body, secret=test_app.webhook_secret).status_code
        == 202
    )
    drain_queue()
    return ReviewRun.objects.get()


@pytest.mark.parametrize("head_repo", ["mallory/shop", None], ids=["fork", "deleted-fork"])
def test_a_fork_pull_request_is_reviewed_from_the_base_repository(
    fake_github, client, test_app, head_repo
):
    world = fork_world(fake_github, head_repo)
    run = opened(world, client, test_app)
    assert run.status == RunStatus.COMPLETED, (run.stage, run.reason)
    pull = PullRequest.objects.get()
    assert (pull.from_fork, pull.head_repository) == (True, head_repo or "")
    assert Finding.objects.filter(
        review__run=run, path="app/payments.py", start_line=SHELL_TRUE_LINE
    ).exists()
    assert any(c["path"] == "app/payments.py" for c in fake_github.review_comments_of(REPO, 7))


def test_a_pull_request_of_the_repository_itself_is_no_fork(fake_github, client, test_app):
    world = world_build(fake_github)
    opened(world, client, test_app)
    assert (PullRequest.objects.get().from_fork, PullRequest.objects.get().head_repository) == (
        False, REPO,
    )  # fmt: skip


def test_a_fork_is_never_dispatched_to_github_actions(fake_github, client, test_app):
    world = fork_world(fake_github, "mallory/shop")
    Reviewer.objects.filter(slug="static").update(runner="actions")
    run = opened(world, client, test_app)
    assert (run.status, run.error_code) == (RunStatus.FAILED, "actions-fork")
    assert "comes from a fork (mallory/shop)" in run.reason
    assert not fake_github.requests("POST", r"/dispatches$")
    [check] = fake_github.check_runs_of(REPO)
    assert check.conclusion == "failure"
    assert "fork" in check.output["summary"]
