"""A signed pull_request webhook, end to end: the HTTP endpoint stores it, a worker
(django-q2's real ORM broker, run in-process) admits it against the repository's policy,
and queued runs with queued check runs appear on the fake GitHub."""

from __future__ import annotations

import pytest

from repos.models import Installation, Repository, Reviewer
from reviews.models import PullRequest, ReviewRun, RunStatus
from tests.factories import InstallationFactory, RepositoryFactory, ReviewerFactory
from tests.fakes.github import Pull, PullFile
from tests.helpers import (
    INSTALLATION_NODE_ID,
    drain_queue,
    post_webhook,
    pull_request_payload,
    queued_tasks,
)
from webhooks.models import DeliveryStatus, WebhookDelivery

pytestmark = pytest.mark.django_db

HEAD = "1" * 40
BASE = "2" * 40


@pytest.fixture
def world(fake_github):
    fake_github.add_installation(31, "acme")
    repo = fake_github.add_repo("acme/widgets", installation_id=31, repo_id=8001)
    pull = fake_github.add_pull(
        "acme/widgets",
        Pull(
            number=12,
            title="Faster widgets",
            head_sha=HEAD,
            base_sha=BASE,
            files=[PullFile("widgets.py", additions=10), PullFile("README.md")],
        ),
    )
    return fake_github, repo, pull


@pytest.fixture
def deliver(client, test_app, django_capture_on_commit_callbacks):
    def send(body, event="pull_request", **kwargs):
        with django_capture_on_commit_callbacks(execute=True):
            response = post_webhook(client, event, body, secret=test_app.webhook_secret, **kwargs)
        assert response.status_code in (200, 202), response.content
        drain_queue(only="webhooks.tasks.delivery_process")
        return WebhookDelivery.objects.order_by("-id").first()

    return send


def test_the_same_head_delivered_again_says_what_already_stands_not_queued(world, deliver):
    fake, repo, pull = world
    deliver(pull_request_payload(fake, repo, pull, action="opened"))
    run = ReviewRun.objects.get()
    # Another delivery of the same head (a second "opened", as a re-run demo sends).
    again = deliver(pull_request_payload(fake, repo, pull, action="reopened"))
    assert ReviewRun.objects.count() == 1
    assert again.outcome == (
        f"admitted acme/widgets#12: 0 reviewers queued; static's run {run.pk} for "
        f"{HEAD[:7]} is queued already"
    )


def test_an_opened_pull_request_becomes_a_queued_run_with_a_check_run_in_progress(world, deliver):
    fake, repo, pull = world
    delivery = deliver(pull_request_payload(fake, repo, pull, action="opened"))

    assert delivery.status == DeliveryStatus.PROCESSED
    assert delivery.decision == "admitted"
    assert delivery.outcome == "admitted acme/widgets#12: 1 reviewer queued"
    run = ReviewRun.objects.get()
    assert run.status == RunStatus.QUEUED
    assert run.reviewer.slug == "static"
    assert (run.head_sha, run.base_sha, run.trigger) == (HEAD, BASE, "opened")
    assert run.delivery == delivery
    assert run.config["reviewers"][0]["slug"] == "static"
    checks = fake.check_runs_of("acme/widgets")
    assert len(checks) == 1
    check = checks[0]
    # Created in progress: the review has begun for the reader, and its start sends nothing.
    assert (check.name, check.head_sha, check.status) == ("Tasuku · static", HEAD, "in_progress")
    assert check.details_url == f"http://tasuku.test/runs/{run.pk}/"
    assert check.external_id == str(run.pk)
    assert run.check_run_id == check.id
    # ... and the worker's doorbell for the run is waiting in the queue.
    assert queued_tasks("reviews.tasks.run_process") == [("reviews.tasks.run_process", (run.pk,))]
    # Tasuku learnt of the installation, repository and pull request from the delivery.
    assert Installation.objects.get().github_id == 31
    assert Repository.objects.get().full_name == "acme/widgets"
    assert PullRequest.objects.get().title == "Faster widgets"


def test_every_enabled_reviewer_gets_its_own_run_and_check(world, deliver):
    fake, repo, pull = world
    installation = InstallationFactory(github_id=31, account_login="acme")
    repository = RepositoryFactory(
        installation=installation, github_id=8001, full_name="acme/widgets"
    )
    second = ReviewerFactory(slug="second-opinion")
    ReviewerFactory(slug="switched-off", enabled=False)
    repository.policy.reviewers.add(second, Reviewer.objects.get(slug="switched-off"))

    deliver(pull_request_payload(fake, repo, pull, action="opened"))

    assert sorted(ReviewRun.objects.values_list("reviewer__slug", flat=True)) == [
        "second-opinion",
        "static",
    ]
    assert sorted(c.name for c in fake.check_runs_of("acme/widgets")) == [
        "Tasuku · second-opinion",
        "Tasuku · static",
    ]


def test_a_redelivered_or_repeated_event_makes_no_second_run_or_check(world, deliver, fake_github):
    fake, repo, pull = world
    body = pull_request_payload(fake, repo, pull, action="synchronize")
    deliver(body, delivery_id="one")
    deliver(body, delivery_id="one")  # GitHub's redelivery: same id
    deliver(body, delivery_id="two")  # the same push reported twice
    assert ReviewRun.objects.count() == 1
    assert len(fake.check_runs_of("acme/widgets")) == 1


def test_a_retried_delivery_finds_the_check_run_its_first_attempt_created(world, deliver):
    fake, repo, pull = world
    # The check run is created, but its answer is lost three times over: the delivery
    # attempt fails after the run row exists.
    fake.inject(3, status=502, method="POST", path=r"/check-runs$", after=True)
    fake.inject(3, status=502, method="GET", path=r"/check-runs$")
    delivery = deliver(pull_request_payload(fake, repo, pull, action="opened"))
    assert delivery.status == DeliveryStatus.RETRYING
    run = ReviewRun.objects.get()
    assert run.check_run_id is None

    from webhooks.services import delivery_process

    WebhookDelivery.objects.filter(pk=delivery.pk).update(next_attempt_at=None)
    assert delivery_process(delivery.pk) == DeliveryStatus.PROCESSED
    run.refresh_from_db()
    checks = fake.check_runs_of("acme/widgets")
    assert len(checks) == 1
    assert run.check_run_id == checks[0].id


def test_a_draft_is_skipped_with_the_reason_recorded(world, deliver):
    fake, repo, pull = world
    pull.draft = True
    delivery = deliver(pull_request_payload(fake, repo, pull, action="opened"))
    assert delivery.decision == "skipped"
    assert delivery.outcome == (
        "skipped acme/widgets#12: draft pull request (the policy does not review drafts)"
    )
    assert not ReviewRun.objects.exists()
    assert fake.check_runs_of("acme/widgets") == []


def test_a_push_to_a_draft_is_not_reviewed_and_ready_for_review_is(world, deliver):
    fake, repo, pull = world
    pull.draft = True
    deliver(pull_request_payload(fake, repo, pull, action="opened"))
    pushed = "3" * 40
    pull.head_sha = pushed
    repo.commits.add(pushed)  # the push reached GitHub
    delivery = deliver(pull_request_payload(fake, repo, pull, action="synchronize", before=HEAD))
    assert delivery.decision == "skipped"
    assert delivery.outcome == (
        "skipped acme/widgets#12: draft pull request (the policy does not review drafts)"
    )
    assert not ReviewRun.objects.exists()
    assert fake.check_runs_of("acme/widgets") == []

    pull.draft = False
    ready = deliver(pull_request_payload(fake, repo, pull, action="ready_for_review"))
    assert ready.decision == "admitted"
    run = ReviewRun.objects.get()
    assert (run.head_sha, run.trigger, run.status) == (pushed, "ready_for_review", RunStatus.QUEUED)
    [check] = fake.check_runs_of("acme/widgets")
    assert (check.head_sha, check.status) == (pushed, "in_progress")


def test_a_disabled_repository_is_skipped_without_calling_github(world, deliver):
    fake, repo, pull = world
    installation = InstallationFactory(github_id=31, account_login="acme")
    RepositoryFactory(
        installation=installation, github_id=8001, full_name="acme/widgets", enabled=False
    )
    fake.calls.clear()
    delivery = deliver(pull_request_payload(fake, repo, pull, action="opened"))
    assert delivery.outcome == "skipped acme/widgets#12: reviews are disabled for this repository"
    assert fake.calls == []


def test_new_repositories_start_disabled_when_the_site_says_so(world, deliver, settings):
    settings.TASUKU_ENABLE_NEW_REPOSITORIES = False
    fake, repo, pull = world
    delivery = deliver(pull_request_payload(fake, repo, pull, action="opened"))
    assert "disabled" in delivery.outcome
    assert not Repository.objects.get().enabled


def test_a_bot_authored_pull_request_is_skipped_and_its_check_completed_neutral(world, deliver):
    fake, repo, pull = world
    pull.author_login, pull.author_type = "dependabot[bot]", "Bot"
    delivery = deliver(pull_request_payload(fake, repo, pull, action="opened"))

    assert delivery.decision == "skipped"
    run = ReviewRun.objects.get()
    assert run.status == RunStatus.SKIPPED
    assert run.reason == "author dependabot[bot] is a bot"
    check = fake.check_runs_of("acme/widgets")[0]
    assert (check.status, check.conclusion) == ("completed", "neutral")
    assert check.output["title"] == "Not reviewed: opened by a bot"
    assert check.details_url.endswith(f"/runs/{run.pk}/")


def test_an_excluded_author_is_skipped_with_a_neutral_check(world, deliver):
    fake, repo, pull = world
    installation = InstallationFactory(github_id=31, account_login="acme")
    repository = RepositoryFactory(
        installation=installation, github_id=8001, full_name="acme/widgets"
    )
    repository.policy.excluded_authors = "octocat\n"
    repository.policy.save()
    delivery = deliver(pull_request_payload(fake, repo, pull, action="opened"))
    assert (
        delivery.outcome
        == "skipped acme/widgets#12: author octocat is excluded by the repository's policy"
    )
    assert fake.check_runs_of("acme/widgets")[0].conclusion == "neutral"


def test_a_pull_request_over_max_changed_files_gets_a_non_success_check_run(world, deliver):
    fake, repo, pull = world
    installation = InstallationFactory(github_id=31, account_login="acme")
    repository = RepositoryFactory(
        installation=installation, github_id=8001, full_name="acme/widgets"
    )
    repository.policy.max_changed_files = 1
    repository.policy.save()

    delivery = deliver(pull_request_payload(fake, repo, pull, action="opened"))

    assert delivery.outcome == "skipped acme/widgets#12: 2 files changed, more than the limit of 1"
    check = fake.check_runs_of("acme/widgets")[0]
    assert check.status == "completed"
    assert check.conclusion == "action_required"
    assert check.output["title"] == "Not reviewed: 2 files changed (limit 1)"
    assert ReviewRun.objects.get().status == RunStatus.SKIPPED


def test_a_repository_the_installation_no_longer_reaches_is_skipped(world, deliver):
    fake, repo, pull = world
    repo.installation_id = None  # deselected from the installation on GitHub
    delivery = deliver(
        pull_request_payload(fake, repo, pull, action="opened")
        | {"installation": {"id": 31, "node_id": INSTALLATION_NODE_ID}}
    )
    assert "can no longer access this repository" in delivery.outcome
    assert not ReviewRun.objects.exists()


def test_a_suspended_installation_is_skipped(world, deliver):
    fake, repo, pull = world
    from django.utils import timezone

    InstallationFactory(github_id=31, account_login="acme", suspended_at=timezone.now())
    delivery = deliver(pull_request_payload(fake, repo, pull, action="opened"))
    assert "suspended" in delivery.outcome


def test_a_trigger_turned_off_in_the_policy_is_skipped(world, deliver):
    fake, repo, pull = world
    installation = InstallationFactory(github_id=31, account_login="acme")
    repository = RepositoryFactory(
        installation=installation, github_id=8001, full_name="acme/widgets"
    )
    repository.policy.trigger_synchronize = False
    repository.policy.save()
    delivery = deliver(pull_request_payload(fake, repo, pull, action="synchronize"))
    assert delivery.outcome == "skipped acme/widgets#12: the policy does not review on synchronize"


def test_actions_that_are_not_triggers_are_ignored_but_update_the_pull_request(world, deliver):
    fake, repo, pull = world
    deliver(pull_request_payload(fake, repo, pull, action="opened"))
    pull.title = "Renamed"
    delivery = deliver(pull_request_payload(fake, repo, pull, action="labeled"))
    assert delivery.status == DeliveryStatus.IGNORED
    assert delivery.outcome == "pull_request.labeled does not trigger a review"
    assert PullRequest.objects.get().title == "Renamed"


def test_a_closed_pull_request_is_recorded(world, deliver):
    fake, repo, pull = world
    pull.state, pull.merged = "closed", True
    delivery = deliver(pull_request_payload(fake, repo, pull, action="closed"))
    assert delivery.outcome == "acme/widgets#12 merged; 0 finding outcomes recorded"
    assert PullRequest.objects.get().state == "closed"


def test_a_payload_without_changed_files_asks_github_for_the_count(world, deliver):
    fake, repo, pull = world
    body = pull_request_payload(fake, repo, pull, action="opened")
    del body["pull_request"]["changed_files"]  # GitHub always sends it; Tasuku copes
    deliver(body, validate=False)
    assert fake.requests("GET", r"/pulls/12$")
    assert ReviewRun.objects.get().status == RunStatus.QUEUED


def test_the_recorded_opened_payload_with_a_null_body_is_admitted(world, deliver):
    fake, repo, pull = world
    body = pull_request_payload(fake, repo, pull, action="opened")
    body["pull_request"]["body"] = None
    deliver(body)
    assert ReviewRun.objects.count() == 1


def test_github_being_down_during_admission_retries_the_delivery(world, deliver):
    fake, repo, pull = world
    fake.inject(3, status=503, path=r"/installation$")
    delivery = deliver(pull_request_payload(fake, repo, pull, action="opened"))
    assert delivery.status == DeliveryStatus.RETRYING
    assert "503" in delivery.last_error
    assert not ReviewRun.objects.exists()


def test_no_worker_can_take_a_new_run_before_its_check_run_exists(world, deliver, monkeypatch):
    """A worker that took the run before admission had created its check run would find
    no check run for it and create one of its own: two `Tasuku · static` checks on the
    head, one left queued for ever. So the run's doorbell rings only once its check run
    exists (a crash in between leaves the run to the reaper, which rings it later)."""
    from repos.github.gateway import GitHubGateway

    create = GitHubGateway.check_run_create
    seen = []

    def check_run_create(self, repo, **kwargs):
        seen.append(queued_tasks("reviews.tasks.run_process"))
        return create(self, repo, **kwargs)

    monkeypatch.setattr(GitHubGateway, "check_run_create", check_run_create)
    fake, repo, pull = world
    deliver(pull_request_payload(fake, repo, pull, action="opened"))
    run = ReviewRun.objects.get()
    assert seen == [[]]  # no doorbell while the check run was being created
    assert queued_tasks("reviews.tasks.run_process") == [("reviews.tasks.run_process", (run.pk,))]
    assert run.rung_at is not None
    [check] = fake.check_runs_of("acme/widgets")
    assert run.check_run_id == check.id


def test_a_run_whose_admission_died_before_its_check_run_is_rung_by_the_reaper(
    world, deliver, monkeypatch
):
    """GitHub refuses the check run (every attempt of the delivery): the run stays queued
    without a doorbell, and the reaper rings it once RING_AGAIN_AFTER has passed; the
    worker that takes it then creates the check run itself."""
    from datetime import timedelta

    from django.utils import timezone

    from repos.github.gateway import GitHubGateway
    from reviews.queue.runs import RING_AGAIN_AFTER, RUNS

    def refused(self, repo, **kwargs):
        raise RuntimeError("GitHub is down")

    monkeypatch.setattr(GitHubGateway, "check_run_create", refused)
    fake, repo, pull = world
    delivery = deliver(pull_request_payload(fake, repo, pull, action="opened"))
    assert delivery.status != DeliveryStatus.PROCESSED
    run = ReviewRun.objects.get()
    assert run.status == RunStatus.QUEUED and run.check_run_id is None
    assert queued_tasks("reviews.tasks.run_process") == []
    assert RUNS.ring_due() == 0  # not yet: its admission may still ring it
    later = timezone.now() + RING_AGAIN_AFTER + timedelta(seconds=1)
    assert RUNS.ring_due(now=later) == 1
    assert queued_tasks("reviews.tasks.run_process") == [("reviews.tasks.run_process", (run.pk,))]


def test_a_run_left_without_its_check_run_is_rung_when_asked_for_again(world, deliver, monkeypatch):
    """The same head asked for again (GitHub back, the event redelivered) creates the
    check run the first admission could not, and rings the run then — at once, not when
    the reaper would — while a run that has its check run is not rung twice."""
    from repos.github.gateway import GitHubGateway

    def refused(self, repo, **kwargs):
        raise RuntimeError("GitHub is down")

    fake, repo, pull = world
    with monkeypatch.context() as patched:
        patched.setattr(GitHubGateway, "check_run_create", refused)
        deliver(pull_request_payload(fake, repo, pull, action="opened"))
    run = ReviewRun.objects.get()
    assert queued_tasks("reviews.tasks.run_process") == []
    deliver(pull_request_payload(fake, repo, pull, action="reopened"))
    run.refresh_from_db()
    [check] = fake.check_runs_of("acme/widgets")
    assert run.check_run_id == check.id
    assert queued_tasks("reviews.tasks.run_process") == [("reviews.tasks.run_process", (run.pk,))]
    deliver(pull_request_payload(fake, repo, pull, action="reopened"))
    assert len(queued_tasks("reviews.tasks.run_process")) == 1
    assert len(fake.check_runs_of("acme/widgets")) == 1


def test_a_run_ending_does_not_ring_the_next_before_its_check_run_exists(
    world, deliver, monkeypatch
):
    """A push while the old head's run is running: the old run stops (asked to by the push)
    while admission is creating the new run's check run. Ending, it rings the next queued
    run of the pull request — but not one whose check run is not there yet: the worker
    that took it would create a second check run, left queued for ever. Admission rings it
    once its check run exists, once."""
    from repos.github.gateway import GitHubGateway
    from reviews.queue.runs import run_claim, run_finish

    fake, repo, pull = world
    deliver(pull_request_payload(fake, repo, pull, action="opened"))
    old = ReviewRun.objects.get()
    held = run_claim(old.pk)
    assert held is not None
    new_head = "3" * 40
    pull.head_sha = new_head
    repo.commits.add(new_head)

    create = GitHubGateway.check_run_create
    seen = []

    def check_run_create(self, repo, **kwargs):
        if kwargs["head_sha"] == new_head and not seen:
            run_finish(held, status=RunStatus.CANCELLED, reason="stale")  # its worker stops
            seen.append(queued_tasks("reviews.tasks.run_process"))
        return create(self, repo, **kwargs)

    monkeypatch.setattr(GitHubGateway, "check_run_create", check_run_create)
    deliver(pull_request_payload(fake, repo, pull, action="synchronize"))
    new = ReviewRun.objects.get(head_sha=new_head)
    assert seen and ("reviews.tasks.run_process", (new.pk,)) not in seen[0]
    rung = queued_tasks("reviews.tasks.run_process")
    assert rung.count(("reviews.tasks.run_process", (new.pk,))) == 1
    [check] = [c for c in fake.check_runs_of("acme/widgets") if c.head_sha == new_head]
    assert new.check_run_id == check.id
