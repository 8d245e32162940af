"""The status page's delivery search reads a pull request the way the dashboard's search
box does: `owner/repo#n`, `owner/repo/pull/n`, a pull request's URL, or a repository."""

from __future__ import annotations

import pytest

from tests.factories import WebhookDeliveryFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def deliveries():
    for repository, number in (("acme/api", 7), ("acme/api", 8), ("acme/web", 7)):
        WebhookDeliveryFactory(
            event="pull_request",
            repository_full_name=repository,
            pr_number=number,
            outcome=f"admitted {repository} {number}",
        )


def shown(client, query: str) -> set[str]:
    page = client.get("/status/", {"q": query}).content.decode()
    return {
        name
        for name in ("admitted acme/api 7", "admitted acme/api 8", "admitted acme/web 7")
        if name in page
    }


@pytest.mark.parametrize(
    "query",
    [
        "acme/api#7",
        " acme/api # 7 ",
        "acme/api/pull/7",
        "https://github.com/acme/api/pull/7",
        "https://github.com/acme/api/pull/7/files",
        "ACME/Api#7",
    ],
)
def test_every_spelling_of_a_pull_request_finds_its_deliveries(staff_client, deliveries, query):
    assert shown(staff_client, query) == {"admitted acme/api 7"}


def test_a_repository_alone_finds_all_its_deliveries(staff_client, deliveries):
    assert shown(staff_client, "acme/api") == {"admitted acme/api 7", "admitted acme/api 8"}
    assert shown(staff_client, "https://github.com/acme/api") == {
        "admitted acme/api 7",
        "admitted acme/api 8",
    }


@pytest.mark.parametrize("query", ["acme/api#0", "acme/api#-7", "acme/api#x", "acme", "a b/c"])
def test_what_names_no_pull_request_finds_nothing(staff_client, deliveries, query):
    page = staff_client.get("/status/", {"q": query})
    assert page.status_code == 200
    assert shown(staff_client, query) == set()


def test_an_empty_search_shows_every_delivery(staff_client, deliveries):
    assert len(shown(staff_client, "")) == 3
