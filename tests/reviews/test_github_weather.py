"""GitHub's bad days: rate limits put work off until they lift (never a lost review or
a spent attempt), a check run is concluded however long GitHub refuses it, an author's
answer is posted once after a 502. Through the real endpoint and worker against the fake;
"time passing" is the waits moved into the past (the fake's limits are over by then)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from repos.models import Installation
from reviews.models import AttemptOutcome, ReviewRun, RunAttempt, RunStatus
from reviews.queue.runs import runs_reap
from tests.gitworld import INSTALLATION, REPO, world_build
from tests.helpers import drain_queue, post_webhook, pull_request_payload
from webhooks.models import WebhookDelivery
from webhooks.services import deliveries_sweep

pytestmark = pytest.mark.django_db


@pytest.fixture
def world(fake_github):
    return world_build(fake_github)


@pytest.fixture
def open_pr(client, test_app):
    def send(world):
        body = pull_request_payload(world.fake, world.repo, world.pull, action="opened")
        response = post_webhook(client, "pull_request", body, secret=test_app.webhook_secret)
        assert response.status_code == 202, response.content
        drain_queue()

    return send


def time_passes(fake=None, seconds: float = 0) -> None:
    """Every wait Tasuku recorded is over (and `seconds` pass for GitHub's clock)."""
    if fake is not None:
        fake.limits.advance(seconds)
    past = timezone.now() - timedelta(seconds=1)
    Installation.objects.update(quiet_until=past)
    # (as long ago as the waits were: the reaper's last ring is older than them)
    ReviewRun.objects.filter(next_attempt_at__isnull=False).update(
        next_attempt_at=past, rung_at=past - timedelta(seconds=1)
    )
    ReviewRun.objects.filter(check_due_at__isnull=False).update(check_due_at=past)
    WebhookDelivery.objects.filter(next_attempt_at__isnull=False).update(
        next_attempt_at=past, rung_at=past - timedelta(seconds=1)
    )


def sweep() -> None:
    deliveries_sweep()
    runs_reap()
    from reviews.tasks import runs_reap as scheduled_reap

    scheduled_reap()
    drain_queue()


def ours(items):
    return [i for i in items if i["user"]["type"] == "Bot"]


def test_a_secondary_rate_limit_on_the_review_post_waits_and_posts_exactly_one_review(
    world, open_pr, staff_client
):
    # Three minutes of GitHub's secondary limit on creating reviews, by GitHub's clock.
    limit = world.fake.limits.secondary(180, method="POST", path=r"/pulls/\d+/reviews$")
    open_pr(world)
    run = ReviewRun.objects.get()
    assert run.status == RunStatus.QUEUED
    assert run.attempts == 0  # waiting out a limit is not a failed attempt
    assert run.next_attempt_at >= timezone.now() + timedelta(seconds=170)
    assert "rate limit" in run.reason
    [deferred] = RunAttempt.objects.filter(run=run, outcome=AttemptOutcome.DEFERRED)
    assert deferred.stage == "publication"
    installation = Installation.objects.get(github_id=INSTALLATION)
    assert installation.quiet_until >= timezone.now() + timedelta(seconds=170)
    assert limit.refused == 1  # exactly one request went into the limit
    assert not ours(world.fake.reviews_of(REPO, 7))
    # The wait is shown: the status page and /metrics.
    page = staff_client.get("/status/").content.decode()
    assert "GitHub&#x27;s rate limits" in page or "GitHub's rate limits" in page
    assert "waiting" in page and "secondary rate limit" in page
    metrics = staff_client.get("/metrics").content.decode()
    assert "tasuku_review_run_attempts_deferred_total 1.0" in metrics
    [line] = [
        m for m in metrics.splitlines() if m.startswith("tasuku_github_rate_limited_seconds{")
    ]
    assert float(line.rsplit(" ", 1)[1]) > 100
    # Before the reset nothing is sent: the reaper's ring finds the installation quiet.
    sweep()
    assert ReviewRun.objects.get().status == RunStatus.QUEUED
    assert limit.refused == 1

    time_passes(world.fake, 181)
    sweep()

    run.refresh_from_db()
    assert run.status == RunStatus.COMPLETED, run.reason
    assert len(ours(world.fake.reviews_of(REPO, 7))) == 1
    check = world.fake.check_runs_of(REPO)[-1]
    assert (check.status, check.conclusion) == ("completed", "failure")  # the findings decide


def test_a_review_submitted_too_quickly_is_waited_out_not_taken_for_bad_anchors(world, open_pr):
    # GitHub's content-creation limit, as it has answered reviews: 422 "was submitted too
    # quickly", no retry-after. Weather: no comment is refused, none moved to the body.
    limit = world.fake.limits.too_quickly(90, path=r"/pulls/\d+/reviews$")
    open_pr(world)
    run = ReviewRun.objects.get()
    assert run.status == RunStatus.QUEUED and run.attempts == 0, run.reason
    assert run.next_attempt_at >= timezone.now() + timedelta(seconds=50)  # a minute at least
    assert "rate limit" in run.reason
    assert limit.refused == 1  # no pending review was tried: nothing to sort
    # No pending review was deleted (only the post's own token was revoked after it).
    assert not [c for c in world.fake.requests("DELETE") if c.path != "/installation/token"]
    assert not ours(world.fake.reviews_of(REPO, 7))

    time_passes(world.fake, 91)
    sweep()

    run.refresh_from_db()
    assert run.status == RunStatus.COMPLETED, run.reason
    [review] = ours(world.fake.reviews_of(REPO, 7))
    assert len(world.fake.review_comments_of(REPO, 7)) == 3
    assert "GitHub refused" not in review["body"]
    assert "GitHub did not accept" not in review["body"]


def test_a_spent_primary_quota_when_the_delivery_arrives_reviews_after_the_reset(world, open_pr):
    # The installation's hourly quota is spent; GitHub's clock renews it in 90 seconds.
    quota = world.fake.limits.primary(INSTALLATION, remaining=0, reset_in=90)
    reset = quota.reset
    open_pr(world)
    delivery = WebhookDelivery.objects.get(event="pull_request")
    assert delivery.status == "retrying"
    assert (delivery.attempts, delivery.deferrals) == (0, 1)
    assert delivery.next_attempt_at.timestamp() >= reset
    assert not ReviewRun.objects.filter(status=RunStatus.COMPLETED).exists()
    refused = [c for c in world.fake.calls if c.status == 403]
    assert len(refused) == 1  # one request met the limit; nothing more was tried
    sweep()  # before the reset: the installation is quiet, nothing is sent
    assert [c for c in world.fake.calls if c.status == 403] == refused

    time_passes(world.fake, 91)
    sweep()

    delivery.refresh_from_db()
    assert delivery.status == "processed", delivery.last_error
    run = ReviewRun.objects.get()
    assert run.status == RunStatus.COMPLETED
    assert len(ours(world.fake.reviews_of(REPO, 7))) == 1


def test_a_check_run_github_will_not_update_for_minutes_still_ends_completed(world, open_pr):
    # The check run is created in progress; then every PATCH fails (an outage).
    outage = world.fake.inject(40, status=502, method="PATCH", path=r"/check-runs/\d+$")
    open_pr(world)
    run = ReviewRun.objects.get()
    assert run.status == RunStatus.COMPLETED  # the review is published; only the check waits
    assert len(ours(world.fake.reviews_of(REPO, 7))) == 1
    assert run.check_due_at is not None and run.check_conclusion == "failure"
    assert "502" in run.check_error
    assert world.fake.check_runs_of(REPO)[-1].status == "in_progress"
    for _ in range(3):  # GitHub still down: the tries back off
        time_passes()
        sweep()
    run.refresh_from_db()
    assert run.check_due_at is not None and run.check_sends >= 3

    world.fake.injections.remove(outage)  # GitHub is back
    time_passes()
    sweep()

    run.refresh_from_db()
    assert run.check_due_at is None and run.check_error == ""
    check = world.fake.check_runs_of(REPO)[-1]
    assert (check.status, check.conclusion) == ("completed", "failure")
    assert check.output["title"] == run.check_title


def test_a_failed_run_whose_check_github_refused_to_conclude_is_concluded_later(
    world, open_pr, monkeypatch
):
    """A permanent failure, with GitHub down as it happens: the `failure` conclusion
    waits and is sent when GitHub is back (no check left `in_progress`)."""
    from sandbox.errors import StageError

    def broken(*args, **kwargs):
        raise StageError("the sandbox image is missing", permanent=True, stage="sandbox")

    monkeypatch.setattr("reviews.engines.boundary.engine_run", broken)
    outage = world.fake.inject(40, status=503, method="PATCH", path=r"/check-runs/\d+$")
    open_pr(world)
    run = ReviewRun.objects.get()
    assert run.status == RunStatus.FAILED
    assert run.check_due_at is not None and run.check_conclusion == "failure"
    world.fake.injections.remove(outage)
    time_passes()
    sweep()
    check = world.fake.check_runs_of(REPO)[-1]
    assert (check.status, check.conclusion) == ("completed", "failure")
    assert check.output["title"] == "Review failed at sandbox"


def test_a_newer_conclusion_replaces_the_one_waiting(world, open_pr):
    from reviews.checks.conclusions import SENT, check_final, conclusion_send

    open_pr(world)
    run = ReviewRun.objects.get()
    outage = world.fake.inject(5, status=502, method="PATCH", path=r"/check-runs/\d+$")
    assert check_final(run.pk, "failure", "2 open findings", "old") == "waiting"
    world.fake.injections.remove(outage)
    from reviews.checks.conclusions import conclusion_record

    conclusion_record(run.pk, "success", "No open findings", "new")
    assert conclusion_send(run.pk) == SENT
    check = world.fake.check_runs_of(REPO)[-1]
    assert (check.conclusion, check.output["summary"]) == ("success", "new")
    assert conclusion_send(run.pk) == "nothing due"


def test_backoff_and_deferral_arithmetic():
    from tasuku import durable

    now = timezone.now()
    assert durable.backoff(1, timedelta(seconds=30)) >= timedelta(seconds=30)
    assert durable.backoff(1, timedelta(seconds=30)) <= timedelta(seconds=45)
    assert durable.backoff(10, timedelta(seconds=30)) <= timedelta(minutes=22, seconds=30)
    assert durable.backoff(1, timedelta(seconds=30), retry_after=600) >= timedelta(seconds=600)

    class Limited(Exception):
        permanent = False
        retry_after = 5.0

    class Wrapped(Exception):
        permanent = False

    try:
        try:
            raise Limited("secondary")
        except Limited as inner:
            raise Wrapped("publication failed") from inner
    except Wrapped as outer:
        wrapped = outer
    # As long as GitHub asked; limited again after waiting: a minute at least, doubling.
    first, kind = durable.deferral(wrapped, deferrals=0, since=now, now=now)
    assert timedelta(seconds=5) <= first <= timedelta(seconds=10) and kind == durable.RATE_LIMIT
    assert durable.deferral(wrapped, deferrals=1, since=now, now=now)[0] >= timedelta(seconds=60)
    assert durable.deferral(wrapped, deferrals=3, since=now, now=now)[0] >= timedelta(seconds=240)
    assert durable.deferral(Wrapped("an engine crash"), deferrals=0, since=now, now=now) is None
    old = now - timedelta(hours=25)
    assert durable.deferral(wrapped, deferrals=0, since=old, now=now) is None  # waited enough

    class Down(Exception):  # what the gateway raises after its retries of a 502
        permanent, retry_after, status = False, None, 502

    wait, kind = durable.deferral(Down(), deferrals=0, since=now, now=now)
    assert kind == durable.UNAVAILABLE and timedelta(seconds=30) <= wait <= timedelta(seconds=45)
    assert durable.deferral(Down(), deferrals=5, since=now, now=now)[0] >= timedelta(minutes=15)


def test_two_concluders_at_once_never_leave_github_showing_the_older_conclusion(
    world, open_pr, monkeypatch
):
    """A stale sender's PATCH can land after a newer one's: it must send again."""
    from repos.github.gateway import GitHubGateway
    from reviews.checks.conclusions import check_final, conclusion_record, conclusion_send

    open_pr(world)
    run = ReviewRun.objects.get()
    real = GitHubGateway.check_run_update
    raced = []

    def racing(self, repo, **kwargs):
        if not raced and kwargs.get("conclusion") == "success":
            raced.append(1)
            # Meanwhile a finding is found open again: recorded and sent at once.
            conclusion_record(run.pk, "failure", "1 open finding", "newer")
            assert conclusion_send(run.pk) == "sent"
        return real(self, repo, **kwargs)  # the stale PATCH lands last

    monkeypatch.setattr(GitHubGateway, "check_run_update", racing)
    check_final(run.pk, "success", "No open findings", "older")
    assert raced
    check = world.fake.check_runs_of(REPO)[-1]
    assert (check.conclusion, check.output["summary"]) == ("failure", "newer")
    run.refresh_from_db()
    assert run.check_due_at is None and run.check_conclusion == "failure"


def test_a_conclusion_its_worker_is_sending_is_not_sent_twice():
    """A worker records a conclusion and sends it, waiting its installation's write pace
    first: the reaper does not ring a second send of it meanwhile (two PATCHes of one
    check run), only once FIRST_SEND_GRACE has passed with it unsent (its worker died);
    one GitHub put off is rung as soon as it is due."""
    from reviews.checks.conclusions import FIRST_SEND_GRACE, conclusion_record, conclusions_sweep
    from tests.factories import ReviewRunFactory
    from tests.helpers import queued_tasks

    run = ReviewRunFactory(check_run_id=5)
    due = conclusion_record(run.pk, "success", "No findings", "Nothing found.")
    assert conclusions_sweep(now=due + timedelta(seconds=10)) == 0
    assert queued_tasks("reviews.tasks.run_conclude") == []
    assert conclusions_sweep(now=due + FIRST_SEND_GRACE) == 1
    assert queued_tasks("reviews.tasks.run_conclude") == [("reviews.tasks.run_conclude", (run.pk,))]

    later = timezone.now()
    ReviewRun.objects.filter(pk=run.pk).update(check_due_at=later, check_sends=1, check_error="502")
    assert conclusions_sweep(now=later) == 1  # a resend: at once when due
    ReviewRun.objects.filter(pk=run.pk).update(
        check_due_at=later, check_sends=0, check_error="waiting out the installation's rate limit"
    )
    assert conclusions_sweep(now=later) == 1


def test_a_conclusion_waiting_for_the_write_budget_is_due_at_its_turn_and_goes_first(
    world, open_pr, monkeypatch
):
    """The 200-pull-request benchmark: a check conclusion the installation's spent hour
    held back was backed off as if GitHub had refused it (12 sends, doubling to 15
    minutes), and then waited behind the walkthroughs. A wait for the budget is due when
    the budget says, counts no send, and a conclusion is a review's write (URGENT)."""
    from repos.github import budget as budget_module
    from repos.github.errors import GitHubError
    from repos.github.gateway import GitHubGateway
    from reviews.checks.conclusions import SENT, WAITING, conclusion_record, conclusion_send

    open_pr(world)
    run = ReviewRun.objects.get()
    priorities = []
    real = GitHubGateway.check_run_update

    def spent(self, *args, **kwargs):
        priorities.append(budget_module._priority.get())
        raise GitHubError(
            "Could not write to GitHub for installation 11 for 1800s: waiting for the write budget",
            permanent=False,
            retry_after=1800,
            code="github-write-budget",
        )

    monkeypatch.setattr(GitHubGateway, "check_run_update", spent)
    conclusion_record(run.pk, "failure", "1 open finding", "again")
    before = timezone.now()
    assert conclusion_send(run.pk) == WAITING
    run.refresh_from_db()
    assert run.check_sends == 0 and "write budget" in run.check_error
    assert before + timedelta(seconds=1790) <= run.check_due_at <= before + timedelta(seconds=1810)
    assert priorities == [budget_module.URGENT]

    monkeypatch.setattr(GitHubGateway, "check_run_update", real)
    time_passes()
    assert conclusion_send(run.pk) == SENT
    check = world.fake.check_runs_of(REPO)[-1]
    assert (check.status, check.output["summary"]) == ("completed", "again")
