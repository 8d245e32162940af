"""The GitHub App Tasuku needs, as a manifest (GitHub's "Registering a GitHub App from a
manifest"), and the conversion of the code GitHub returns into the App's credentials.

PERMISSIONS and EVENTS are the one list of what Tasuku asks of GitHub: the setup page
sends them, and the README's *Connect a GitHub App* is checked against them
(tests/repos/test_setup.py). The optional features add theirs (FEATURES).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import requests

from repos.github.clients import API_VERSION
from repos.github.errors import GitHubError

# What every review needs. Contents is *write* only because GitHub lets an App resolve a
# review thread with nothing less; Tasuku never pushes.
PERMISSIONS: dict[str, str] = {
    "checks": "write",
    "contents": "write",
    "pull_requests": "write",
    "metadata": "read",
    "merge_queues": "read",
}
EVENTS: list[str] = [
    "pull_request",
    "issue_comment",
    "pull_request_review_comment",
    "pull_request_review_thread",
    "merge_group",
]


@dataclass(frozen=True)
class Feature:
    label: str
    permissions: dict[str, str]
    events: list[str]


FEATURES: dict[str, Feature] = {
    "actions": Feature("Reviews on GitHub Actions runners", {"actions": "write"}, ["workflow_run"]),
    "passes": Feature(
        "Review passes (required checks and statuses)",
        {"administration": "read", "statuses": "read"},
        ["pull_request_review", "check_run", "check_suite", "status"],
    ),
    # The built-in `github_issue` connector (repos/connectors/github_issue.py).
    "issues": Feature(
        "The GitHub issue connector (model reviewers read issues)", {"issues": "read"}, []
    ),
}


# GitHub Enterprise Cloud with data residency: every host a subdomain of ghe.com.
GHE_COM = ".ghe.com"


def hosts(host: str) -> tuple[str, str]:
    """GitHub's web URL and REST API URL for `host`: github.com; GitHub Enterprise Cloud
    with data residency (`<name>.ghe.com`, whose API is `https://api.<name>.ghe.com`);
    or a GitHub Enterprise Server's name (its API is under /api/v3)."""
    host = (host or "github.com").strip().lower()
    if "://" in host:
        host = urlsplit(host).hostname or ""
    host = host.strip("/")
    if not host or any(c in host for c in "/?#@ "):
        raise ValueError(f"{host!r} is not a host name")
    if host in ("github.com", "www.github.com"):
        return "https://github.com", "https://api.github.com"
    if host.endswith(GHE_COM):
        # GitHub documents the API of a data-residency enterprise at its own subdomain,
        # not under /api/v3 as on a server (docs/configuration.md).
        name = host.removesuffix(GHE_COM).removeprefix("api.")
        if not name:
            raise ValueError(f"{host!r} names no enterprise (<name>.ghe.com)")
        return f"https://{name}{GHE_COM}", f"https://api.{name}{GHE_COM}"
    return f"https://{host}", f"https://{host}/api/v3"


def manifest_for(base_url: str, *, name: str, features: list[str]) -> dict[str, Any]:
    """The manifest of Tasuku's App, reached at `base_url`, with the optional features."""
    permissions = dict(PERMISSIONS)
    events = list(EVENTS)
    for key in features:
        feature = FEATURES[key]
        permissions.update(feature.permissions)
        events += [e for e in feature.events if e not in events]
    base = base_url.rstrip("/")
    return {
        "name": name[:34],  # GitHub's limit on an App's name
        "url": base,
        "hook_attributes": {"url": f"{base}/webhooks/github", "active": True},
        "redirect_url": f"{base}/setup/github/created",
        "setup_url": f"{base}/setup/github/",
        "description": "Reviews pull requests and keeps its findings honest across pushes.",
        "public": False,
        "default_permissions": permissions,
        "default_events": events,
    }


def new_app_url(web_url: str, organization: str = "") -> str:
    """Where the manifest is POSTed: a personal account's, or an organisation's."""
    if organization:
        return f"{web_url}/organizations/{organization}/settings/apps/new"
    return f"{web_url}/settings/apps/new"


@dataclass(frozen=True)
class Created:
    app_id: int
    slug: str
    name: str
    owner: str
    html_url: str
    pem: str
    webhook_secret: str
    client_id: str
    client_secret: str


def manifest_convert(api_url: str, code: str, *, timeout: float = 15.0) -> Created:
    """Exchange the code GitHub gave the browser for the App's credentials (no
    authentication; good once, within an hour)."""
    # Reference: https://docs.github.com/rest/apps/apps#create-a-github-app-from-a-manifest
    url = f"{api_url.rstrip('/')}/app-manifests/{requests.utils.quote(code, safe='')}/conversions"
    try:
        answer = requests.post(
            url,
            headers={"Accept": "application/vnd.github+json", "X-GitHub-Api-Version": API_VERSION},
            timeout=timeout,
        )
    except requests.RequestException as exc:
        raise GitHubError(f"GitHub did not answer ({exc})", permanent=False) from exc
    if answer.status_code == 404:
        raise GitHubError(
            "GitHub does not know this code: it is good once, for an hour. Create the App "
            "again from the setup page.",
            permanent=True,
            status=404,
        )
    if answer.status_code != 201:
        raise GitHubError(
            f"GitHub answered {answer.status_code}: {answer.text[:300]}",
            permanent=answer.status_code < 500,
            status=answer.status_code,
        )
    try:
        body = answer.json()
        return Created(
            app_id=int(body["id"]),
            slug=str(body["slug"]),
            name=str(body.get("name") or ""),
            owner=str((body.get("owner") or {}).get("login") or ""),
            html_url=str(body.get("html_url") or ""),
            pem=str(body["pem"]),
            webhook_secret=str(body.get("webhook_secret") or ""),
            client_id=str(body.get("client_id") or ""),
            client_secret=str(body.get("client_secret") or ""),
        )
    except (ValueError, KeyError, TypeError) as exc:
        raise GitHubError(f"GitHub's answer is not an App: {exc}", permanent=True) from exc
