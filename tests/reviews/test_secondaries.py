"""Secondary repositories through the pipeline: a pull_request webhook, the approved
secondary mounted beside the checkout (through the real gateway, against the fake GitHub
and its git smart HTTP), a model reviewer reading it through the real SDK against the
fake model server, and what the review, the check run and the run page say of it; one
the App cannot reach, or whose pinned commit is gone, is a note and a limitation, never a
failed review; the GitHub Actions runner is handed what it needs and nothing more."""

from __future__ import annotations

import json

import pytest

from repos.models import Reviewer, SecondaryRepository
from repos.services import installation_upsert, repository_upsert
from reviews.models import Review, ReviewRun, RunStatus
from tests.fakes.models import ANTHROPIC_TEST_KEY, ToolCall
from tests.gitworld import (
    INSTALLATION,
    REPO,
    REPO_ID,
    SHARED,
    SHARED_LATER,
    SHARED_PINNED,
    SHELL_TRUE_LINE,
    shared_build,
    world_build,
)
from tests.helpers import drain_queue, post_webhook, pull_request_payload

pytestmark = pytest.mark.django_db

SHARED_PATH = f"secondary/{SHARED}"
SHELL = {
    "path": "app/payments.py", "start_line": SHELL_TRUE_LINE, "end_line": SHELL_TRUE_LINE,
    "severity": "high", "category": "security", "title": "Order id reaches a shell",
    "body": "shell=True with an f-string.", "confidence": 0.95,
}  # fmt: skip
ON_SECONDARY = {
    **SHELL, "path": f"{SHARED_PATH}/lib/money.py", "start_line": 1, "end_line": 1,
    "title": "The rate is hard-coded",
}  # fmt: skip


@pytest.fixture
def world(fake_github):
    return world_build(fake_github)


@pytest.fixture
def shared(fake_github):
    return shared_build(fake_github)


@pytest.fixture
def claude(settings, fake_anthropic):
    settings.ANTHROPIC_BASE_URL = fake_anthropic.base_url
    settings.ANTHROPIC_API_KEY = ANTHROPIC_TEST_KEY
    Reviewer.objects.update(default_for_new_repositories=False)
    Reviewer.objects.create(slug="anthropic", engine="anthropic", model="claude-sonnet-5-5",
                            default_for_new_repositories=True)  # fmt: skip
    return fake_anthropic


def secondary(full_name: str, commit: str, *, approved: bool = True) -> SecondaryRepository:
    """An operator added (and approved) a secondary repository to acme/shop in the admin."""
    installation = installation_upsert(github_id=INSTALLATION, account_login="acme")
    repository = repository_upsert(installation=installation, github_id=REPO_ID, full_name=REPO)
    return SecondaryRepository.objects.create(
        repository=repository, full_name=full_name, pinned_commit=commit, approved=approved
    )


@pytest.fixture
def deliver(client, test_app):
    def send(world) -> ReviewRun:
        body = pull_request_payload(world.fake, world.repo, world.pull, action="opened")
        response = post_webhook(client, "pull_request", body, secret=test_app.webhook_secret)
        assert response.status_code == 202, response.content
        drain_queue()
        return ReviewRun.objects.order_by("-id").first()

    return send


def test_a_model_reviewer_reads_a_secondary_at_its_pin_and_the_review_lists_it_as_context(
    world, shared, claude, deliver, staff_client
):
    secondary(SHARED, shared.pinned)
    secondary("acme-libs/unapproved", shared.later, approved=False)  # never mounted
    claude.script(
        ToolCall("read_file", {"path": f"{SHARED_PATH}/lib/money.py"}),
        ToolCall("submit_review", {"findings": [SHELL, ON_SECONDARY]}),
    )
    run = deliver(world)
    assert run.status == RunStatus.COMPLETED, (run.stage, run.reason)

    # The prompt names it, where it is and what it is for; the tool read the pinned commit.
    first, second = claude.model_requests
    assert f"- {SHARED} at commit {shared.pinned[:12]}: read its files as `{SHARED_PATH}/<path>`" in first.system  # fmt: skip
    assert "not under review: never raise a finding on their files" in first.system
    assert "unapproved" not in first.system
    [read] = second.tool_results
    assert SHARED_PINNED.strip() in read.content and SHARED_LATER.strip() not in read.content

    # A finding on it is kept off the pull request: context, not under review.
    review = Review.objects.get(run=run)
    kept_off = review.findings.get(path=f"{SHARED_PATH}/lib/money.py")
    assert kept_off.state == "suppressed"
    assert kept_off.suppression_reason == f"in the secondary repository {SHARED}: context, not under review"  # fmt: skip
    [comment] = world.fake.review_comments_of(REPO, 7)
    assert comment["path"] == "app/payments.py"

    # The review names it as a context source, and so do its record and the run page.
    source = f"secondary repository {SHARED} at {shared.pinned[:12]} (read-only context, not reviewed)"  # fmt: skip
    assert review.context_sources == [source]
    [posted] = world.fake.reviews_of(REPO, 7)
    assert "**Context:**" in posted["body"] and f"{shared.pinned[:12]}" in posted["body"]
    assert run.secondaries == [
        {"full_name": SHARED, "commit": shared.pinned, "path": SHARED_PATH, "mounted": True,
         "note": "", "removed": ["AGENTS.md", "docs/.claude/", "escape -> /etc/passwd"]}
    ]  # fmt: skip
    page = staff_client.get(f"/runs/{run.pk}/").content.decode()
    assert f"mounted read-only at <code>{SHARED_PATH}/</code>" in page


@pytest.mark.parametrize("case", ["unreachable", "commit gone"])
def test_a_secondary_that_cannot_be_mounted_is_a_note_and_a_limitation_and_the_review_completes(
    world, shared, deliver, staff_client, case
):
    if case == "unreachable":
        world.fake.add_repo("outside/tools", installation_id=None)  # the App is not there
        name, commit = "outside/tools", "c" * 40
        why = "the App cannot reach it"
    else:
        name, commit = SHARED, "e" * 40
        why = f"its pinned commit {'e' * 12} is not on GitHub any more"
    secondary(name, commit)
    run = deliver(world)
    assert run.status == RunStatus.COMPLETED, (run.stage, run.reason)
    [record] = run.secondaries
    assert record["mounted"] is False and record["note"].startswith(why)
    review = Review.objects.get(run=run)
    limitation = f"The secondary repository {name} was not mounted: {why}"
    assert any(text.startswith(limitation) for text in review.limitations)
    assert not any("secondary" in source for source in review.context_sources)
    [posted] = world.fake.reviews_of(REPO, 7)
    assert "**Limitations:**" in posted["body"] and "was not mounted" in posted["body"]
    check = world.fake.check_runs_of(REPO)[-1]
    assert "was not mounted" in check.output["summary"]
    page = staff_client.get(f"/runs/{run.pk}/").content.decode()
    assert "<strong>not mounted</strong>" in page and why in page


def test_the_static_reviewer_gets_the_secondary_in_its_job_and_the_review_still_completes(
    world, shared, deliver
):
    secondary(SHARED, shared.pinned)
    run = deliver(world)
    assert run.status == RunStatus.COMPLETED, (run.stage, run.reason)
    assert run.secondaries[0]["mounted"] is True
    review = Review.objects.get(run=run)
    assert f"secondary repository {SHARED} at {shared.pinned[:12]} (read-only context, not reviewed)" in review.context_sources  # fmt: skip
    assert not review.findings.filter(path__startswith="secondary/").exists()
    assert json.dumps(review.limitations).count("not mounted") == 0


def test_a_finding_on_a_secondary_path_is_suppressed_even_where_the_pull_request_has_that_path():
    from reviews.scope.diff import diff_parse
    from reviews.validation.findings import GateConfig, gate

    # A pull request that adds a file at the very path a secondary is mounted under: the
    # tools read the secondary there, so a finding there is about the secondary.
    diff = diff_parse(
        f"diff --git a/{SHARED_PATH}/x.py b/{SHARED_PATH}/x.py\nnew file mode 100644\n"
        f"--- /dev/null\n+++ b/{SHARED_PATH}/x.py\n@@ -0,0 +1 @@\n+x = 1\n"
    )
    finding = {**ON_SECONDARY, "path": f"{SHARED_PATH}/x.py"}
    [found] = gate([finding], diff, GateConfig(secondaries={SHARED_PATH: SHARED}))
    assert found.state == "suppressed"
    assert found.reason == f"in the secondary repository {SHARED}: context, not under review"
    [without] = gate([finding], diff, GateConfig())
    assert without.state == "open"
