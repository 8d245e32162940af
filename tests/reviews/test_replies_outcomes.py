"""People's replies on Tasuku's threads; what findings became; the repository memory."""

from __future__ import annotations

import pytest

from repos.models import RepoMemory, Repository
from reviews.engines import boundary as engines
from reviews.memory.outcomes import figures, memory_text
from reviews.models import Dismissal, FindingOutcome, ThreadReply
from tests.gitworld import REPO, world_build
from tests.helpers import drain_queue, post_webhook, pull_request_payload, review_comment_payload

pytestmark = pytest.mark.django_db


@pytest.fixture
def world(fake_github, client, test_app):
    world = world_build(fake_github)
    post_webhook(
        client,
        "pull_request",
        pull_request_payload(world.fake, world.repo, world.pull),
        secret=test_app.webhook_secret,
    )
    drain_queue()
    return world


def reply_payload(world, parent, *, body, login="maria", user_type="User"):
    comment = world.fake.person_comment(
        REPO, world.pull.number, login=login, body=body, reply_to=parent["id"]
    )
    return review_comment_payload(world.fake, world.repo, world.pull, comment, user_type=user_type)


def our_comment(world, path):
    return next(
        c
        for c in world.fake.review_comments_of(REPO, world.pull.number)
        if c["path"] == path and c["user"]["type"] == "Bot"
    )


def test_a_persons_reply_is_answered_in_the_thread_with_how_to_suppress_the_rule(
    world, client, test_app
):
    parent = our_comment(world, "deploy.sh")
    post_webhook(client, "pull_request_review_comment", reply_payload(world, parent, body="Why is this a problem?"),
                 secret=test_app.webhook_secret)  # fmt: skip
    drain_queue()
    reply = ThreadReply.objects.get()
    assert reply.status == "answered" and not reply.dismissal
    [thread] = [
        t for t in world.fake.threads_of(REPO, world.pull.number) if t["first"] == parent["id"]
    ]
    answer = thread["comments"][-1]
    assert answer["user"]["type"] == "Bot"
    assert "https://www.shellcheck.net/wiki/SC2115" in answer["body"]
    assert "# shellcheck disable=SC2115" in answer["body"]


def test_the_same_reply_delivered_twice_is_answered_once(world, client, test_app):
    parent = our_comment(world, "deploy.sh")
    body = reply_payload(world, parent, body="Why?")
    for _ in range(2):
        post_webhook(client, "pull_request_review_comment", body, secret=test_app.webhook_secret)
        drain_queue()
    [thread] = [
        t for t in world.fake.threads_of(REPO, world.pull.number) if t["first"] == parent["id"]
    ]
    assert [c["user"]["type"] for c in thread["comments"]] == ["Bot", "User", "Bot"]


def test_a_dismiss_command_from_a_writer_dismisses_it_and_is_acknowledged(world, client, test_app):
    world.fake.add_collaborator(REPO, "maria", "write")
    parent = our_comment(world, "deploy.sh")
    post_webhook(client, "pull_request_review_comment",
                 reply_payload(world, parent, body="@tasuku-test dismiss this path is fixed."),
                 secret=test_app.webhook_secret)  # fmt: skip
    drain_queue()
    dismissal = Dismissal.objects.get()
    assert (dismissal.login, dismissal.reason) == ("maria", "this path is fixed.")
    assert "will not be raised again" in ThreadReply.objects.get().answer


def test_a_reply_calling_it_a_false_positive_is_answered_not_taken_as_a_dismissal(
    world, client, test_app
):
    world.fake.add_collaborator(REPO, "maria", "write")
    parent = our_comment(world, "deploy.sh")
    post_webhook(client, "pull_request_review_comment", reply_payload(world, parent, body="False positive, this path is fixed."),
                 secret=test_app.webhook_secret)  # fmt: skip
    drain_queue()
    assert not Dismissal.objects.exists()
    assert "@tasuku-test dismiss <reason>" in ThreadReply.objects.get().answer


def test_replies_on_peoples_own_threads_and_by_bots_are_left_alone(world, client, test_app):
    theirs = world.fake.person_comment(
        REPO, world.pull.number, login="maria", body="Hmm", path="deploy.sh", line=3
    )
    for body in (reply_payload(world, theirs, body="agreed", login="omar"),
                 reply_payload(world, our_comment(world, "deploy.sh"), body="beep", login="ci[bot]", user_type="Bot")):  # fmt: skip
        post_webhook(client, "pull_request_review_comment", body, secret=test_app.webhook_secret)
        drain_queue()
    assert not ThreadReply.objects.exists()


def test_closing_a_pull_request_records_each_findings_fate_and_the_repository_memory(
    world, client, test_app
):
    # The AWS key is fixed, the unquoted variable dismissed, the shell=True call left open.
    before = world.pull.head_sha
    world.push(
        {
            "app/payments.py": 'import subprocess\n\n\ndef refund(order_id):\n    cmd = f"refund --order {order_id}"\n    return subprocess.call(cmd, shell=True)\n'
        }
    )
    post_webhook(client, "pull_request", pull_request_payload(world.fake, world.repo, world.pull, action="synchronize", before=before),
                 secret=test_app.webhook_secret)  # fmt: skip
    drain_queue()
    parent = our_comment(world, "deploy.sh")
    world.fake.add_collaborator(REPO, "maria", "admin")
    post_webhook(
        client,
        "pull_request_review_comment",
        reply_payload(world, parent, body="@tasuku-test dismiss won't fix"),
        secret=test_app.webhook_secret,
    )
    drain_queue()
    world.pull.state, world.pull.merged = "closed", True
    post_webhook(client, "pull_request", pull_request_payload(world.fake, world.repo, world.pull, action="closed"),
                 secret=test_app.webhook_secret)  # fmt: skip
    drain_queue()

    fates = dict(FindingOutcome.objects.values_list("rule", "fate"))
    assert fates["detect-secrets:AWS Access Key"] == "fixed"
    assert fates["shellcheck:SC2115"] == "dismissed"
    assert fates["ruff:S602"] == "open"
    repository = Repository.objects.get(full_name=REPO)
    numbers = figures(repository=repository)
    assert (numbers.published, numbers.fixed, numbers.dismissed, numbers.left_open) == (3, 1, 1, 1)
    assert numbers.acceptance == 0.5
    memory = RepoMemory.objects.get(repository=repository).text
    assert "dismissed findings of these kinds as not worth fixing: shellcheck:SC2115 (1×)" in memory
    assert "fixed findings of these kinds: detect-secrets:AWS Access Key (1×)" in memory

    # A later review receives the memory in its job.
    seen = {}
    original = engines.engine_run

    def capture(reviewer, config, job, root, **kwargs):
        seen["memory"] = job.memory
        return original(reviewer, config, job, root, **kwargs)

    engines.engine_run = capture
    try:
        world.pull.state = "open"
        before = world.push({"app/more.py": "VALUE = 2\n"})
        body = pull_request_payload(
            world.fake, world.repo, world.pull, action="synchronize", before=before
        )
        post_webhook(client, "pull_request", body, secret=test_app.webhook_secret)
        drain_queue()
    finally:
        engines.engine_run = original
    assert seen["memory"] == memory


def test_the_repositories_page_shows_the_figures(world, admin_client):
    page = admin_client.get("/repos/")
    assert page.status_code == 200 and REPO.encode() in page.content


def test_memory_text_is_bounded():
    text = memory_text([("dismissed", f"rule-{i}" * 40, "t") for i in range(100)])
    assert len(text) <= 1500


def test_a_reply_github_will_not_take_for_a_while_is_answered_once_when_the_limit_ends(
    world, client, test_app
):
    from datetime import timedelta

    from django.utils import timezone

    from reviews.conversation.replies import replies_sweep

    parent = our_comment(world, "deploy.sh")
    # Two minutes of GitHub's secondary limit on replies, by GitHub's clock.
    window = world.fake.limits.secondary(120, method="POST", path=r"/comments/\d+/replies$")
    post_webhook(client, "pull_request_review_comment", reply_payload(world, parent, body="Why?"),
                 secret=test_app.webhook_secret)  # fmt: skip
    drain_queue()
    reply = ThreadReply.objects.get()
    assert reply.status == "queued" and "secondary rate limit" in reply.error
    assert (reply.attempts, reply.deferrals) == (0, 1)  # waiting is not a failed try
    assert reply.next_attempt_at >= timezone.now() + timedelta(seconds=110)
    assert replies_sweep() == 0  # not before GitHub asked
    assert window.refused == 1
    # The limit ends; the wait recorded is over.
    world.fake.limits.advance(121)
    past = timezone.now() - timedelta(seconds=1)
    ThreadReply.objects.update(next_attempt_at=past, rung_at=past - timedelta(seconds=1))
    from repos.models import Installation

    Installation.objects.update(quiet_until=past)
    assert replies_sweep() == 1
    drain_queue()
    reply.refresh_from_db()
    assert reply.status == "answered"
    [thread] = [
        t for t in world.fake.threads_of(REPO, world.pull.number) if t["first"] == parent["id"]
    ]
    assert [c["user"]["type"] for c in thread["comments"]] == ["Bot", "User", "Bot"]
    assert window.refused == 1


def test_a_reply_whose_worker_died_is_answered_by_another(world, client, test_app):
    from datetime import timedelta

    from django.utils import timezone

    from reviews.conversation.replies import REPLIES

    parent = our_comment(world, "deploy.sh")
    body = reply_payload(world, parent, body="Why?")
    with pytest.MonkeyPatch.context() as patch:
        # The worker takes the reply and dies before it answers.
        patch.setattr("reviews.tasks.reply_answer", REPLIES.claim)
        post_webhook(client, "pull_request_review_comment", body, secret=test_app.webhook_secret)
        drain_queue()
    reply = ThreadReply.objects.get()
    assert (reply.status, reply.attempts) == ("answering", 1)
    assert REPLIES.claim(reply.pk) is None  # held
    later = timezone.now() + REPLIES.lease_for() + timedelta(seconds=1)
    assert REPLIES.sweep(now=later)["requeued"] == 1
    drain_queue()
    reply.refresh_from_db()
    assert (reply.status, reply.attempts) == ("answered", 2)
