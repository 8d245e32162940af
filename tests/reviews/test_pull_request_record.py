"""One writer of a pull request's row (reviews.intake.pull_requests.pull_request_record): a webhook's
payload and GitHub's API answer record the same fields the same way."""

from __future__ import annotations

import pytest

from repos.github import PullRequestInfo
from reviews.intake.pull_requests import pull_request_record, pull_request_sync
from reviews.intake.triggers import pull_request_refresh
from reviews.models import PullRequest
from tests.factories import RepositoryFactory
from webhooks import payloads

pytestmark = pytest.mark.django_db

FIELDS = (
    "title", "author_login", "author_type", "state", "draft", "merged", "head_sha",
    "head_ref", "base_sha", "base_ref", "html_url", "changed_files",
)  # fmt: skip


def row(pull_request: PullRequest) -> dict:
    pull_request.refresh_from_db()
    return {name: getattr(pull_request, name) for name in FIELDS}


def facts(**values) -> dict:
    return {
        "title": "Fix it",
        "author_login": "octocat",
        "author_type": "User",
        "state": "open",
        "draft": False,
        "merged": False,
        "head_sha": "a" * 40,
        "head_ref": "fix",
        "base_sha": "b" * 40,
        "base_ref": "main",
        "html_url": "https://github.com/acme/api/pull/7",
        "changed_files": 3,
        **values,
    }


def test_it_creates_the_row_then_updates_it_in_place():
    repository = RepositoryFactory()
    first = pull_request_record(repository=repository, number=7, github_id=70, **facts())
    again = pull_request_record(
        repository=repository, number=7, **facts(title="Fix it properly", state="closed")
    )
    assert again.pk == first.pk and PullRequest.objects.count() == 1
    assert row(again) == facts(title="Fix it properly", state="closed")


def test_what_is_not_known_keeps_what_the_row_holds():
    repository = RepositoryFactory()
    pull_request_record(repository=repository, number=7, github_id=70, **facts())
    kept = pull_request_record(
        repository=repository, number=7, github_id=None, **facts(changed_files=None)
    )
    kept.refresh_from_db()
    assert (kept.github_id, kept.changed_files) == (70, 3)


def test_a_long_title_is_cut_to_the_column():
    repository = RepositoryFactory()
    pull_request = pull_request_record(repository=repository, number=7, **facts(title="x" * 2000))
    assert len(row(pull_request)["title"]) == 1024


def test_a_payload_and_the_api_record_the_same_row(monkeypatch):
    repository = RepositoryFactory()
    payload = {
        "number": 7,
        "id": 70,
        "title": "Fix it",
        "user": {"login": "octocat", "type": "User"},
        "state": "open",
        "draft": False,
        "merged": False,
        "head": {"sha": "a" * 40, "ref": "fix"},
        "base": {"sha": "b" * 40, "ref": "main"},
        "html_url": "https://github.com/acme/api/pull/7",
        "changed_files": 3,
    }
    from_payload = row(
        pull_request_sync(repository=repository, pull=payloads.PullRequest.model_validate(payload))
    )
    PullRequest.objects.all().delete()

    info = PullRequestInfo(number=7, **facts())

    class Gateway:
        def pull_request_get(self, repo, **where):
            assert where["number"] == 7
            return info

    monkeypatch.setattr("repos.github.gateway", lambda: Gateway())
    from_api = row(pull_request_refresh(repository.installation, repository, 7))
    assert from_payload == from_api == facts()


def test_the_api_records_a_merged_pull_request_as_closed(monkeypatch):
    repository = RepositoryFactory()
    info = PullRequestInfo(number=7, **facts(state="open", merged=True))

    class Gateway:
        def pull_request_get(self, repo, **where):
            return info

    monkeypatch.setattr("repos.github.gateway", lambda: Gateway())
    pull_request = pull_request_refresh(repository.installation, repository, 7)
    assert row(pull_request)["state"] == "closed"
