"""The minimal dashboard pages a check run links to."""

from __future__ import annotations

import pytest

from reviews.models import RunStatus
from tests.factories import ReviewRunFactory, WebhookDeliveryFactory

pytestmark = pytest.mark.django_db


def test_a_check_runs_details_link_opens_the_run_page(staff_client):
    run = ReviewRunFactory(status=RunStatus.SKIPPED, reason="author dependabot[bot] is a bot")
    page = staff_client.get(f"/runs/{run.pk}/")
    assert page.status_code == 200
    assert b"author dependabot[bot] is a bot" in page.content
    assert run.head_sha[:12].encode() in page.content


def test_the_pull_request_page_lists_its_runs(staff_client):
    run = ReviewRunFactory()
    repository = run.pull_request.repository
    page = staff_client.get(f"/repos/{repository.full_name}/pulls/{run.pull_request.number}/")
    assert page.status_code == 200
    assert f"/runs/{run.pk}/".encode() in page.content
    title = page.content.split(b"<title>")[1].split(b"</title>")[0]
    assert b"<" not in title and str(run.pull_request.number).encode() in title
    assert page.content.count(b"<h2>Findings") == 1


def test_the_overview_shows_recent_runs_and_warns_of_failed_deliveries(staff_client):
    run = ReviewRunFactory()
    WebhookDeliveryFactory(status="failed")
    page = staff_client.get("/")
    assert f"/runs/{run.pk}/".encode() in page.content
    assert b"1 webhook delivery failed" in page.content


def test_a_delivery_page_shows_its_payload_and_error(staff_client):
    delivery = WebhookDeliveryFactory(
        status="failed", last_error="GitHub answered 502", payload={"action": "opened"}
    )
    page = staff_client.get(f"/status/deliveries/{delivery.pk}/")
    assert b"GitHub answered 502" in page.content
    assert b"&quot;action&quot;: &quot;opened&quot;" in page.content


def test_dashboard_pages_need_a_staff_login(client):
    run = ReviewRunFactory()
    for url in ("/", f"/runs/{run.pk}/", "/status/"):
        response = client.get(url)
        assert response.status_code == 302
        assert "/admin/login/" in response["Location"]


def test_the_overview_shows_the_budget_banner_once_80_percent_is_spent(staff_client):
    from decimal import Decimal

    from reviews.scope.budget import Budget, budget_alert
    from tests.factories import InstallationFactory

    installation = InstallationFactory(account_login="acme", monthly_budget_usd=Decimal("50"))
    assert b"review budget" not in staff_client.get("/").content
    budget_alert(installation, Budget(Decimal("41.5"), Decimal("50")))
    page = staff_client.get("/")
    assert b"acme has spent $41.50 of its $50.00 review budget this month" in page.content
