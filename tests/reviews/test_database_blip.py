"""A database that goes away for longer than a run's lease while the run's engine waits for
its model: a real worker (`manage.py worker`, two worker processes, each with its reaper)
reaches the test's PostgreSQL database through a TCP proxy (tests/dbproxy.py) that the
test cuts — new connections refused, open ones dropped, as a stopped server does — and
restores.

The lease here is 4 s and the outage 9 s, so that the test does not wait for production's
20-second lease and a 30-second outage; the mechanism is the same (tasuku/outage.py): the
engine goes on, the heartbeat renews the lease when the database answers again, and no
reaper that was cut off itself declares the run lost. benchmarks/database_blip.py does the
real 30-second outage under the production lease.
"""

from __future__ import annotations

import re
import threading
import time

import pytest
from django.db import connection

from repos.models import Reviewer
from reviews.models import ReviewRun, RunStatus
from tests.dbproxy import DatabaseProxy
from tests.fakes.models import ANTHROPIC_TEST_KEY, ToolCall
from tests.gitworld import REPO, SHELL_TRUE_LINE, world_build
from tests.helpers import post_webhook, pull_request_payload
from tests.workers import Worker, wait_for

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(
        connection.vendor != "postgresql", reason="a database server to cut off: PostgreSQL"
    ),
]

LEASE = 4  # TASUKU_RUN_LEASE_SECONDS of the worker (production: 20)
HEARTBEAT = 2  # TASUKU_RUN_HEARTBEAT_SECONDS (production: 8)
OUTAGE = 9  # seconds the database is cut off: more than two leases

SHELL = {
    "path": "app/payments.py", "start_line": SHELL_TRUE_LINE, "end_line": SHELL_TRUE_LINE,
    "severity": "high", "category": "security", "title": "Order id reaches a shell",
    "body": "An order id like `1; rm -rf /` runs as a shell command.",
    "evidence": "refund('1; rm -rf /') runs rm.", "confidence": 0.95, "blocking": True,
}  # fmt: skip


@pytest.fixture
def claude(settings, fake_anthropic):
    settings.ANTHROPIC_BASE_URL = fake_anthropic.base_url
    settings.ANTHROPIC_API_KEY = ANTHROPIC_TEST_KEY
    Reviewer.objects.update(default_for_new_repositories=False)
    Reviewer.objects.create(slug="claude", engine="anthropic", model="claude-sonnet-5-5",
                            default_for_new_repositories=True)  # fmt: skip
    return fake_anthropic


@pytest.fixture
def proxy():
    settings = connection.settings_dict
    started = DatabaseProxy(settings["HOST"] or "127.0.0.1", int(settings["PORT"] or 5432))
    yield started.start()
    started.stop()


@pytest.mark.parametrize("answer", ["after", "during"])
def test_a_database_outage_longer_than_the_lease_costs_no_attempt_and_no_model_call(
    answer, tmp_path, fake_github, test_app, client, claude, proxy
):
    """`answer`: the model answers once the database is back, or while it is still away
    (the run then waits for it to write the engine's result)."""
    world = world_build(fake_github)
    release = threading.Event()

    def model_waits(request):  # the engine's model call, answered when the test says
        release.wait(60)
        return ToolCall("submit_review", {"findings": [SHELL]})

    claude.script(model_waits)
    worker = Worker(tmp_path / "worker.log", lease=LEASE, heartbeat=HEARTBEAT, reap_seconds=1,
                    database_port=proxy.port)  # fmt: skip
    try:
        worker.ready()
        body = pull_request_payload(world.fake, world.repo, world.pull, action="opened")
        assert post_webhook(client, "pull_request", body,
                            secret=test_app.webhook_secret).status_code == 202  # fmt: skip
        wait_for(lambda: claude.requests, timeout=60, what="the engine to call its model",
                 worker=worker)  # fmt: skip
        before = len(worker.log().splitlines())

        proxy.cut()
        if answer == "during":
            time.sleep(1)
            release.set()
        time.sleep(OUTAGE)
        # The lease ran out meanwhile, as the database's clock sees it.
        run = ReviewRun.objects.get()
        assert run.status == RunStatus.RUNNING and run.lease_expires_at < _now()
        proxy.restore()
        restored = time.monotonic()
        release.set()

        run = wait_for(lambda: ReviewRun.objects.filter(status__in=[RunStatus.COMPLETED,
                       RunStatus.FAILED, RunStatus.QUEUED]).first(), timeout=60,
                       what="the run to end", worker=worker)  # fmt: skip
        recovered = time.monotonic() - restored
        log = worker.log()
        assert run.status == RunStatus.COMPLETED, (run.status, run.reason, log[-4000:])
        # One attempt, never declared lost; one model call; one review.
        assert [(a.number, a.outcome) for a in run.attempt_rows.all()] == [(1, "succeeded")]
        assert run.attempts == 1
        assert len(claude.requests) == 1
        [review] = world.fake.reviews_of(REPO, 7)
        assert review["commit_id"] == world.head
        assert recovered < 20

        # The worker's log says the database went away and came back, once per process
        # that noticed (each says so at its next look), without a traceback.
        def said(what: str) -> list[str]:
            return [line for line in worker.log().splitlines()[before:] if what in line]

        away = said("the database cannot be reached")
        wait_for(lambda: len(said("the database answers again")) == len(away), timeout=10,
                 what="each process to see the database back", worker=worker)  # fmt: skip
        log = worker.log()
        during = log.splitlines()[before:]
        assert "Traceback" not in log, log[-6000:]
        assert 1 <= len(away) <= 4, "\n".join(during)
        warnings = [line for line in during if re.search(r"\b(WARNING|ERROR)\b", line)]
        assert len(warnings) == 2 * len(away), "\n".join(warnings)
        assert "lease lost" not in log and "No heartbeat" not in log
    finally:
        release.set()
        proxy.restore() if proxy.is_cut else None
        worker.stop()


def _now():
    from django.utils import timezone

    return timezone.now()
