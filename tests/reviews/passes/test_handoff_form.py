"""The dashboard's hand-off form: the API's choices, through the same services, so the
same checks hold — the user's API scope, one open task per pull request, pull requests
the author's App opened — and the site's default reviewer for review passes."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.test import Client

from repos.models import Installation, Reviewer, ReviewSkill
from reviews.models import ApiScope, Task, TaskState
from tests.fakes.github.state import Pull
from tests.fakes.models import ToolCall
from tests.gitworld import REPO
from tests.helpers import drain_queue
from tests.reviews.passes.conftest import AUTHOR_BOT, MODEL, REVIEWER_BOT

pytestmark = pytest.mark.django_db


def lead(passes, *, scoped: bool = True, may_hand_off: bool = True) -> Client:
    user = get_user_model().objects.create_user("lead", password="pw", is_staff=True)
    for codename in ("add_task", "change_task") if may_hand_off else ("change_task",):
        user.user_permissions.add(
            Permission.objects.get(codename=codename, content_type__app_label="reviews")
        )
    if scoped:
        ApiScope.objects.create(user=user).installations.add(
            Installation.objects.get(github_id=passes.world.repo.installation_id)
        )
    browser = Client()
    browser.force_login(user)
    return browser


def form(**fields) -> dict:
    return {"title": "Refunds", "description": "Refund an order once.", "author_name": "agent-7",
            "author_login": AUTHOR_BOT, "pull_requests": f"{REPO}#7", "enabled": "on",
            "max_passes": "2", **fields}  # fmt: skip


def test_a_task_handed_off_on_the_dashboard_is_the_one_the_api_would_make(passes):
    ReviewSkill.objects.create(name="3-tier-review", text="Correctness, failures, tests.")
    Reviewer.objects.filter(slug="claude").update(default_for_passes=True)
    browser = lead(passes)
    page = browser.get("/tasks/new").content.decode()
    # The choices the API allows: reviewers (empty: the default), their models, skills.
    assert "the default for review passes (claude)" in page
    assert f'<option value="{MODEL}">{MODEL} (claude)</option>' in page
    assert '<option value="3-tier-review">3-tier-review (any reviewer)</option>' in page

    sent = browser.post("/tasks/new", form(
        model=MODEL, skill="3-tier-review", counted_bots="lint-bot[bot], ci-bot[bot]",
        required_checks="ci/test\nci/lint", author_silence_minutes="60"))  # fmt: skip
    task = Task.objects.get()
    assert sent.status_code == 302 and sent.url == f"/tasks/{task.pk}/"
    assert task.owner.username == "lead"
    body = passes.api.get(f"/api/tasks/{task.pk}")  # another owner's: not found
    assert body.status_code == 404
    assert (task.reviewer.slug, task.reviewer_model, task.skill.name) == ("claude", MODEL,
                                                                          "3-tier-review")  # fmt: skip
    assert (task.max_passes, task.counted_bots, task.required_checks) == (
        2, ["lint-bot[bot]", "ci-bot[bot]"], ["ci/test", "ci/lint"])  # fmt: skip
    assert task.author_silence_minutes == 60 and task.passes_enabled
    assert task.description == "Refund an order once." and task.handed_off_at is not None

    # It runs like any other: the author's done starts pass 1 with the chosen reviewer.
    passes.claude.script(ToolCall("submit_review", {"findings": []}))
    assert passes.done(task, passes.world.pull.head_sha).status_code == 404  # not the agent's
    from reviews.passes.flow import task_done

    assert task_done(task, heads={f"{REPO}#7": passes.world.pull.head_sha}).started
    drain_queue()
    assert passes.claude.last_request.model == MODEL
    assert [r["state"] for r in passes.reviews_by(REVIEWER_BOT)] == ["APPROVED"]


def test_the_form_is_refused_what_the_api_refuses_and_makes_nothing(passes):
    browser = lead(passes)

    def refused(**fields) -> str:
        answer = browser.post("/tasks/new", form(**fields))
        assert answer.status_code == 200  # the form again, with why
        return answer.content.decode()

    # No reviewer named and no default for review passes.
    assert "no reviewer is the default for review passes" in refused()
    # A skill kept for another reviewer: the service refuses it before the task is made.
    other = Reviewer.objects.create(slug="codex", engine="openai", model="gpt-5.1")
    ReviewSkill.objects.create(name="security", text="Injection.").reviewers.add(other)
    page = refused(reviewer="claude", skill="security")
    assert "skill: &#x27;security&#x27; is not a review skill the reviewer" in page
    # One that is not configured at all is not even offered.
    assert "Select a valid choice" in refused(reviewer="claude", skill="../../SKILL.md")
    assert not Task.objects.exists()

    # A pull request a person opened.
    passes.world.fake.add_pull(REPO, Pull(number=9, title="By hand", head_sha=passes.world.head,
                                          base_sha=passes.world.base, author_login="octocat"))  # fmt: skip
    page = refused(reviewer="claude", pull_requests=f"{REPO}#9")
    assert f"{REPO}#9 was opened by octocat" in page
    # A pull request another open task holds (the agent's, over the API).
    held = passes.create_task()
    page = refused(reviewer="claude")
    assert f"{REPO}#7 is in task {held.pk}, which is open" in page
    assert list(Task.objects.all()) == [held]


def test_a_repository_outside_the_users_api_scope_cannot_be_named(passes):
    browser = lead(passes, scoped=False)
    page = browser.post("/tasks/new", form(reviewer="claude")).content.decode()
    assert f"{REPO} is not a repository your API token may name" in page
    assert not Task.objects.exists()


def test_handing_off_needs_the_add_task_permission(passes):
    browser = lead(passes, may_hand_off=False)
    assert browser.get("/tasks/new").status_code == 403
    assert browser.post("/tasks/new", form(reviewer="claude")).status_code == 403
    assert "Hand off a task" not in browser.get("/tasks/").content.decode()
    assert not Task.objects.exists()


def test_review_passes_off_on_the_form(passes):
    browser = lead(passes)
    data = form()
    del data["enabled"]
    assert browser.post("/tasks/new", data).status_code == 302
    task = Task.objects.get()
    assert not task.passes_enabled and task.reviewer is None
    assert task.state == TaskState.OPEN


def test_one_reviewer_at_most_is_the_default_for_review_passes(passes):
    from repos.admin import ReviewerForm

    Reviewer.objects.filter(slug="claude").update(default_for_passes=True)
    data = {"slug": "deep", "engine": "anthropic", "model": "claude-opus-5-1", "runner": "local",
            "enabled": "on", "default_for_passes": "on", "step_limit": 40,
            "context_budget_tokens": 120000, "max_output_tokens": 16000, "explorer_limit": 6}  # fmt: skip
    second = ReviewerForm(data=data)
    assert not second.is_valid()
    assert second.errors["default_for_passes"] == [
        "claude is the default for review passes: untick it there first."
    ]
    Reviewer.objects.filter(slug="claude").update(default_for_passes=False)
    assert ReviewerForm(data=data).is_valid()
