"""Counting the gateway's calls to GitHub, in memory, per App and installation.

The gateway records every call here (no database: it may run inside a caller's
transaction, and a counter must never take a row lock there or fail a review). The
process's own edges add the counts to `GitHubApiUsage` rows with `github_usage_flush`
(repos/services.py): after each web request and each worker task, and from the worker's
heartbeat thread. A process killed before it flushes loses at most that much counting.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

APP = 0  # the installation id under which the App's own (JWT) calls are counted


@dataclass
class Pending:
    calls: int = 0
    errors: int = 0
    # As GitHub reported on the latest answer seen (None: no rate-limit headers yet).
    remaining: int | None = None
    limit: int | None = None
    reset: int | None = None  # epoch seconds


_lock = threading.Lock()
_pending: dict[tuple[str, int], Pending] = {}


def usage_record(app_id: str, installation_id: int, requester: Any, *, failed: bool) -> None:
    """Count one call and keep the rate limit that PyGithub's requester read from the
    answer's headers (`rate_limiting` is (-1, -1) until an answer carried them)."""
    remaining, limit = getattr(requester, "rate_limiting", (-1, -1))
    reset = getattr(requester, "rate_limiting_resettime", 0)
    with _lock:
        entry = _pending.setdefault((str(app_id), int(installation_id)), Pending())
        entry.calls += 1
        entry.errors += int(failed)
        if limit is not None and limit >= 0:
            entry.remaining, entry.limit = int(remaining), int(limit)
            entry.reset = int(reset) or None


@contextmanager
def usage_counted(app_id: str, installation_id: int, requester: Any) -> Iterator[None]:
    """Count the call made inside the block, failed if it raised."""
    failed = True
    try:
        yield
        failed = False
    finally:
        usage_record(app_id, installation_id, requester, failed=failed)


def usage_take() -> dict[tuple[str, int], Pending]:
    """Everything counted since the last take, and forget it."""
    global _pending
    with _lock:
        taken, _pending = _pending, {}
    return taken


def usage_put_back(taken: dict[tuple[str, int], Pending]) -> None:
    """Return counts a flush could not write, so the next flush writes them."""
    with _lock:
        for key, old in taken.items():
            entry = _pending.setdefault(key, Pending())
            entry.calls += old.calls
            entry.errors += old.errors
            if entry.limit is None and old.limit is not None:
                entry.remaining, entry.limit, entry.reset = old.remaining, old.limit, old.reset


def usage_pending() -> bool:
    with _lock:
        return bool(_pending)
