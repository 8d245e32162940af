"""A review's cost on GitHub, counted against the fake: a clean warm review (a worker with
its read token and mirror) makes at most 4 writes and 7 requests — its check run created
`in_progress`, one review (its inline comments inside it), its walkthrough posted once
with its final text, its check completed; the pull request read once; git's two fetches.
Beside them, each write has a token of its own, minted for it and revoked after (the
Tasuku App's tokens that can post outlive no post: docs/review-passes.md): two token
calls a write, which create no content (GitHub's secondary limits count content)."""

from __future__ import annotations

from collections import Counter

import pytest

from benchmarks.github_weather import endpoint_of
from reviews.models import ReviewRun, RunStatus
from tests.fakes.github import Pull
from tests.gitworld import HEAD_FILES, REPO, world_build
from tests.helpers import drain_queue, post_webhook, pull_request_payload

pytestmark = pytest.mark.django_db

WRITES = ("POST", "PATCH", "PUT", "DELETE")


@pytest.fixture
def world(fake_github):
    return world_build(fake_github)


def review(world, client, test_app, pull) -> ReviewRun:
    body = pull_request_payload(world.fake, world.repo, pull)
    response = post_webhook(client, "pull_request", body, secret=test_app.webhook_secret)
    assert response.status_code == 202, response.content
    drain_queue()
    return ReviewRun.objects.filter(pull_request__number=pull.number).get()


def another_pull(world, number: int, *, clean: bool = False) -> Pull:
    files = (
        {"app/values.py": f"VALUE = {number}\n"}
        if clean
        else {**HEAD_FILES, "app/payments.py": HEAD_FILES["app/payments.py"] + f"# {number}\n"}
    )
    head = world.git.commit(
        files, parent=world.base, message=f"feature {number}", branch=f"feature{number}"
    )
    return world.fake.add_pull(
        REPO, Pull(number=number, title="Add refunds", head_sha=head, base_sha=world.base)
    )


TOKEN_CALLS = {"POST /app/installations/{n}/access_tokens", "DELETE /installation/token"}


def counted(world) -> tuple[Counter, Counter, int]:
    """The API's writes and reads by endpoint (the writes' own tokens apart), and git's
    fetches."""
    calls = world.fake.requests()
    api = [
        c
        for c in calls
        if ".git/" not in c.path and endpoint_of(c.method, c.path) not in TOKEN_CALLS
    ]
    writes = Counter(endpoint_of(c.method, c.path) for c in api if c.method in WRITES)
    reads = Counter(endpoint_of(c.method, c.path) for c in api if c.method not in WRITES)
    fetches = sum(1 for c in calls if c.path.endswith(".git/git-upload-pack"))
    return writes, reads, fetches


FLOOR = {
    "POST /repos/{r}/check-runs": 1,  # created in progress
    "POST /repos/{r}/pulls/{n}/reviews": 1,  # one review, its inline comments inside it
    "POST /repos/{r}/issues/{n}/comments": 1,  # the walkthrough, once, with its final text
    "PATCH /repos/{r}/check-runs/{n}": 1,  # completed
}


def test_a_clean_warm_review_makes_four_writes_and_seven_requests(world, client, test_app):
    cold = review(world, client, test_app, world.pull)  # tokens minted, mirror filled
    assert cold.status == RunStatus.COMPLETED, cold.reason
    pull = another_pull(world, 8, clean=True)
    world.fake.calls.clear()

    run = review(world, client, test_app, pull)
    assert run.status == RunStatus.COMPLETED, run.reason
    writes, reads, fetches = counted(world)
    assert writes == FLOOR, writes
    assert reads == {"GET /repos/{r}/pulls/{n}": 1}, reads  # the pull request, read once
    assert fetches == 2  # git's two: the commits, then the blobs the review reads
    assert sum(writes.values()) + sum(reads.values()) + fetches == 7
    assert world.fake.limits.hits == []  # no documented secondary limit met
    # Each write's token, minted for it and revoked after it: none kept between posts.
    tokens = Counter(endpoint_of(c.method, c.path) for c in world.fake.requests())
    assert tokens["POST /app/installations/{n}/access_tokens"] == 4
    assert tokens["DELETE /installation/token"] == 4

    # What the pull request's reader sees is unchanged: the review, the walkthrough with
    # its final text, the check run created in progress and completed.
    assert [r for r in world.fake.reviews_of(REPO, 8) if r["user"]["type"] == "Bot"]
    [walkthrough] = [c for c in world.fake.issue_comments_of(REPO, 8) if c["user"]["type"] == "Bot"]
    assert "✅ reviewed at `" + pull.head_sha[:7] in walkthrough["body"]
    [created] = world.fake.requests("POST", r"/check-runs$")
    assert created.body["status"] == "in_progress"
    [check] = [c for c in world.fake.check_runs_of(REPO) if c.head_sha == pull.head_sha]
    assert check.status == "completed" and check.conclusion == "success"


def test_a_warm_review_with_inline_comments_is_still_one_review_post(world, client, test_app):
    cold = review(world, client, test_app, world.pull)
    assert cold.status == RunStatus.COMPLETED, cold.reason
    pull = another_pull(world, 9)
    world.fake.calls.clear()

    run = review(world, client, test_app, pull)
    assert run.status == RunStatus.COMPLETED, run.reason
    writes, reads, _ = counted(world)
    assert writes == FLOOR, writes
    assert len(world.fake.review_comments_of(REPO, 9)) >= 2  # inline, in that one review
    # The pull request, and its review comments once (to record which comment is which
    # finding's thread).
    assert reads == {"GET /repos/{r}/pulls/{n}": 1, "GET /repos/{r}/pulls/{n}/comments": 1}
    [check] = [c for c in world.fake.check_runs_of(REPO) if c.head_sha == pull.head_sha]
    assert check.status == "completed" and check.conclusion == "failure"
