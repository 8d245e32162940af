"""The worker's stop, in one process (tasuku/lifecycle.py, tasuku/cluster.py); the real
processes are in tests/reviews/test_stopping.py."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.utils import timezone
from django_q.brokers import get_broker
from django_q.models import OrmQ
from django_q.signing import SignedPackage

from tasuku import lifecycle
from tasuku.cluster import _Stopping, task_hand_back


@pytest.fixture(autouse=True)
def fresh_stop():
    lifecycle._reset()
    yield
    lifecycle._reset()


def test_a_stop_calls_each_callback_once_and_late_ones_at_once(settings):
    settings.TASUKU_STOP_SECONDS = 25
    called = []
    lifecycle.on_stop(lambda: called.append("early"))
    gone = lambda: called.append("gone")  # noqa: E731
    lifecycle.on_stop(gone)
    lifecycle.off_stop(gone)
    assert lifecycle.seconds_left() == float("inf") and not lifecycle.stopping()
    assert lifecycle.stop_begin("a test")
    assert not lifecycle.stop_begin("again")
    lifecycle.on_stop(lambda: called.append("late"))
    assert called == ["early", "late"]
    assert 24 < lifecycle.seconds_left() <= 25


def test_only_a_worker_processs_stop_ends_what_it_started():
    # A parent (standing in for a worker process) with a child of its own (a git fetch);
    # only that parent's tree is looked at, never this test process's other children.
    script = (
        "import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', "
        "'import time; time.sleep(60)']); time.sleep(60)"
    )
    parent = subprocess.Popen([sys.executable, "-c", script])  # noqa: S603
    try:
        grandchild = None
        for _ in range(100):
            found = lifecycle.children_of(parent.pid)
            if found:
                grandchild = found[0]
                break
            time.sleep(0.05)
        assert grandchild
        lifecycle.stop_begin("a test")  # not a worker's: its children are not the runs'
        assert lifecycle.children_terminate(parent.pid) == []
        lifecycle._reset()
        lifecycle.stop_begin("a worker's", processes=True)
        assert lifecycle.children_terminate(parent.pid) == [grandchild]
        stat = Path(f"/proc/{grandchild}/stat")
        for _ in range(100):  # killed: a zombie until its parent reaps it, then gone
            try:
                if stat.read_text().rsplit(")", 1)[1].split()[0] == "Z":
                    break
            except FileNotFoundError:
                break
            time.sleep(0.05)
        else:
            raise AssertionError("the child was not ended")
    finally:
        parent.kill()
        parent.wait()


@pytest.mark.django_db(transaction=True)
def test_a_doorbell_fetched_but_not_started_is_handed_back_for_another_cluster():
    broker = get_broker()
    broker.enqueue(SignedPackage.dumps({"id": "t1", "name": "run-7", "func": "reviews.tasks.run_process",
                                        "args": (7,), "kwargs": {}}))  # fmt: skip
    [(ack, payload)] = broker.dequeue()  # this cluster's pusher took it: locked for a while
    assert OrmQ.objects.get().lock > timezone.now()
    task = {**SignedPackage.loads(payload), "ack_id": ack, "cluster": "tasuku"}
    assert task_hand_back(broker, task)
    row = OrmQ.objects.get()
    assert row.pk != ack and row.lock <= timezone.now()  # another cluster may take it now
    assert SignedPackage.loads(row.payload)["args"] == (7,)


@pytest.mark.django_db(transaction=True)
def test_a_stopping_worker_takes_no_task_and_hands_back_one_it_got():
    class Tasks:
        def get(self):
            lifecycle.stop_begin("meanwhile")
            return {"id": "t2", "name": "run-8", "func": "reviews.tasks.run_process",
                    "args": (8,), "kwargs": {}}  # fmt: skip

    view = _Stopping(Tasks())
    assert view.get() == "STOP"
    assert [SignedPackage.loads(r.payload)["args"] for r in OrmQ.objects.all()] == [(8,)]
    assert view.get() == "STOP"


@pytest.mark.django_db(transaction=True)
def test_the_sentinels_scheduler_waits_out_a_database_outage_without_a_traceback(
    monkeypatch, caplog
):
    """django-q2's sentinel calls its scheduler about once a minute; while the database is
    away each call used to log a traceback. The outage is said once (tasuku/outage.py)
    and the schedules are looked at again once it answers."""
    from django.db import OperationalError, connection

    from tasuku import cluster, outage

    monkeypatch.setattr(outage, "OUTAGE", outage.Outage())
    called = []
    monkeypatch.setattr(cluster, "q_scheduler", lambda broker=None: called.append(broker))

    def gone():
        raise OperationalError("server closed the connection unexpectedly")

    with monkeypatch.context() as away:
        away.setattr(connection, "cursor", gone)
        for _ in range(3):
            cluster._scheduler(broker="b")
    assert called == []
    assert outage.OUTAGE.down
    cluster._scheduler(broker="b")
    assert called == ["b"]
    assert not any(r.exc_info for r in caplog.records)
    said = [r.getMessage() for r in caplog.records if r.name == "tasuku.outage"]
    assert len(said) == 2 and "the scheduler: server closed" in said[0], said
    assert django_q_scheduler_is_ours()


def django_q_scheduler_is_ours() -> bool:
    from django_q import cluster as q_cluster

    from tasuku import cluster

    return q_cluster.scheduler is cluster._scheduler
