"""TASUKU_REDIS_URL switches django-q2 to its Redis broker: a doorbell rung by Tasuku
lands in Redis and a worker's broker hands it out (against the Redis server on
127.0.0.1:6379; skipped when none answers)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
REDIS = ("127.0.0.1", 6379)


def redis_answers() -> bool:
    try:
        with socket.create_connection(REDIS, timeout=1):
            return True
    except OSError:
        return False


def run(code: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=ROOT, capture_output=True, text=True, timeout=60,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "tasuku.settings", **env},
    )  # fmt: skip


@pytest.mark.skipif(not redis_answers(), reason="no Redis server on 127.0.0.1:6379")
def test_a_doorbell_goes_through_redis_when_tasuku_redis_url_is_set():
    done = run(
        """
        import django
        django.setup()
        from django.conf import settings
        from django_q.brokers import get_broker
        from django_q.signing import SignedPackage
        from tasuku import broker

        assert "orm" not in settings.Q_CLUSTER and "broker_class" not in settings.Q_CLUSTER
        assert not broker._shares_the_database()
        import os
        # A queue of this process's own: CI runs two suites against one Redis at once.
        queue = get_broker(f"tasuku-redis-test-{os.getpid()}")
        queue.purge_queue()
        broker.async_task("reviews.tasks.run_process", 41, task_name="run-41",
                          broker=queue)
        assert queue.queue_size() == 1
        [(ack, payload)] = queue.dequeue()
        task = SignedPackage.loads(payload)
        print(task["func"], task["args"], type(queue).__name__)
        queue.purge_queue()
        """,
        TASUKU_REDIS_URL="redis://127.0.0.1:6379/15",
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == ["reviews.tasks.run_process", "(41,)", "Redis"]


def test_a_malformed_tasuku_redis_url_is_refused_by_name():
    done = run("import django; django.setup()", TASUKU_REDIS_URL="localhost:6379")
    assert done.returncode != 0
    assert "TASUKU_REDIS_URL must be a redis://" in done.stderr
