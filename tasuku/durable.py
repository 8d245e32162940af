"""The durable row queues: a table whose rows are the work, and one way to hold, retry,
defer and sweep them, written once (`Queue`), and one attempt at a row (`Job`: claim,
work, verdict, settle). Every piece of background work is a Queue (docs/architecture.md,
*Durable queues*, lists them); check conclusions (reviews/checks/conclusions.py) are an outbox
on the run row that shares the retry rules below.

A row of a Queue is *waiting* (due once `not_before` has passed, or at once when it is
empty), *working* (held by one worker until its lease ends; the holder renews it), or in
a final state. A task carries only the row's id: its doorbell. What happens to a row:

- `claim`: one conditional UPDATE decides between workers that got the same doorbell: a
  due, waiting row below its attempt bound becomes working, its attempt counted and its
  lease set; the row count says who won. The attempt number keys every later update, so a
  worker whose lease was taken over cannot finish the row.
- `verdict` and `settle`: what an attempt that failed means, applied. `release`: an
  attempt whose worker is stopping gives the row back, not counted, due at once.
  - A transient failure is tried again after an exponential backoff with jitter, until
    the attempt bound; a permanent one, or the last attempt, fails the row.
  - A failure GitHub answered with a rate limit (`Retry-After`, or a spent quota with its
    `x-ratelimit-reset`) is *deferred*: tried again no sooner than GitHub asked, and not
    counted against the row's attempts — waiting out a limit is not a failure. A limit
    without a time waits a minute (repos/github/errors.py); one met again after waiting
    waits at least a minute, doubling each time, as GitHub's documentation asks.
  - A failure that is GitHub being unavailable (5xx, no answer, past the gateway's own
    retries) is deferred the same way, with a backoff (30 s doubling to 15 minutes): a
    5xx storm delays work, it does not fail it.
  - Deferral has a bound (MAX_DEFERRAL_AGE): a row that has waited a day for GitHub
    fails the ordinary way.
- Rate limits hold for the whole installation: the wait is recorded on it
  (`installation_quiet`), and `claim` puts every queue's next work for that installation
  off until then, rather than hammer the limit the last job met.
- `sweep` (from the reaper): a working row whose lease ran out (its worker
  died) is waiting again, due now — or failed, when that was its last attempt — and every
  due row not rung recently is rung again (a lost doorbell, a retry that came due).
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, ClassVar

from tasuku import outage
from tasuku.broker import ring, ring_now
from tasuku.logs import log_context

MAX_DEFERRAL_AGE = timedelta(hours=24)
LONGEST_BACKOFF = timedelta(minutes=15)
# Secondary limits with no time given: a minute at least, then doubling (GitHub's docs:
# "wait for at least one minute", "increase the time between retries exponentially").
SECONDARY_FLOOR = 60.0
OUTAGE_BACKOFF = timedelta(seconds=30)
RATE_LIMIT, UNAVAILABLE = "rate limit", "GitHub unavailable"


def retry_after_of(exc: BaseException | None) -> float | None:
    """Seconds GitHub asked to wait, from the error or anything it was raised from."""
    seen = 0
    while exc is not None and seen < 10:
        wait = getattr(exc, "retry_after", None)
        if wait is not None and not getattr(exc, "permanent", False):
            return float(wait)
        exc = exc.__cause__ or exc.__context__
        seen += 1
    return None


def backoff(failures: int, base: timedelta, *, retry_after: float | None = None) -> timedelta:
    """`base` doubled per earlier failure (`failures` ≥ 1), capped, with up to half again
    as jitter; never sooner than `retry_after`."""
    delay = min(LONGEST_BACKOFF, base * (2 ** max(0, failures - 1)))
    delay += timedelta(seconds=random.uniform(0, delay.total_seconds() / 2))  # noqa: S311
    if retry_after is not None:
        delay = max(delay, timedelta(seconds=retry_after))
    return delay


def github_unavailable(exc: BaseException | None) -> bool:
    """Whether the failure is GitHub being unavailable — a 5xx or no answer from its API
    (a transient `GitHubError` without a rate limit) — here or in what it was raised from."""
    seen = 0
    while exc is not None and seen < 10:
        if (
            hasattr(exc, "retry_after")
            and hasattr(exc, "status")
            and not getattr(exc, "permanent", True)
            and (exc.status is None or exc.status >= 500)
        ):
            return True
        exc = exc.__cause__ or exc.__context__
        seen += 1
    return False


def deferral(
    exc: BaseException, *, deferrals: int, since: datetime, now: datetime
) -> tuple[timedelta, str] | None:
    """How long to defer a row whose attempt met GitHub's weather, and which: a rate limit
    (as long as GitHub asked; a minute at least, doubling, when limited again) or GitHub
    unavailable (5xx, no answer: 30 s doubling to 15 minutes). None when the failure is
    neither, or the row has waited MAX_DEFERRAL_AGE: it fails or backs off as usual.
    `deferrals` counts the row's earlier deferrals, `since` is when it was made."""
    if now - since > MAX_DEFERRAL_AGE:
        return None
    jitter = timedelta(seconds=random.uniform(0, 5))  # noqa: S311 - spread the wake-ups
    wait = retry_after_of(exc)
    if wait is not None:
        # GitHub's limit met again waits longer each time; a place in Tasuku's own write
        # budget comes when the budget says, however often it was waited for.
        if deferrals and quiets(exc):
            wait = max(wait, SECONDARY_FLOOR * 2 ** min(deferrals - 1, 4))
        return timedelta(seconds=wait) + jitter, RATE_LIMIT
    if github_unavailable(exc):
        return backoff(deferrals + 1, OUTAGE_BACKOFF), UNAVAILABLE
    return None


# A wait for a place in the installation's own write budget (repos/github/budget.py),
# not a limit GitHub answered: the row waits, the installation's other work does not.
WRITE_BUDGET = "github-write-budget"


def quiets(exc: BaseException | None) -> bool:
    """Whether a rate limit quiets the whole installation: GitHub's, not a write's wait
    for its place in Tasuku's own budget (which already orders every process's writes).
    The error that carries the wait decides, here or in what it was raised from."""
    seen = 0
    while exc is not None and seen < 10:
        if getattr(exc, "retry_after", None) is not None:
            return getattr(exc, "code", "") != WRITE_BUDGET
        exc = exc.__cause__ or exc.__context__
        seen += 1
    return True


def _installations():
    from django.apps import apps

    return apps.get_model("repos", "Installation").objects


def installation_quiet(github_id: int | None, until: datetime, reason: str) -> None:
    """GitHub rate-limited a call for this installation: its work waits until `until`
    (a later wait already recorded stands)."""
    if not github_id:
        return
    from django.db.models import Q

    _installations().filter(github_id=github_id).filter(
        Q(quiet_until__isnull=True) | Q(quiet_until__lt=until)
    ).update(quiet_until=until, quiet_reason=reason[:2000])


def _ahead(until: datetime | None, now: datetime) -> datetime | None:
    """A rate-limit wait's end, if it is still ahead of `now`."""
    return until if until is not None and until > now else None


def quiet_until(github_id: int | None, now: datetime) -> datetime | None:
    """When the installation's rate-limit wait ends, if it is still waiting."""
    if not github_id:
        return None
    until = (
        _installations().filter(github_id=github_id).values_list("quiet_until", flat=True).first()
    )
    return _ahead(until, now)


def quiet_left(installation: Any, now: datetime) -> datetime | None:
    """`quiet_until` of an installation row in hand (read with the work, no second read)."""
    return _ahead(installation.quiet_until if installation.github_id else None, now)


# --- The queue ------------------------------------------------------------------------

DEFERRED, RETRY, FAILED = "deferred", "retry", "failed"


@dataclass(frozen=True)
class Verdict:
    """What a failed attempt means: `deferred` (GitHub's weather: the attempt is given
    back), `retry` (backed off) or `failed`; `at` is when the row is due again, `why`
    says which weather (RATE_LIMIT, UNAVAILABLE) or why it failed."""

    kind: str
    at: datetime | None = None
    why: str = ""


@dataclass(frozen=True)
class Queue:
    """A table whose rows are work (see the module's docstring). The fields name the
    model's columns, so each queue keeps its own vocabulary."""

    model: str  # "app_label.Model"
    task: str  # the task rung with a row's id
    name: str  # the doorbell's name is f"{name}-{pk}"
    waiting: tuple[str, ...]  # states a row is due in, once `not_before` has passed; a
    # retried or deferred row waits in the last of them
    working: str  # the state while a worker holds the row
    failed: str  # the state a row fails into
    # Waiting states a doorbell may take at once: their `not_before` only says when the
    # sweeper rings again if the first doorbell was lost.
    fresh: tuple[str, ...] = ()
    status: str = "status"
    attempts: str = "attempts"
    lease: str = "leased_until"
    not_before: str = "next_attempt_at"
    rung: str = "rung_at"  # when its doorbell last rang
    deferrals: str | None = "deferrals"  # a count on the row (None: the caller counts)
    installation: str | None = None  # the path to the row's installation's GitHub id
    max_attempts: int = 3
    lease_for: Callable[[], timedelta] = field(default=lambda: timedelta(minutes=5))
    retry_base: timedelta = timedelta(seconds=30)
    ring_again: timedelta = timedelta(minutes=10)

    @property
    def rows(self):
        from django.apps import apps

        return apps.get_model(self.model).objects

    def _is_due(self, now: datetime, *, claim: bool = False):
        """Waiting and past `not_before` (for a claim, also waiting in a `fresh` state)."""
        from django.db.models import Q

        due = Q(**{f"{self.status}__in": self.waiting}) & (
            Q(**{f"{self.not_before}__isnull": True}) | Q(**{f"{self.not_before}__lte": now})
        )
        if claim and self.fresh:
            due |= Q(**{f"{self.status}__in": self.fresh})
        return due

    # Doorbells.
    def ring(self, pk: int, *, now: datetime | None = None) -> None:
        """Ring for a row written in the current transaction (tasuku.broker.ring)."""
        self.rows.filter(pk=pk).update(**{self.rung: now or _now()})
        ring(self.task, pk, name=f"{self.name}-{pk}")

    def ring_now(self, pk: int) -> bool:
        return ring_now(self.task, pk, name=f"{self.name}-{pk}")

    def ring_later(self, *, now: datetime | None = None) -> dict[str, Any]:
        """The fields that count a row as rung without ringing, for the INSERT that writes
        it (no second statement): its writer rings (`ring`) once what must come before
        any worker takes it is done. Should the writer die first, `ring_due` rings the
        row when `ring_again` has passed."""
        return {self.rung: now or _now()}

    # Holding a row.
    def installation_of(self, pk: int) -> int | None:
        if not self.installation:
            return None
        return self.rows.filter(pk=pk).values_list(self.installation, flat=True).first()

    def quiet_until(self, pk: int, now: datetime) -> datetime | None:
        """`quiet_until` of the row's installation, in one statement (`installation_of`
        a subquery of it)."""
        from django.db.models import Subquery

        if not self.installation:
            return None
        github_id = self.rows.filter(pk=pk).order_by().values(self.installation)[:1]
        until = (
            _installations()
            .filter(github_id=Subquery(github_id))
            .exclude(github_id=0)  # none of a local review's (as `quiet_until` says)
            .values_list("quiet_until", flat=True)
            .first()
        )
        return _ahead(until, now)

    def _quiet(self, pk: int, now: datetime):
        """A condition: row `pk`'s installation waits out a rate limit at `now` (what
        `quiet_until` reads, as a subquery of the claim's UPDATE). Not correlated with
        the updated row (its pk is known): the UPDATE itself joins nothing, where a
        condition through the row's relations would make Django wrap it in two nested
        `id IN (SELECT …)` (about 3 ms of CPU to compile, at every claim)."""
        from django.db.models import Exists, Subquery

        github_id = self.rows.filter(pk=pk).order_by().values(self.installation)[:1]
        return Exists(
            _installations()
            .filter(github_id=Subquery(github_id), quiet_until__gt=now)
            .exclude(github_id=0)  # none of a local review's (as `quiet_until` says)
        )

    def take(
        self,
        pk: int,
        *,
        now: datetime | None = None,
        where: Any = None,
        also: dict[str, Any] | None = None,
    ) -> bool:
        """`claim` without reading the attempt back: whether this worker now holds the
        row (its caller reads the row, the attempt number with it)."""
        from django.db.models import F

        now = now or _now()
        rows = self.rows.filter(pk=pk, **{f"{self.attempts}__lt": self.max_attempts})
        rows = rows.filter(self._is_due(now, claim=True))
        if where is not None:
            rows = rows.filter(where)
        if self.installation:
            # The installation's rate-limit wait in the one UPDATE that decides (the
            # usual case: no wait, one statement); it is read only when the row was
            # not taken, to put the row off until the wait ends.
            rows = rows.filter(~self._quiet(pk, now))
        won = rows.update(
            **{
                self.status: self.working,
                self.attempts: F(self.attempts) + 1,
                self.lease: now + self.lease_for(),
                self.not_before: None,
            },
            **(also or {}),
        )
        if won:
            return True
        waiting = self.quiet_until(pk, now)
        if waiting is not None:
            self.rows.filter(pk=pk, **{f"{self.status}__in": self.waiting}).update(
                **{self.not_before: waiting}
            )
        return False

    def claim(
        self,
        pk: int,
        *,
        now: datetime | None = None,
        where: Any = None,
        also: dict[str, Any] | None = None,
    ) -> int | None:
        """Hold a due row: its attempt number, or None when it is not this worker's to
        take (not due, held, finished, out of attempts, or `where` — a queue's own
        condition, a Q — does not hold). While its installation waits out a rate limit
        the row is put off until then instead, its attempt not spent."""
        if not self.take(pk, now=now, where=where, also=also):
            return None
        return self.rows.values_list(self.attempts, flat=True).get(pk=pk)

    def held(self, pk: int, attempt: int, where: dict[str, Any] | None = None):
        """The row, while this attempt holds it (a queryset: update it to act on it);
        `where` adds the queue's own key of a holder (such as the worker's name)."""
        rows = self.rows.filter(pk=pk, **{self.status: self.working, self.attempts: attempt})
        return rows.filter(**where) if where else rows

    def renew(
        self, pk: int, attempt: int, *, now: datetime | None = None, where: dict | None = None
    ) -> bool:
        """Extend the lease; False when the attempt no longer holds the row."""
        lease = {self.lease: (now or _now()) + self.lease_for()}
        return bool(self.held(pk, attempt, where).update(**lease))

    # A failed attempt.
    def verdict(
        self,
        exc: BaseException,
        *,
        attempt: int,
        deferrals: int,
        since: datetime,
        now: datetime | None = None,
        installation: int | None = None,
    ) -> Verdict:
        """What `exc` on this attempt means (see the module's docstring). A rate limit
        also quiets the installation until GitHub's reset."""
        now = now or _now()
        if getattr(exc, "permanent", False):
            return Verdict(FAILED, why="permanent")
        found = deferral(exc, deferrals=deferrals, since=since, now=now)
        if found is not None:
            wait, kind = found
            if kind == RATE_LIMIT and quiets(exc):
                installation_quiet(installation, now + wait, str(exc))
            return Verdict(DEFERRED, now + wait, kind)
        if attempt >= self.max_attempts:
            return Verdict(FAILED, why="out of attempts")
        return Verdict(RETRY, now + backoff(attempt, self.retry_base), "transient")

    def settle(
        self, pk: int, attempt: int, verdict: Verdict, *, where: dict | None = None, **also: Any
    ) -> bool:
        """Apply a verdict to the row this attempt holds (with the queue's own fields in
        `also`); False when the attempt no longer holds it."""
        from django.db.models import F

        fields: dict[str, Any] = {self.lease: None}
        if verdict.kind == FAILED:
            fields.update({self.status: self.failed, self.not_before: None})
        else:
            fields.update({self.status: self.waiting[-1], self.not_before: verdict.at})
        if verdict.kind == DEFERRED:
            fields[self.attempts] = F(self.attempts) - 1
            if self.deferrals:
                fields[self.deferrals] = F(self.deferrals) + 1
        return bool(self.held(pk, attempt, where).update(**fields, **also))

    def release(self, pk: int, attempt: int, *, where: dict | None = None, **also: Any) -> bool:
        """Give back the row this attempt holds, its attempt not counted: waiting and due
        at once (its worker is stopping; nothing failed). False when it no longer holds it."""
        from django.db.models import F

        fields = {
            self.status: self.waiting[-1],
            self.lease: None,
            self.not_before: None,
            self.attempts: F(self.attempts) - 1,
        }
        return bool(self.held(pk, attempt, where).update(**fields, **also))

    def finish(
        self, pk: int, attempt: int, state: str, *, where: dict | None = None, **also: Any
    ) -> bool:
        """End the row this attempt holds in `state`."""
        ended = {self.status: state, self.lease: None}
        return bool(self.held(pk, attempt, where).update(**ended, **also))

    # An outbox: a row that says what is to be sent, `version` raised each time it is
    # asked for again, `sent_version` the version last sent.
    def asked_again(self, pk: int, **fields: Any) -> bool:
        """The row asked for again (`fields` raise its version). While a worker holds it
        only `fields` are written: the worker sees the newer version when it is done
        (`sent`) and sends again — a state flipped under it would let two workers send at
        once. Otherwise it is due again with its attempts afresh, at once unless it waits
        out GitHub's weather (its `not_before` kept), and rung. False when held."""
        from django.db.models import Case, F, Q, When

        if self.rows.filter(pk=pk, **{self.status: self.working}).update(**fields):
            return False
        again = {**fields, self.status: self.waiting[-1], self.attempts: 0, self.rung: _now()}
        if self.deferrals:
            # One statement: due at once unless it waits out a deferral.
            again[self.not_before] = Case(
                When(Q(**{self.deferrals: 0}), then=None), default=F(self.not_before)
            )
        idle = self.rows.filter(pk=pk).exclude(**{self.status: self.working})
        if idle.update(**again):
            ring(self.task, pk, name=f"{self.name}-{pk}")  # counted rung by that UPDATE
        else:
            self.ring(pk)
        return True

    def sent(self, pk: int, attempt: int, version: int, state: str, /, **done: Any) -> str:
        """The attempt sent `version`: the row ends in `state` ("sent") with `done`,
        unless it was asked for again meanwhile — then it is due again at once, its
        attempts afresh, and rung ("waiting"). Conditional on the version this attempt
        read, so that request is not lost."""
        ended = {self.status: state, "sent_version": version, self.lease: None}
        if self.deferrals:
            ended[self.deferrals] = 0
        if self.held(pk, attempt).filter(version=version).update(**ended, **done):
            return "sent"
        again = {self.status: self.waiting[-1], self.attempts: 0, self.lease: None}
        if self.held(pk, attempt).update(**again, **{self.not_before: None}, **done):
            self.ring_now(pk)
        return "waiting"

    # The sweeper.
    def expired(self, now: datetime):
        """Rows whose holder's lease ran out."""
        return self.rows.filter(**{self.status: self.working, f"{self.lease}__lt": now})

    def sweep_lost(
        self,
        *,
        now: datetime | None = None,
        lost: dict[str, Any] | None = None,
        lost_last: dict[str, Any] | None = None,
    ) -> dict[str, int]:
        """Hand rows whose worker died to another — waiting again, due now, with the
        queue's own fields in `lost` (such as the error) — or fail them when that was
        their last attempt (`lost_last`)."""
        now = now or _now()
        expired = self.expired(now)
        # A sweeper back from a database outage saw no heartbeat of anyone's: it judges
        # no lease before it has been connected for one (tasuku/outage.py).
        if not outage.trusted(self.lease_for().total_seconds()):
            return {"failed": 0, "requeued": 0}
        failed = expired.filter(**{f"{self.attempts}__gte": self.max_attempts}).update(
            **{self.status: self.failed, self.lease: None, self.not_before: None},
            **(lost_last or {}),
        )
        requeued = expired.filter(**{f"{self.attempts}__lt": self.max_attempts}).update(
            # Due at once, and its doorbell went with its worker: ring_due rings it.
            **{self.status: self.waiting[-1], self.lease: None, self.not_before: None},
            **{self.rung: None},
            **(lost or {}),
        )
        return {"failed": failed, "requeued": requeued}

    def ring_due(self, *, now: datetime | None = None, limit: int = 500) -> int:
        """Ring the due rows not rung within `ring_again` — or rung before they were last
        put off, whose wait is now over. Returns how many were rung."""
        from django.db.models import F, Q

        now = now or _now()
        due = self.rows.filter(self._is_due(now)).filter(
            Q(**{f"{self.rung}__isnull": True})
            | Q(**{f"{self.rung}__lt": now - self.ring_again})
            | Q(**{f"{self.not_before}__gt": F(self.rung)})
        )
        rung = 0
        for pk in list(due.order_by("pk").values_list("pk", flat=True)[:limit]):
            # Conditional on still being due: two sweepers do not both ring.
            still = self.rows.filter(self._is_due(now), pk=pk)
            if still.update(**{self.rung: now}) and self.ring_now(pk):
                rung += 1
        return rung

    def sweep(self, *, now: datetime | None = None, **lost: Any) -> dict[str, int]:
        """`sweep_lost`, then `ring_due`: the reaper's pass over the queue."""
        now = now or _now()
        result = self.sweep_lost(now=now, **lost)
        return {**result, "rung": self.ring_due(now=now)}


# --- One attempt at a row ----------------------------------------------------------------

NOT_CLAIMED = "not claimed"


class Job:
    """One attempt at a row of a Queue, written once; the task rung with the row's id
    calls `Job.run(pk)`. The row is claimed (NOT_CLAIMED: not this worker's to take),
    loaded, and worked on in its log context (tasuku/logs.py); a failure the queue judges
    (`retry_on`; anything else is a bug, raised) gets the queue's verdict, settled on the
    row with what the row keeps of it (`failure_fields`) — unless it was `excused` (the
    worker stopping). A subclass names its queue and says what the work is (`work`, which
    ends the row: `finish`, or `Queue.sent` for an outbox), and the rest where it differs.
    """

    queue: ClassVar[Queue]
    retry_on: ClassVar[tuple[type[BaseException], ...]] = (Exception,)
    claim_where: ClassVar[Any] = None  # the queue's own condition on a claim (a Q)
    related: ClassVar[tuple[str, ...]] = ()  # select_related when the row is loaded
    since: ClassVar[str] = "created_at"  # when the work was asked for: bounds deferral
    log_as: ClassVar[str] = ""  # the row's log field (tasuku/logs.py FIELDS)
    log_traceback: ClassVar[bool] = False

    def __init__(self, pk: Any) -> None:
        # `pk`: the row's id, or a subquery that names it (its id is known once it is read)
        self.pk, self.attempt, self.row = pk, 0, None

    @classmethod
    def run(cls, pk: Any) -> Any:
        return cls(pk).process()

    def process(self) -> Any:
        if not self.queue.take(self.pk, where=self.claim_where):
            return NOT_CLAIMED
        rows = self.queue.rows.select_related(*self.related) if self.related else self.queue.rows
        self.row = rows.get(pk=self.pk)  # the attempt just counted with it
        self.pk, self.attempt = self.row.pk, getattr(self.row, self.queue.attempts)
        attempt = self.attempt
        with log_context(**self.context()):
            try:
                return self.work()
            except self.retry_on as exc:
                if (excused := self.excused(exc)) is not None:
                    return excused
                counted = self.queue.deferrals
                verdict = self.queue.verdict(
                    exc,
                    attempt=attempt,
                    deferrals=getattr(self.row, counted) if counted else 0,
                    since=getattr(self.row, self.since) or self.row.created_at,
                    installation=self.installation(),
                )
                self.queue.settle(self.pk, attempt, verdict, **self.failure_fields(exc, verdict))
                self.log_failure(exc, verdict)
                return self.failed(exc, verdict)

    def context(self) -> dict[str, Any]:
        """The log fields: the row, its attempt, its installation and that installation's
        repository (when the queue's path to the installation goes through one)."""
        fields = {
            self.log_as: self.pk,
            "attempt": self.attempt,
            "installation": self.installation(),
        }
        path = self.queue.installation or ""
        if path.endswith("installation__github_id"):
            fields["repository"] = self._read(
                path.removesuffix("installation__github_id") + "full_name"
            )
        return {k: v for k, v in fields.items() if k}

    def installation(self) -> int | None:
        return self._read(self.queue.installation) if self.queue.installation else None

    def _read(self, path: str) -> Any:  # through what `related` selected
        value = self.row
        for name in path.split("__"):
            value = getattr(value, name, None)
        return value

    def work(self) -> Any:
        raise NotImplementedError

    def finish(self, state: str, **fields: Any) -> bool:
        return self.queue.finish(self.pk, self.attempt, state, **fields)

    def excused(self, exc: BaseException) -> Any:
        """What to return for a failure that is not the attempt's (None: judge it)."""
        return None

    def failure_fields(self, exc: BaseException, verdict: Verdict) -> dict[str, Any]:
        return {"error": str(exc)[:2000]}

    def log_failure(self, exc: BaseException, verdict: Verdict) -> None:
        logging.getLogger(type(self).__module__).warning(
            "%s %s: attempt %d failed (%s): %s", self.queue.name, self.pk, self.attempt,
            verdict.kind, exc, exc_info=self.log_traceback,
        )  # fmt: skip

    def failed(self, exc: BaseException, verdict: Verdict) -> Any:
        """What the task returns once a failure is settled."""
        return "failed" if verdict.kind == FAILED else "waiting"


def _now() -> datetime:
    from django.utils import timezone

    return timezone.now()
