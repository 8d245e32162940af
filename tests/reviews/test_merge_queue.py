"""Merge queues: `merge_group.checks_requested` completes every `Tasuku · <reviewer>` check
on the group's head, from the reviews its pull requests already have; `destroyed` ends
a group. Each scenario goes through the real webhook endpoint and the worker against
the fake GitHub, whose merge queue builds the groups in the repository's git history."""

from __future__ import annotations

import copy

import pytest

from repos import github
from repos.github import RepoRef
from repos.models import Reviewer
from reviews.models import ReviewRun, RunStatus
from tests.fakes.github import CheckRun, Pull
from tests.gitworld import INSTALLATION, REPO, world_build
from tests.helpers import (
    drain_queue,
    payload,
    post_webhook,
    pull_request_payload,
    webhook_shaped,
)
from webhooks.models import DeliveryStatus, WebhookDelivery

pytestmark = pytest.mark.django_db

STATIC = "Tasuku · static"
CLEAN = {"app/refunds.py": "def refund(order_id: int) -> int:\n    return order_id\n"}
ALSO_CLEAN = {"app/orders.py": "def order(order_id: int) -> int:\n    return order_id + 1\n"}


@pytest.fixture
def world(fake_github):
    return world_build(fake_github, head_files=CLEAN)


def second_pull(world, files=ALSO_CLEAN, number=8, **kwargs):
    """Another pull request into main, from a branch of its own."""
    head = world.git.commit(files, parent=world.base, message="orders", branch=f"pr-{number}")
    return world.fake.add_pull(
        REPO,
        Pull(number=number, title="Add orders", head_sha=head, base_sha=world.base,
             head_ref=f"pr-{number}", **kwargs),
    )  # fmt: skip


def merge_group_payload(world, group, *, action="checks_requested", reason=None):
    """The recorded `merge_group.checks_requested` payload rewritten to `group` (as
    `fake.merge_queue_enqueue` returns it) in the world's repository."""
    data = payload("merge_group", "checks_requested")
    data["action"] = action
    data["merge_group"] = copy.deepcopy(group)
    data["repository"].update(world.fake._repo_json(world.repo))
    data["installation"] = {**data["installation"], "id": INSTALLATION}
    if reason is not None:
        data["reason"] = reason
    return webhook_shaped(data)


@pytest.fixture
def review(client, test_app):
    """A pull request opened (or pushed) and reviewed, as GitHub delivers it."""

    def send(world, pull, action="opened", **extra):
        body = pull_request_payload(world.fake, world.repo, pull, action=action, **extra)
        response = post_webhook(client, "pull_request", body, secret=test_app.webhook_secret)
        assert response.status_code == 202, response.content
        drain_queue()
        return ReviewRun.objects.filter(pull_request__number=pull.number).order_by("-id").first()

    return send


@pytest.fixture
def queue(client, test_app):
    """A `merge_group` delivery, processed by the worker."""

    def send(world, group, **kwargs):
        body = merge_group_payload(world, group, **kwargs)
        response = post_webhook(client, "merge_group", body, secret=test_app.webhook_secret)
        assert response.status_code == 202, response.content
        drain_queue()
        return WebhookDelivery.objects.order_by("-id").first()

    return send


def checks_on(world, sha):
    return [c for c in world.fake.check_runs_of(REPO) if c.head_sha == sha]


def the_check(world, group, name=STATIC) -> CheckRun:
    [check] = [c for c in checks_on(world, group["head_sha"]) if c.name == name]
    assert check.status == "completed"
    return check


# --- one pull request ---------------------------------------------------------------------


def test_a_group_whose_pull_request_passed_gets_success_on_its_head(world, review, queue):
    run = review(world, world.pull)
    assert run.check_conclusion == "success"
    runs_before = ReviewRun.objects.count()
    [group] = world.fake.merge_queue_enqueue(REPO, [7])

    delivery = queue(world, group)

    assert delivery.status == DeliveryStatus.PROCESSED
    check = the_check(world, group)
    assert check.conclusion == "success"
    assert check.output["title"] == "#7 passed Tasuku · static"
    assert f"passed at `{world.pull.head_sha[:7]}`" in check.output["summary"]
    assert check.external_id == "merge-group"
    assert check.details_url == "http://tasuku.test/repos/acme/shop/pulls/7/"
    assert delivery.outcome == (
        f"merge group {REPO}@{group['head_sha'][:7]} (#7 into main): Tasuku · static success"
    )
    assert ReviewRun.objects.count() == runs_before  # concluded, nothing reviewed again


@pytest.mark.parametrize("method", ["merge", "squash"])
def test_either_merge_method_is_checked_the_same(world, review, queue, method):
    review(world, world.pull)
    [group] = world.fake.merge_queue_enqueue(REPO, [7], method=method)
    queue(world, group)
    assert the_check(world, group).conclusion == "success"


def test_a_pull_request_whose_check_failed_fails_the_group_naming_it(fake_github, review, queue):
    world = world_build(fake_github)  # adds a hard-coded AWS key and shell=True
    run = review(world, world.pull)
    assert run.check_conclusion == "failure"
    [group] = fake_github.merge_queue_enqueue(REPO, [7])

    delivery = queue(world, group)

    check = the_check(world, group)
    assert check.conclusion == "failure"
    head = world.pull.head_sha[:7]
    assert check.output["title"].startswith(f"#7 check at {head} concluded failure: 3 open")
    assert "the queue removes the pull request" in check.output["summary"]
    assert delivery.outcome.endswith(f"Tasuku · static failure ({check.output['title']})")


def test_a_pull_request_tasuku_never_reviewed_fails_the_group(world, queue):
    [group] = world.fake.merge_queue_enqueue(REPO, [7])
    queue(world, group)
    check = the_check(world, group)
    assert check.conclusion == "failure"
    head = world.pull.head_sha[:7]
    assert check.output["title"] == f"#7 has no Tasuku · static review of its head {head}"


def test_a_bot_pull_request_that_was_not_reviewed_fails_the_group(fake_github, review, queue):
    world = world_build(fake_github, head_files=CLEAN)
    world.pull.author_login, world.pull.author_type = "dependabot[bot]", "Bot"
    run = review(world, world.pull)
    assert run.status == RunStatus.SKIPPED
    [group] = fake_github.merge_queue_enqueue(REPO, [7])
    queue(world, group)
    check = the_check(world, group)
    assert check.conclusion == "failure"
    assert check.output["title"].startswith(f"#7 was not reviewed at {world.pull.head_sha[:7]}")


def test_a_pull_request_pushed_after_its_review_fails_the_group(world, review, queue):
    review(world, world.pull)
    world.push({"app/refunds.py": "def refund(order_id):\n    return -order_id\n"})
    [group] = world.fake.merge_queue_enqueue(REPO, [7])
    queue(world, group)  # Tasuku never heard of the push: no review of the new head
    check = the_check(world, group)
    assert check.conclusion == "failure"
    assert f"review of its head {world.pull.head_sha[:7]}" in check.output["title"]


def test_a_neutral_check_is_not_enough_for_the_queue(
    fake_github, fake_anthropic, settings, review, queue
):
    """A head not reviewed in full (triaged trivial, over budget, partial) is `neutral` on
    the pull request — GitHub lets that pass a required check — and never passes a group."""
    from tests.fakes.models import ANTHROPIC_TEST_KEY, ToolCall

    settings.ANTHROPIC_BASE_URL = fake_anthropic.base_url
    settings.ANTHROPIC_API_KEY = ANTHROPIC_TEST_KEY
    Reviewer.objects.update(default_for_new_repositories=False)
    Reviewer.objects.create(slug="claude", engine="anthropic", model="claude-sonnet-5-5",
                            default_for_new_repositories=True)  # fmt: skip
    world = world_build(fake_github, head_files=CLEAN)
    fake_anthropic.script(ToolCall("submit_review", {"findings": []}))
    assert review(world, world.pull).check_conclusion == "success"
    previous = world.pull.head_sha
    world.push({"README.md": "# Shop\n\nTypo fixed.\n"})
    assert review(world, world.pull, "synchronize", before=previous).check_conclusion == "neutral"
    [group] = fake_github.merge_queue_enqueue(REPO, [7])

    queue(world, group)

    check = the_check(world, group, "Tasuku · claude")
    assert check.conclusion == "failure"
    assert check.output["title"] == (
        f"#7 check at {world.pull.head_sha[:7]} concluded neutral: "
        "No open findings · not reviewed in depth"
    )
    assert not [c for c in checks_on(world, group["head_sha"]) if c.name == STATIC]


def test_a_change_no_pull_request_accounts_for_fails_the_group(world, review, queue):
    review(world, world.pull)
    [group] = world.fake.merge_queue_enqueue(REPO, [7])
    # The group's head carries a change that is in none of its pull requests.
    extra = world.git.commit({"app/extra.py": "import os\n"}, parent=group["head_sha"])
    group = {**group, "head_sha": extra, "head_commit": {**group["head_commit"], "id": extra}}
    world.repo.commits.add(extra)

    queue(world, group)

    check = the_check(world, group)
    assert check.conclusion == "failure"
    assert check.output["title"] == (
        "the merge group changes 1 file that none of its pull requests changes: app/extra.py"
    )


# --- several pull requests ------------------------------------------------------------------


@pytest.mark.parametrize("method", ["merge", "squash"])
def test_a_group_of_two_passes_when_both_passed(world, review, queue, method):
    other = second_pull(world)
    review(world, world.pull)
    review(world, other)
    first, second = world.fake.merge_queue_enqueue(REPO, [7, 8], method=method)
    assert second["base_sha"] == first["head_sha"]  # built on the group ahead of it

    queue(world, first)
    delivery = queue(world, second)

    assert the_check(world, first).output["title"] == "#7 passed Tasuku · static"
    check = the_check(world, second)
    assert check.conclusion == "success"
    assert check.output["title"] == "All 2 pull requests of the group passed Tasuku · static"
    assert "| #8 | ✅ passed" in check.output["summary"]
    assert "| #7 | ✅ passed" in check.output["summary"]
    assert "(#8, #7 into main)" in delivery.outcome


def test_the_last_group_answers_for_a_failing_pull_request_ahead_of_it(world, review, queue):
    """With "only merge non-failing pull requests" off, GitHub merges a whole group once
    its last entry passes: that entry's check fails while one ahead of it fails."""
    failing = second_pull(
        world, files={"app/leak.py": 'AWS_ACCESS_KEY_ID = "AKIAZ2Q7WJ4KXN5BL3TP"\n'}
    )
    assert review(world, failing).check_conclusion == "failure"
    review(world, world.pull)
    first, second = world.fake.merge_queue_enqueue(REPO, [8, 7])

    queue(world, first)
    queue(world, second)

    assert the_check(world, first).conclusion == "failure"
    check = the_check(world, second)
    assert check.conclusion == "failure"
    assert check.output["title"].startswith(f"#8 check at {failing.head_sha[:7]} concluded failure")
    assert "| #7 | ✅ passed" in check.output["summary"]


def test_a_group_ahead_that_merged_is_not_answered_for_again(world, review, queue):
    other = second_pull(world)
    review(world, world.pull)
    review(world, other)
    first, second = world.fake.merge_queue_enqueue(REPO, [7, 8])
    queue(world, first)
    world.fake.merge_queue_merge(REPO, first)
    queue(world, first, action="destroyed", reason="merged")

    queue(world, second)

    check = the_check(world, second)
    assert check.output["title"] == "#8 passed Tasuku · static"


def test_a_stacked_pull_request_carries_the_commits_of_the_branch_it_is_built_on(
    world, review, queue
):
    """#9 is built on #8's branch: #9's diff, which its review covered, holds #8's
    changes, so the queue's merge of #9 passes though #8 itself was never reviewed."""
    under = second_pull(world)
    head = world.git.commit({"app/more.py": "X = 1\n"}, parent=under.head_sha, branch="pr-9")
    stacked = world.fake.add_pull(
        REPO, Pull(number=9, title="More", head_sha=head, base_sha=world.base, head_ref="pr-9")
    )
    review(world, stacked)
    [group] = world.fake.merge_queue_enqueue(REPO, [9], method="merge")
    queue(world, group)
    assert the_check(world, group).output["title"] == "#9 passed Tasuku · static"


def test_a_pull_request_is_found_from_its_commits_when_the_ref_does_not_name_it(
    world, review, queue
):
    other = second_pull(world)
    review(world, world.pull)
    [group] = world.fake.merge_queue_enqueue(REPO, [7])
    unnamed = {**group, "head_ref": "refs/heads/gh-readonly-queue/main/unexpected"}
    queue(world, unnamed)
    assert the_check(world, group).output["title"] == "#7 passed Tasuku · static"

    # A commit of another open pull request in the group makes it one of the group's.
    tip = world.git.commit(ALSO_CLEAN, parent=group["head_sha"], branch="pr-8")
    other.head_sha = tip
    queue(world, {**group, "head_sha": tip})
    check = the_check(world, {"head_sha": tip})
    assert check.conclusion == "failure"
    assert check.output["title"] == f"#8 has no Tasuku · static review of its head {tip[:7]}"


def test_a_group_in_which_no_pull_request_can_be_found_fails(world, review, queue):
    review(world, world.pull)
    [group] = world.fake.merge_queue_enqueue(REPO, [7], method="squash")
    unnamed = {**group, "head_ref": "refs/heads/gh-readonly-queue/main/unexpected"}
    queue(world, unnamed)  # the squash commit belongs to no pull request's commits
    check = the_check(world, group)
    assert check.conclusion == "failure"
    assert check.output["title"] == "no pull request was found in this merge group (and 1 more)"
    assert "`app/refunds.py`" in check.output["summary"]


# --- the end of a group, and GitHub's bad moments ---------------------------------------------


def test_a_destroyed_group_is_recorded_and_nothing_is_left_to_conclude(world, review, queue):
    review(world, world.pull)
    [group] = world.fake.merge_queue_enqueue(REPO, [7])
    queue(world, group)
    checks = len(world.fake.check_runs_of(REPO))

    delivery = queue(world, group, action="destroyed", reason="dequeued")

    assert delivery.status == DeliveryStatus.PROCESSED
    assert delivery.outcome == (
        f"merge group {REPO}@{group['head_sha'][:7]} destroyed (dequeued): nothing left to conclude"
    )
    assert len(world.fake.check_runs_of(REPO)) == checks
    assert the_check(world, group).conclusion == "success"  # untouched


def test_a_destroyed_group_with_an_unfinished_tasuku_check_gets_it_cancelled(world, queue):
    [group] = world.fake.merge_queue_enqueue(REPO, [7])
    queue(world, group)  # concluded failure: #7 was never reviewed
    check = the_check(world, group)
    check.status, check.conclusion, check.completed_at = "in_progress", None, None

    delivery = queue(world, group, action="destroyed", reason="invalidated")

    assert check.status == "completed" and check.conclusion == "cancelled"
    assert delivery.outcome.endswith(
        "destroyed (invalidated): 1 unfinished Tasuku check(s) cancelled"
    )


def test_checks_requested_after_the_group_was_destroyed_concludes_nothing(world, queue):
    [group] = world.fake.merge_queue_enqueue(REPO, [7])
    queue(world, group, action="destroyed", reason="dequeued")
    delivery = queue(world, group)
    assert delivery.status == DeliveryStatus.IGNORED
    assert "was destroyed before its checks were concluded" in delivery.outcome
    assert not checks_on(world, group["head_sha"])


@pytest.mark.parametrize(
    ("method", "path"),
    [("POST", r"/check-runs$"), ("GET", r"/compare/"), ("GET", r"/commits/[0-9a-f]+/pulls$")],
    ids=["check-create", "compare", "commit-pulls"],
)
def test_a_github_5xx_while_concluding_retries_the_delivery_and_the_check_ends_completed(
    world, review, queue, method, path
):
    from webhooks.services import delivery_process

    review(world, world.pull)
    [group] = world.fake.merge_queue_enqueue(REPO, [7])
    attempts = github.retry_policy().max_attempts
    world.fake.inject(attempts, status=502, method=method, path=path)

    delivery = queue(world, group)

    assert delivery.status == DeliveryStatus.RETRYING
    assert "502" in delivery.last_error
    assert not [c for c in checks_on(world, group["head_sha"]) if c.status != "completed"]
    WebhookDelivery.objects.filter(pk=delivery.pk).update(next_attempt_at=None)
    assert delivery_process(delivery.pk) == DeliveryStatus.PROCESSED
    assert the_check(world, group).conclusion == "success"  # one check, completed


def test_a_check_created_by_an_attempt_whose_answer_was_lost_is_updated_not_doubled(
    world, review, queue
):
    from webhooks.services import delivery_process

    review(world, world.pull)
    [group] = world.fake.merge_queue_enqueue(REPO, [7])
    attempts = github.retry_policy().max_attempts
    # The check is created but its answer is lost, and the look-ups for it fail.
    world.fake.inject(1, status=502, method="POST", path=r"/check-runs$", after=True)
    world.fake.inject(attempts, status=502, method="GET", path=r"/check-runs$", skip=1)

    delivery = queue(world, group)

    assert delivery.status == DeliveryStatus.RETRYING
    WebhookDelivery.objects.filter(pk=delivery.pk).update(next_attempt_at=None)
    assert delivery_process(delivery.pk) == DeliveryStatus.PROCESSED
    check = the_check(world, group)  # exactly one
    assert check.conclusion == "success"
    assert len(world.fake.requests("PATCH", rf"/check-runs/{check.id}$")) == 1


def test_a_group_github_will_not_describe_fails_rather_than_waits(world, review, queue):
    review(world, world.pull)
    [group] = world.fake.merge_queue_enqueue(REPO, [7])
    world.fake.inject(1, status=404, method="GET", path=r"/compare/",
                      body={"message": "Not Found", "documentation_url": "https://docs.github.com/rest", "status": "404"})  # fmt: skip
    delivery = queue(world, group)
    assert delivery.status == DeliveryStatus.PROCESSED
    check = the_check(world, group)
    assert check.conclusion == "failure"
    assert check.output["title"].startswith("GitHub would not describe this merge group")


# --- the fake GitHub's side: compare and associated pull requests -----------------------------


def test_the_fake_compares_and_associates_commits_as_github_does(world):
    gateway = github.gateway()
    where = RepoRef(installation_id=INSTALLATION, repository_id=world.repo.id, full_name=REPO)
    [group] = world.fake.merge_queue_enqueue(REPO, [7])

    comparison = gateway.compare(where, base=group["base_sha"], head=group["head_sha"])
    assert comparison.status == "ahead" and comparison.total_commits == 2
    assert [c.sha for c in comparison.commits] == [world.pull.head_sha, group["head_sha"]]
    assert comparison.commits[1].parents == (world.base, world.pull.head_sha)
    assert [f.filename for f in comparison.files] == ["app/refunds.py"]
    assert comparison.complete
    by_branch = gateway.compare(where, base="main", head=group["head_sha"])
    assert by_branch.total_commits == 2

    assert [p.number for p in gateway.commit_pull_requests(where, sha=world.pull.head_sha)] == [7]
    assert gateway.commit_pull_requests(where, sha=group["head_sha"]) == []
    assert [f.filename for f in gateway.pull_request_files(where, number=7)] == ["app/refunds.py"]

    world.fake.merge_queue_merge(REPO, group)
    [merged] = gateway.commit_pull_requests(where, sha=world.pull.head_sha)
    assert (merged.number, merged.state, merged.merged) == (7, "closed", True)
    assert gateway.commit_pull_requests(where, sha=world.base) == []
    assert gateway.compare(where, base="main", head=group["head_sha"]).status == "identical"

    with pytest.raises(github.GitHubError) as refused:
        gateway.commit_pull_requests(where, sha="0" * 40)
    assert refused.value.permanent and refused.value.status == 422
    unrelated = world.git.commit({"other.txt": "x\n"}, message="unrelated root")
    with pytest.raises(github.GitHubError) as refused:
        gateway.compare(where, base="main", head=unrelated)
    assert refused.value.status == 404 and "No common ancestor" in refused.value.message
