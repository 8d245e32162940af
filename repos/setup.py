"""The setup page: create Tasuku's GitHub App in one click (GitHub's manifest flow), then
install it. Superusers only.

1. `/setup/github/` says which App Tasuku uses (from settings, or created here) and, with
   none, offers the form: where (github.com, a GitHub Enterprise Cloud `<name>.ghe.com`
   or a GitHub Enterprise Server host, a
   personal account or an organisation), the App's name and the optional features.
2. Sending it renders an auto-submitting form that POSTs the manifest to GitHub, with a
   `state` kept in the session. On GitHub the person clicks *Create GitHub App*.
3. GitHub sends the browser to `/setup/github/created?code=…&state=…`: the state must be
   the session's; the code is converted (`POST /app-manifests/{code}/conversions`) and
   the App's id, slug, private key and webhook secret are stored sealed
   (repos.models.AppRegistration). Settings still win when set.
4. The page then links to the App's installation page, and lists the installations and
   repositories as their `installation` deliveries arrive.
"""

from __future__ import annotations

import json
import re
import secrets
from urllib.parse import urlsplit

from django.conf import settings
from django.contrib.admin.views.decorators import user_passes_test
from django.db import transaction
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_http_methods

from repos.credentials import key_seal
from repos.github import GitHubError, registration_forget
from repos.github.config import registration, settings_name_an_app
from repos.github.manifest import FEATURES, hosts, manifest_convert, manifest_for, new_app_url
from repos.models import LOCAL_INSTALLATION, AppRegistration, Installation, Repository

ORG = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})$")
SESSION_KEY = "tasuku_manifest"

superuser_required = user_passes_test(
    lambda u: u.is_active and u.is_superuser, login_url="admin:login"
)


def _default_host() -> str:
    return urlsplit(settings.GITHUB_WEB_URL).netloc or "github.com"


def _default_name() -> str:
    host = re.sub(r"^https?://", "", settings.TASUKU_BASE_URL).split("/")[0].split(":")[0]
    return f"Tasuku ({host})"[:34]


@superuser_required
@require_http_methods(["GET", "POST"])
def setup_github(request: HttpRequest) -> HttpResponse:
    """The setup page (GET) and the manifest's hand-off to GitHub (POST)."""
    error = ""
    if request.method == "POST":
        host = request.POST.get("host", "").strip()
        try:
            # The GitHub the settings name (GITHUB_API_URL, GITHUB_WEB_URL), or another.
            web_url, api_url = (
                (settings.GITHUB_WEB_URL, settings.GITHUB_API_URL)
                if host in ("", _default_host())
                else hosts(host)
            )
        except ValueError as exc:
            error = f"GitHub host: {exc}."
        else:
            organization = request.POST.get("organization", "").strip()
            name = request.POST.get("name", "").strip() or _default_name()
            features = [f for f in request.POST.getlist("features") if f in FEATURES]
            if organization and not ORG.match(organization):
                error = f"{organization!r} is not an organisation's login."
            else:
                state = secrets.token_urlsafe(24)
                request.session[SESSION_KEY] = {"state": state, "api_url": api_url}
                manifest = manifest_for(settings.TASUKU_BASE_URL, name=name, features=features)
                return render(
                    request,
                    "repos/setup_github_post.html",
                    {
                        "action": f"{new_app_url(web_url, organization)}?state={state}",
                        "manifest": json.dumps(manifest),
                        "where": organization or "your personal account",
                        "web_url": web_url,
                    },
                )
    return _page(request, error=error)


def _page(request: HttpRequest, *, error: str = ""):
    found = registration()
    # The App's installations; command-line reviews' `local` one is no GitHub installation.
    installations = (
        Installation.objects.exclude(github_id=LOCAL_INSTALLATION)
        .prefetch_related("repositories")
        .order_by("account_login")
    )
    return render(
        request,
        "repos/setup_github.html",
        {
            "from_settings": settings_name_an_app(),
            "slug": settings.GITHUB_APP_SLUG,
            "registration": found,
            "base_url_https": settings.TASUKU_BASE_URL.startswith("https://"),
            "error": error,
            "features": FEATURES,
            "default_name": _default_name(),
            "default_host": _default_host(),
            "base_url": settings.TASUKU_BASE_URL,
            "installations": installations,
            "local_repositories": Repository.objects.filter(
                installation__github_id=LOCAL_INSTALLATION
            ).count(),
        },
        status=400 if error else 200,
    )


@superuser_required
@require_GET
def setup_github_created(request: HttpRequest) -> HttpResponse:
    """Where GitHub sends the browser back with the code."""
    pending = request.session.get(SESSION_KEY)
    state = request.GET.get("state", "")
    code = request.GET.get("code", "")
    # Compared before the session's state is spent: a link with another state (forged,
    # or an old tab's) is refused and leaves the set-up in progress as it was. As bytes:
    # compare_digest refuses a str with a non-ASCII character, and the link is anyone's.
    if (
        not pending
        or not state
        or not secrets.compare_digest(
            state.encode("utf-8", "surrogateescape"),
            str(pending.get("state", "")).encode("utf-8", "surrogateescape"),
        )
    ):
        return HttpResponseBadRequest(
            "This link did not come from the setup page in this browser session (its state "
            "does not match): start again from /setup/github/."
        )
    # Spent now: a code is good once, and so is the state that came with it.
    request.session.pop(SESSION_KEY, None)
    if not code or len(code) > 100:
        return HttpResponseBadRequest("GitHub sent no code: start again from /setup/github/.")
    try:
        made = manifest_convert(pending["api_url"], code)
    except GitHubError as exc:
        return _page(request, error=f"GitHub did not hand over the App: {exc}")
    with transaction.atomic():
        AppRegistration.objects.create(
            app_id=made.app_id,
            slug=made.slug,
            name=made.name,
            owner=made.owner,
            html_url=made.html_url,
            api_url=pending["api_url"],
            private_key_sealed=key_seal(made.pem),
            webhook_secret_sealed=key_seal(made.webhook_secret),
            client_id=made.client_id,
            client_secret_sealed=key_seal(made.client_secret),
        )
    registration_forget()
    return redirect("repos:setup_github")
