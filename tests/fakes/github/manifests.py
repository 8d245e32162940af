"""Creating a GitHub App from a manifest, on the fake GitHub, as GitHub's docs describe
"Registering a GitHub App from a manifest":

- GitHub's web UI (not the REST API): a form POSTed to `/settings/apps/new` (a personal
  account) or `/organizations/{org}/settings/apps/new`, with the `manifest` JSON in a form
  field and `state` in the query, shows a page naming the App to be created; its button
  (`/settings/apps/new/confirm`) creates the App and redirects the browser to the
  manifest's `redirect_url` with `?code=…&state=…`. The fake shows its page without a
  login (GitHub asks for one first).
- `POST /app-manifests/{code}/conversions` (no authentication) answers 201 with the App
  (`integration`) and its `client_id`, `client_secret`, `webhook_secret` and `pem`. A
  code is good once, for an hour; an unknown, used or expired one is 404.

A test can also make a code directly (`manifest_code`), as if a browser had been there.
"""

from __future__ import annotations

import html
import json
import re
import secrets
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlencode

from tests.fakes.github.shapes import integration
from tests.fakes.github.state import HTTPError, RawBody, Request, Response, rsa_keypair

CODE_LIFETIME = 3600.0


@dataclass
class Pending:
    """A manifest GitHub has been shown, waiting for the button (or converted)."""

    manifest: dict[str, Any]
    owner: str
    owner_type: str
    state: str = ""
    code: str = ""
    made_at: float = field(default_factory=time.time)
    used: bool = False


class ManifestRoutes:
    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)  # type: ignore[call-arg]
        self.manifests: dict[str, Pending] = {}  # by its page's id, and by its code
        table = [
            ("POST", r"/settings/apps/new", "none", self._manifest_page),
            (
                "POST",
                r"/organizations/(?P<org>[^/]+)/settings/apps/new",
                "none",
                self._manifest_page,
            ),  # fmt: skip
            ("GET", r"/settings/apps/new/confirm", "none", self._manifest_confirm),
            ("POST", r"/app-manifests/(?P<code>[^/]+)/conversions", "none", self._convert),
        ]
        self.routes += [(m, re.compile(p), a, fn) for m, p, a, fn in table]  # type: ignore[attr-defined]

    def reset(self) -> None:
        super().reset()  # type: ignore[misc]
        with self.lock:  # type: ignore[attr-defined]
            self.manifests.clear()

    def manifest_code(self, manifest: dict[str, Any], *, owner: str = "acme") -> str:
        """A code for `manifest`, as GitHub gives the browser after its button."""
        with self.lock:  # type: ignore[attr-defined]
            code = secrets.token_hex(10)
            self.manifests[code] = Pending(manifest, owner, "Organization", code=code)
            return code

    def _manifest_page(self, request: Request) -> Response:
        form = parse_qs(request.raw.decode(errors="replace"))
        try:
            manifest = json.loads(form["manifest"][0])
        except (KeyError, IndexError, ValueError) as exc:
            raise HTTPError(422, "Invalid GitHub App configuration") from exc
        if not isinstance(manifest, dict) or not manifest.get("url"):
            raise HTTPError(422, "Invalid GitHub App configuration")
        org = request.params.get("org")
        page_id = secrets.token_hex(8)
        self.manifests[page_id] = Pending(
            manifest, org or "octocat", "Organization" if org else "User",
            state=request.arg("state") or "",
        )  # fmt: skip
        name = html.escape(str(manifest.get("name") or "GitHub App"))
        owner = html.escape(org or "octocat")
        events = ", ".join(html.escape(str(e)) for e in manifest.get("default_events") or [])
        page = (
            f"<!doctype html><title>Create GitHub App</title><h1>Create GitHub App for {owner}</h1>"
            f"<p>App name: <strong>{name}</strong></p><p>Events: {events}</p>"
            f'<form method="get" action="/settings/apps/new/confirm">'
            f'<input type="hidden" name="id" value="{page_id}">'
            f'<button type="submit">Create GitHub App for {owner}</button></form>'
        )
        return 200, RawBody(page.encode(), "text/html; charset=utf-8"), {}

    def _manifest_confirm(self, request: Request) -> Response:
        pending = self.manifests.pop(request.arg("id") or "", None)
        if pending is None or not pending.manifest.get("redirect_url"):
            raise HTTPError(404, "Not Found")
        pending.code = secrets.token_hex(10)
        pending.made_at = time.time()
        self.manifests[pending.code] = pending
        query = {"code": pending.code}
        if pending.state:
            query["state"] = pending.state
        target = f"{pending.manifest['redirect_url']}?{urlencode(query)}"
        return 302, None, {"Location": target}

    def _convert(self, request: Request) -> Response:
        pending = self.manifests.get(request.params["code"])
        if (
            pending is None
            or pending.used
            or not pending.code
            or time.time() - pending.made_at > CODE_LIFETIME
        ):
            raise HTTPError(404, "Not Found")
        pending.used = True
        manifest = pending.manifest
        private, public = rsa_keypair()
        name = str(manifest.get("name") or "GitHub App")
        slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "app"
        app_id = self.next_id()  # type: ignore[attr-defined]
        app = self.add_app(app_id, public, slug)  # type: ignore[attr-defined]
        app.name = name
        owner = self._user_json(pending.owner, pending.owner_type, 1000)  # type: ignore[attr-defined]
        body = integration(
            self.url,  # type: ignore[attr-defined]
            app_id=app_id,
            slug=slug,
            name=name,
            owner=owner,
            permissions=manifest.get("default_permissions") or {},
            events=manifest.get("default_events") or [],
        )
        body.update(
            client_secret=secrets.token_hex(20),
            webhook_secret=(manifest.get("hook_attributes") or {}).get("secret")
            or secrets.token_hex(20),
            pem=private,
        )
        return 201, body, {}
