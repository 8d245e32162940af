"""How a process of the worker learns that it is to stop, and what it does about it.

A worker process (`manage.py worker`, tasuku/cluster.py) that gets SIGTERM or SIGINT —
sent to it alone, or to its whole process group or cgroup by a process manager — does not
die at once: `stop_begin` marks the process as stopping and calls what was registered with
`on_stop` (a run's heartbeat: it stops the run's engine and makes the pipeline give the run
back at its next step). The process then has `seconds_left()` until the cluster kills
whatever is still running (TASUKU_STOP_SECONDS from the signal).

Signals are read by a thread of their own (`signals_watch`), never acted on inside a
Python signal handler: a handler runs between two bytecodes of the main thread, which may
hold the very lock the handler would take (a multiprocessing Event's condition, the
logging lock, the thread-start lock), and django-q2's own handlers hang that way.
"""

from __future__ import annotations

import ctypes
import logging
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable

from django.dispatch import Signal

logger = logging.getLogger(__name__)

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)

# Sent in a worker's sentinel (tasuku/cluster.py) when one of its worker processes died, or
# was killed at the stop's bound, with its `name` (host:pid, as its runs name it): what it
# held is handed on at once rather than when its lease runs out.
worker_lost = Signal()


class _Stop:
    def __init__(self) -> None:
        self.event = threading.Event()
        self.lock = threading.Lock()
        self.began: float | None = None
        self.why = ""
        self.processes = False  # whether the processes this one started may be ended
        self.callbacks: list[Callable[[], None]] = []


_stop = _Stop()


def worker_name(pid: int | None = None) -> str:
    """The name a worker process holds its runs under (attempts, heartbeats): host:pid."""
    return f"{socket.gethostname()}:{pid or os.getpid()}"


def stop_seconds() -> float:
    from django.conf import settings

    return float(settings.TASUKU_STOP_SECONDS)


def stopping() -> bool:
    """Whether this process has been asked to stop."""
    return _stop.event.is_set()


def seconds_left() -> float:
    """Until the cluster kills what is still running (infinite while not stopping)."""
    if _stop.began is None:
        return float("inf")
    return stop_seconds() - (time.monotonic() - _stop.began)


def wait(seconds: float) -> bool:
    """Sleep up to `seconds`, waking when the stop begins; whether it has."""
    return _stop.event.wait(seconds)


def stop_begin(why: str, *, processes: bool = False) -> bool:
    """Mark this process as stopping and call every `on_stop` callback (once; later calls
    return False). `processes`: a worker process, whose children are its runs' own and
    may be ended (`children_terminate`); never a test's or a web process's."""
    with _stop.lock:
        if _stop.event.is_set():
            return False
        _stop.began, _stop.why, _stop.processes = time.monotonic(), why, processes
        _stop.event.set()
        callbacks = list(_stop.callbacks)
    logger.info("process %s stopping (%s): %.0f s left", os.getpid(), why, seconds_left())
    for callback in callbacks:
        _call(callback)
    return True


def on_stop(callback: Callable[[], None]) -> None:
    """Call `callback` when the stop begins (at once, if it has)."""
    with _stop.lock:
        if not _stop.event.is_set():
            _stop.callbacks.append(callback)
            return
    _call(callback)


def off_stop(callback: Callable[[], None]) -> None:
    with _stop.lock:
        if callback in _stop.callbacks:
            _stop.callbacks.remove(callback)


def _call(callback: Callable[[], None]) -> None:
    try:
        callback()
    except Exception:  # one stop callback's error must not keep the others from running
        logger.exception("a stop callback failed")


def _reset() -> None:
    """Forget a stop (tests that begin one in the test process)."""
    global _stop
    _stop = _Stop()


# --- Signals --------------------------------------------------------------------------


def _noted(signum: int, frame: object) -> None:
    """The Python-level handler: nothing. Its C half has already written the signal's
    number to the wakeup fd, where `_watch` reads it; and having a handler at all keeps
    the default action (death) away and lets interrupted system calls resume (PEP 475)."""


def signals_watch(on_signal: Callable[[int], None], signals=STOP_SIGNALS) -> None:
    """Call `on_signal(signum)` on a thread of its own for each of `signals` this process
    gets. Call from the main thread (Python installs handlers only there)."""
    read, write = os.pipe()
    os.set_blocking(write, False)
    for signum in signals:
        signal.signal(signum, _noted)
    signal.set_wakeup_fd(write, warn_on_full_buffer=False)
    wanted = {int(s) for s in signals}
    threading.Thread(
        target=_watch, args=(read, wanted, on_signal), name="tasuku-signals", daemon=True
    ).start()


def _watch(read: int, wanted: set[int], on_signal: Callable[[int], None]) -> None:
    while True:
        try:
            data = os.read(read, 64)
        except InterruptedError:
            continue
        if not data:
            return
        for signum in data:
            if signum in wanted:
                try:
                    on_signal(signum)
                except Exception:  # the signal thread must outlive a handler's error
                    logger.exception("handling signal %s failed", signum)


def signals_ignore(signals=STOP_SIGNALS) -> None:
    """For a helper process its parent stops by itself (django-q2's pusher and monitor): a
    stop signal sent to the whole group must not kill it half-way through a task's
    result. The wakeup fd a forked child inherits is its parent's: dropped."""
    signal.set_wakeup_fd(-1)
    for signum in signals:
        signal.signal(signum, signal.SIG_IGN)


def signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return str(signum)


# --- Processes ------------------------------------------------------------------------

PR_SET_PDEATHSIG = 1  # linux/prctl.h
# Looked up at import, not in a freshly forked child (another thread of the parent may
# have held the loader's lock when it forked).
_PRCTL = ctypes.CDLL(None, use_errno=True).prctl if sys.platform.startswith("linux") else None


def die_with_parent(signum: int) -> None:
    """Have the kernel send `signum` to this process when its parent dies (Linux only):
    a cluster killed past its bound, or a main process killed outright, leaves nothing
    running on."""
    if _PRCTL is None:
        return
    parent = os.getppid()
    _PRCTL(PR_SET_PDEATHSIG, int(signum), 0, 0, 0)
    if os.getppid() != parent:  # the parent died before the signal was asked for
        os.kill(os.getpid(), signum)


def children_of(pid: int) -> list[int]:
    """The processes `pid` started and still parents (Linux's /proc; elsewhere none)."""
    found = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return []
    for task in tasks:
        try:
            with open(f"/proc/{pid}/task/{task}/children") as children:
                found.extend(int(child) for child in children.read().split())
        except (OSError, ValueError):
            continue
    return found


def descendants_of(pid: int) -> list[int]:
    """Every process below `pid`, children first."""
    found, queue = [], children_of(pid)
    while queue:
        child = queue.pop(0)
        found.append(child)
        queue.extend(children_of(child))
    return found


def children_terminate(pid: int | None = None) -> list[int]:
    """SIGTERM every process this process started, and theirs (a git fetch mid-clone,
    and the transport helper that holds its pipes open): the stop reaches them too when
    it was sent to the main process alone. Returns their pids; none unless the stop said
    this process's children are its runs' (`stop_begin(processes=True)`)."""
    if not _stop.processes:
        return []
    descendants = descendants_of(pid or os.getpid())
    for process in descendants:
        try:
            os.kill(process, signal.SIGTERM)
        except OSError:
            continue
    return descendants
