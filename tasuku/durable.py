"""What the durable row queues (deliveries, runs, author answers, check conclusions)
decide the same way when an attempt fails: when to try again. (Thread replies still
have their own three-attempt sweep, reviews/replies.py.)

- A transient failure is tried again after an exponential backoff with jitter.
- A failure GitHub answered with a rate limit (`Retry-After`, or a spent quota with its
  `x-ratelimit-reset`) is *deferred*: tried again no sooner than GitHub asked, and not
  counted against the row's attempts — waiting out a limit is not a failure. A limit
  without a time waits a minute (repos/github/errors.py); one met again after waiting
  waits at least a minute, doubling each time, as GitHub's documentation asks. Deferral has a bound (MAX_DEFERRAL_AGE): a row that has waited
  a day for GitHub fails the ordinary way.
- A failure that is GitHub being unavailable (5xx, no answer, past the gateway's own
  retries) is deferred the same way, with a backoff (30 s doubling to 15 minutes): a
  5xx storm delays work, it does not fail it.
- Rate limits hold for the whole installation: the wait is recorded on it
  (`repos.services.installation_quiet`), and every queue's next work for that
  installation waits too, rather than hammer the limit the last job met.
"""

from __future__ import annotations

import random
from datetime import datetime, timedelta

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
        if deferrals:
            wait = max(wait, SECONDARY_FLOOR * 2 ** min(deferrals - 1, 4))
        return timedelta(seconds=wait) + jitter, RATE_LIMIT
    if github_unavailable(exc):
        return backoff(deferrals + 1, OUTAGE_BACKOFF), UNAVAILABLE
    return None


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


def quiet_until(github_id: int | None, now: datetime) -> datetime | None:
    """When the installation's rate-limit wait ends, if it is still waiting."""
    if not github_id:
        return None
    until = (
        _installations().filter(github_id=github_id).values_list("quiet_until", flat=True).first()
    )
    return until if until is not None and until > now else None
