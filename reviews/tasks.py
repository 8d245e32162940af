"""django-q2 entry points (doorbells): each takes an id and calls one service."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from django.conf import settings

from reviews import conclusions, pipeline, replies, runs
from sandbox.workspace import mirrors_prune, workspaces_prune


def run_process(run_pk: int) -> str:
    # The reaper runs on one host; every worker clears its own host's leftovers.
    host_tidy()
    return pipeline.run_execute(run_pk)


HOST_TIDY_EVERY = 600.0  # seconds
_host_tidied_at: float | None = None


def host_tidy(*, force: bool = False) -> dict[str, int]:
    """Remove what killed workers left on this host's disk — workspaces and engine homes
    older than twice the run deadline (no run lives that long), and checkout mirrors
    unused for TASUKU_CHECKOUT_CACHE_DAYS — at most every HOST_TIDY_EVERY seconds per
    process (`force`: now)."""
    global _host_tidied_at
    now = time.monotonic()
    if not force and _host_tidied_at is not None and now - _host_tidied_at < HOST_TIDY_EVERY:
        return {}
    _host_tidied_at = now
    stale = 2 * settings.TASUKU_RUN_DEADLINE_SECONDS
    result = {
        "workspaces_removed": len(
            workspaces_prune(Path(settings.TASUKU_WORKSPACE_ROOT or tempfile.gettempdir()), stale)
        )
    }
    cache = settings.TASUKU_CHECKOUT_CACHE
    if cache and cache.lower() != "off":
        days = settings.TASUKU_CHECKOUT_CACHE_DAYS
        result["mirrors_pruned"] = len(mirrors_prune(Path(cache), days * 86400))
    return result


def run_conclude(run_pk: int) -> None:
    pipeline.run_check_conclude(run_pk)


def runs_reap() -> dict[str, int]:
    result = runs.runs_reap()
    result["replies"] = replies.replies_sweep()
    result["checks_due"] = conclusions.conclusions_sweep()
    from reviews.passes.services import answers_sweep

    result["answers"] = answers_sweep()
    result.update(host_tidy(force=True))
    return result


def reply_answer(reply_pk: int) -> str:
    return replies.reply_answer(reply_pk)


def tasks_sweep() -> int:
    from reviews.passes.services import tasks_sweep as sweep

    return sweep()


def answer_post(answer_pk: int) -> str:
    from reviews.passes.services import answer_post as post

    return post(answer_pk)


def data_prune() -> dict[str, int]:
    from reviews.retention import data_prune as prune

    return prune()
