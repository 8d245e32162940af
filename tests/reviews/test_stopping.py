"""Stopping a real worker (`manage.py worker`, started in a process group of its own) as
process managers do: SIGTERM to the whole group (systemd, `kill -- -PGID`), SIGTERM to
the main process alone (tini, Docker, `kill PID`), SIGINT to the group (Ctrl-C), SIGTERM
to PID 1 of a container. Idle, or holding a run in its clone, its engine (a model that
hangs) or its publication: the worker exits within its bound (TASUKU_STOP_SECONDS, 10 s
here); a run in publication is finished, any other is handed back at once — its attempt
interrupted and not counted, its engine and git stopped, its workspace removed, its
doorbell rung — and another worker (this test process) completes it: one review."""

from __future__ import annotations

import os
import shutil
import signal
import time
from pathlib import Path

import pytest
from django.utils import timezone
from django_q.models import OrmQ
from django_q.signing import SignedPackage

from repos.models import Reviewer
from reviews.models import ReviewRun, RunStatus, WorkerHeartbeat
from reviews.queue.runs import PROCESS_TASK
from tests.fakes.models import ANTHROPIC_TEST_KEY, Hang, ToolCall
from tests.gitworld import REPO, SHELL_TRUE_LINE, world_build
from tests.helpers import drain_queue, post_webhook, pull_request_payload, queued_tasks
from tests.workers import Worker, wait_for

pytestmark = pytest.mark.django_db(transaction=True)

BOUND = 10  # TASUKU_STOP_SECONDS of the workers started here
HOW = ["group", "main", "interrupt"]

SHELL = {
    "path": "app/payments.py", "start_line": SHELL_TRUE_LINE, "end_line": SHELL_TRUE_LINE,
    "severity": "high", "category": "security", "title": "Order id reaches a shell",
    "body": "An order id like `1; rm -rf /` runs as a shell command.",
    "evidence": "refund('1; rm -rf /') runs rm.", "confidence": 0.95, "blocking": True,
}  # fmt: skip


def _start(tmp_path: Path, stop_seconds: int = BOUND, **kwargs) -> Worker:
    # A lease far longer than the test: a run taken over quickly was handed back, not
    # reaped after its lease.
    worker = Worker(tmp_path / "worker.log", lease=120, heartbeat=1, stop_seconds=stop_seconds,
                    **kwargs)  # fmt: skip
    worker.ready()
    return worker


@pytest.fixture
def workspaces(tmp_path, monkeypatch):
    root = tmp_path / "workspaces"
    root.mkdir()
    monkeypatch.setenv("TASUKU_WORKSPACE_ROOT", str(root))
    return root


@pytest.fixture
def claude(settings, fake_anthropic):
    settings.ANTHROPIC_BASE_URL = fake_anthropic.base_url
    settings.ANTHROPIC_API_KEY = ANTHROPIC_TEST_KEY
    Reviewer.objects.update(default_for_new_repositories=False)
    Reviewer.objects.create(slug="claude", engine="anthropic", model="claude-sonnet-5-5",
                            default_for_new_repositories=True)  # fmt: skip
    return fake_anthropic


def _open_pull_request(world, client, test_app) -> None:
    body = pull_request_payload(world.fake, world.repo, world.pull, action="opened")
    answer = post_webhook(client, "pull_request", body, secret=test_app.webhook_secret)
    assert answer.status_code == 202


def _holder(worker: Worker) -> int:
    run = wait_for(lambda: ReviewRun.objects.filter(status=RunStatus.RUNNING).first(),
                   timeout=30, what="a worker to take the run", worker=worker)  # fmt: skip
    return int(run.worker.rsplit(":", 1)[1])


def _children(pid: int) -> list[int]:
    try:
        return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _handed_back(worker: Worker, stage: str) -> ReviewRun:
    """The run after the stop: waiting for another worker, rung, its attempt given back."""
    run = ReviewRun.objects.get()
    assert run.status == RunStatus.QUEUED, (run.status, run.reason, worker.log()[-3000:])
    assert run.attempts == 0  # the interrupted attempt is not counted
    assert run.next_attempt_at is None and run.lease_expires_at is None
    assert run.reason.startswith("interrupted: ")
    [attempt] = run.attempt_rows.all()
    assert (attempt.outcome, attempt.stage, attempt.error_code) == (
        "interrupted", stage, "worker-stopped")  # fmt: skip
    assert queued_tasks(PROCESS_TASK) == [(PROCESS_TASK, (run.pk,))]  # rung for another
    return run


def _completed_here_once(world) -> ReviewRun:
    drain_queue()  # this test process is the other worker
    run = ReviewRun.objects.get()
    assert run.status == RunStatus.COMPLETED, (run.stage, run.reason)
    assert [a.outcome for a in run.attempt_rows.order_by("number")] == [
        "interrupted", "succeeded"]  # fmt: skip
    assert len(world.fake.reviews_of(REPO, 7)) == 1
    return run


@pytest.mark.parametrize("how", HOW)
def test_an_idle_worker_stops_at_once(how, tmp_path, fake_github):
    worker = _start(tmp_path)
    try:
        wait_for(lambda: WorkerHeartbeat.objects.count() >= 2, timeout=20, what="heartbeats",
                 worker=worker)  # fmt: skip
        worker.signal(how)
        took = worker.exited_within(BOUND)
        assert took < 5, worker.log()[-3000:]
        assert worker.process.returncode == 0
        # Each worker process said it stopped (not "silent").
        assert not WorkerHeartbeat.objects.filter(stopped_at__isnull=True).exists()
    finally:
        worker.stop()


@pytest.mark.parametrize("how", HOW)
def test_a_run_in_its_clone_is_handed_back_and_git_stopped(
    how, tmp_path, fake_github, test_app, client, workspaces
):
    world = world_build(fake_github)
    slow = fake_github.slow(1, seconds=60, method="POST", path=r"git-upload-pack$")
    worker = _start(tmp_path)
    try:
        _open_pull_request(world, client, test_app)
        holder = _holder(worker)
        wait_for(lambda: slow.count == 0 and _children(holder), timeout=30,
                 what="git to wait for its pack", worker=worker)  # fmt: skip
        git = _children(holder)
        worker.signal(how)
        took = worker.exited_within(BOUND)
        assert took < 5, worker.log()[-3000:]
        assert not any(_alive(pid) for pid in git)
        assert list(workspaces.iterdir()) == []
        _handed_back(worker, "clone")
    finally:
        worker.stop()
    _completed_here_once(world)


@pytest.mark.parametrize("how", HOW)
def test_a_run_in_its_engine_is_handed_back_and_the_engine_stopped(
    how, tmp_path, fake_github, test_app, client, claude, workspaces
):
    world = world_build(fake_github)
    claude.script(Hang(60), ToolCall("submit_review", {"findings": [SHELL]}))
    worker = _start(tmp_path)
    try:
        _open_pull_request(world, client, test_app)
        holder = _holder(worker)
        wait_for(lambda: claude.requests, timeout=30, what="the engine to wait for its model",
                 worker=worker)  # fmt: skip
        engine = _children(holder)
        assert engine
        worker.signal(how)
        took = worker.exited_within(BOUND)
        assert took < 5, worker.log()[-3000:]
        assert not any(_alive(pid) for pid in engine)
        assert list(workspaces.iterdir()) == []
        run = _handed_back(worker, "sandbox")
        assert run.runner_result is None  # nothing of the killed engine is kept
        assert world.fake.reviews_of(REPO, 7) == []
    finally:
        worker.stop()
    _completed_here_once(world)


@pytest.mark.parametrize("how", HOW)
def test_a_run_in_its_publication_is_finished_before_the_worker_exits(
    how, tmp_path, fake_github, test_app, client
):
    world = world_build(fake_github)
    # GitHub creates the review, then takes 2 s to answer: the stop comes meanwhile.
    fake_github.slow(1, seconds=2, method="POST", path=r"/pulls/7/reviews$", after=True)
    worker = _start(tmp_path)
    try:
        _open_pull_request(world, client, test_app)
        wait_for(lambda: world.fake.reviews_of(REPO, 7), timeout=60, what="the review",
                 worker=worker)  # fmt: skip
        worker.signal(how)
        took = worker.exited_within(BOUND)
        assert took < BOUND
        run = ReviewRun.objects.get()
        assert run.status == RunStatus.COMPLETED, (run.stage, run.reason, worker.log()[-3000:])
        assert [a.outcome for a in run.attempt_rows.all()] == ["succeeded"]
        assert len(world.fake.reviews_of(REPO, 7)) == 1
        assert world.fake.check_runs_of(REPO)[0].conclusion == "failure"
    finally:
        worker.stop()


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("unshare"),
                    reason="a PID namespace needs root and unshare")  # fmt: skip
def test_as_pid_1_of_a_container_it_stops_on_sigterm_and_hands_the_run_back(
    tmp_path, fake_github, test_app, client, claude, workspaces
):
    world = world_build(fake_github)
    claude.script(Hang(60), ToolCall("submit_review", {"findings": [SHELL]}))
    worker = _start(tmp_path, pid1=True)
    try:
        _open_pull_request(world, client, test_app)
        wait_for(lambda: claude.requests, timeout=30, what="the engine to wait for its model",
                 worker=worker)  # fmt: skip
        started = time.monotonic()
        # A container runtime's stop: SIGTERM to PID 1, which the kernel delivers only
        # to a process that handles it.
        os.kill(worker.main_pid, signal.SIGTERM)
        worker.exited_within(BOUND)
        assert time.monotonic() - started < 5, worker.log()[-3000:]
        assert list(workspaces.iterdir()) == []
        _handed_back(worker, "sandbox")
    finally:
        worker.stop()
    _completed_here_once(world)


def test_a_publication_that_cannot_finish_in_time_is_killed_at_the_bound_and_handed_on(
    tmp_path, fake_github, test_app, client
):
    """Under a bound of 6 s rather than the others' 10: the kill comes KILL_MARGIN (3 s)
    before the bound either way, and the test waits for it."""
    bound = 6
    world = world_build(fake_github)
    # The review POST hangs past the bound (and never takes effect).
    fake_github.inject(1, status=None, delay=40, disconnect=True, method="POST",
                       path=r"/pulls/7/reviews$")  # fmt: skip
    worker = _start(tmp_path, stop_seconds=bound)
    try:
        _open_pull_request(world, client, test_app)
        wait_for(lambda: ReviewRun.objects.filter(stage="publication").exists(), timeout=60,
                 what="the publication", worker=worker)  # fmt: skip
        time.sleep(0.5)  # in the POST
        worker.signal("group")
        took = worker.exited_within(bound + 1)
        assert bound - 4 < took < bound, worker.log()[-3000:]  # killed 3 s before the bound
        run = ReviewRun.objects.get()
        # Its cluster handed it on as it killed its worker, not when the lease (120 s) ends.
        assert run.status == RunStatus.QUEUED, (run.status, run.reason)
        assert run.attempt_rows.get().outcome == "lost"
        # Rung afresh (beside the killed worker's own doorbell, never acknowledged, which
        # the broker hands out again only after Q_RETRY: harmless, the row decides).
        due = OrmQ.objects.filter(lock__lte=timezone.now())
        assert [SignedPackage.loads(r.payload)["args"] for r in due] == [(run.pk,)]
    finally:
        worker.stop()
    drain_queue()
    run = ReviewRun.objects.get()
    assert run.status == RunStatus.COMPLETED and len(world.fake.reviews_of(REPO, 7)) == 1
