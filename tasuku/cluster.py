"""`manage.py worker`: django-q2's cluster, stopped within TASUKU_STOP_SECONDS on SIGTERM
or SIGINT, whether the signal reaches the main process alone (`kill PID`, tini, Docker)
or every process of the group or cgroup at once (systemd, `kill -- -PGID`, Ctrl-C).

django-q2's own `qcluster` hangs on the second: its sentinel keeps SIGTERM's default
action, dies while it waits on the stop event, and the main process then waits forever in
that event's `set()` for a sleeper that will never wake; the workers die in the middle of
their task, their runs left for the lease to expire. Here (docs/operations.md, *Stopping*):

- every process reads signals on a thread of its own (tasuku/lifecycle.py);
- each worker process marks itself stopping: its run stops its engine and is handed back
  at its next step (reviews/queue/runs.py), or finishes its publication while there is time;
  a doorbell it had not started is put back on the queue for another cluster;
- the sentinel stops the pusher, hands back the doorbells it had fetched, waits for the
  workers until shortly before the bound, kills those still running and has their runs
  released at once (`lifecycle.worker_lost`), then stops the monitor;
- the main process waits for the sentinel until just before the bound, then kills it; its
  children die with it (parent-death signals).
"""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import signal
import threading
import time
import uuid
from multiprocessing import Event, Process, current_process

from django_q import cluster as q_cluster
from django_q import worker as q_worker
from django_q.brokers import get_broker
from django_q.conf import Conf
from django_q.scheduler import scheduler as q_scheduler
from django_q.signing import SignedPackage
from django_q.status import Stat

from tasuku import lifecycle, outage

logger = logging.getLogger(__name__)

KILL_MARGIN = 3.0  # the sentinel kills workers still busy this long before the bound
EXIT_MARGIN = 1.0  # the main process kills the sentinel this long before the bound
PUSHER_WAIT = 3.0  # the pusher ends within one broker poll


def task_hand_back(broker, task: dict) -> bool:
    """Put a doorbell fetched but never started back on the queue, for another cluster
    (rather than leave it locked until the broker's retry time)."""
    package = {k: v for k, v in task.items() if k not in ("ack_id", "cluster")}
    try:
        broker.enqueue(SignedPackage.dumps(package))
        if task.get("ack_id"):
            broker.acknowledge(task["ack_id"])
    except Exception:  # a lost ring is rung again by the sweepers: never fail the stop
        logger.exception("could not hand back %s; the sweepers will ring it", task.get("name"))
        return False
    return True


class _Stopping:
    """A worker's view of its task queue: once the process is stopping, no task starts —
    one taken meanwhile is handed back — and the worker's loop ends."""

    def __init__(self, tasks) -> None:
        self.tasks = tasks

    def get(self):
        if lifecycle.stopping():
            return "STOP"
        task = self.tasks.get()
        if task != "STOP" and lifecycle.stopping():
            task_hand_back(get_broker(), task)
            return "STOP"
        return task


def _scheduler(broker=None) -> None:
    """django-q2's scheduler, called by the sentinel about once a minute — but not while the
    database is away: each call would log a traceback, where the outage is said once
    (tasuku/outage.py). The schedules due meanwhile are created at the next call."""
    if outage.wait(0, who="the scheduler"):
        q_scheduler(broker=broker)


# The sentinel's guard loop calls the name `scheduler` of django-q2's cluster module.
q_cluster.scheduler = _scheduler


def _worker(task_queue, result_queue, timer, timeout) -> None:
    lifecycle.die_with_parent(signal.SIGKILL)

    def stop(signum: int) -> None:
        lifecycle.stop_begin(f"{lifecycle.signal_name(signum)} received", processes=True)

    lifecycle.signals_watch(stop)
    q_worker.worker(_Stopping(task_queue), result_queue, timer, timeout)


def _helper(target):
    def run(*args) -> None:
        lifecycle.die_with_parent(signal.SIGKILL)
        lifecycle.signals_ignore()
        target(*args)

    return run


class Sentinel(q_cluster.Sentinel):
    """django-q2's sentinel, whose stop is bounded and hands back what it cannot finish."""

    def __init__(self, stop_event, start_event, cluster_id, broker=None, timeout=None,
                 start=True) -> None:  # fmt: skip
        super().__init__(stop_event, start_event, cluster_id, broker, timeout, start=False)
        self.stop_began: float | None = None
        # Killed with the main process: stop as if told to.
        lifecycle.die_with_parent(signal.SIGTERM)
        lifecycle.signals_watch(self._signalled)
        if start:
            self.start()

    def _signalled(self, signum: int) -> None:
        if self.stop_began is None:
            self.stop_began = time.monotonic()
        # From this thread: the guard loop may be waiting on the event, and a set() from a
        # handler interrupting that wait would wait for itself to wake.
        self.stop_event.set()

    def spawn_process(self, target, *args) -> Process:
        is_worker = target is q_worker.worker
        process = q_cluster.get_mp_context().Process(
            target=_worker if is_worker else _helper(target),
            args=args,
            name=f"Process-{uuid.uuid4().hex}",
        )
        process.daemon = True
        if is_worker:
            process.daemon = Conf.DAEMONIZE_WORKERS
            process.timer = args[2]
            self.pool.append(process)
        process.start()
        return process

    def reincarnate(self, process) -> None:
        was_worker = process in self.pool
        super().reincarnate(process)
        if was_worker:
            process.join(timeout=1)  # django-q2 terminates one that timed out
            self._lost(process)

    def _lost(self, process) -> None:
        try:
            lifecycle.worker_lost.send(sender=type(self), name=lifecycle.worker_name(process.pid))
        except Exception:  # a receiver's error must not take the cluster's watch down
            logger.exception("could not release what worker %s held", process.pid)

    def stop(self) -> None:
        began = self.stop_began = self.stop_began or time.monotonic()
        bound = lifecycle.stop_seconds()
        kill_at = began + bound - KILL_MARGIN
        logger.info("%s stopping its cluster within %.0f s", current_process().name, bound)
        Stat(self).save()
        # The workers hand back what they hold (already told, when the signal went to the
        # whole group; a second SIGTERM changes nothing).
        for process in self.pool:
            _kill(process.pid, signal.SIGTERM)
        self.event_out.set()
        self.pusher.join(timeout=max(0.1, min(PUSHER_WAIT, kill_at - time.monotonic())))
        if self.pusher.is_alive():
            self.pusher.kill()
            self.pusher.join(timeout=1)
        handed = self._hand_back_queued()
        for _ in self.pool:
            self.task_queue.put("STOP")
        while self.pool and time.monotonic() < kill_at:
            for process in [p for p in self.pool if not p.is_alive()]:
                process.join()
                self.pool.remove(process)
                if process.exitcode:
                    self._lost(process)
            time.sleep(0.05)
        for process in self.pool:
            logger.warning("worker %s still busy at the stop's bound: killed", process.pid)
            process.kill()
            process.join(timeout=1)
            self._lost(process)
        self.pool = []
        self.result_queue.put("STOP")
        self.monitor.join(timeout=max(0.5, began + bound - EXIT_MARGIN - 0.5 - time.monotonic()))
        if self.monitor.is_alive():
            self.monitor.kill()
        Stat(self).save()
        logger.info(
            "%s stopped its cluster in %.1f s (%d doorbell(s) handed back)",
            current_process().name,
            time.monotonic() - began,
            handed,
        )

    def _hand_back_queued(self) -> int:
        handed = 0
        while True:
            try:
                task = self.task_queue.get(timeout=0.05)
            except queue.Empty:
                return handed
            if task != "STOP":
                handed += task_hand_back(self.broker, task)


class Cluster(q_cluster.Cluster):
    """django-q2's cluster, run in the foreground by `run()` until a stop signal, then
    stopped within TASUKU_STOP_SECONDS."""

    def __init__(self, broker=None) -> None:
        super().__init__(broker)
        self.stop_began: float | None = None
        lifecycle.signals_watch(self._signalled)

    def _signalled(self, signum: int) -> None:
        if self.stop_began is None:
            self.stop_began = time.monotonic()
            logger.info("%s: stopping within %.0f s", lifecycle.signal_name(signum),
                        lifecycle.stop_seconds())  # fmt: skip

    def start(self) -> int:
        self.stop_event, self.start_event = Event(), Event()
        self.sentinel = q_cluster.get_mp_context().Process(
            target=Sentinel,
            name=f"Process-{uuid.uuid4().hex}",
            args=(self.stop_event, self.start_event, self.cluster_id, self.broker, self.timeout),
        )
        self.sentinel.start()
        logger.info("Q Cluster %s starting.", self.name)
        while not self.start_event.is_set() and self.stop_began is None:
            if not self.sentinel.is_alive():
                raise RuntimeError(f"the worker's sentinel exited ({self.sentinel.exitcode})")
            time.sleep(0.1)
        return self.pid

    def run(self) -> int:
        """Start, wait for a stop signal (or the sentinel's death), stop. The exit code."""
        self.start()
        while self.stop_began is None and self.sentinel.is_alive():
            time.sleep(0.2)
        if self.stop_began is None:
            logger.error("the worker's sentinel exited (%s)", self.sentinel.exitcode)
            return 1
        return self.stop_within()

    def stop_within(self) -> int:
        began = self.stop_began or time.monotonic()
        deadline = began + lifecycle.stop_seconds() - EXIT_MARGIN
        # On a thread: set() waits for the sentinel to wake from its wait on the event,
        # forever if it died in that wait.
        threading.Thread(target=self.stop_event.set, daemon=True).start()
        self.sentinel.join(timeout=max(0.0, deadline - time.monotonic()))
        if self.sentinel.is_alive():
            logger.error("the cluster did not stop in time: killed")
            self.sentinel.kill()
            self.sentinel.join(timeout=2)
            return 1
        logger.info("Q Cluster %s stopped in %.1f s.", self.name, time.monotonic() - began)
        return 0


def _kill(pid: int | None, signum: int) -> None:
    if pid:
        with contextlib.suppress(OSError):
            os.kill(pid, signum)
