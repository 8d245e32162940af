"""Routes: the App, installations, tokens, repositories."""

from __future__ import annotations

import secrets
import time
from typing import Any

from tests.fakes.github.state import (
    PERMISSION_LEVELS,
    HTTPError,
    Installation,
    Request,
    Response,
    Token,
    iso,
)


class AppsRoutes:
    def _get_app(self, request: Request) -> Response:
        app = request.app
        assert app is not None
        return 200, self._app_json(app), {}

    def _list_installations(self, request: Request) -> Response:
        assert request.app is not None
        items = [
            self._installation_json(i)
            for i in self.installations.values()
            if i.app_id == request.app.id
        ]
        chunk, headers = self._paginate(request, items)
        return 200, chunk, headers

    def _installation_of_app(self, request: Request) -> Installation:
        installation = self.installations.get(int(request.params["id"]))
        if installation is None or request.app is None or installation.app_id != request.app.id:
            raise HTTPError(404, "Not Found")
        return installation

    def _get_installation(self, request: Request) -> Response:
        return 200, self._installation_json(self._installation_of_app(request)), {}

    def _create_token(self, request: Request) -> Response:
        installation = self._installation_of_app(request)
        if installation.suspended:
            raise HTTPError(403, "This installation has been suspended")
        body = request.body or {}
        if not isinstance(body, dict):
            raise HTTPError(400, "Problems parsing JSON")
        own = {r.id: r for r in self.repos.values() if installation.id in r.installation_ids}
        scope: frozenset[int] | None = None
        if body.get("repository_ids") is not None or body.get("repositories") is not None:
            ids = set(body.get("repository_ids") or ())
            by_name = {r.name: r.id for r in own.values()}
            for name in body.get("repositories") or ():
                if name not in by_name:
                    ids.add(-1)
                else:
                    ids.add(by_name[name])
            if len(ids) > 500:
                raise HTTPError(422, "Too many repositories: at most 500 can be listed.")
            if not ids.issubset(own):
                raise HTTPError(
                    422,
                    "There is at least one repository that does not exist or is not "
                    "accessible to the parent installation.",
                )
            scope = frozenset(ids)
        permissions = dict(installation.permissions)
        if body.get("permissions"):
            asked = body["permissions"]
            for name, level in asked.items():
                granted = installation.permissions.get(name)
                if (
                    level not in PERMISSION_LEVELS
                    or not granted
                    or PERMISSION_LEVELS[level] > PERMISSION_LEVELS[granted]
                ):
                    raise HTTPError(
                        422, "The permissions requested are not granted to this installation."
                    )
            permissions = {**asked, "metadata": "read"}
        # Tokens minted since 2026-04-27 look like `ghs_APPID_JWT` and run ~520 characters.
        value = f"ghs_{installation.app_id}_{secrets.token_urlsafe(300)}.{secrets.token_urlsafe(60)}.{secrets.token_urlsafe(20)}"
        expires = time.time() + self.token_ttl
        self.tokens[value] = Token(value, installation.id, scope, permissions, expires)
        data: dict[str, Any] = {
            "token": value,
            "expires_at": iso(expires),
            "permissions": permissions,
            "repository_selection": "selected"
            if scope is not None
            else installation.repository_selection,
        }
        if scope is not None:
            data["repositories"] = [self._repo_json(own[i]) for i in sorted(scope)]
        return 201, data, {}

    def _revoke_token(self, request: Request) -> Response:
        # Reference: https://docs.github.com/rest/apps/installations#revoke-an-installation-access-token
        token = request.token
        assert token is not None
        self.tokens.pop(token.token, None)
        self.revoked_tokens.append(token.token)
        return 204, None, {}

    def _get_repo_installation(self, request: Request) -> Response:
        repo = self.repos.get(f"{request.params['owner']}/{request.params['repo']}")
        assert request.app is not None
        # Several Apps may be installed on one repository: each sees only its own installation.
        found = [
            self.installations[i]
            for i in sorted(repo.installation_ids if repo else ())
            if i in self.installations and self.installations[i].app_id == request.app.id
        ]
        if not found:
            raise HTTPError(404, "Not Found")
        return 200, self._installation_json(found[0]), {}

    def _list_installation_repos(self, request: Request) -> Response:
        token = request.token
        assert token is not None
        if token.login is not None:
            raise HTTPError(
                403,
                "You must authenticate with an installation access token in order to list "
                "repositories for an installation.",
            )
        repos = [
            self._repo_json(r)
            for r in sorted(self.repos.values(), key=lambda r: r.id)
            if token.installation_id in r.installation_ids
            and (token.repository_ids is None or r.id in token.repository_ids)
        ]
        chunk, headers = self._paginate(request, repos)
        return 200, {"total_count": len(repos), "repositories": chunk}, headers

    def _get_repo(self, request: Request) -> Response:
        return 200, self._repo_json(self._repo_for_token(request, "metadata", "read")), {}

    # Roles as GitHub's permission endpoint folds them into the legacy `permission`.
    LEGACY_PERMISSION = {"admin": "admin", "maintain": "write", "write": "write",
                         "triage": "read", "read": "read", "none": "none"}  # fmt: skip

    def _collaborator_permission(self, request: Request) -> Response:
        # Reference: https://docs.github.com/rest/collaborators/collaborators#get-repository-permissions-for-a-user
        # Metadata: read is enough. Someone who is not a collaborator reads a public
        # repository (`read`) and nothing of a private one (`none`).
        repo = self._repo_for_token(request, "metadata", "read")
        login = request.params["username"]
        role = repo.collaborators.get(login, "none" if repo.private else "read")
        user = self._user_json(login, "User", abs(hash(login)) % 10**6)
        return 200, {
            "permission": self.LEGACY_PERMISSION[role],
            "role_name": role,
            "user": {**user, "permissions": {
                "admin": role == "admin", "maintain": role in ("admin", "maintain"),
                "push": role in ("admin", "maintain", "write"),
                "triage": role in ("admin", "maintain", "write", "triage"),
                "pull": role != "none"}, "role_name": role},
        }, {}  # fmt: skip

    def add_collaborator(self, full_name: str, login: str, role: str = "write") -> None:
        """Test helper: give `login` a role on the repository."""
        assert role in self.LEGACY_PERMISSION, role
        with self.lock:
            self.repos[full_name].collaborators[login] = role
