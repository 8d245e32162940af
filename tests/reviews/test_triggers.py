"""Reviews asked for by comment commands, review requests, check re-runs and the
dashboard, and repeated triggers coalescing into one run."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission

from reviews.models import ReviewRun, RunStatus
from tests.gitworld import REPO, world_build
from tests.helpers import (
    check_run_payload,
    conversation_answers,
    drain_queue,
    issue_comment_payload,
    post_webhook,
    pull_request_payload,
    queued_tasks,
    webhook_shaped,
)
from webhooks.models import WebhookDelivery

pytestmark = pytest.mark.django_db
SLUG = "tasuku-test"


@pytest.fixture
def world(fake_github):
    built = world_build(fake_github)
    # The comments' default author (tests/helpers.py): a maintainer with write access.
    fake_github.add_collaborator(REPO, "maria", "write")
    return built


@pytest.fixture
def send(client, test_app):
    def deliver(event, body, *, drain="webhooks.tasks.delivery_process", delivery_id=None):
        response = post_webhook(
            client, event, body, secret=test_app.webhook_secret, delivery_id=delivery_id
        )
        assert response.status_code in (200, 202)
        drain_queue(only=drain) if drain else drain_queue()
        return WebhookDelivery.objects.order_by("-id").first()

    return deliver


def opened(world, send, *, review=True):
    send(
        "pull_request",
        pull_request_payload(world.fake, world.repo, world.pull),
        drain=None if review else "webhooks.tasks.delivery_process",
    )


def comment(world, send, body, **kwargs):
    return send(
        "issue_comment",
        issue_comment_payload(world.fake, world.repo, world.pull.number, body=body, **kwargs),
    )


def test_review_command_queues_a_run_for_the_current_head(world, send):
    opened(world, send)
    world.push({"app/extra.py": "x = 1\n"})
    delivery = comment(world, send, f"@{SLUG} review please")
    run = ReviewRun.objects.order_by("-id").first()
    assert (run.trigger, run.head_sha, run.status) == (
        "command",
        world.pull.head_sha,
        RunStatus.QUEUED,
    )
    assert delivery.decision == "admitted"
    assert run.check_run_id is not None
    drain_queue()
    run.refresh_from_db()
    assert run.status == RunStatus.COMPLETED and run.incremental_since == world.head


def test_full_review_command_reviews_the_whole_pull_request_again(world, send):
    opened(world, send)
    comment(world, send, f"@{SLUG} full review")
    drain_queue()
    run = ReviewRun.objects.order_by("-id").first()
    assert run.trigger == "full_review_command"
    assert run.status == RunStatus.COMPLETED and run.incremental_since == ""
    assert "app/payments.py" in run.reviewed


@pytest.mark.parametrize("body", [f"@{SLUG} help", f"@{SLUG} dance", f"@{SLUG}"])
def test_help_and_unknown_commands_answer_with_the_commands(world, send, body):
    opened(world, send, review=False)
    comment(world, send, body)
    [answer] = conversation_answers(world.fake, REPO, world.pull.number)
    assert f"`@{SLUG} full review [note]`" in answer["body"]
    assert not ReviewRun.objects.exclude(trigger="opened").exists()


@pytest.mark.parametrize("association", ["CONTRIBUTOR", "NONE", "FIRST_TIME_CONTRIBUTOR"])
def test_people_without_write_access_are_refused_politely_once(world, send, association):
    opened(world, send, review=False)
    comment(world, send, f"@{SLUG} review", login="visitor", association=association)
    comment(world, send, f"@{SLUG} full review", login="visitor", association=association)
    answers = conversation_answers(world.fake, REPO, world.pull.number)
    assert len(answers) == 1
    assert answers[0]["body"].startswith("Sorry @visitor, only people with write access")
    assert not ReviewRun.objects.exclude(trigger="opened").exists()


@pytest.mark.parametrize(
    ("role", "association"),
    [("admin", "OWNER"), ("maintain", "MEMBER"), ("write", "COLLABORATOR")],
)
def test_people_with_write_access_may_give_commands(world, send, role, association):
    opened(world, send)
    world.fake.add_collaborator(REPO, "lead", role)
    comment(world, send, f"@{SLUG} review", login="lead", association=association)
    assert ReviewRun.objects.filter(trigger="command").exists()


@pytest.mark.parametrize(
    ("role", "association"),
    [("read", "MEMBER"), ("triage", "COLLABORATOR"), ("read", "OWNER")],
    ids=["a read-only member", "a triage collaborator", "association says owner"],
)
def test_an_association_without_write_permission_orders_nothing(world, send, role, association):
    """The webhook's association is no permission: a read-only organisation member
    arrives as MEMBER, a `triage` collaborator as COLLABORATOR. GitHub's permission
    answer decides, and no model money is spent on their order."""
    opened(world, send)
    world.fake.add_collaborator(REPO, "someone", role)
    comment(world, send, f"@{SLUG} full review", login="someone", association=association)
    assert not ReviewRun.objects.filter(trigger="full_review_command").exists()
    [refusal] = conversation_answers(world.fake, REPO, world.pull.number)
    assert refusal["body"].startswith("Sorry @someone, only people with write access")


def test_a_replayed_command_delivery_starts_nothing_a_retried_one_still_does(
    world, send, client, test_app
):
    """A captured, signed delivery sent again under a new delivery id is the same
    comment: acted on once. The same delivery tried again (it failed half way) may act."""
    opened(world, send)
    body = issue_comment_payload(
        world.fake, world.repo, world.pull.number, body=f"@{SLUG} full review"
    )
    first = send("issue_comment", body, drain=None)
    runs = ReviewRun.objects.filter(trigger="full_review_command").count()
    assert runs == 1
    replayed = send("issue_comment", body, drain=None)  # a new X-GitHub-Delivery
    assert replayed.pk != first.pk
    assert ReviewRun.objects.filter(trigger="full_review_command").count() == runs
    assert "acted on already" in replayed.outcome
    from reviews.intake.triggers import command_acted_on

    assert command_acted_on(world_repository(), body["comment"]["id"], first.pk) is None


def world_repository():
    from repos.models import Repository

    return Repository.objects.get(full_name=REPO)


def test_comments_by_bots_without_a_mention_or_on_issues_are_not_commands(world, send):
    opened(world, send, review=False)
    assert (
        comment(world, send, f"@{SLUG} review", login="renovate[bot]", user_type="Bot").status
        == "ignored"
    )
    assert comment(world, send, "Looks good to me").status == "ignored"
    assert comment(world, send, f"@{SLUG} review", on_pull_request=False).status == "ignored"
    assert conversation_answers(world.fake, REPO, world.pull.number) == []


@pytest.mark.parametrize(("login", "kind"), [(f"{SLUG}[bot]", "Bot"), ("maria", "User")])
def test_a_review_request_is_for_people_and_starts_no_review(world, send, login, kind):
    """GitHub does not let an App be a requested reviewer: Tasuku is asked by command."""
    opened(world, send, review=False)
    ReviewRun.objects.all().delete()
    reviewer = webhook_shaped(world.fake._user_json(login, kind, 4243))
    body = pull_request_payload(world.fake, world.repo, world.pull, action="review_requested",
                                requested_reviewer=reviewer)  # fmt: skip
    delivery = send("pull_request", body)
    assert delivery.status == "ignored"
    assert "GitHub does not let an App be requested as a reviewer" in delivery.outcome
    assert not ReviewRun.objects.exists()


def test_rerequesting_a_check_run_reviews_that_head_again(world, send):
    opened(world, send)
    first = ReviewRun.objects.get()
    body = check_run_payload(world.fake, world.repo, _check_run(world, first), action="rerequested")
    send("check_run", body, drain=None)
    again = ReviewRun.objects.order_by("-id").first()
    assert again.pk != first.pk and again.trigger == "rerun" and again.head_sha == first.head_sha
    assert again.status == RunStatus.COMPLETED


def _check_run(world, run):
    """The fake's check run of `run`."""
    [check] = [c for c in world.fake.check_runs_of(REPO) if c.id == run.check_run_id]
    return check


def _button(world, run, login, *, identifier="rereview", user_type="User"):
    """`check_run.requested_action`: `login` pressed a button of the run's check run."""
    body = check_run_payload(world.fake, world.repo, _check_run(world, run),
                             action="requested_action")  # fmt: skip
    body["requested_action"] = {"identifier": identifier}
    body["sender"] = webhook_shaped(world.fake._user_json(login, user_type, 4242))
    return body


def test_the_check_run_offers_a_re_review_button_that_reviews_that_head_again(world, send):
    opened(world, send)
    first = ReviewRun.objects.get()
    [check] = world.fake.check_runs_of(REPO)
    assert check.status == "completed"
    assert check.actions == [
        {"label": "Re-review", "description": "Review this commit again", "identifier": "rereview"}
    ]
    delivery = send("check_run", _button(world, first, "maria"), drain=None)
    assert delivery.decision == "admitted", delivery.outcome
    again = ReviewRun.objects.order_by("-id").first()
    assert again.pk != first.pk and again.trigger == "rerun"
    assert (again.head_sha, again.reviewer_id, again.requested_by) == (
        first.head_sha, first.reviewer_id, "maria")  # fmt: skip
    assert again.status == RunStatus.COMPLETED
    assert "maria" in delivery.outcome


def test_a_re_review_button_pressed_without_write_access_runs_nothing(world, send):
    opened(world, send)
    first = ReviewRun.objects.get()
    world.fake.add_collaborator(REPO, "rita", "read")
    for login in ("rita", "stranger"):
        delivery = send("check_run", _button(world, first, login))
        assert delivery.decision == "skipped" and "no write access" in delivery.outcome
    # nor a bot, another App's button, or a button on another App's check run
    send("check_run", _button(world, first, "ci[bot]", user_type="Bot"))
    send("check_run", _button(world, first, "maria", identifier="deploy"))
    foreign = _button(world, first, "maria")
    foreign["check_run"] = {**foreign["check_run"], "id": 1, "external_id": "build-7"}
    send("check_run", foreign)
    assert ReviewRun.objects.count() == 1


def test_a_re_review_of_a_head_the_pull_request_has_left_is_not_made(world, send):
    opened(world, send)
    first = ReviewRun.objects.get()
    world.push({"app/more.py": "x = 2\n"})
    delivery = send("check_run", _button(world, first, "maria"))
    assert "has moved on" in delivery.outcome
    assert ReviewRun.objects.count() == 1


def test_re_running_all_checks_reviews_the_head_again_with_each_reviewer(world, send):
    from tests.helpers import check_suite_payload

    opened(world, send)
    first = ReviewRun.objects.get()
    body = check_suite_payload(world.fake, world.repo, head_sha=first.head_sha,
                               app_slug="tasuku-test", action="rerequested")  # fmt: skip
    delivery = send("check_suite", body, drain=None)
    assert delivery.decision == "admitted", delivery.outcome
    again = ReviewRun.objects.order_by("-id").first()
    assert again.pk != first.pk and again.trigger == "rerun"
    assert (again.head_sha, again.reviewer_id) == (first.head_sha, first.reviewer_id)
    assert again.status == RunStatus.COMPLETED
    # A suite on a head the pull request has left is not reviewed again.
    world.push({"app/more.py": "x = 2\n"})
    delivery = send("check_suite", body, drain=None)
    assert "has moved on" in delivery.outcome
    assert ReviewRun.objects.count() == 2


def test_repeated_triggers_for_the_same_head_coalesce(world, send):
    opened(world, send, review=False)
    body = pull_request_payload(world.fake, world.repo, world.pull, action="synchronize")
    send("pull_request", body)  # the same push reported again
    comment(world, send, f"@{SLUG} review")  # and asked for while it waits
    assert ReviewRun.objects.count() == 1
    run = ReviewRun.objects.get()
    assert (
        queued_tasks("reviews.tasks.run_process").count(("reviews.tasks.run_process", (run.pk,)))
        == 1
    )
    # While it runs, one more request waits — and no more than one.
    ReviewRun.objects.filter(pk=run.pk).update(status=RunStatus.RUNNING)
    comment(world, send, f"@{SLUG} review")
    comment(world, send, f"@{SLUG} full review")
    waiting = ReviewRun.objects.filter(status=RunStatus.QUEUED)
    assert waiting.count() == 1 and waiting.get().trigger == "full_review_command"


def test_a_push_supersedes_the_run_waiting_for_the_older_head(world, send):
    opened(world, send, review=False)
    old = ReviewRun.objects.get()
    before = world.push({"app/extra.py": "x = 1\n"})
    send(
        "pull_request",
        pull_request_payload(
            world.fake, world.repo, world.pull, action="synchronize", before=before
        ),
        drain=None,
    )
    old.refresh_from_db()
    assert old.status == RunStatus.CANCELLED and old.superseded_by == world.pull.head_sha
    check = next(c for c in world.fake.check_runs_of(REPO) if c.id == old.check_run_id)
    assert (check.conclusion, check.output["title"]) == (
        "cancelled",
        f"Superseded by {world.pull.head_sha[:7]}",
    )


class TestReviewNowButton:
    def url(self, world):
        return f"/repos/{REPO}/pulls/{world.pull.number}/review"

    def test_it_queues_a_review_of_the_current_head(self, world, send, admin_client):
        opened(world, send, review=False)
        ReviewRun.objects.all().delete()
        response = admin_client.post(self.url(world), {"full": "1"})
        assert response.status_code == 302
        assert ReviewRun.objects.get().trigger == "full_review_command"
        page = admin_client.get(f"/repos/{REPO}/pulls/{world.pull.number}/")
        assert b"Full review queued" in page.content and b"Review now" in page.content

    def test_a_read_only_operator_sees_no_button_and_may_not_post(
        self, world, send, client, django_user_model
    ):
        opened(world, send, review=False)
        viewer = django_user_model.objects.create_user("viewer", password="pw", is_staff=True)
        client.force_login(viewer)
        page = client.get(f"/repos/{REPO}/pulls/{world.pull.number}/")
        assert b"Review now" not in page.content
        assert client.post(self.url(world), {"full": "0"}).status_code == 403
        viewer.user_permissions.add(Permission.objects.get(codename="change_reviewrun"))
        client.force_login(django_user_model.objects.get(pk=viewer.pk))
        assert client.post(self.url(world), {"full": "0"}).status_code == 302


def test_a_maintainer_whose_org_membership_is_private_may_give_commands(world, send):
    """GitHub sends such a member as CONTRIBUTOR; its collaborator permission knows."""
    opened(world, send)
    world.fake.add_collaborator(REPO, "quiet-lead", "maintain")
    comment(world, send, f"@{SLUG} review", login="quiet-lead", association="CONTRIBUTOR")
    assert ReviewRun.objects.filter(trigger="command").exists()
    assert not conversation_answers(world.fake, REPO, world.pull.number)  # no refusal
    world.fake.add_collaborator(REPO, "reader", "read")
    comment(world, send, f"@{SLUG} review", login="reader", association="CONTRIBUTOR")
    [refusal] = conversation_answers(world.fake, REPO, world.pull.number)
    assert refusal["body"].startswith("Sorry @reader")
