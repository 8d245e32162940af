"""The walkthrough comment: one per pull request, created when a review has been under way
for a while (or, for one that ends sooner, once with its final text), finalised when it ends, edited in place on later pushes, found again only by Tasuku's own
signed marker; off by policy; never the review's failure or wait."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from repos.models import RepositoryPolicy, Reviewer
from repos.policy import EffectiveConfig, Trigger
from reviews.engines import boundary as engines
from reviews.models import ReviewRun, RunStatus, Walkthrough
from reviews.publication.walkthrough import (
    walkthrough_request,
    walkthrough_send,
    walkthrough_wanted,
)
from reviews.text.markers import marker, marker_of
from tests.fakes.models import ANTHROPIC_TEST_KEY, ToolCall
from tests.gitworld import REPO, SHELL_TRUE_LINE, world_build
from tests.helpers import drain_queue, post_webhook, pull_request_payload

pytestmark = pytest.mark.django_db


@pytest.fixture
def world(fake_github):
    return world_build(fake_github)


@pytest.fixture
def deliver(client, test_app):
    def send(world, action="opened", **extra):
        body = pull_request_payload(world.fake, world.repo, world.pull, action=action, **extra)
        response = post_webhook(client, "pull_request", body, secret=test_app.webhook_secret)
        assert response.status_code == 202, response.content
        drain_queue()
        run = ReviewRun.objects.order_by("-id").first()
        run.refresh_from_db()
        return run

    return send


def walkthroughs(world):
    """Tasuku's walkthrough comments on the fake's pull request."""
    return [
        c
        for c in world.fake.issue_comments_of(REPO, world.pull.number)
        if c["user"]["type"] == "Bot" and marker_of(c["body"], "walkthrough")
    ]


def repository_first(world, **policy):
    from repos.services import installation_upsert, repository_upsert

    installation = installation_upsert(github_id=world.repo.installation_id, account_login="acme")
    repository_upsert(installation=installation, github_id=world.repo.id, full_name=REPO)
    RepositoryPolicy.objects.update(**policy)


def test_a_walkthrough_is_created_under_way_finalised_and_edited_in_place_across_two_pushes(
    world, deliver, monkeypatch
):
    # A review that takes longer than the grace: its walkthrough is sent while the engine
    # runs, as the sweep rings it for a worker beside this one.
    seen = []
    real = engines.engine_run

    def engine_run(*args, **kwargs):
        row = Walkthrough.objects.get()
        assert walkthrough_send(row.pk) == "not claimed"  # within the grace: not yet
        Walkthrough.objects.filter(pk=row.pk).update(
            next_attempt_at=timezone.now() - timedelta(seconds=1)
        )
        seen.append(walkthrough_send(row.pk))
        seen.append(walkthroughs(world)[0]["body"])
        return real(*args, **kwargs)

    monkeypatch.setattr(engines, "engine_run", engine_run)
    first = deliver(world)
    assert first.status == RunStatus.COMPLETED, first.reason
    assert seen[0] == "sent"
    under_way = seen[1]
    assert "⏳ review under way at `" + first.head_sha[:7] in under_way
    assert "**What changed** in" in under_way and "`app/`" in under_way

    [comment] = walkthroughs(world)
    body = comment["body"]
    assert "✅ reviewed at `" + first.head_sha[:7] in body
    assert "open findings" in body and "check `failure`" in body
    assert "[the review](" in body and f"/runs/{first.pk}/" in body
    assert "Reviewed 3 files." in body
    posted_id = comment["id"]

    # A push: the same comment, edited, naming the new head and the review's scope.
    seen.clear()
    before = world.pull.head_sha
    world.push({"app/more.py": "VALUE = 1\n"})
    second = deliver(world, "synchronize", before=before)
    assert second.status == RunStatus.COMPLETED, second.reason
    [comment] = walkthroughs(world)
    assert comment["id"] == posted_id
    assert "✅ reviewed at `" + second.head_sha[:7] in comment["body"]
    assert "only the changes since `" + first.head_sha[:7] in comment["body"]
    assert f"/runs/{second.pk}/" in comment["body"] and f"/runs/{first.pk}/" not in comment["body"]
    assert world.fake.requests("PATCH", r"/issues/comments/\d+$")
    assert len(world.fake.requests("POST", r"/issues/\d+/comments$")) == 1
    assert Walkthrough.objects.get().status == "sent"


def test_a_review_that_ends_within_the_grace_posts_its_walkthrough_once_with_its_final_text(
    world, deliver
):
    run = deliver(world)
    assert run.status == RunStatus.COMPLETED, run.reason
    [comment] = walkthroughs(world)
    assert "✅ reviewed at `" + run.head_sha[:7] in comment["body"]
    assert "under way" not in comment["body"]
    # One write: created with its final text, never edited.
    assert len(world.fake.requests("POST", r"/issues/\d+/comments$")) == 1
    assert not world.fake.requests("PATCH", r"/issues/comments/\d+$")
    assert Walkthrough.objects.get().status == "sent"


def test_with_the_walkthrough_off_no_comment_is_posted(world, deliver):
    repository_first(world, walkthrough=False)
    run = deliver(world)
    assert run.status == RunStatus.COMPLETED
    assert walkthroughs(world) == []
    assert not Walkthrough.objects.exists()


def test_a_walkthrough_github_refuses_does_not_fail_the_review_and_is_a_note_on_the_run(
    world, deliver, staff_client
):
    world.fake.inject(5, status=403, method="POST", path=r"/issues/\d+/comments$")
    run = deliver(world)
    assert run.status == RunStatus.COMPLETED, run.reason
    assert world.fake.reviews_of(REPO, 7)  # the review is posted
    assert world.fake.check_runs_of(REPO)[-1].conclusion == "failure"
    row = Walkthrough.objects.get()
    assert row.status == "failed" and "GitHub did not take the walkthrough" in row.error
    assert walkthroughs(world) == []
    page = staff_client.get(f"/runs/{run.pk}/").content.decode()
    assert "GitHub did not take the walkthrough" in page


def test_a_rate_limited_walkthrough_waits_like_other_github_weather(world, deliver):
    world.fake.rate_limit(10, retry_after=120, method="POST", path=r"/issues/\d+/comments$")
    run = deliver(world)
    assert run.status == RunStatus.COMPLETED, run.reason
    row = Walkthrough.objects.get()
    assert row.status == "due" and row.next_attempt_at is not None and row.deferrals == 1
    assert "waits for GitHub (rate limit)" in row.error
    assert walkthroughs(world) == []


def test_a_retried_walkthrough_edits_tasukus_own_comment_and_never_a_copy_of_its_marker(
    world, deliver
):
    run = deliver(world)
    [ours] = walkthroughs(world)
    # Someone pastes Tasuku's comment, marker and all, into a comment of their own.
    world.fake.repos[REPO].issue_comments[9999] = {
        **ours, "id": 9999, "node_id": "IC_9999", "_number": world.pull.number,
        "user": world.fake._user_json("mallory", "User", 777),
    }  # fmt: skip
    # The sender lost what it knew of its comment (a crash before it recorded it).
    Walkthrough.objects.update(comment_id=None, body="")
    walkthrough_request(run)
    drain_queue()
    comments = world.fake.issue_comments_of(REPO, world.pull.number)
    assert [c["id"] for c in comments if c["user"]["type"] == "Bot"] == [ours["id"]]
    assert len(world.fake.requests("POST", r"/issues/\d+/comments$")) == 1
    assert world.fake.repos[REPO].issue_comments[9999]["body"] == ours["body"]  # untouched


def test_a_first_walkthrough_is_created_without_a_look_up_marked_before_it_is_sent(
    world, deliver, monkeypatch
):
    from repos.github.conversation import ConversationCalls

    real = ConversationCalls.issue_comment_create
    marked = []

    def create(self, repo, **kwargs):
        # Marked before GitHub is asked: a sender stopped after GitHub took it looks first.
        marked.append(Walkthrough.objects.get().create_tried)
        return real(self, repo, **kwargs)

    monkeypatch.setattr(ConversationCalls, "issue_comment_create", create)
    run = deliver(world)
    assert run.status == RunStatus.COMPLETED, run.reason
    assert len(walkthroughs(world)) == 1 and marked == [True]
    assert world.fake.requests("GET", r"/issues/\d+/comments(\?|$)") == []
    # Lost after the create (a crash before the id was recorded): found, not posted again.
    Walkthrough.objects.update(comment_id=None, body="")
    walkthrough_request(run)
    drain_queue()
    assert len(walkthroughs(world)) == 1 and marked == [True]
    assert len(world.fake.requests("GET", r"/issues/\d+/comments(\?|$)")) == 1


def test_local_reviews_and_review_passes_keep_no_walkthrough(world, deliver):
    run = deliver(world)
    config = EffectiveConfig.model_validate(run.config)
    assert walkthrough_wanted(run, config)
    for trigger in (Trigger.LOCAL, Trigger.REVIEW_PASS):
        run.trigger = trigger
        assert not walkthrough_wanted(run, config)


def test_a_model_reviewers_summary_is_in_the_walkthrough_escaped(
    world, deliver, settings, fake_anthropic
):
    settings.ANTHROPIC_BASE_URL = fake_anthropic.base_url
    settings.ANTHROPIC_API_KEY = ANTHROPIC_TEST_KEY
    Reviewer.objects.update(default_for_new_repositories=False)
    Reviewer.objects.create(
        slug="claude", engine="anthropic", model="claude-sonnet-5-5",
        default_for_new_repositories=True,
    )  # fmt: skip
    forged = marker("walkthrough", "pr-1")
    summary = f"Adds refunds through a shell. {forged} cc @security-team <details>"
    finding = {
        "path": "app/payments.py", "start_line": SHELL_TRUE_LINE, "end_line": SHELL_TRUE_LINE,
        "severity": "high", "category": "security", "title": "Order id reaches a shell",
    }  # fmt: skip
    fake_anthropic.script(
        ToolCall("submit_review", {"findings": [finding], "walkthrough": summary})
    )
    run = deliver(world)
    assert run.status == RunStatus.COMPLETED, run.reason
    [comment] = walkthroughs(world)
    body = comment["body"]
    assert "Adds refunds through a shell." in body
    assert "@\u200bsecurity-team" in body and "<details>" not in body
    assert body.count("<!-- tasuku:walkthrough:") == 1 and body.rstrip().endswith("-->")


def test_a_failed_review_says_so_in_the_walkthrough(world, deliver, settings, fake_anthropic):
    settings.ANTHROPIC_BASE_URL = fake_anthropic.base_url
    settings.ANTHROPIC_API_KEY = ANTHROPIC_TEST_KEY
    fake_anthropic.keys = {"sk-ant-other"}  # the key is refused
    Reviewer.objects.update(default_for_new_repositories=False)
    Reviewer.objects.create(
        slug="claude", engine="anthropic", model="claude-sonnet-5-5",
        default_for_new_repositories=True,
    )  # fmt: skip
    run = deliver(world)
    assert run.status == RunStatus.FAILED and run.stage == "provider"
    [comment] = walkthroughs(world)
    assert "❌ failed at provider at `" + run.head_sha[:7] in comment["body"]
    assert "**What changed** in" in comment["body"]


def test_a_change_triage_found_trivial_says_so_in_the_walkthrough(
    fake_github, deliver, settings, fake_anthropic
):
    settings.ANTHROPIC_BASE_URL = fake_anthropic.base_url
    settings.ANTHROPIC_API_KEY = ANTHROPIC_TEST_KEY
    Reviewer.objects.update(default_for_new_repositories=False)
    Reviewer.objects.create(
        slug="claude", engine="anthropic", model="claude-sonnet-5-5",
        default_for_new_repositories=True,
    )  # fmt: skip
    # Documentation only: triage's rules find it trivial, and a paid reviewer stops there.
    world = world_build(fake_github, head_files={"README.md": "# Shop\n\nSells gadgets.\n"})
    run = deliver(world)
    assert run.status == RunStatus.COMPLETED, run.reason
    assert fake_anthropic.model_requests == []  # no deep review
    [comment] = walkthroughs(world)
    assert (
        "**claude** · ➖ triaged trivial at `" + run.head_sha[:7] + "`, not reviewed in depth"
        in comment["body"]
    )


def test_a_walkthroughs_lines_name_its_row_attempt_installation_and_repository(world, deliver):
    from tests.gitworld import INSTALLATION
    from tests.helpers import log_records

    world.fake.inject(5, status=403, method="POST", path=r"/issues/\d+/comments$")
    with log_records() as records:
        deliver(world)
    row = Walkthrough.objects.get()
    during = [r for r in records if r.walkthrough is not None]
    assert any("attempt 1 failed" in r.getMessage() for r in during), [
        r.getMessage() for r in records
    ]
    assert {(r.walkthrough, r.attempt, r.installation, r.repository) for r in during} == {
        (row.pk, 1, INSTALLATION, REPO)
    }
