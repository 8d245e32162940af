"""The dashboard in a real browser, against a live server, a real worker process
(`manage.py worker`) and the fake GitHub: what an operator does when a developer asks
"why didn't Tasuku review my PR?" or "why did it say that?"."""

from __future__ import annotations

import re
from decimal import Decimal

import pytest

from repos.models import Reviewer
from reviews.models import ReviewRun, RunStatus
from reviews.scope.budget import Budget, budget_alert
from tests.factories import InstallationFactory, RepositoryFactory, WebhookDeliveryFactory
from tests.gitworld import INSTALLATION, REPO, REPO_ID, world_build
from tests.helpers import payload, post_webhook_live, pull_request_payload
from tests.workers import Worker, wait_for
from webhooks.models import DeliveryStatus, WebhookDelivery

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
]

PASSWORD = "correct horse battery staple"


@pytest.fixture
def worker(tmp_path, fake_github):
    started = Worker(tmp_path / "worker.log")
    yield started
    started.stop()


@pytest.fixture
def operator(django_user_model):
    return django_user_model.objects.create_superuser("ops", "ops@example.test", PASSWORD)


def log_in(page, username: str = "ops") -> None:
    page.goto("/")
    # staff pages send an anonymous visitor to the admin's login form
    assert "/admin/login/" in page.url
    page.fill("#id_username", username)
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")
    page.wait_for_url(re.compile(r"/$"))
    assert page.locator("h1").inner_text() == "Overview"


def _run_of_pull_request(status: str):
    run = ReviewRun.objects.filter(pull_request__number=7).order_by("-pk").first()
    return run if run is not None and run.status == status else None


def test_an_operator_finds_a_pull_request_sees_why_its_run_failed_and_retries_it(
    fake_github, test_app, live_server, worker, operator, page, screenshot
):
    from playwright.sync_api import expect

    world = world_build(fake_github)
    # The repository reviews with at most two inline comments: the third finding is
    # suppressed, with its reason, and shown only on the dashboard.
    repository = RepositoryFactory(
        installation=InstallationFactory(github_id=INSTALLATION, account_login="acme"),
        github_id=REPO_ID,
        full_name=REPO,
        policy__reviewers=Reviewer.objects.filter(slug="static"),
    )
    repository.policy.comment_limit = 2
    repository.policy.save()
    # GitHub refuses the review once, as it does when the App lacks a permission.
    world.fake.inject(
        1,
        status=403,
        method="POST",
        path=r"/pulls/7/reviews$",
        body={"message": "Resource not accessible by integration"},
    )
    body = pull_request_payload(world.fake, world.repo, world.pull)
    assert (
        post_webhook_live(
            live_server.url, "pull_request", body, secret=test_app.webhook_secret
        ).status_code
        == 202
    )
    failed = wait_for(
        lambda: _run_of_pull_request(RunStatus.FAILED),
        timeout=90,
        what="the run to fail at publication",
        worker=worker,
    )
    assert failed.stage == "publication", (failed.stage, failed.reason)

    log_in(page)
    screenshot("overview")
    expect(page.locator("table").filter(has_text="Most recent error")).to_contain_text(
        "publication"
    )

    # Find the pull request from the search box every page has.
    page.fill("header input[name=q]", f"{REPO}#7")
    page.press("header input[name=q]", "Enter")
    page.wait_for_url(re.compile(r"/repos/acme/shop/pulls/7/$"))
    expect(page.locator("h1")).to_contain_text("acme/shop#7")
    screenshot("pull-request")

    # Open the run: it failed at publication, says why and what to do.
    page.click(f"a[href='/runs/{failed.pk}/']")
    expect(page.locator("#run-status")).to_have_text("failed")
    expect(page.locator(".banner.bad")).to_contain_text("Failed at publication")
    expect(page.locator(".banner.bad")).to_contain_text("Grant the App Pull requests: write")
    screenshot("run-failed")

    # Workflow diagnostics groups the failure by stage and cause, with what to do.
    page.click("header nav a:has-text('Diagnostics')")
    publication = page.locator("#stage-publication")
    expect(publication).to_contain_text("1 failed")
    expect(publication).to_contain_text("The App lacks a permission this call needs.")
    expect(page.locator("#admission ~ table")).to_contain_text(f"admitted {REPO}#7")
    screenshot("diagnostics")
    page.go_back()

    # Retry, and watch the page follow the run until the real worker completes it.
    page.click("button:has-text('Retry')")
    expect(page.locator(".messages")).to_contain_text(f"Run #{failed.pk} queued again")
    expect(page.locator("#run-status")).to_have_text("completed", timeout=90_000)
    assert "/retry" not in page.url and f"/runs/{failed.pk}/" in page.url

    # Every finding is there; the one past the comment limit is still open (it counts
    # in the check) but was not posted, with the reason.
    over = page.locator("tr").filter(has_text="over the comment limit (2)")
    expect(over).to_have_count(1)
    expect(over).to_contain_text("open")
    expect(over).to_contain_text("not posted")
    expect(page.locator("h2").filter(has_text="Findings")).to_contain_text(
        "3 open, 3 in all: 2 posted inline, 0 suppressed"
    )
    expect(page.get_by_text("Effective configuration")).to_be_visible()
    screenshot("run")
    assert len(world.fake.reviews_of(REPO, 7)) == 1
    assert len(world.fake.review_comments_of(REPO, 7)) == 2

    page.click("header nav a:has-text('Repositories')")
    expect(page.locator("tr").filter(has_text=REPO)).to_contain_text("2 comments")
    screenshot("repositories")


def test_an_operator_retries_a_failed_delivery_from_the_status_page(
    live_server, worker, operator, page, screenshot
):
    from playwright.sync_api import expect

    delivery = WebhookDeliveryFactory(
        event="sponsorship",
        status=DeliveryStatus.FAILED,
        attempts=3,
        last_error="GitHub answered 502 (Bad Gateway)",
    )
    log_in(page)
    page.click("header nav a:has-text('Status')")
    expect(page.locator("h1")).to_have_text("Status")
    row = page.locator("tr").filter(has_text="sponsorship")
    expect(row).to_contain_text("GitHub answered 502")
    expect(page.locator("table").first).to_contain_text("Database")
    screenshot("status")

    row.locator("button:has-text('Retry')").click()
    expect(page.locator(".messages")).to_contain_text(
        f"Delivery {delivery.delivery_id} queued again"
    )
    wait_for(
        lambda: WebhookDelivery.objects.get(pk=delivery.pk).status == DeliveryStatus.IGNORED,
        timeout=60,
        what="the worker to process the delivery",
        worker=worker,
    )
    page.reload()
    expect(page.locator("tr").filter(has_text="sponsorship")).to_contain_text("ignored")
    expect(page.locator("tr").filter(has_text="sponsorship").locator("button")).to_have_count(0)


def test_the_overview_warns_when_an_installation_has_spent_80_percent_of_its_budget(
    live_server, operator, page, screenshot
):
    from playwright.sync_api import expect

    installation = InstallationFactory(account_login="globex", monthly_budget_usd=Decimal("50"))
    log_in(page)
    expect(page.locator(".banner.budget")).to_have_count(0)

    budget_alert(installation, Budget(Decimal("42"), Decimal("50")))
    page.reload()
    expect(page.locator(".banner.budget")).to_have_text(
        re.compile(r"globex has spent \$42\.00 of its \$50\.00 review budget this month")
    )
    expect(page.locator("tr").filter(has_text="globex")).to_contain_text("84 %")
    screenshot("overview-budget")


def test_a_read_only_operator_can_look_but_finds_no_retry(live_server, page, django_user_model):
    from playwright.sync_api import expect

    django_user_model.objects.create_user("viewer", password=PASSWORD, is_staff=True)
    delivery = WebhookDeliveryFactory(event="sponsorship", status=DeliveryStatus.FAILED)
    log_in(page, "viewer")
    page.goto(f"/status/deliveries/{delivery.pk}/")
    expect(page.locator("h1")).to_contain_text("sponsorship")
    expect(page.locator("button:has-text('Retry')")).to_have_count(0)


def test_a_newcomer_creates_the_github_app_from_the_setup_page(
    live_server, operator, page, screenshot, fake_github, settings
):
    """The whole manifest flow in a browser: Tasuku's setup page, GitHub's page and its
    button, back to Tasuku with the App's credentials stored; then GitHub's deliveries,
    signed with the new App's secret, are taken."""
    from playwright.sync_api import expect

    from repos.github import credentials
    from repos.models import AppRegistration

    settings.GITHUB_API_URL = settings.GITHUB_WEB_URL = fake_github.url
    settings.GITHUB_APP_ID = settings.GITHUB_APP_SLUG = ""
    settings.GITHUB_PRIVATE_KEY = settings.GITHUB_WEBHOOK_SECRET = ""
    settings.TASUKU_BASE_URL = live_server.url
    log_in(page)
    page.goto("/setup/github/")
    expect(page.locator("h1")).to_have_text("Connect GitHub")
    page.fill("input[name=organization]", "acme")
    page.check("input[name=features][value=passes]")
    screenshot("setup-github")
    page.click("button:has-text('Create the App on GitHub')")
    # GitHub's page (the fake's), reached by the form that sent the manifest.
    expect(page.locator("h1")).to_have_text("Create GitHub App for acme")
    page.click("button:has-text('Create GitHub App for acme')")
    page.wait_for_url(re.compile(r"/setup/github/$"))
    expect(page.locator("a:has-text('Install the App')")).to_be_visible()
    row = AppRegistration.objects.get()
    assert row.owner == "acme" and row.slug.startswith("tasuku")
    secret = credentials().webhook_secret
    answer = post_webhook_live(live_server.url, "ping", payload("ping", "default"), secret=secret)
    assert answer.status_code == 200
