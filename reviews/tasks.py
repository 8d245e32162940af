"""django-q2 entry points (doorbells): each takes an id and calls one service."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from django.conf import settings

from reviews.actions import workflow as actions
from reviews.checks import conclusions, gate
from reviews.conversation import replies
from reviews.evaluation import replay as evaluation
from reviews.memory import folds as memory
from reviews.passes import answers, flow
from reviews.passes.mode import mode_for
from reviews.pipeline import flow as pipeline
from reviews.pr_tests import suite as sandbox_tests
from reviews.publication import fixes, walkthrough
from reviews.queue import runs
from reviews.queue.retention import data_prune as prune
from sandbox.workspace import mirrors_prune, workspaces_prune
from tasuku.logs import log_context


def run_process(run_pk: int) -> str:
    # The reaper's turn falls to one host; every worker clears its own host's leftovers.
    host_tidy()
    outcome = pipeline.run_execute(run_pk, mode_for)
    # What follows a completed review on GitHub: the pull request's own tests, if the
    # repository runs them (never raises).
    sandbox_tests.tests_after_review(run_pk)
    return outcome


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
    with log_context(run=run_pk):
        gate.run_check_conclude(run_pk)


def runs_reap() -> dict[str, int]:
    """Every sweep of the durable queues: the reaper's turn (reviews/queue/reaper.py, every
    TASUKU_REAP_SECONDS in the workers). Kept at this path: django-q2 rows of the schedules
    it had before may name it until the next migrate removes them."""
    result = runs.runs_reap()
    # Runs dispatched to GitHub Actions that never reported back.
    result["failed"] += actions.dispatched_sweep()
    result["replies"] = replies.replies_sweep()
    result["checks_due"] = conclusions.conclusions_sweep()
    result["answers"] = answers.answers_sweep()
    result["walkthroughs"] = walkthrough.walkthroughs_sweep()
    result["fixes"] = fixes.fixes_sweep()
    result["evaluations"] = evaluation.evaluations_sweep()
    result["memory_folds"] = memory.folds_sweep()
    result["sandbox_tests"] = sandbox_tests.tests_sweep()
    result.update(host_tidy(force=True))
    return result


def reply_answer(reply_pk: int) -> str:
    return replies.reply_answer(reply_pk)


def sandbox_tests_run(tests_pk: int) -> str:
    return sandbox_tests.sandbox_tests_run(tests_pk)


def walkthrough_send(walkthrough_pk: int) -> str:
    return walkthrough.walkthrough_send(walkthrough_pk)


def fixes_send(fix_proposal_pk: int) -> str:
    return fixes.fixes_send(fix_proposal_pk)


def tasks_sweep() -> int:
    return flow.tasks_sweep()


def evaluation_run(evaluation_pk: int) -> str:
    return evaluation.evaluation_run(evaluation_pk)


def answer_post(answer_pk: int) -> str:
    return answers.answer_post(answer_pk)


def data_prune() -> dict[str, int]:
    return prune()


def memory_fold_process(fold_pk: int) -> str:
    return memory.memory_fold_process(fold_pk)


# The doorbells of folds asked for before each fold was a row (a review's id, a closed
# pull request's): kept while django-q2 may still hold one.
def memory_fold(review_pk: int) -> str:
    return memory.memory_fold_review(review_pk)


def memory_fold_closed(pull_request_pk: int) -> str:
    return memory.memory_fold_outcomes(pull_request_pk)
