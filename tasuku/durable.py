"""What every durable row queue (deliveries, runs, thread replies, author answers, check
conclusions) decides the same way when an attempt fails: when to try again.

- A transient failure is tried again after an exponential backoff with jitter.
- A failure GitHub answered with a rate limit (`Retry-After`, or a spent quota with its
  `x-ratelimit-reset`) is *deferred*: tried again no sooner than GitHub asked, and not
  counted against the row's attempts — waiting out a limit is not a failure. A limit
  without a time waits a minute (repos/github/errors.py); one met again after waiting
  waits at least a minute, doubling each time, as GitHub's documentation asks. Deferral has a bound (MAX_DEFERRAL_AGE): a row that has waited
  a day for GitHub fails the ordinary way.
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


def deferral(
    exc: BaseException, *, deferrals: int, since: datetime, now: datetime
) -> timedelta | None:
    """How long to defer a row whose attempt met a rate limit, or None when the failure is
    not one (or the row has waited long enough: it fails or backs off as usual).
    `deferrals` counts the earlier deferrals of the row, `since` is when it was made."""
    wait = retry_after_of(exc)
    if wait is None or now - since > MAX_DEFERRAL_AGE:
        return None
    if deferrals:
        # Limited again after waiting: a minute at least, doubling each time.
        wait = max(wait, SECONDARY_FLOOR * 2 ** min(deferrals - 1, 4))
    return timedelta(seconds=wait + random.uniform(0, 5))  # noqa: S311 - spread the wake-ups


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
