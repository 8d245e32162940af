"""The setup page creates Tasuku's GitHub App from a manifest: what the manifest asks
for (and that the README says the same), the hand-off to GitHub and back, the sealed
credentials Tasuku then uses, and who may do it. (tests/browser walks it in a browser.)"""

from __future__ import annotations

import html
import re
from pathlib import Path

import pytest
import requests

from repos.github import credentials, gateway, missing_settings
from repos.github.manifest import EVENTS, FEATURES, PERMISSIONS, hosts, manifest_for
from repos.models import AppRegistration
from tests.helpers import payload, post_webhook

pytestmark = pytest.mark.django_db

README = (Path(__file__).resolve().parents[2] / "README.md").read_text()
# GitHub's names on the App's settings page, for the README's list.
PERMISSION_NAMES = {
    "checks": "Checks", "contents": "Contents", "pull_requests": "Pull requests",
    "metadata": "Metadata", "merge_queues": "Merge queues", "actions": "Actions",
    "administration": "Administration", "statuses": "Commit statuses", "issues": "Issues",
}  # fmt: skip
LEVEL_NAMES = {"write": "Read and write", "read": "Read-only"}
EVENT_NAMES = {
    "pull_request": "Pull request", "issue_comment": "Issue comment",
    "pull_request_review_comment": "Pull request review comment",
    "pull_request_review_thread": "Pull request review thread", "merge_group": "Merge group",
    "workflow_run": "Workflow run", "pull_request_review": "Pull request review",
    "check_run": "Check run", "check_suite": "Check suite", "status": "Status",
}  # fmt: skip


def test_the_readme_asks_for_exactly_what_the_manifest_asks_for():
    section = README.split("## Connect a GitHub App", 1)[1].split("\n## ", 1)[0]
    everything = dict(PERMISSIONS)
    events = list(EVENTS)
    for feature in FEATURES.values():
        everything.update(feature.permissions)
        events += feature.events
    for key, level in everything.items():
        assert f"**{PERMISSION_NAMES[key]}: {LEVEL_NAMES[level]}**" in section, key
    for event in events:
        assert f"**{EVENT_NAMES[event]}**" in section, event
    manifest = manifest_for("https://t.example", name="Tasuku", features=["passes"])
    assert manifest["default_permissions"]["statuses"] == "read"
    assert manifest["hook_attributes"]["url"] == "https://t.example/webhooks/github"
    assert manifest["redirect_url"] == "https://t.example/setup/github/created"


@pytest.fixture
def github(fake_github, settings):
    """The fake GitHub, with no App configured in the settings (the setup page's case)."""
    settings.GITHUB_API_URL = settings.GITHUB_WEB_URL = fake_github.url
    settings.GITHUB_APP_ID = settings.GITHUB_APP_SLUG = ""
    settings.GITHUB_PRIVATE_KEY = settings.GITHUB_WEBHOOK_SECRET = ""
    settings.TASUKU_BASE_URL = "https://tasuku.example.test"
    return fake_github


@pytest.fixture
def superuser_client(client, django_user_model):
    client.force_login(django_user_model.objects.create_superuser("root", password="pw"))
    return client


def _browser_goes_to_github_and_back(response) -> str:
    """What the browser does with the page: POST the manifest, click GitHub's button,
    follow the redirect. Returns the URL GitHub sends it back to."""
    page = response.content.decode()
    action = html.unescape(re.search(r'<form method="post" action="([^"]+)"', page).group(1))
    manifest = html.unescape(re.search(r'name="manifest" value="([^"]*)"', page).group(1))
    shown = requests.post(action, data={"manifest": manifest}, timeout=10)
    assert shown.status_code == 200 and "Create GitHub App for acme" in shown.text
    confirm = re.search(r'name="id" value="([^"]+)"', shown.text).group(1)
    back = requests.get(action.split("/organizations/")[0] + "/settings/apps/new/confirm",
                        params={"id": confirm}, allow_redirects=False, timeout=10)  # fmt: skip
    assert back.status_code == 302
    return back.headers["Location"]


def test_a_superuser_creates_the_app_and_tasuku_uses_it_with_nothing_copied(
    github, superuser_client
):
    assert missing_settings()  # nothing configured yet
    page = superuser_client.get("/setup/github/").content.decode()
    assert "Create the App on GitHub" in page
    # (the host field's default is the GitHub the settings name: here, the fake)
    handed = superuser_client.post("/setup/github/", {
        "host": github.url.split("://")[1], "organization": "acme", "name": "Tasuku test",
        "features": ["passes"],
    })  # fmt: skip
    back = _browser_goes_to_github_and_back(handed)
    assert back.startswith("https://tasuku.example.test/setup/github/created?code=")

    done = superuser_client.get(back.split("tasuku.example.test", 1)[1])
    assert done.status_code == 302 and done["Location"] == "/setup/github/"

    row = AppRegistration.objects.get()
    assert (row.slug, row.owner, row.api_url) == ("tasuku-test", "acme", github.url)
    assert "PRIVATE KEY" not in row.private_key_sealed  # sealed, not stored as given
    assert missing_settings() == []
    creds = credentials()
    assert creds.app_id == row.app_id and "PRIVATE KEY" in creds.private_key
    # The registration's slug, not GITHUB_APP_SLUG's (known from the conversion: no GET /app).
    assert gateway().app_slug() == "tasuku-test"
    # Deliveries signed with the new App's secret are accepted.
    body = payload("ping", "default")
    ping = post_webhook(superuser_client, "ping", body, secret=creds.webhook_secret)
    assert ping.status_code == 200
    assert post_webhook(superuser_client, "ping", body, secret="guess").status_code == 401
    page = superuser_client.get("/setup/github/").content.decode()
    assert f"{row.html_url}/installations/new" in page and "Install the App" in page

    # Replaced: removed in the admin (where its secrets are never shown), the setup page
    # offers to create another, and Tasuku no longer takes deliveries for the old one.
    remove = f"/admin/repos/appregistration/{row.pk}/delete/"
    assert f'href="{remove}"' in page
    shown = superuser_client.get(f"/admin/repos/appregistration/{row.pk}/change/").content
    assert b"tasuku-test" in shown and b"sealed" not in shown and b"PRIVATE" not in shown
    assert superuser_client.post(remove, {"post": "yes"}).status_code == 302
    assert not AppRegistration.objects.exists()
    assert "Create the App on GitHub" in superuser_client.get("/setup/github/").content.decode()
    assert missing_settings()


def test_trial_installations_are_marked_and_removable_on_the_setup_page(github, superuser_client):
    from repos.models import LOCAL_INSTALLATION
    from tests.factories import InstallationFactory, RepositoryFactory

    demo = InstallationFactory(account_login="acme")
    RepositoryFactory(installation=demo, full_name="acme/shop-1204-225629")
    local = InstallationFactory(github_id=LOCAL_INSTALLATION, account_login="local")
    RepositoryFactory(installation=local, github_id=-5, full_name="local/shop")
    page = superuser_client.get("/setup/github/").content.decode()
    assert "acme/shop-1204-225629" in page
    assert f'href="/admin/repos/installation/{demo.pk}/delete/">remove</a>' in page
    assert "local/shop" not in page  # no GitHub installation: said apart
    assert "1 repository reviewed from the command line" in page


def test_the_return_refuses_another_sessions_state_and_a_code_used_once(github, superuser_client):
    handed = superuser_client.post("/setup/github/", {"host": github.url.split("://")[1],
                                                      "organization": "acme"})  # fmt: skip
    back = _browser_goes_to_github_and_back(handed).split("tasuku.example.test", 1)[1]
    forged = re.sub(r"state=[^&]+", "state=someone-elses", back)
    assert superuser_client.get(forged).status_code == 400
    assert (
        superuser_client.get(re.sub(r"state=[^&]+", "state=%C3%A9t%C3%A9", back)).status_code == 400
    )
    assert superuser_client.get(re.sub(r"&?state=[^&]+", "", back)).status_code == 400
    assert not AppRegistration.objects.exists()
    # A wrong state cancels nothing: the set-up in progress still completes, once.
    assert superuser_client.get(back).status_code == 302
    assert AppRegistration.objects.count() == 1
    assert superuser_client.get(back).status_code == 400  # the state is spent now
    AppRegistration.objects.all().delete()
    # A code GitHub no longer knows (used, or older than an hour) is said in words.
    handed = superuser_client.post("/setup/github/", {"host": github.url.split("://")[1],
                                                      "organization": "acme"})  # fmt: skip
    back = _browser_goes_to_github_and_back(handed).split("tasuku.example.test", 1)[1]
    used = re.sub(r"code=[^&]+", "code=" + "0" * 20, back)
    answer = superuser_client.get(used)
    assert answer.status_code == 400 and "good once, for an hour" in answer.content.decode()
    assert not AppRegistration.objects.exists()


def test_an_enterprise_with_data_residency_gets_its_own_api_host(github, superuser_client):
    # GitHub Enterprise Cloud with data residency: the API is api.<name>.ghe.com, not
    # /api/v3 as on a GitHub Enterprise Server.
    assert hosts("octo.ghe.com") == ("https://octo.ghe.com", "https://api.octo.ghe.com")
    assert hosts("https://api.octo.ghe.com/") == (
        "https://octo.ghe.com",
        "https://api.octo.ghe.com",
    )
    assert hosts("ghe.example.com") == ("https://ghe.example.com", "https://ghe.example.com/api/v3")
    handed = superuser_client.post(
        "/setup/github/", {"host": "octo.ghe.com", "organization": "acme"}
    )
    page = html.unescape(handed.content.decode())
    assert 'action="https://octo.ghe.com/organizations/acme/settings/apps/new?state=' in page
    assert superuser_client.session["tasuku_manifest"]["api_url"] == "https://api.octo.ghe.com"


def test_only_a_superuser_may_create_the_app(github, client, django_user_model):
    staff = django_user_model.objects.create_user("staff", password="pw", is_staff=True)
    client.force_login(staff)
    assert client.get("/setup/github/").status_code == 302  # to the login page
    assert client.post("/setup/github/", {"organization": "acme"}).status_code == 302


def test_settings_win_over_an_app_created_on_the_page(github, superuser_client, test_app, settings):
    from repos.credentials import key_seal

    settings.GITHUB_APP_ID = str(test_app.app_id)
    settings.GITHUB_PRIVATE_KEY = test_app.private_key
    settings.GITHUB_WEBHOOK_SECRET = test_app.webhook_secret

    AppRegistration.objects.create(app_id=1, slug="made-here", api_url=github.url,
                                   private_key_sealed=key_seal("x"),
                                   webhook_secret_sealed=key_seal("y"))  # fmt: skip
    assert credentials().app_id == test_app.app_id  # GITHUB_APP_ID is set
    assert (
        "the GitHub App its settings name"
        in superuser_client.get("/setup/github/").content.decode()
    )
