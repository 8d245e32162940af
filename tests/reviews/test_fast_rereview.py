"""Fast re-reviews: the same job (head, base, files, configuration, reviewer) is never
given to the engine twice — a retried attempt and a later run of the same job publish the
result the engine already returned (paid once) — while validation, the threads and the
check run are each run's own. Through the real endpoint and worker against the fakes."""

from __future__ import annotations

import pytest

from repos.models import Repository
from reviews.engines import boundary as engines
from reviews.models import Finding, Review, ReviewRun, RunStatus
from tests.gitworld import REPO, world_build
from tests.helpers import drain_queue, issue_comment_payload, post_webhook, review_comment_payload

pytestmark = pytest.mark.django_db

SLUG = "tasuku-test"


@pytest.fixture
def world(fake_github):
    built = world_build(fake_github)
    # The comments' default author (tests/helpers.py): a maintainer with write access.
    fake_github.add_collaborator(REPO, "maria", "write")
    return built


@pytest.fixture
def engine_calls(monkeypatch):
    calls: list[int] = []
    real = engines.engine_run

    def counted(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(engines, "engine_run", counted)
    return calls


@pytest.fixture
def command(client, test_app):
    def send(world, text):
        body = issue_comment_payload(world.fake, world.repo, world.pull.number, body=text)
        response = post_webhook(client, "issue_comment", body, secret=test_app.webhook_secret)
        assert response.status_code == 202
        drain_queue()
        run = ReviewRun.objects.order_by("-id").first()
        assert run.status == RunStatus.COMPLETED, (run.status, run.stage, run.reason)
        return run

    return send


def _open(run):
    return sorted(
        Finding.objects.filter(review__run=run, state="open").values_list("fingerprint", flat=True)
    )


def _ours(world, kind):
    items = getattr(world.fake, f"{kind}_of")(REPO, world.pull.number)
    return [c for c in items if c["user"]["type"] == "Bot"]


def test_the_same_head_asked_again_reuses_the_engines_result_and_posts_nothing_twice(
    world, engine_calls, command
):
    first = command(world, f"@{SLUG} review")
    assert len(engine_calls) == 1
    comments = len(_ours(world, "review_comments"))
    assert comments > 0

    second = command(world, f"@{SLUG} review")

    assert len(engine_calls) == 1  # the engine did not run again
    assert second.job_digest == first.job_digest
    notes = Review.objects.get(run=second).notes
    assert notes[0].startswith(f"the engine's result is run {first.pk}'s")
    assert _open(second) == _open(first)
    assert len(_ours(world, "review_comments")) == comments  # no comment posted twice
    checks = world.fake.check_runs_of(REPO)
    assert checks[-1].head_sha == checks[0].head_sha == world.head
    assert checks[-1].conclusion == checks[0].conclusion == "failure"


def test_the_same_head_after_an_incremental_review_keeps_its_scope_and_reuses_its_result(
    world, engine_calls, command, client, test_app
):
    from tests.helpers import pull_request_payload

    command(world, f"@{SLUG} review")
    before = world.pull.head_sha
    world.push({"app/util.py": "import os\n\n\ndef util():\n    return 1\n"})
    body = pull_request_payload(world.fake, world.repo, world.pull, action="synchronize",
                                before=before)  # fmt: skip
    post_webhook(client, "pull_request", body, secret=test_app.webhook_secret)
    drain_queue()
    incremental = ReviewRun.objects.order_by("-id").first()
    assert incremental.incremental_since == before
    assert len(engine_calls) == 2

    again = command(world, f"@{SLUG} review")

    assert len(engine_calls) == 2
    assert again.incremental_since == before  # the scope the last review had
    assert again.job_digest == incremental.job_digest
    assert _open(again) == _open(incremental)
    assert world.fake.check_runs_of(REPO)[-1].conclusion == "failure"


def test_a_full_review_command_and_a_changed_configuration_get_the_engine_anew(
    world, engine_calls, command
):
    command(world, f"@{SLUG} review")
    command(world, f"@{SLUG} full review")
    assert len(engine_calls) == 2
    policy = Repository.objects.get(full_name=REPO).policy
    policy.strictness = "high"
    policy.save()
    command(world, f"@{SLUG} review")
    assert len(engine_calls) == 3


def test_a_reused_review_still_honours_what_was_dismissed_since(
    world, engine_calls, command, client, test_app
):
    from tests.reviews.test_honest_gate import KEY_TITLE

    first = command(world, f"@{SLUG} review")
    key = Finding.objects.get(review__run=first, title__contains=KEY_TITLE)
    assert key.fingerprint in _open(first)
    world.fake.add_collaborator(REPO, "maintainer", "maintain")
    [thread] = [
        t
        for t in world.fake.threads_of(REPO, world.pull.number)
        if t["comments"][0]["line"] == key.start_line and t["comments"][0]["path"] == key.path
    ]
    parent = thread["comments"][0]
    comment = world.fake.person_comment(
        REPO, world.pull.number, login="maintainer", reply_to=parent["id"],
        body=f"@{SLUG} dismiss it is a documented test key",
    )  # fmt: skip
    post_webhook(
        client, "pull_request_review_comment",
        review_comment_payload(world.fake, world.repo, world.pull, comment, association="MEMBER"),
        secret=test_app.webhook_secret,
    )  # fmt: skip
    drain_queue()

    second = command(world, f"@{SLUG} review")

    assert len(engine_calls) == 1
    assert key.fingerprint not in _open(second)  # the engine's result has it; people ruled


def test_a_model_reviewer_is_paid_once_for_a_retried_attempt_and_once_for_the_same_job(
    world, settings, fake_anthropic, command, client, test_app
):
    from repos.models import Reviewer
    from tests.fakes.models import ANTHROPIC_TEST_KEY, ToolCall
    from tests.reviews.test_honest_gate import MODEL_FINDING

    settings.ANTHROPIC_BASE_URL = fake_anthropic.base_url
    settings.ANTHROPIC_API_KEY = ANTHROPIC_TEST_KEY
    Reviewer.objects.update(default_for_new_repositories=False)
    Reviewer.objects.create(slug="claude", engine="anthropic", model="claude-sonnet-5-5",
                            default_for_new_repositories=True)  # fmt: skip
    fake_anthropic.script(ToolCall("submit_review", {"findings": [MODEL_FINDING]}))
    # GitHub refuses the review three times (every retry the gateway makes): the first
    # attempt fails at publication, after the model has been paid.
    world.fake.inject(3, status=502, method="POST", path=r"/pulls/\d+/reviews$")

    body = issue_comment_payload(world.fake, world.repo, world.pull.number, body=f"@{SLUG} review")
    post_webhook(client, "issue_comment", body, secret=test_app.webhook_secret)
    drain_queue()
    run = ReviewRun.objects.order_by("-id").first()
    assert run.runner_result is not None  # kept although publication failed
    if run.status != RunStatus.COMPLETED:
        from django.utils import timezone

        from reviews.queue.runs import runs_reap

        ReviewRun.objects.filter(pk=run.pk).update(next_attempt_at=timezone.now())
        runs_reap()
        drain_queue()
        run.refresh_from_db()
    assert run.status == RunStatus.COMPLETED, (run.status, run.reason)
    # GitHub unavailable: the first attempt was deferred (not counted), the second posted.
    assert list(run.attempt_rows.values_list("outcome", flat=True)) == ["deferred", "succeeded"]
    assert len(fake_anthropic.model_requests) == 1  # the retry did not call the model
    assert len(_ours(world, "reviews")) == 1
    paid = Review.objects.get(run=run).cost_usd
    assert paid > 0

    again = command(world, f"@{SLUG} review")
    assert len(fake_anthropic.model_requests) == 1
    assert Review.objects.get(run=again).cost_usd == 0  # the month is not charged twice
    assert _open(again) == _open(run)


def test_a_partial_result_is_never_reused(world, engine_calls, command, monkeypatch):
    real = engines.engine_run

    def partial(*args, **kwargs):
        result = real(*args, **kwargs)
        return result.model_copy(update={"partial": "shellcheck ran out of memory"})

    monkeypatch.setattr(engines, "engine_run", partial)
    first = command(world, f"@{SLUG} review")
    assert world.fake.check_runs_of(REPO)[-1].conclusion in ("neutral", "failure")
    assert first.runner_result["partial"]
    command(world, f"@{SLUG} review")
    assert len(engine_calls) == 2
