"""installation and installation_repositories deliveries keep Tasuku's rows in step."""

from __future__ import annotations

import pytest

from repos.models import Installation, Repository
from tests.helpers import drain_queue, payload, post_webhook
from webhooks.models import DeliveryStatus

pytestmark = pytest.mark.django_db


@pytest.fixture
def deliver(client, fake_github, test_app, django_capture_on_commit_callbacks):
    from webhooks.models import WebhookDelivery

    def send(event, body):
        with django_capture_on_commit_callbacks(execute=True):
            response = post_webhook(client, event, body, secret=test_app.webhook_secret)
        assert response.status_code == 202
        drain_queue(only="webhooks.tasks.delivery_process")
        return WebhookDelivery.objects.order_by("-id").first()

    return send


def test_an_installation_creates_the_installation_and_its_repositories(deliver):
    delivery = deliver("installation", payload("installation", "created"))

    assert delivery.status == DeliveryStatus.PROCESSED
    assert delivery.outcome == "installed on Codertocat: 1 repositories"
    installation = Installation.objects.get()
    assert (installation.github_id, installation.account_login, installation.account_type) == (
        957387,
        "Codertocat",
        "User",
    )
    assert installation.permissions["checks"] == "write"
    repository = Repository.objects.get()
    assert (repository.github_id, repository.full_name, repository.enabled) == (
        186853002,
        "Codertocat/Hello-World",
        True,
    )
    # A new repository is reviewed by the default reviewer with no configuration.
    assert list(repository.policy.reviewers.values_list("slug", flat=True)) == ["static"]


def removed_space() -> dict:
    """The recorded `removed` payload, rewritten to remove what `added` added."""
    added = payload("installation_repositories", "added")
    body = payload("installation_repositories", "removed")
    body["installation"] = added["installation"]
    body["repositories_removed"] = added["repositories_added"]
    return body


def test_repositories_added_and_removed_later_follow_the_installation(deliver):
    deliver("installation", payload("installation", "created"))
    added = deliver("installation_repositories", payload("installation_repositories", "added"))
    assert added.outcome == "1 repositories added to Codertocat"
    assert set(Repository.objects.values_list("full_name", flat=True)) == {
        "Codertocat/Hello-World",
        "Codertocat/Space",
    }

    removed = deliver("installation_repositories", removed_space())
    assert removed.outcome == "1 repositories removed from Codertocat"
    space = Repository.objects.get(full_name="Codertocat/Space")
    assert space.removed_at is not None
    assert Repository.objects.get(full_name="Codertocat/Hello-World").removed_at is None


def test_a_repository_added_back_is_no_longer_removed(deliver):
    deliver("installation", payload("installation", "created"))
    deliver("installation_repositories", payload("installation_repositories", "added"))
    deliver("installation_repositories", removed_space())
    deliver("installation_repositories", payload("installation_repositories", "added"))
    assert Repository.objects.get(full_name="Codertocat/Space").removed_at is None
    assert Repository.objects.filter(full_name="Codertocat/Space").count() == 1


def test_uninstalling_removes_the_installation_and_its_repositories_but_keeps_history(deliver):
    body = payload("installation", "created")
    deliver("installation", body)
    deleted = payload("installation", "deleted")
    deleted["installation"] = body["installation"]
    delivery = deliver("installation", deleted)

    assert delivery.outcome == "uninstalled from Codertocat: 1 repositories removed"
    installation = Installation.objects.get()
    assert installation.removed_at is not None
    assert not installation.active
    assert Repository.objects.get().removed_at is not None


def test_suspend_and_unsuspend(deliver):
    body = payload("installation", "created")
    deliver("installation", body)
    suspend = payload("installation", "suspend")
    # The installation created above, suspended (GitHub says by whom and when).
    suspension = {k: suspend["installation"][k] for k in ("suspended_by", "suspended_at")}
    suspend["installation"] = {**body["installation"], **suspension}
    deliver("installation", suspend)
    assert Installation.objects.get().suspended_at is not None

    unsuspend = payload("installation", "unsuspend")
    unsuspend["installation"] = body["installation"]
    deliver("installation", unsuspend)
    assert Installation.objects.get().suspended_at is None


def test_new_permissions_accepted_records_the_new_permissions(deliver):
    body = payload("installation", "new_permissions_accepted")
    delivery = deliver("installation", body)
    assert delivery.status == DeliveryStatus.PROCESSED
    assert Installation.objects.get().permissions == body["installation"]["permissions"]


def test_a_renamed_repository_keeps_its_row(deliver):
    body = payload("installation", "created")
    deliver("installation", body)
    body["repositories"][0]["full_name"] = "Codertocat/Hello-Universe"
    deliver("installation", body | {"action": "unsuspend"})
    assert list(Repository.objects.values_list("full_name", flat=True)) == [
        "Codertocat/Hello-Universe"
    ]
