"""A run's check run reaches its final state, whatever GitHub's weather: an outbox.

Not a claimed queue like the others (tasuku/durable.py): its row is the run, and the due
time is the version of what is to be sent (a newer conclusion replaces the one waiting).
It waits by the same rules: durable.backoff, GitHub's `Retry-After` or reset at least,
and a rate limit quiets the installation.

What the check should say (conclusion, title, summary) is written on the run first; then
it is sent. A send that GitHub does not accept for a transient reason (5xx, a network
error, a rate limit) leaves it due, with the next try backed off (at least as long as
GitHub's `Retry-After` or rate-limit reset asks), and the reaper rings every due one
again until GitHub accepts it. A newer conclusion recorded meanwhile (a dismissal
re-concluded the head) replaces the one waiting: the newest is what is sent. So a check
run is never left `queued` or `in_progress` because GitHub was down when the run ended.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from django.db.models import Q
from django.utils import timezone

from repos import github
from repos.github import CheckRunOutput, GitHubError, RepoRef
from repos.github.budget import URGENT, writes_for
from reviews.checks.checkruns import REREVIEW_ACTION, details_url, run_check_ensure
from reviews.models import ReviewRun
from reviews.queue import runs
from reviews.queue.runs import CONCLUDE_TASK  # the doorbell's task, named once
from reviews.text.rendering import MAX_SUMMARY_BYTES, clip_bytes
from tasuku import durable
from tasuku.broker import ring_now

logger = logging.getLogger(__name__)

SENT, WAITING, REFUSED, NOTHING = "sent", "waiting", "refused", "nothing due"
FIRST_WAIT = timedelta(seconds=30)  # before the first resend; doubled each time (to 15 min)
# A conclusion recorded is sent at once by the worker that recorded it, which may wait its
# installation's write pace to do so (repos/github/pacing.py): the sweeper leaves a first
# send this long before it rings another worker to send it too (a worker that died with
# it unsent), or both would PATCH the same check run.
FIRST_SEND_GRACE = timedelta(seconds=60)


def conclusion_record(run_pk: int, conclusion: str, title: str, summary: str) -> datetime:
    """What the run's check run is to say, due now. Returns the due time (the version)."""
    now = timezone.now()
    runs.run_conclusion_record(
        run_pk,
        conclusion=conclusion,
        title=title,
        summary=clip_bytes(summary, MAX_SUMMARY_BYTES),
        now=now,
    )
    return now


def conclusion_send(run_pk: int) -> str:
    """Send the run's recorded conclusion to GitHub, if one is due. `sent`; `waiting`
    (GitHub did not take it now: due again later); `refused` (a permanent error: kept on
    the run, not sent again); or `nothing due`.

    Two writers may send at once (a run concluding while a dismissal re-concludes its
    head), and GitHub keeps whichever PATCH lands last. So a sender that finds, after
    GitHub took its PATCH, that the run now says something else sends again: the last
    PATCH to land is never an older conclusion than the run's."""
    outcome = NOTHING
    for _ in range(5):
        outcome, sent = _send_once(run_pk)
        if outcome != SENT:
            return outcome
        now = (
            ReviewRun.objects.filter(pk=run_pk)
            .values_list("check_conclusion", "check_title", "check_summary")
            .first()
        )
        if now is None or now == sent:
            return SENT
        runs.run_conclusion_due_again(run_pk)
    return outcome


def _send_once(run_pk: int) -> tuple[str, tuple[str, str, str] | None]:
    run = (
        # Its Actions run too, if one reviews it (`details_url`): one read.
        ReviewRun.objects.select_related(
            "pull_request__repository__installation", "reviewer", "dispatch"
        )
        .filter(pk=run_pk)
        .first()
    )
    if run is None or run.check_due_at is None:
        return NOTHING, None
    due = run.check_due_at
    sent = (run.check_conclusion, run.check_title, run.check_summary)
    repository = run.pull_request.repository
    # The installation as read with the run just now (its rate-limit wait among it).
    waiting = durable.quiet_left(repository.installation, timezone.now())
    if waiting is not None:
        # The installation is waiting out a rate limit: so does its check (said, so the
        # sweeper rings it when the wait is over: conclusions_sweep).
        runs.run_conclusion_waits(
            run.pk,
            due=due,
            until=waiting,
            why=f"waiting out the installation's rate limit, until {waiting:%H:%M:%S}",
        )
        return WAITING, None
    try:
        # A review's last write, whoever sends it: it goes before the backlog's in the
        # installation's write budget (a check left `in_progress` is a review unfinished).
        with writes_for(URGENT):
            check_id = run_check_ensure(run, created=False, installation=repository.installation)
            github.gateway().check_run_update(
                RepoRef.of(repository),
                check_run_id=check_id,
                conclusion=run.check_conclusion,
                output=CheckRunOutput(title=run.check_title, summary=run.check_summary),
                details_url=details_url(run),
                actions=[REREVIEW_ACTION],
            )
    except GitHubError as exc:
        if exc.code == durable.WRITE_BUDGET and exc.retry_after is not None:
            # Not GitHub's answer: the installation's own budget says when its turn comes
            # (its hour spent, say). Due then, not backed off, and no send counted.
            until = timezone.now() + timedelta(seconds=exc.retry_after)
            runs.run_conclusion_waits(
                run.pk, due=due, until=until, why=f"waiting for the write budget: {exc}"
            )
            return WAITING, None
        if exc.permanent:
            runs.run_conclusion_refused(
                run.pk, due=due, error=f"GitHub refused the check run: {exc}"
            )
            logger.error("run %s: GitHub refused its check run's conclusion: %s", run.pk, exc)
            return REFUSED, None
        now = timezone.now()
        wait = durable.backoff(run.check_sends + 1, FIRST_WAIT, retry_after=exc.retry_after)
        if exc.retry_after is not None and durable.quiets(exc):
            durable.installation_quiet(repository.installation.github_id, now + wait, str(exc))
        runs.run_conclusion_backed_off(run.pk, due=due, until=now + wait, error=str(exc))
        logger.warning("run %s: check run not concluded (%s); again in %s", run.pk, exc, wait)
        return WAITING, None
    # Sent. Only this version is done: one recorded meanwhile is still due.
    runs.run_conclusion_sent(run.pk, due=due)
    return SENT, sent


def check_final(run_pk: int, conclusion: str, title: str, summary: str) -> str:
    """Record the run's conclusion and send it (see the module's docstring)."""
    conclusion_record(run_pk, conclusion, title, summary)
    return conclusion_send(run_pk)


def conclusions_sweep(now: datetime | None = None, limit: int = 200) -> int:
    """Ring every run whose check conclusion is due (the reaper calls this): one put off
    (GitHub did not take it, or a rate limit) when its time comes; a first send, which
    its own worker is making, once FIRST_SEND_GRACE has passed with it unsent."""
    now = now or timezone.now()
    put_off = Q(check_sends__gt=0) | ~Q(check_error="")
    due = list(
        ReviewRun.objects.filter(
            Q(put_off, check_due_at__lte=now) | Q(check_due_at__lte=now - FIRST_SEND_GRACE)
        )
        .order_by("check_due_at")
        .values_list("pk", flat=True)[:limit]
    )
    for pk in due:
        ring_now(CONCLUDE_TASK, pk, name=f"conclude-{pk}")
    return len(due)
