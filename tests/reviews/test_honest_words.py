"""Every word Tasuku says is true: no disk state, path, pragma, delivery order, reviewer
combination or command makes the check, the summary, a reply or an approval say more
than happened. Each case goes through the real webhook endpoint and the worker's tasks
against the fake GitHub."""

from __future__ import annotations

import contextlib
import subprocess
from datetime import timedelta

import pytest
from django.utils import timezone

from reviews.models import Review, ReviewRun, RunAttempt, RunStatus
from reviews.runs import runs_reap
from tests.gitworld import PAYMENTS, REPO, world_build
from tests.helpers import drain_queue, post_webhook, pull_request_payload

pytestmark = pytest.mark.django_db

KEY_TITLE = "AWS Access Key"


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

    return send


def last_check(world):
    return world.fake.check_runs_of(REPO)[-1]


def tasuku_reviews(world):
    return [r for r in world.fake.reviews_of(REPO, world.pull.number) if r["user"]["type"] == "Bot"]


def retry_now() -> None:
    """The run's backoff is over: the reaper rings it and a worker takes it."""
    past = timezone.now() - timedelta(seconds=1)
    ReviewRun.objects.filter(next_attempt_at__isnull=False).update(
        next_attempt_at=past, rung_at=past - timedelta(seconds=1)
    )
    runs_reap()
    drain_queue()


@contextlib.contextmanager
def small_disk(path, size: str):
    """A tmpfs of `size` mounted at `path` (the test is skipped where this process may
    not mount one)."""
    path.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
        capture_output=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode().strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True, check=False)


# --- 1. A full disk is never a clean review ---------------------------------------------

BIG = "\0" * 600_000  # a binary file, larger than the small disk: nothing checks it


def test_a_full_workspace_disk_fails_the_checkout_instead_of_reviewing_what_was_written(
    fake_github, deliver, settings, tmp_path
):
    # The key sorts after the big file: git writes the big one first and fills the disk.
    world = world_build(fake_github, head_files={"app/a_big.bin": BIG, "app/payments.py": PAYMENTS})
    with small_disk(tmp_path / "disk", "512k") as disk:
        settings.TASUKU_WORKSPACE_ROOT = str(disk)
        deliver(world)
        run = ReviewRun.objects.get()
        assert run.status == RunStatus.QUEUED  # to be tried again, not reviewed
        attempt = RunAttempt.objects.get(run=run)
        assert attempt.error_code == "workspace-write", attempt.error
        assert attempt.stage == "clone"
        assert not Review.objects.exists()
        assert not tasuku_reviews(world)
        assert last_check(world).conclusion is None  # still under way: never success

    # The same head with room to check it out: reviewed, and the key fails it.
    settings.TASUKU_WORKSPACE_ROOT = str(tmp_path)
    retry_now()
    run.refresh_from_db()
    assert run.status == RunStatus.COMPLETED, run.reason
    check = last_check(world)
    assert check.conclusion == "failure"
    assert KEY_TITLE in check.output["summary"]
