"""Review runs as a durable queue: claim, lease and heartbeat, finish, retry, reap.

The `ReviewRun` row owns everything (docs/architecture.md, *Durable queues*): django-q2 only rings a doorbell
carrying the run's id. Every transition is a conditional UPDATE whose row count says
whether this worker still holds the run; each try is a `RunAttempt` row that later tries
never overwrite.
"""

from __future__ import annotations

import logging
import traceback
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Exists, F, OuterRef, Q, Subquery
from django.db.models.functions import Coalesce
from django.utils import timezone

from repos.policy import CHECKLESS_TRIGGERS
from reviews.models import (
    RUN_FINAL_STATES,
    ActionsDispatch,
    AttemptOutcome,
    ReviewRun,
    RunAttempt,
    RunStatus,
)
from reviews.queue import timeline
from tasuku import durable, lifecycle, outage
from tasuku.broker import ring
from tasuku.errors import code_of, error_id

logger = logging.getLogger(__name__)

MAX_ATTEMPTS = 3
RETRY_BACKOFF = timedelta(seconds=30)
RING_AGAIN_AFTER = timedelta(minutes=5)
PROCESS_TASK = "reviews.tasks.run_process"
CONCLUDE_TASK = "reviews.tasks.run_conclude"


def lease_length() -> timedelta:
    return timedelta(seconds=settings.TASUKU_RUN_LEASE_SECONDS)


# The run queue (tasuku/durable.py). Its deferrals are counted from its attempt rows; the
# reaper's hand-over of a run whose worker died is its own (it closes the attempt row).
RUNS = durable.Queue(
    model="reviews.ReviewRun",
    task=PROCESS_TASK,
    name="run",
    waiting=(RunStatus.QUEUED,),
    working=RunStatus.RUNNING,
    failed=RunStatus.FAILED,
    lease="lease_expires_at",
    deferrals=None,
    installation="pull_request__repository__installation__github_id",
    max_attempts=MAX_ATTEMPTS,
    lease_for=lease_length,
    retry_base=RETRY_BACKOFF,
    ring_again=RING_AGAIN_AFTER,
)


def worker_name(pid: int | None = None) -> str:
    return lifecycle.worker_name(pid)


class LeaseLost(Exception):
    """This worker no longer holds the run (the reaper gave it to another, or it was
    failed for its deadline). Stop without touching it."""

    permanent = True
    stage = ""


class RunCancelled(Exception):
    """Someone asked the run to stop while it ran (`run_cancel_request`): it ends
    `cancelled` with their reason, publishes nothing more, and its engine is stopped."""

    permanent = True
    stage = ""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass
class AttemptRow:
    """The attempt row a claim opened, as its worker last wrote it. While the attempt
    runs nobody else writes its stage times (the reaper closes it only once the run is
    no longer held), so they are written from here instead of read back each stage."""

    pk: int
    started_at: datetime
    stages: list[dict]


@dataclass(frozen=True)
class Held:
    """A run this worker holds: the attempt number is the key of every later update."""

    run_pk: int
    attempt: int
    worker: str
    # The attempt row `run_claim` opened (None: it is read when needed).
    row: AttemptRow | None = field(default=None, compare=False, repr=False)


def run_ring(run: ReviewRun) -> None:
    """Ring for a run written in the current transaction."""
    RUNS.ring(run.pk)


def run_ring_later() -> dict[str, Any]:
    """The fields of a queued run's INSERT that count it rung: it is rung by
    `run_ring_ready` once its check run exists (or by the reaper, RING_AGAIN_AFTER later,
    if that never comes)."""
    return RUNS.ring_later()


def run_ring_ready(run: ReviewRun) -> None:
    """Ring for a queued run whose check run now exists."""
    if run.status == RunStatus.QUEUED:
        with transaction.atomic():
            RUNS.ring(run.pk)


def _held(held: Held):
    return RUNS.held(held.run_pk, held.attempt, {"worker": held.worker})


def run_claim(
    run_pk: int, *, worker: str | None = None, now: datetime | None = None
) -> Held | None:
    """Take a queued run, or None if it is not this worker's to take (`run_claim_read`)."""
    claimed = run_claim_read(run_pk, worker=worker, now=now)
    return claimed[0] if claimed else None


def run_claim_read(
    run_pk: int, *, worker: str | None = None, now: datetime | None = None
) -> tuple[Held, ReviewRun] | None:
    """Take a queued run, or None if it is not this worker's to take; with the run as it
    is once taken (its pull request, repository, installation and reviewer with it).

    One conditional UPDATE decides: the run must be queued and due, below its attempt
    bound, and its pull request must have no other running run (the partial unique
    index `run_one_running_per_pull_request` settles two claims racing for one PR).
    A run waiting for its PR's running run is rung again when that one finishes.
    """
    now = now or timezone.now()
    worker = worker or worker_name()
    busy = ReviewRun.objects.filter(
        pull_request=OuterRef("pull_request"), status=RunStatus.RUNNING
    ).exclude(pk=run_pk)
    try:
        with transaction.atomic():
            taken = RUNS.take(
                run_pk,
                now=now,
                where=~Exists(busy),
                also={"worker": worker, "stage": "", "started_at": Coalesce(F("started_at"), now)},
            )
            if not taken:
                return None
            # The run with the attempt just counted, and its last attempt row's number,
            # in one read (row numbers count every try the run ever had, also before an
            # operator's retry).
            last = RunAttempt.objects.filter(run_id=OuterRef("pk")).order_by("-number")
            run = (
                ReviewRun.objects.select_related(
                    "pull_request__repository__installation", "reviewer"
                )
                .annotate(last_attempt=Subquery(last.values("number")[:1]))
                .get(pk=run_pk)
            )
            row = RunAttempt.objects.create(
                run_id=run_pk, number=(run.last_attempt or 0) + 1, worker=worker, started_at=now
            )
    except IntegrityError:
        return None  # another run of this pull request started first
    return Held(run_pk, run.attempts, worker, row=AttemptRow(row.pk, now, [])), run


def run_stage(held: Held, stage: str) -> None:
    """Record the stage a held run is in (a failure or a lost worker is blamed on it),
    and on its attempt when the stage began (the one before ends there)."""
    now = timezone.now()
    # One transaction, the run's row locked first as the reaper locks it: an attempt the
    # reaper is closing as lost (and a later worker's attempt) is never written to.
    # (Raised outside it: an exception within would break a transaction it is part of.)
    with transaction.atomic(savepoint=False):
        still_held = _held(held).update(stage=stage)
        row = held.row if still_held else None
        if still_held and row is None:
            attempt = _running_attempt(held.run_pk)
            row = AttemptRow(*attempt) if attempt is not None else None
        if row is not None:
            entered = timeline.stage_enter(row.stages, stage, timeline.offset(row.started_at, now))
            # Still running: the run's row locked above, the reaper cannot be closing it.
            if RunAttempt.objects.filter(pk=row.pk, outcome=AttemptOutcome.RUNNING).update(
                stage_times=entered
            ):
                row.stages = entered
    if not still_held:
        raise LeaseLost(f"run {held.run_pk} is no longer held by {held.worker}")


def _running_attempt(run_pk: int) -> tuple[int, datetime, list[dict]] | None:
    """The run's attempt under way (there is at most one), locked until the transaction
    ends: (its pk, when it started, its stage times)."""
    return (
        RunAttempt.objects.select_for_update()
        .filter(run_id=run_pk, outcome=AttemptOutcome.RUNNING)
        .values_list("pk", "started_at", "stage_times")
        .first()
    )


def run_cancel_request(run_pk: int, reason: str, *, superseded_by: str = "") -> str:
    """Stop a run, whatever it is doing. Returns what was done.

    - Waiting: cancelled at once, its check run concluded `cancelled` with the reason.
    - Handed to a runner elsewhere (GitHub Actions) and waiting for its result: the
      same; a result that arrives later is refused.
    - Held by a worker: the request is recorded; the worker stops at its next step or
      GitHub call, stops the engine, publishes nothing more and concludes the check
      `cancelled` with the reason.
    """
    now = timezone.now()
    fields = {"reason": reason[:2000], "superseded_by": superseded_by, "finished_at": now}
    for waiting in (RunStatus.QUEUED, RunStatus.DISPATCHED):
        # Race: a worker claiming it at this moment wins or loses on the status; a run it
        # claimed is asked to stop below instead.
        if _end_waiting(run_pk, waiting, RunStatus.CANCELLED, **fields):
            return "cancelled"
    if ReviewRun.objects.filter(
        pk=run_pk, status=RunStatus.RUNNING, cancel_requested_at__isnull=True
    ).update(cancel_requested_at=now, cancel_reason=reason[:2000], superseded_by=superseded_by):
        return "asked to stop"
    return "already ended"


def _end_waiting(run_pk: int, waiting: str, status: str, **fields: object) -> bool:
    """End a run no worker holds (still `waiting`) as `status`, and ring its check run's
    conclusion. Whether it was still waiting."""
    if ReviewRun.objects.filter(pk=run_pk, status=waiting).update(status=status, **fields):
        ring(CONCLUDE_TASK, run_pk, name=f"conclude-{run_pk}")
        return True
    return False


def run_supersede_waiting(
    run_pk: int, reason: str, *, superseded_by: str = "", finished_at: datetime | None = None
) -> bool:
    """A run still waiting for a worker gives way (a newer head, a review pass): cancelled
    with `reason` and its check run concluded. Whether it was still waiting."""
    fields: dict[str, object] = {"reason": reason, "superseded_by": superseded_by}
    if finished_at is not None:
        fields["finished_at"] = finished_at
    return _end_waiting(run_pk, RunStatus.QUEUED, RunStatus.CANCELLED, **fields)


def run_dispatch(held: Held, *, reason: str, dispatch: dict[str, object]) -> bool:
    """The run its worker holds is handed to a runner elsewhere (GitHub Actions): it
    waits for the runner's result, under no lease. `dispatch`: what the dispatch
    recorded (its ActionsDispatch's fields; an earlier dispatch's are replaced).
    Whether this worker still held it."""
    with transaction.atomic():
        held_still = ReviewRun.objects.filter(
            pk=held.run_pk, status=RunStatus.RUNNING, attempts=held.attempt, worker=held.worker
        ).update(status=RunStatus.DISPATCHED, lease_expires_at=None, reason=reason)
        if held_still:
            ActionsDispatch.objects.update_or_create(
                run_id=held.run_pk, defaults={"job_fetched_at": None, **dispatch}
            )
    return bool(held_still)


def run_dispatched_cancel(run_pk: int, reason: str, *, superseded_by: str = "") -> bool:
    """A dispatched run whose head moved before its runner fetched the job: cancelled,
    its check run concluded. Whether it was still waiting for its runner."""
    return _end_waiting(run_pk, RunStatus.DISPATCHED, RunStatus.CANCELLED, reason=reason,
                        superseded_by=superseded_by, finished_at=timezone.now())  # fmt: skip


def run_result_received(run_pk: int, result: dict, *, received: datetime, reason: str) -> bool:
    """A dispatched run's result arrived: it waits for a worker again, which takes it on
    from the result. False when a result was accepted already (or the run moved on)."""
    return bool(
        ReviewRun.objects.filter(
            pk=run_pk, status=RunStatus.DISPATCHED, runner_result__isnull=True
        ).update(
            status=RunStatus.QUEUED,
            runner_result=result,
            result_received_at=received,
            next_attempt_at=None,
            reason=reason,
        )
    )


def run_dispatched_fail(run_pk: int, **fields: object) -> bool:
    """A dispatched run that cannot end well (no result, a refused one): failed with
    `fields` (reason, error code…), its check run concluded. Whether it was still
    waiting for its runner."""
    return _end_waiting(run_pk, RunStatus.DISPATCHED, RunStatus.FAILED, **fields)


def run_requeue(run_pk: int, **fields: object) -> None:
    """A run asked for again as new (a local review of the same branch and head): waiting,
    its attempts, times, reason and stage cleared; `fields` set anew."""
    ReviewRun.objects.filter(pk=run_pk).update(
        status=RunStatus.QUEUED,
        attempts=0,
        next_attempt_at=None,
        started_at=None,
        finished_at=None,
        reason="",
        stage="",
        **fields,
    )


def run_finish(held: Held, *, status: str, reason: str = "", superseded_by: str = "") -> bool:
    """End a held run (completed, skipped or cancelled) and ring the next run of its PR."""
    now = timezone.now()
    outcome = {
        RunStatus.COMPLETED: AttemptOutcome.SUCCEEDED,
        RunStatus.SKIPPED: AttemptOutcome.SKIPPED,
        RunStatus.CANCELLED: AttemptOutcome.CANCELLED,
    }[status]
    with transaction.atomic():
        done = RUNS.finish(
            held.run_pk,
            held.attempt,
            status,
            where={"worker": held.worker},
            reason=reason,
            error_code="",
            superseded_by=superseded_by,
            finished_at=now,
        )
        if done:
            attempt_end(held.run_pk, outcome=outcome, now=now, row=held.row)
            _ring_waiting(held.run_pk)
    return bool(done)


def run_attempt_failed(held: Held, exc: BaseException, *, stage: str, final: bool = False) -> str:
    """Record a failed attempt: a transient error is retried with exponential backoff and
    jitter until MAX_ATTEMPTS; a permanent one (or the last attempt, or `final`) fails the
    run. An attempt that met GitHub's weather (a rate limit, GitHub unavailable) is
    deferred and does not count (tasuku/durable.py); after a rate limit the installation
    waits meanwhile."""
    now = timezone.now()
    error = f"{type(exc).__name__}: {exc}"
    code = code_of(exc)  # tasuku/errors.py; an exception without one is a bug
    if not hasattr(exc, "permanent"):
        error += "\n\n" + "".join(traceback.format_exception(exc)[-8:])
    row = (
        ReviewRun.objects.filter(pk=held.run_pk)
        .values("created_at", "pull_request__repository__installation__github_id")
        .first()
    )
    if final or row is None:
        verdict = durable.Verdict(durable.FAILED, why="final")
    else:
        deferrals = RunAttempt.objects.filter(
            run_id=held.run_pk, outcome=AttemptOutcome.DEFERRED
        ).count()
        verdict = RUNS.verdict(
            exc,
            attempt=held.attempt,
            deferrals=deferrals,
            since=row["created_at"],
            now=now,
            installation=row["pull_request__repository__installation__github_id"],
        )
    if verdict.kind == durable.DEFERRED:
        what = (
            "GitHub's rate limit" if verdict.why == durable.RATE_LIMIT else "GitHub to answer again"
        )
        reason = f"waiting until {verdict.at:%H:%M:%S} UTC for {what}: {exc}"
        # The run's 45-minute clock restarts when it runs again: waiting is not running.
        fields = {"reason": reason[:2000], "started_at": None}
        outcome = AttemptOutcome.DEFERRED
    elif verdict.kind == durable.RETRY:
        fields = {"reason": f"retrying after: {exc}"[:2000]}
        outcome = AttemptOutcome.FAILED
    else:
        fields = {"reason": str(exc)[:2000], "finished_at": now}
        outcome = AttemptOutcome.FAILED
    with transaction.atomic():
        changed = RUNS.settle(
            held.run_pk,
            held.attempt,
            verdict,
            where={"worker": held.worker},
            stage=stage,
            error_code=code,
            **fields,
        )
        if changed:
            attempt_end(
                held.run_pk,
                outcome=outcome,
                now=now,
                stage=stage,
                error=error[:20000],
                error_code=code,
                row=held.row,
            )
            if verdict.kind == durable.FAILED:
                _ring_waiting(held.run_pk)
    if verdict.kind == durable.DEFERRED:
        logger.warning("run %s deferred at %s until %s: %s", held.run_pk, stage, verdict.at, exc,
                       extra={"error_id": error_id(code)})  # fmt: skip
    else:
        logger.warning("run %s attempt %d failed at %s: %s", held.run_pk, held.attempt, stage, exc,
                       extra={"error_id": error_id(code)})  # fmt: skip
    if not changed:
        return "lost"
    return RunStatus.FAILED if verdict.kind == durable.FAILED else RunStatus.QUEUED


def run_release(held: Held, *, stage: str) -> str:
    """Hand a held run back because this worker is stopping: queued again and due at
    once, its attempt given back (not counted against the run's attempts) and recorded
    as interrupted, and rung for another worker. "lost" when it was no longer ours."""
    now = timezone.now()
    why = f"the worker {held.worker} was stopped at {stage or 'its start'}"
    with transaction.atomic():
        # Keyed on the attempt and the worker: a run the reaper already handed on (its
        # lease ran out during the stop) is another worker's now, and stays so.
        released = RUNS.release(
            held.run_pk,
            held.attempt,
            where={"worker": held.worker},
            worker="",
            reason=f"interrupted: {why}; another worker takes it over"[:2000],
        )
        if released:
            attempt_end(
                held.run_pk,
                outcome=AttemptOutcome.INTERRUPTED,
                now=now,
                stage=stage,
                error=f"Interrupted: {why}.",
                error_code="worker-stopped",
                row=held.row,
            )
            RUNS.ring(held.run_pk, now=now)
    logger.info("run %s: %s; handed back", held.run_pk, why)
    return RunStatus.QUEUED if released else "lost"


def attempt_end(
    run_pk: int,
    *,
    outcome: str,
    now: datetime,
    stage: str = "",
    error: str = "",
    error_code: str = "",
    row: AttemptRow | None = None,
) -> None:
    """Close the run's running attempt row (there is at most one), and the stage it was
    in with it. `row`: that attempt as its worker holds it (else it is read)."""
    with transaction.atomic(savepoint=False):
        attempt = (row.pk, row.started_at, row.stages) if row else _running_attempt(run_pk)
        if attempt is None:
            return
        pk, started_at, stages = attempt
        closed = timeline.stages_close(
            stages, timeline.offset(started_at, now), lost=outcome == AttemptOutcome.LOST
        )
        RunAttempt.objects.filter(pk=pk, outcome=AttemptOutcome.RUNNING).update(
            outcome=outcome,
            finished_at=now,
            stage=stage,
            error=error,
            error_code=error_code,
            stage_times=closed,
        )


def _ring_waiting(run_pk: int) -> None:
    """Ring the next queued run of the same pull request (it waited for this one). Not a
    run whose check run is not there yet: its admission rings it once it is (a worker
    taking it before would create a second check run), or the reaper does."""
    # (Called just after this run's row was written: it is there.)
    pull_request_id = ReviewRun.objects.filter(pk=run_pk).order_by().values("pull_request_id")[:1]
    waiting = (
        ReviewRun.objects.filter(pull_request_id=Subquery(pull_request_id), status=RunStatus.QUEUED)
        .exclude(pk=run_pk)
        .exclude(Q(check_run_id__isnull=True) & ~Q(trigger__in=CHECKLESS_TRIGGERS))
        .order_by("created_at", "pk")
        .values_list("pk", flat=True)  # its id is all a doorbell carries
        .first()
    )
    if waiting is not None:
        RUNS.ring(waiting)


def run_retry(run: ReviewRun) -> bool:
    """An operator's retry of a failed run: three fresh attempts, starting now."""
    with transaction.atomic():
        updated = ReviewRun.objects.filter(pk=run.pk, status=RunStatus.FAILED).update(
            status=RunStatus.QUEUED,
            attempts=0,
            next_attempt_at=None,
            started_at=None,
            finished_at=None,
            reason="",
            error_code="",
            stage="",
        )
        if updated:
            run_ring(run)
    return bool(updated)


def _hand_on(run: ReviewRun, *, now: datetime, still: dict, error: str) -> str:
    """A run whose worker is gone: queued again at once and rung, or failed after its last
    try; the attempt recorded as lost. `still` keys the conditional update on why it was
    judged gone. Returns the run's new status, or "" when that no longer held."""
    final = run.attempts >= MAX_ATTEMPTS
    where = run.stage or "its start"
    updates = dict(lease_expires_at=None, worker="", error_code="worker-lost")
    if final:
        updates.update(
            status=RunStatus.FAILED,
            finished_at=now,
            reason=f"the worker stopped while the run was at {where} (last attempt)",
        )
    else:
        updates.update(
            status=RunStatus.QUEUED,
            next_attempt_at=now,
            reason=f"retrying: the worker stopped while the run was at {where}",
        )
    with transaction.atomic():
        if not ReviewRun.objects.filter(
            pk=run.pk, status=RunStatus.RUNNING, attempts=run.attempts, **still
        ).update(**updates):
            return ""
        attempt_end(
            run.pk,
            outcome=AttemptOutcome.LOST,
            now=now,
            stage=run.stage,
            error=error,
            error_code="worker-lost",
        )
        if final:
            ring(CONCLUDE_TASK, run.pk, name=f"conclude-{run.pk}")
        else:
            RUNS.ring(run.pk, now=now)
    return updates["status"]


def runs_release_worker(name: str) -> int:
    """Hand on at once the runs of a worker process its cluster saw die (killed, out of
    memory, killed at the stop's bound), as the reaper would once their leases ran out.
    How many."""
    now = timezone.now()
    handed = 0
    for run in ReviewRun.objects.filter(status=RunStatus.RUNNING, worker=name):
        # Keyed on the worker too: the run may have been handed on and claimed meanwhile.
        handed += bool(
            _hand_on(
                run,
                now=now,
                still={"worker": name},
                error=f"The worker process {name} died while it held the run.",
            )
        )
    if handed:
        logger.warning("worker %s died holding %d run(s): handed on", name, handed)
    return handed


def runs_reap(*, now: datetime | None = None) -> dict[str, int]:
    """The periodic safety net for runs (reviews/queue/reaper.py runs it in the workers).

    1. A run whose lease expired (its worker was killed or stopped heartbeating) records
       the attempt as lost and is queued again at once, or failed after its last try —
       unless this process was itself cut off from the database within the last lease.
    2. A run still unfinished 45 minutes after it started is failed; time spent waiting
       (deferred, or for a write's turn in the write budget) does not count.
    3. Queued runs that are due and were not rung recently are rung again (a lost
       doorbell, or a run that waited for another run of its PR).
    """
    now = now or timezone.now()
    lost = requeued = failed_lost = 0
    # Only a process that could reach the database for a whole lease saw that no
    # heartbeat came (tasuku/outage.py): one back from an outage leaves the leases alone.
    expired = ReviewRun.objects.filter(status=RunStatus.RUNNING, lease_expires_at__lt=now)
    if not outage.trusted(lease_length().total_seconds()):
        expired = expired.none()
    for run in expired:
        # Unless it heartbeated or finished meanwhile.
        ended = _hand_on(
            run,
            now=now,
            still={"lease_expires_at__lt": now},
            error=f"No heartbeat from {run.worker} since its lease expired.",
        )
        lost += bool(ended)
        failed_lost += ended == RunStatus.FAILED
        requeued += ended == RunStatus.QUEUED

    overdue = 0
    deadline = now - timedelta(seconds=settings.TASUKU_RUN_DEADLINE_SECONDS)
    for run in _on_the_clock(now).filter(
        Q(started_at__lt=deadline) | Q(result_received_at__lt=deadline)
    ):
        if _clock_of(run) >= deadline:
            continue
        with transaction.atomic():
            if ReviewRun.objects.filter(
                pk=run.pk, status=run.status, attempts=run.attempts, started_at=run.started_at
            ).update(
                status=RunStatus.FAILED,
                finished_at=now,
                lease_expires_at=None,
                reason=f"did not finish within {settings.TASUKU_RUN_DEADLINE_SECONDS // 60} minutes of starting",
                error_code="run-deadline",
            ):
                attempt_end(
                    run.pk,
                    outcome=AttemptOutcome.FAILED,
                    now=now,
                    stage=run.stage,
                    error="deadline exceeded",
                    error_code="run-deadline",
                )
                ring(CONCLUDE_TASK, run.pk, name=f"conclude-{run.pk}")
                overdue += 1

    rung = RUNS.ring_due(now=now)
    return {"lost": lost, "requeued": requeued, "failed": failed_lost + overdue, "rung": rung}


def _on_the_clock(now: datetime):
    """The runs the 45-minute deadline applies to now: unfinished, not with a GitHub
    Actions runner (reviews/tasks.py sweeps those: their clock runs from the dispatch to
    the result), and not waiting: not for a worker (not started, or deferred for GitHub's
    weather or its installation's write budget: a deferral restarts the clock), nor for
    its next attempt after a failure, nor for a write's turn in the write budget at this
    moment. Waiting is not running: an installation past its hourly writes holds its
    reviews for most of an hour."""
    return (
        ReviewRun.objects.exclude(status__in=RUN_FINAL_STATES)
        .exclude(status=RunStatus.DISPATCHED)
        .filter(started_at__isnull=False)
        .exclude(status=RunStatus.QUEUED, next_attempt_at__gt=now)
        .exclude(status=RunStatus.RUNNING, write_wait_until__gt=now)
    )


def _clock_of(run: ReviewRun) -> datetime:
    """When the run's current stretch of work began: it started (again, after a
    deferral), or its Actions runner's result came, whichever is later."""
    return max(run.started_at, run.result_received_at or run.started_at)


# --- What a run's stages record on it -----------------------------------------------
# Not transitions: what a stage fills in as it goes, and the check run's outbox columns
# (reviews/checks/conclusions.py sends them). Written here too, so that every write to a run is
# in this module (tests/reviews/test_run_writes.py holds the rest of the code to it).


def run_waiting_asked_again(
    run_pk: int, *, trigger: str = "", requested_by: str = "", note: str = ""
) -> None:
    """A queued run asked for again: a full review asked of it, and the latest
    requester's words go with it. Nothing changes once it has been taken."""
    fields: dict[str, Any] = {"trigger": trigger} if trigger else {}
    if requested_by:
        fields.update(requested_by=requested_by, requester_note=note)
    if fields:
        ReviewRun.objects.filter(pk=run_pk, status=RunStatus.QUEUED).update(**fields)


def run_write_waited(run_pk: int, *, seconds: float, until: datetime, why: str) -> None:
    """One of the run's GitHub writes waited its installation's turn (the run page shows
    it): until when, why, and the time waited in all."""
    ReviewRun.objects.filter(pk=run_pk).update(
        write_wait_until=until,
        write_wait_reason=why[:300],
        write_waited=F("write_waited") + seconds,
    )


def run_job_recorded(run_pk: int, *, omitted: list, digest: str, result_reused: bool) -> None:
    """The job the engine is given: what it leaves out, and its digest (an identical job
    may reuse a stored result). A result not reused is forgotten: it was another job's."""
    ReviewRun.objects.filter(pk=run_pk).update(
        omitted=omitted,
        job_digest=digest,
        **({} if result_reused else {"runner_result": None}),
    )


def run_result_recorded(run_pk: int, result: dict, *, received: datetime) -> None:
    """The engine's result, kept before it is validated (a retry reuses it)."""
    ReviewRun.objects.filter(pk=run_pk).update(runner_result=result, result_received_at=received)


def run_scope_recorded(run: ReviewRun) -> None:
    """What the review covered, as set on `run`: the sanitised names, the files reviewed
    and filtered, the base of an incremental review, the secondary repositories."""
    ReviewRun.objects.filter(pk=run.pk).update(
        sanitised=run.sanitised,
        reviewed=run.reviewed,
        filtered=run.filtered,
        incremental_since=run.incremental_since,
        secondaries=run.secondaries,
    )


def run_job_fetched(run_pk: int, *, now: datetime | None = None) -> bool:
    """A dispatched run's job was fetched by its Actions runner (the first fetch counts)."""
    return bool(
        ActionsDispatch.objects.filter(run_id=run_pk, job_fetched_at__isnull=True).update(
            job_fetched_at=now or timezone.now()
        )
    )


def run_actions_attached(run_pk: int, *, actions_run_id: int, url: str, reason: str) -> bool:
    """A run dispatched to GitHub Actions without the workflow run's id gets it (once;
    an id that is another run's raises IntegrityError)."""
    with transaction.atomic():
        attached = ActionsDispatch.objects.filter(
            run_id=run_pk, run__status=RunStatus.DISPATCHED, actions_run_id__isnull=True
        ).update(actions_run_id=actions_run_id, actions_run_url=url)
        if attached:
            ReviewRun.objects.filter(pk=run_pk).update(reason=reason)
    return bool(attached)


def run_check_created(
    run_pk: int, check_id: int, *, shown: str, conclusion: str = "", title: str = ""
) -> None:
    """The run's check run exists on GitHub: its id (only the first writer's: a
    concurrent duplicate keeps it), the status it shows, and a conclusion it was created
    with."""
    ReviewRun.objects.filter(pk=run_pk, check_run_id__isnull=True).update(
        check_run_id=check_id, check_status=shown
    )
    if conclusion:
        ReviewRun.objects.filter(pk=run_pk).update(
            check_conclusion=conclusion, check_title=title[:255]
        )


def run_check_in_progress(run_pk: int) -> None:
    ReviewRun.objects.filter(pk=run_pk).update(check_status="in_progress")


def run_conclusion_record(
    run_pk: int, *, conclusion: str, title: str, summary: str, now: datetime
) -> None:
    """What the run's check run is to say, due `now` (reviews/checks/conclusions.py)."""
    ReviewRun.objects.filter(pk=run_pk).update(
        check_conclusion=conclusion,
        check_title=title[:255],
        check_summary=summary,
        check_due_at=now,
        check_sends=0,
        check_error="",
    )


def run_conclusion_due_again(run_pk: int) -> None:
    """The run says something else than what was just sent: due again, now."""
    ReviewRun.objects.filter(pk=run_pk).update(check_due_at=timezone.now())


def run_conclusion_waits(run_pk: int, *, due: datetime, until: datetime, why: str) -> None:
    """The due conclusion (version `due`) waits until `until`, not counted as a send."""
    ReviewRun.objects.filter(pk=run_pk, check_due_at=due).update(
        check_due_at=until, check_error=why[:2000]
    )


def run_conclusion_backed_off(run_pk: int, *, due: datetime, until: datetime, error: str) -> None:
    """A send of version `due` GitHub did not take: counted, due again at `until`."""
    ReviewRun.objects.filter(pk=run_pk, check_due_at=due).update(
        check_due_at=until, check_sends=F("check_sends") + 1, check_error=error[:2000]
    )


def run_conclusion_refused(run_pk: int, *, due: datetime, error: str) -> None:
    """GitHub refused version `due` for good: kept on the run, never sent again."""
    ReviewRun.objects.filter(pk=run_pk, check_due_at=due).update(
        check_due_at=None, check_error=error[:2000]
    )


def run_conclusion_sent(run_pk: int, *, due: datetime) -> None:
    """Version `due` was sent; one recorded meanwhile is still due."""
    ReviewRun.objects.filter(pk=run_pk, check_due_at=due).update(check_due_at=None, check_error="")


def runs_results_forget(runs) -> int:
    """Retention: the jobs and engine results of ended runs (`runs`, a QuerySet of them)
    are forgotten; the runs stay. Returns how many."""
    ended = runs.filter(status__in=RUN_FINAL_STATES)
    ActionsDispatch.objects.filter(run__in=ended, job__isnull=False).update(job=None)
    return ended.update(runner_result=None)
