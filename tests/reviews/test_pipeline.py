"""The review pipeline end to end: a signed pull_request webhook through the HTTP
endpoint, the worker's tasks run through the real queue, a real git checkout of the fake
GitHub's repository, the static engine in its sandbox, one review on GitHub."""

from __future__ import annotations

import pytest

from reviews.models import Finding, Review, ReviewRun, RunStatus
from tests.gitworld import AWS_KEY_LINE, REPO, SHELL_TRUE_LINE, UNQUOTED_LINE, world_build
from tests.helpers import drain_queue, post_webhook, pull_request_payload

pytestmark = pytest.mark.django_db


@pytest.fixture
def world(fake_github):
    return world_build(fake_github)


@pytest.fixture
def deliver(client, test_app):
    def send(world, action="opened", **extra):
        body = pull_request_payload(world.fake, world.repo, world.pull, action=action, **extra)
        response = post_webhook(client, "pull_request", body, secret=test_app.webhook_secret)
        assert response.status_code == 202, response.content
        drain_queue()
        return ReviewRun.objects.order_by("-id").first()

    return send


def test_a_pull_request_gets_one_review_with_comments_on_exactly_the_added_problems(world, deliver, staff_client):
    run = deliver(world)

    run.refresh_from_db()
    assert run.status == RunStatus.COMPLETED, (run.status, run.stage, run.reason)
    reviews = world.fake.reviews_of(REPO, 7)
    assert len(reviews) == 1
    assert reviews[0]["state"] == "COMMENTED"
    assert reviews[0]["commit_id"] == world.head
    comments = world.fake.review_comments_of(REPO, 7)
    where = sorted((c["path"], c["line"]) for c in comments)
    assert ("app/payments.py", SHELL_TRUE_LINE) in where
    assert ("app/payments.py", AWS_KEY_LINE) in where
    assert ("deploy.sh", UNQUOTED_LINE) in where
    assert not any(path == "app/legacy.py" for path, _ in where)
    assert all(c["side"] == "RIGHT" for c in comments)

    check = world.fake.check_runs_of(REPO)[0]
    assert (check.status, check.conclusion) == ("completed", "failure")

    review = Review.objects.get(run=run)
    assert review.github_review_id == reviews[0]["id"]
    published = Finding.objects.filter(review=review, published=True)
    assert published.count() == len(comments)
    assert all(f.github_comment_id for f in published)

    page = staff_client.get(f"/runs/{run.pk}/")
    assert b"shell=True" in page.content
    assert b"Secret committed: AWS Access Key" in page.content
    assert page.content.count(b"discussion_r") == len(comments)
