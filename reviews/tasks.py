"""django-q2 entry points (doorbells): each takes an id and calls one service."""

from __future__ import annotations

import tempfile
from pathlib import Path

from django.conf import settings

from reviews import conclusions, pipeline, replies, runs
from sandbox.workspace import mirrors_prune, workspaces_prune


def run_process(run_pk: int) -> str:
    return pipeline.run_execute(run_pk)


def run_conclude(run_pk: int) -> None:
    pipeline.run_check_conclude(run_pk)


def runs_reap() -> dict[str, int]:
    result = runs.runs_reap()
    result["replies"] = replies.replies_sweep()
    result["checks_due"] = conclusions.conclusions_sweep()
    # What a killed worker left on this host's disk (no run lives past its deadline).
    stale = 2 * settings.TASUKU_RUN_DEADLINE_SECONDS
    result["workspaces_removed"] = len(
        workspaces_prune(Path(settings.TASUKU_WORKSPACE_ROOT or tempfile.gettempdir()), stale)
    )
    from reviews.passes.services import answers_sweep

    result["answers"] = answers_sweep()
    cache = settings.TASUKU_CHECKOUT_CACHE
    if cache and cache.lower() != "off":
        days = settings.TASUKU_CHECKOUT_CACHE_DAYS
        result["mirrors_pruned"] = len(mirrors_prune(Path(cache), days * 86400))
    return result


def reply_answer(reply_pk: int) -> str:
    return replies.reply_answer(reply_pk)


def tasks_sweep() -> int:
    from reviews.passes.services import tasks_sweep as sweep

    return sweep()


def answer_post(answer_pk: int) -> str:
    from reviews.passes.services import answer_post as post

    return post(answer_pk)
