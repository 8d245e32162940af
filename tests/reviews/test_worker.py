"""With real worker processes (`manage.py worker`) beside the test: the product as it
runs, through the real HTTP endpoint of a live server."""

from __future__ import annotations

import os
import signal
import time

import pytest

from reviews.models import ReviewRun, RunAttempt, RunStatus
from tests.gitworld import AWS_KEY_LINE, REPO, SHELL_TRUE_LINE, UNQUOTED_LINE, world_build
from tests.helpers import post_webhook_live, pull_request_payload
from tests.workers import Worker, wait_for

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def worker(tmp_path, fake_github):
    started = Worker(tmp_path / "worker.log")
    yield started
    started.stop()


def _final_run():
    run = ReviewRun.objects.order_by("-id").first()
    return (
        run if run is not None and run.status in (RunStatus.COMPLETED, RunStatus.FAILED) else None
    )


def test_a_webhook_to_the_live_server_becomes_a_review_by_a_real_worker(
    fake_github, test_app, live_server, worker, admin_client
):
    world = world_build(fake_github)
    response = post_webhook_live(
        live_server.url,
        "pull_request",
        pull_request_payload(world.fake, world.repo, world.pull),
        secret=test_app.webhook_secret,
    )
    assert response.status_code == 202

    run = wait_for(_final_run, timeout=60, what="the run to finish", worker=worker)

    assert run.status == RunStatus.COMPLETED, (run.stage, run.reason, worker.log()[-3000:])
    [review] = world.fake.reviews_of(REPO, 7)
    assert review["commit_id"] == world.head
    where = {(c["path"], c["line"]) for c in world.fake.review_comments_of(REPO, 7)}
    assert where == {
        ("app/payments.py", AWS_KEY_LINE),
        ("app/payments.py", SHELL_TRUE_LINE),
        ("deploy.sh", UNQUOTED_LINE),
    }
    assert world.fake.check_runs_of(REPO)[0].conclusion == "failure"
    page = admin_client.get(f"/runs/{run.pk}/")
    assert b"Secret committed: AWS Access Key" in page.content


def _post(world, live_server, test_app) -> None:
    body = pull_request_payload(world.fake, world.repo, world.pull)
    answer = post_webhook_live(
        live_server.url, "pull_request", body, secret=test_app.webhook_secret
    )
    assert answer.status_code == 202


def _taken_over_once(world, worker) -> ReviewRun:
    run = wait_for(_final_run, timeout=60, what="another worker to finish the run", worker=worker)
    assert run.status == RunStatus.COMPLETED, (run.reason, worker.log()[-3000:])
    assert len(world.fake.reviews_of(REPO, 7)) == 1
    comments = world.fake.review_comments_of(REPO, 7)
    assert len(comments) == 3
    assert len({c["body"] for c in comments}) == 3
    attempts = list(run.attempt_rows.order_by("number").values_list("number", "outcome", "worker"))
    assert [(n, outcome) for n, outcome, _ in attempts] == [(1, "lost"), (2, "succeeded")]
    assert attempts[0][2] != attempts[1][2]
    return run


def test_a_run_held_by_a_killed_worker_process_is_handed_on_by_its_cluster_at_once(
    fake_github, test_app, live_server, tmp_path
):
    world = world_build(fake_github)
    # GitHub creates the review, then takes 60 s to answer: the worker process is killed
    # while it waits, holding the run.
    world.fake.slow(1, seconds=60, method="POST", path=r"/pulls/7/reviews$", after=True)
    # A lease longer than the test: only its cluster, seeing the process die, hands on.
    worker = Worker(tmp_path / "worker.log", lease=120, heartbeat=1)
    try:
        _post(world, live_server, test_app)
        wait_for(lambda: world.fake.reviews_of(REPO, 7), timeout=60,
                 what="the review to be posted", worker=worker)  # fmt: skip
        holder = int(RunAttempt.objects.get().worker.rsplit(":", 1)[1])
        killed = time.monotonic()
        os.kill(holder, signal.SIGKILL)
        _taken_over_once(world, worker)
        assert time.monotonic() - killed < 20
    finally:
        worker.stop()


def test_a_run_of_a_killed_worker_host_is_taken_over_by_another_hosts_reaper(
    fake_github, test_app, live_server, tmp_path
):
    world = world_build(fake_github)
    world.fake.slow(1, seconds=60, method="POST", path=r"/pulls/7/reviews$", after=True)
    first = Worker(tmp_path / "first.log", lease=3, heartbeat=1)
    second = None
    try:
        _post(world, live_server, test_app)
        wait_for(lambda: world.fake.reviews_of(REPO, 7), timeout=60,
                 what="the review to be posted", worker=first)  # fmt: skip
        second = Worker(tmp_path / "second.log", lease=3, heartbeat=1)
        second.ready()
        # The whole host is gone at once: nothing of it says what it held. The other
        # worker's reaper finds the lease (3 s here) run out and hands the run on.
        os.killpg(first.process.pid, signal.SIGKILL)
        _taken_over_once(world, second)
    finally:
        first.stop()
        if second is not None:
            second.stop()
