"""Reviewer revisions: every change to what shapes a reviewer's reviews makes a new,
immutable revision; every run records the one it was given, and its page shows it, with
how the reviewer has changed since."""

from __future__ import annotations

import pytest

from repos.models import Reviewer, ReviewerRevision, Skill
from repos.policy import Trigger
from repos.revisions import definition, diff, digest
from repos.selectors import effective_config, reviewer_config
from repos.services import revision_record
from reviews.engines.boundary import job_digest
from reviews.intake.pull_requests import run_request
from reviews.models import ReviewRun
from tests.factories import PullRequestFactory, RepositoryFactory, ReviewerFactory
from tests.repos.test_reviewer_admin import URL, form


def _run_for(reviewer: Reviewer) -> ReviewRun:
    """A run made as a pull request's event makes one, on a repository reviewed by
    `reviewer`."""
    repository = RepositoryFactory()
    repository.policy.reviewers.set([reviewer])
    pull_request = PullRequestFactory(repository=repository)
    run, created = run_request(
        pull_request=pull_request,
        reviewer=reviewer,
        trigger=Trigger.OPENED,
        config=effective_config(repository),
    )
    assert created
    return run


@pytest.mark.django_db
def test_an_admin_edit_makes_a_new_revision_and_a_run_after_it_records_it(admin_client):
    assert admin_client.post(f"{URL}add/", form(rules="Raise bugs.")).status_code == 302
    reviewer = Reviewer.objects.get(slug="claude")
    first = reviewer.revisions.get()
    assert (first.number, first.author, first.source) == (1, "admin", "admin")
    assert first.definition["rules"] == "Raise bugs."
    assert first.digest == reviewer_config(reviewer).revision
    assert _run_for(reviewer).reviewer_revision == first

    response = admin_client.post(f"{URL}{reviewer.pk}/change/", form(rules="Raise bugs and races."))
    assert response.status_code == 302
    second = reviewer.revisions.order_by("-number").first()
    assert second.number == 2 and second.definition["rules"] == "Raise bugs and races."
    assert ReviewerRevision.objects.get(pk=first.pk).definition["rules"] == "Raise bugs."
    run = _run_for(reviewer)
    assert run.reviewer_revision == second
    assert run.config["reviewers"][0]["revision"] == second.digest

    # A save that changes nothing that shapes a review (here: the name) makes none.
    admin_client.post(f"{URL}{reviewer.pk}/change/", form(rules="Raise bugs and races.", name="C"))
    assert reviewer.revisions.count() == 2


@pytest.mark.django_db
def test_a_named_skill_added_in_the_admin_is_a_new_revision(admin_client):
    admin_client.post(f"{URL}add/", form())
    reviewer = Reviewer.objects.get(slug="claude")
    skill = {
        "skill_documents-TOTAL_FORMS": "1",
        "skill_documents-0-name": "migrations",
        "skill_documents-0-description": "Django migrations",
        "skill_documents-0-body": "Check the reverse migration.",
    }
    response = admin_client.post(f"{URL}{reviewer.pk}/change/", form(**skill))
    assert response.status_code == 302, response.content
    latest = reviewer.revisions.order_by("-number").first()
    assert latest.number == 2
    assert latest.definition["skill_documents"] == [
        {
            "name": "migrations",
            "description": "Django migrations",
            "body": "Check the reverse migration.",
        }
    ]


@pytest.mark.django_db
def test_a_run_records_the_revision_it_was_given_even_after_an_edit_outside_the_admin():
    reviewer = ReviewerFactory(slug="careful", rules="Be careful.")
    first = revision_record(reviewer=reviewer, source=ReviewerRevision.Source.ADMIN, author="ann")
    assert _run_for(reviewer).reviewer_revision == first

    Reviewer.objects.filter(pk=reviewer.pk).update(rules="Be very careful.")  # a shell
    run = _run_for(reviewer)
    recorded = run.reviewer_revision
    assert recorded.number == 2 and recorded.source == ReviewerRevision.Source.OUTSIDE
    assert recorded.definition["rules"] == "Be very careful."
    assert recorded.digest == run.config["reviewers"][0]["revision"]

    # Changed back: a new revision again (the history is kept), with the first's hash.
    Reviewer.objects.filter(pk=reviewer.pk).update(rules="Be careful.")
    third = revision_record(reviewer=reviewer, source=ReviewerRevision.Source.ADMIN)
    assert third.number == 3 and third.digest == first.digest
    assert _run_for(reviewer).reviewer_revision == third


@pytest.mark.django_db
def test_the_run_page_shows_the_revision_and_how_the_reviewer_changed_since(staff_client):
    reviewer = ReviewerFactory(slug="careful", rules="Raise bugs.\nNever style.")
    Skill.objects.create(reviewer=reviewer, name="sql", description="SQL", body="Check joins.")
    revision_record(reviewer=reviewer, source=ReviewerRevision.Source.ADMIN, author="ann")
    run = _run_for(reviewer)

    page = staff_client.get(f"/runs/{run.pk}/").content.decode()
    given = run.reviewer_revision
    assert "r1" in page and given.digest[:12] in page and "ann" in page
    assert "its current revision" in page and "revision-diff" not in page

    Reviewer.objects.filter(pk=reviewer.pk).update(rules="Raise bugs.\nRaise races.")
    Skill.objects.filter(reviewer=reviewer).update(body="Check joins and indexes.")
    revision_record(reviewer=reviewer, source=ReviewerRevision.Source.ADMIN, author="bob")
    page = staff_client.get(f"/runs/{run.pk}/").content.decode()
    assert "the reviewer has changed since" in page and "r2" in page and "bob" in page
    assert 'id="revision-diff"' in page
    assert "-Never style." in page and "+Raise races." in page
    assert "+Check joins and indexes." in page
    assert "A retry of this run reviews with what it was given (r1)" in page


@pytest.mark.django_db
def test_the_run_page_says_when_a_run_s_revision_is_not_known(staff_client):
    run = _run_for(ReviewerFactory(slug="old"))
    ReviewRun.objects.filter(pk=run.pk).update(reviewer_revision=None)  # made before revisions
    page = staff_client.get(f"/runs/{run.pk}/").content.decode()
    assert "not recorded: this run was made before reviewers had revisions" in page


def test_the_definition_leaves_out_where_a_reviewer_runs_and_its_name():
    from repos.policy import ReviewerConfig

    one = ReviewerConfig(slug="a", engine="anthropic", model="m", runner="local", rules="R")
    other = one.model_copy(update={"slug": "b", "runner": "docker"})
    assert digest(definition(one)) == digest(definition(other))
    changed = one.model_copy(update={"base_url": "http://gpu:8000/v1"})
    assert digest(definition(one)) != digest(definition(changed))
    assert [c.field for c in diff(definition(one), definition(changed))] == ["base url"]


def test_the_job_digest_tells_two_revisions_apart():
    """A stored result is reused only for a job of the same revision: a change the job
    does not carry (a base URL, a triage model) is a different review."""

    class Job:  # the same job, whatever it holds
        def model_dump_json(self, **kwargs) -> str:
            return "{}"

    reviewer = Reviewer(engine="anthropic", runner="local")
    same = job_digest(Job(), reviewer, revision="a" * 64)
    assert same == job_digest(Job(), reviewer, revision="a" * 64)
    assert same != job_digest(Job(), reviewer, revision="b" * 64)


def test_the_job_digest_names_the_version_this_process_runs(monkeypatch):
    """A result of another version of Tasuku is not reused; the version is read at the
    process's first review and kept, not whatever was installed beside it since."""
    from importlib import metadata

    from reviews.engines import boundary

    class Job:
        def model_dump_json(self, **kwargs) -> str:
            return "{}"

    reviewer = Reviewer(engine="static", runner="local")
    installed = {"tasuku": "1.0"}
    monkeypatch.setattr(metadata, "version", lambda name: installed[name])
    boundary.running_version.cache_clear()
    try:
        first = job_digest(Job(), reviewer)
        installed["tasuku"] = "2.0"  # upgraded on disk; this process still runs 1.0
        assert job_digest(Job(), reviewer) == first
        boundary.running_version.cache_clear()  # a process started after the upgrade
        assert job_digest(Job(), reviewer) != first
    finally:
        boundary.running_version.cache_clear()


@pytest.mark.django_db
def test_a_retry_reviews_with_the_revision_the_run_recorded():
    from reviews.models import RunStatus
    from reviews.queue.runs import run_retry

    reviewer = ReviewerFactory(slug="careful", rules="Be careful.")
    run = _run_for(reviewer)
    given = run.reviewer_revision
    Reviewer.objects.filter(pk=reviewer.pk).update(rules="Be reckless.")
    revision_record(reviewer=reviewer, source=ReviewerRevision.Source.ADMIN, author="bob")
    ReviewRun.objects.filter(pk=run.pk).update(status=RunStatus.FAILED)

    assert run_retry(run)
    run.refresh_from_db()
    assert run.status == RunStatus.QUEUED and run.reviewer_revision == given
    assert run.config["reviewers"][0]["rules"] == "Be careful."
