"""The fake GitHub's HTTP server: plumbing, authentication, JSON shapes."""

from __future__ import annotations

import base64
import json
import re
import secrets
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import jwt

from tests.fakes.github import shapes
from tests.fakes.github.contract import Contract
from tests.fakes.github.git import GitRepo
from tests.fakes.github.limits import RateLimits, Refused
from tests.fakes.github.state import (
    DEFAULT_PERMISSIONS,
    DOCS,
    PERMISSION_LEVELS,
    App,
    Call,
    CheckRun,
    HTTPError,
    Injection,
    Installation,
    Pull,
    RawBody,
    Repo,
    Request,
    Response,
    Route,
    Token,
)


class FakeGitHubBase:
    """Server, state set-up, plumbing, authentication and JSON shapes; the routes live
    in mixins (apps, pulls, checks, git)."""

    def __init__(self, *, token_ttl: float = 3600, port: int = 0) -> None:
        self.lock = threading.RLock()
        self.token_ttl = self._initial_token_ttl = token_ttl
        self.apps: dict[int, App] = {}
        self.installations: dict[int, Installation] = {}
        self.repos: dict[str, Repo] = {}
        self.tokens: dict[str, Token] = {}
        self.revoked_tokens: list[str] = []  # DELETE /installation/token, in order
        self.check_runs: dict[int, tuple[str, CheckRun]] = {}  # id -> (repo full name, run)
        self.injections: list[Injection] = []
        self.limits = RateLimits()
        self.calls: list[Call] = []
        self.contract = Contract()  # checks every exchange against GitHub's description
        self._ids = iter(range(10_000_000, 100_000_000))
        self.git_root = Path(tempfile.mkdtemp(prefix="fake-github-git-"))
        self.routes: list[Route] = []
        self._register_routes()
        self.server = _Server(("127.0.0.1", port), _Handler)
        self.server.fake = self  # type: ignore[attr-defined]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    # --- lifecycle ---

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> FakeGitHubBase:
        self.thread.start()
        return self

    def stop(self) -> None:
        if self.thread.is_alive():
            self.server.shutdown()  # waits for the serving loop: never call it on none
        self.server.server_close()
        shutil.rmtree(self.git_root, ignore_errors=True)

    def reset(self) -> None:
        with self.lock:
            for repo in self.repos.values():
                if repo.git_dir is not None:
                    shutil.rmtree(repo.git_dir, ignore_errors=True)
            self.installations.clear()
            self.repos.clear()
            self.tokens.clear()
            self.revoked_tokens.clear()
            self.check_runs.clear()
            self.injections.clear()
            self.limits.clear()
            self.calls.clear()
            self.contract.clear()
            self.token_ttl = self._initial_token_ttl  # a test may have shortened it

    # --- state set-up for tests ---

    def next_id(self) -> int:
        return next(self._ids)

    def add_app(self, app_id: int, public_key: str, slug: str = "tasuku-test") -> App:
        with self.lock:
            app = App(id=app_id, slug=slug, public_key=public_key)
            self.apps[app_id] = app
            return app

    def add_installation(
        self, installation_id: int, account_login: str, **kwargs: Any
    ) -> Installation:
        with self.lock:
            app_id = kwargs.pop("app_id", next(iter(self.apps)))
            installation = Installation(
                id=installation_id, app_id=app_id, account_login=account_login, **kwargs
            )
            self.installations[installation_id] = installation
            return installation

    def add_repo(
        self,
        full_name: str,
        *,
        installation_id: int | None,
        repo_id: int | None = None,
        **kwargs: Any,
    ) -> Repo:
        with self.lock:
            repo = Repo(
                id=repo_id or self.next_id(),
                full_name=full_name,
                installation_id=installation_id,
                **kwargs,
            )
            self.repos[full_name] = repo
            return repo

    def install_repo(self, full_name: str, installation_id: int) -> Repo:
        """Give `full_name` to one more installation (another App's): each App then
        reaches it through its own installation."""
        with self.lock:
            repo = self.repos[full_name]
            if repo.installation_id is None:
                repo.installation_id = installation_id
            elif installation_id != repo.installation_id:
                repo.other_installation_ids.add(installation_id)
            return repo

    def add_git_repo(
        self, full_name: str, *, installation_id: int | None, **kwargs: Any
    ) -> tuple[Repo, GitRepo]:
        """A repository backed by a real bare git repository, served for cloning."""
        git = GitRepo.init(self.git_root / f"{full_name.replace('/', '__')}.git")
        repo = self.add_repo(
            full_name, installation_id=installation_id, git_dir=git.git_dir, **kwargs
        )
        return repo, git

    def add_pull(self, full_name: str, pull: Pull) -> Pull:
        with self.lock:
            repo = self.repos[full_name]
            pull.id = pull.id or self.next_id()
            repo.pulls[pull.number] = pull
            repo.commits.update({pull.head_sha, pull.base_sha})
            return pull

    def user_token(self, login: str, *, user_id: int | None = None) -> str:
        """A personal access token of `login` (classic, `repo` scope): it reads public
        repositories and those `login` collaborates on (`Repo.collaborators`), and posts
        as `login`."""
        with self.lock:
            value = "ghp_" + secrets.token_urlsafe(27)
            self.tokens[value] = Token(
                token=value,
                installation_id=None,
                repository_ids=None,
                permissions={},
                expires_at=time.time() + 365 * 24 * 3600,
                login=login,
                user_id=user_id or self.next_id(),
            )
            return value

    def slow(self, count: int = 1, *, seconds: float, **kwargs: Any) -> Injection:
        """Answer the next `count` matching calls normally, `seconds` late (with
        `after=True` the call takes effect first, then the answer waits)."""
        return self.inject(count, status=None, delay=seconds, **kwargs)

    def inject(self, count: int = 1, **kwargs: Any) -> Injection:
        """Make the next `count` matching calls fail; see `Injection`."""
        with self.lock:
            injection = Injection(count=count, **kwargs)
            self.injections.append(injection)
            return injection

    def rate_limit(
        self, count: int = 1, *, status: int = 403, retry_after: float | None = None, **kwargs: Any
    ) -> Injection:
        """The next `count` calls are rate limited the way GitHub does it: a primary
        limit is a 403 with `x-ratelimit-remaining: 0` and the reset time; a 429 or a
        secondary limit carries `Retry-After`."""
        if retry_after is not None:
            headers = {"retry-after": str(retry_after)}
            message = (
                "You have exceeded a secondary rate limit. Please wait a few minutes "
                "before you try again."
            )
        else:
            headers = {
                "x-ratelimit-limit": "5000",
                "x-ratelimit-remaining": "0",
                "x-ratelimit-used": "5000",
                "x-ratelimit-reset": str(int(time.time()) + 1),
                "x-ratelimit-resource": "core",
            }
            message = "API rate limit exceeded for installation ID 1."
        return self.inject(
            count,
            status=status,
            headers=headers,
            body={"message": message, "documentation_url": DOCS, "status": str(status)},
            **kwargs,
        )

    def expire_tokens(self) -> None:
        with self.lock:
            for token in self.tokens.values():
                token.expires_at = time.time() - 1

    def requests(self, method: str | None = None, path: str | None = None) -> list[Call]:
        with self.lock:
            return [
                c
                for c in self.calls
                if (method is None or c.method == method)
                and (path is None or re.search(path, c.path))
            ]

    def check_runs_of(self, full_name: str) -> list[CheckRun]:
        with self.lock:
            return [run for repo, run in self.check_runs.values() if repo == full_name]

    # --- HTTP plumbing ---

    @staticmethod
    def _read_body(handler: _Handler) -> bytes:
        if handler.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks = []
            while True:
                size = int(handler.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    handler.rfile.readline()
                    return b"".join(chunks)
                chunks.append(handler.rfile.read(size))
                handler.rfile.readline()
        length = int(handler.headers.get("Content-Length") or 0)
        return handler.rfile.read(length) if length else b""

    def handle(self, handler: _Handler) -> None:
        arrived = time.monotonic()
        parts = urlsplit(handler.path)
        path, query = parts.path.rstrip("/") or "/", parse_qs(parts.query)
        raw = self._read_body(handler)
        try:
            body = (
                json.loads(raw)
                if raw and not path.endswith(("git-upload-pack", "git-receive-pack"))
                else None
            )
        except ValueError:
            body = None
        method = handler.command
        headers = {k.lower(): v for k, v in handler.headers.items()}
        handler.contract_exchange = self.contract.request(method, path, query, body, raw)

        injection = self._take_injection(method, path)
        if injection and not injection.after:
            if injection.delay:
                time.sleep(injection.delay)
            if injection.status is not None or injection.disconnect:
                self._record(method, path, query, body, injection.status or 0, "injected",
                             arrived=arrived)  # fmt: skip
                self._answer_injection(handler, injection)
                return

        status, payload, extra, auth = self._dispatch(method, path, query, body, headers, raw)
        if injection and injection.after:
            if injection.delay:
                time.sleep(injection.delay)
            if injection.status is not None or injection.disconnect:
                # The call took effect; its answer is lost.
                self._record(
                    method,
                    path,
                    query,
                    body,
                    injection.status or 0,
                    f"{auth}, answer lost",
                    arrived=arrived,
                )
                self._answer_injection(handler, injection)
                return
        self._record(method, path, query, body, status, auth, headers, arrived=arrived)
        self._send(handler, status, payload, extra)

    def _take_injection(self, method: str, path: str) -> Injection | None:
        with self.lock:
            for injection in self.injections:
                if injection.count > 0 and injection.matches(method, path):
                    if injection.skip > 0:
                        injection.skip -= 1
                        return None
                    injection.count -= 1
                    return injection
        return None

    def _answer_injection(self, handler: _Handler, injection: Injection) -> None:
        if injection.disconnect:
            handler.close_connection = True
            handler.connection.shutdown(2)
            return
        body = injection.body
        if injection.status in (204, 304):
            body = None  # no content: GitHub sends no body (a 204 dispatch, a 304)
        elif body is None:
            body = {
                "message": "Server Error",
                "documentation_url": DOCS,
                "status": str(injection.status),
            }
        self._send(handler, injection.status, body, injection.headers)

    def _send(self, handler: _Handler, status: int, payload: Any, headers: dict[str, str]) -> None:
        if isinstance(payload, RawBody):
            data, content_type = payload.data, payload.content_type
        else:
            data = b"" if payload is None else json.dumps(payload).encode()
            content_type = "application/json; charset=utf-8"
        self.contract.response(
            getattr(handler, "contract_exchange", None),
            status,
            payload,
            json_body=not isinstance(payload, RawBody),
        )
        handler.send_response(status)
        handler.send_header("Content-Type", content_type)
        handler.send_header("Content-Length", str(len(data)))
        handler.send_header("X-GitHub-Request-Id", secrets.token_hex(8).upper())
        for name, value in headers.items():
            handler.send_header(name, value)
        handler.end_headers()
        if data:
            handler.wfile.write(data)

    def _record(
        self,
        method: str,
        path: str,
        query: Any,
        body: Any,
        status: int,
        auth: str,
        headers: dict[str, str] | None = None,
        *,
        arrived: float | None = None,
    ) -> None:
        scheme, _, credential = (headers or {}).get("authorization", "").partition(" ")
        token = credential if auth == "token" and scheme.lower() in ("token", "bearer") else ""
        if scheme.lower() == "basic" and ".git/" in path:
            # Git sends the installation token as HTTP Basic's password.
            try:
                token = base64.b64decode(credential).decode().partition(":")[2]
            except (ValueError, UnicodeDecodeError):
                token = ""
        call = Call(method, path, query, body, status, auth, token)
        if arrived is not None:
            call.at = arrived
        with self.lock:
            self.calls.append(call)

    def _dispatch(
        self,
        method: str,
        path: str,
        query: dict[str, list[str]],
        body: Any,
        headers: dict[str, str],
        raw: bytes = b"",
    ) -> tuple[int, Any, dict[str, str], str]:
        auth_kind = "none"
        try:
            for route_method, pattern, auth, fn in self.routes:
                match = pattern.fullmatch(path)
                if not match or route_method != method:
                    continue
                request = Request(method, path, query, body, headers, match.groupdict(), raw=raw)
                auth_kind = auth
                if auth == "jwt":
                    request.app = self._authenticate_app(headers)
                elif auth == "token":
                    request.token = self._authenticate_token(headers)
                metered = {}
                flying = None
                if request.token is not None and ".git/" not in path:
                    # Git's own transport is not the REST API's: not metered.
                    token = request.token
                    counted_as = (
                        token.installation_id
                        if token.installation_id is not None
                        else -token.user_id
                    )
                    try:
                        metered = (
                            self.limits.meter(counted_as, method, path, body=body)
                            if token.installation_id is not None
                            else self.limits.meter(counted_as, method, path, who="user", body=body)
                        )
                    except Refused as refused:
                        raise HTTPError(
                            refused.status, refused.message, headers=refused.headers
                        ) from None
                    flying = counted_as
                    self.limits.begin(flying)
                try:
                    with self.lock:
                        status, payload, extra = fn(request)
                finally:
                    if flying is not None:
                        self.limits.end(flying)
                return status, payload, {**metered, **extra}, auth_kind
            raise HTTPError(404, "Not Found")
        except HTTPError as exc:
            return exc.status, exc.body(), exc.headers, auth_kind

    # --- authentication ---

    def _authenticate_app(self, headers: dict[str, str]) -> App:
        scheme, _, credential = headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not credential:
            raise HTTPError(401, "A JSON web token could not be decoded")
        try:
            claims = jwt.decode(credential, options={"verify_signature": False})
            app = self.apps[int(claims["iss"])]
        except (jwt.PyJWTError, KeyError, ValueError, TypeError) as exc:
            raise HTTPError(401, "A JSON web token could not be decoded") from exc
        now = time.time()
        try:
            claims = jwt.decode(
                credential,
                app.public_key,
                algorithms=["RS256"],
                options={"require": ["exp", "iat", "iss"]},
            )
        except jwt.ExpiredSignatureError as exc:
            raise HTTPError(
                401,
                "'Expiration time' claim ('exp') must be a numeric value representing the future time at which the assertion expires",
            ) from exc
        except jwt.ImmatureSignatureError as exc:
            raise HTTPError(
                401,
                "'Issued at' claim ('iat') must be an Integer representing the time that the assertion was issued",
            ) from exc
        except jwt.PyJWTError as exc:
            raise HTTPError(401, "A JSON web token could not be decoded") from exc
        if claims["exp"] > now + 600 + 5:
            raise HTTPError(401, "'Expiration time' claim ('exp') is too far in the future")
        if claims["iat"] > now + 60:
            raise HTTPError(
                401,
                "'Issued at' claim ('iat') must be an Integer representing the time that the assertion was issued",
            )
        return app

    def _authenticate_token(self, headers: dict[str, str]) -> Token:
        scheme, _, credential = headers.get("authorization", "").partition(" ")
        token = self.tokens.get(credential) if scheme.lower() in ("token", "bearer") else None
        if token is None or token.expires_at <= time.time():
            raise HTTPError(401, "Bad credentials")
        if token.login is not None:
            return token  # a person's token: no installation behind it
        installation = self.installations.get(token.installation_id)
        if installation is None or installation.suspended:
            raise HTTPError(401, "Bad credentials")
        return token

    def _repo_for_token(self, request: Request, permission: str, level: str) -> Repo:
        repo = self.repos.get(f"{request.params['owner']}/{request.params['repo']}")
        token = request.token
        assert token is not None
        if token.login is not None:
            return self._repo_for_person(repo, token.login, permission, level)
        if (
            repo is None
            or token.installation_id not in repo.installation_ids
            or (token.repository_ids is not None and repo.id not in token.repository_ids)
        ):
            raise HTTPError(404, "Not Found")
        granted = token.permissions.get(permission)
        if not granted or PERMISSION_LEVELS[granted] < PERMISSION_LEVELS[level]:
            raise HTTPError(403, "Resource not accessible by integration")
        return repo

    def _repo_for_person(self, repo: Repo | None, login: str, permission: str, level: str) -> Repo:
        """What a person's token reaches: a public repository, or one its user
        collaborates on (else 404, as GitHub hides a private repository). Anyone who can
        read a repository may review and comment on its pull requests and issues; other
        writes need write access; check runs only an App may write."""
        role = repo.collaborators.get(login) if repo is not None else None
        if repo is None or (repo.private and role is None):
            raise HTTPError(404, "Not Found")
        if level == "read" or permission in ("pull_requests", "issues"):
            return repo
        if permission == "checks":
            # Reference: https://docs.github.com/rest/checks/runs ("OAuth apps and
            # authenticated users are not able to create a check run")
            raise HTTPError(403, "You must authenticate via a GitHub App.")
        if role not in ("admin", "maintain", "write"):
            raise HTTPError(403, "Resource not accessible by personal access token")
        return repo

    # --- routes ---

    def _register_routes(self) -> None:
        owner_repo = r"/repos/(?P<owner>[^/]+)/(?P<repo>[^/]+)"
        table: list[tuple[str, str, str, Callable[[Request], Response]]] = [
            ("GET", r"/app", "jwt", self._get_app),
            ("GET", r"/app/installations", "jwt", self._list_installations),
            ("GET", r"/app/installations/(?P<id>\d+)", "jwt", self._get_installation),
            ("POST", r"/app/installations/(?P<id>\d+)/access_tokens", "jwt", self._create_token),
            ("DELETE", r"/installation/token", "token", self._revoke_token),
            ("GET", owner_repo + r"/installation", "jwt", self._get_repo_installation),
            ("GET", r"/installation/repositories", "token", self._list_installation_repos),
            ("GET", owner_repo, "token", self._get_repo),
            (
                "GET",
                owner_repo + r"/collaborators/(?P<username>[^/]+)/permission",
                "token",
                self._collaborator_permission,
            ),
            ("GET", owner_repo + r"/pulls/(?P<number>\d+)", "token", self._get_pull),
            ("GET", owner_repo + r"/pulls/(?P<number>\d+)/files", "token", self._list_pull_files),
            ("GET", owner_repo + r"/pulls/(?P<number>\d+)/reviews", "token", self._list_reviews),
            ("POST", owner_repo + r"/pulls/(?P<number>\d+)/reviews", "token", self._create_review),
            (
                "GET",
                owner_repo + r"/pulls/(?P<number>\d+)/reviews/(?P<id>\d+)",
                "token",
                self._get_review,
            ),
            (
                "PUT",
                owner_repo + r"/pulls/(?P<number>\d+)/reviews/(?P<id>\d+)",
                "token",
                self._update_review,
            ),
            (
                "DELETE",
                owner_repo + r"/pulls/(?P<number>\d+)/reviews/(?P<id>\d+)",
                "token",
                self._delete_review,
            ),
            (
                "GET",
                owner_repo + r"/pulls/(?P<number>\d+)/reviews/(?P<id>\d+)/comments",
                "token",
                self._list_review_comments_of,
            ),
            (
                "GET",
                owner_repo + r"/pulls/(?P<number>\d+)/comments",
                "token",
                self._list_review_comments,
            ),
            (
                "GET",
                r"/(?P<owner>[^/]+)/(?P<repo>[^/]+)\.git/(?P<service_path>info/refs|git-upload-pack|git-receive-pack)",
                "none",
                self._git_http,
            ),
            (
                "POST",
                r"/(?P<owner>[^/]+)/(?P<repo>[^/]+)\.git/(?P<service_path>git-upload-pack|git-receive-pack)",
                "none",
                self._git_http,
            ),
            (
                "POST",
                owner_repo + r"/pulls/(?P<number>\d+)/comments/(?P<id>\d+)/replies",
                "token",
                self._reply,
            ),
            (
                "PUT",
                owner_repo + r"/pulls/(?P<number>\d+)/reviews/(?P<id>\d+)/dismissals",
                "token",
                self._dismiss_review,
            ),
            (
                "DELETE",
                owner_repo + r"/pulls/(?P<number>\d+)/requested_reviewers",
                "token",
                self._remove_requested_reviewers,
            ),
            (
                "GET",
                owner_repo + r"/issues/(?P<number>\d+)/comments",
                "token",
                self._list_issue_comments,
            ),
            (
                "POST",
                owner_repo + r"/issues/(?P<number>\d+)/comments",
                "token",
                self._create_issue_comment,
            ),
            (
                "PATCH",
                owner_repo + r"/issues/comments/(?P<id>\d+)",
                "token",
                self._update_issue_comment,
            ),
            ("POST", r"/graphql", "token", self._graphql),
            ("POST", owner_repo + r"/check-runs", "token", self._create_check_run),
            ("GET", owner_repo + r"/check-runs/(?P<id>\d+)", "token", self._get_check_run),
            ("PATCH", owner_repo + r"/check-runs/(?P<id>\d+)", "token", self._update_check_run),
            (
                "GET",
                owner_repo + r"/commits/(?P<ref>[^/]+)/check-runs",
                "token",
                self._list_check_runs,
            ),
            ("GET", owner_repo + r"/commits/(?P<ref>[^/]+)/status", "token", self._combined_status),
            ("POST", owner_repo + r"/statuses/(?P<sha>[^/]+)", "token", self._create_status),
            (
                "GET",
                owner_repo + r"/branches/(?P<branch>.+)/protection/required_status_checks",
                "token",
                self._required_status_checks,
            ),
        ]
        self.routes = [(m, re.compile(p), a, fn) for m, p, a, fn in table]

    # --- JSON shapes ---

    def _user_json(self, login: str, kind: str = "User", user_id: int = 1) -> dict[str, Any]:
        return shapes.user(self.url, login, kind, user_id)

    def _app_json(self, app: App) -> dict[str, Any]:
        """The App as GitHub shows it (`integration`), owned by the organization that
        registered it."""
        return shapes.integration(
            self.url,
            app_id=app.id,
            slug=app.slug,
            name=app.name,
            owner=self._user_json("tasuku-org", "Organization", 1000),
            permissions=DEFAULT_PERMISSIONS,
            events=["check_run", "check_suite", "pull_request", "pull_request_review"],
        )

    def _installation_json(self, installation: Installation) -> dict[str, Any]:
        account = self._user_json(
            installation.account_login, installation.account_type, installation.account_id
        )
        return {
            "id": installation.id,
            "client_id": f"Iv1.{installation.app_id:016x}",
            "app_id": installation.app_id,
            "app_slug": self.apps[installation.app_id].slug,
            "account": account,
            "repository_selection": installation.repository_selection,
            "permissions": installation.permissions,
            "events": ["pull_request", "installation_repositories"],
            "target_id": installation.account_id,
            "target_type": installation.account_type,
            "single_file_name": None,
            "has_multiple_single_files": False,
            "single_file_paths": [],
            "access_tokens_url": f"{self.url}/app/installations/{installation.id}/access_tokens",
            "repositories_url": f"{self.url}/installation/repositories",
            "html_url": f"{self.url}/settings/installations/{installation.id}",
            "created_at": "2026-01-01T00:00:00Z",
            "updated_at": "2026-01-01T00:00:00Z",
            "suspended_at": "2026-01-02T00:00:00Z" if installation.suspended else None,
            "suspended_by": account if installation.suspended else None,
        }

    def _repo_json(self, repo: Repo) -> dict[str, Any]:
        return shapes.repository(
            self.url,
            repo_id=repo.id,
            full_name=repo.full_name,
            private=repo.private,
            owner=self._user_json(repo.owner, repo.owner_type, repo.owner_id),
            default_branch=repo.default_branch,
        )

    def _head_json(self, repo: Repo, pull: Pull, owner: dict[str, Any]) -> dict[str, Any]:
        """The pull request's head: a branch of the repository itself, of a fork (its own
        repository, `fork: true`), or of a fork since deleted (`repo: null`)."""
        if pull.head_repo == "":
            return {"label": f"{repo.owner}:{pull.head_ref}", "ref": pull.head_ref,
                    "sha": pull.head_sha, "user": owner, "repo": self._repo_json(repo)}  # fmt: skip
        if pull.head_repo is None:
            return {"label": f"unknown:{pull.head_ref}", "ref": pull.head_ref,
                    "sha": pull.head_sha, "user": owner, "repo": None}  # fmt: skip
        fork_owner = pull.head_repo.partition("/")[0]
        fork = Repo(id=repo.id + 500_000, full_name=pull.head_repo, installation_id=None,
                    owner_type="User", owner_id=abs(hash(fork_owner)) % 10**6)  # fmt: skip
        data = self._repo_json(fork)
        data["fork"] = True
        return {"label": f"{fork_owner}:{pull.head_ref}", "ref": pull.head_ref,
                "sha": pull.head_sha, "user": data["owner"], "repo": data}  # fmt: skip

    def _pull_json(self, repo: Repo, pull: Pull) -> dict[str, Any]:
        files = self._files_of(repo, pull)  # type: ignore[attr-defined]
        owner = self._user_json(repo.owner, repo.owner_type, repo.owner_id)
        closed_at = None if pull.state == "open" else shapes.CREATED_AT
        return {
            **shapes.pull_urls(self.url, repo.full_name, pull.number, pull.head_sha),
            "id": pull.id,
            "node_id": f"PR_{pull.id}",
            "number": pull.number,
            "state": pull.state,
            "locked": False,
            "title": pull.title,
            "body": pull.body,
            "draft": pull.draft,
            "user": self._user_json(pull.author_login, pull.author_type, pull.author_id),
            "labels": [],
            "milestone": None,
            "active_lock_reason": None,
            "created_at": shapes.CREATED_AT,
            "updated_at": shapes.CREATED_AT,
            "closed_at": closed_at,
            "merged_at": closed_at if pull.merged else None,
            "merge_commit_sha": None,
            "assignee": None,
            "assignees": [],
            "requested_reviewers": [
                self._user_json(login, "User", abs(hash(login)) % 10**6)
                for login in pull.requested_reviewers
            ],
            "requested_teams": [],
            "head": self._head_json(repo, pull, owner),
            "base": {
                "label": f"{repo.owner}:{pull.base_ref}",
                "ref": pull.base_ref,
                "sha": pull.base_sha,
                "user": owner,
                "repo": self._repo_json(repo),
            },
            "_links": shapes.pull_links(self.url, repo.full_name, pull.number, pull.head_sha),
            "author_association": "NONE",
            "auto_merge": None,
            "merged": pull.merged,
            "mergeable": None,  # GitHub computes it in the background: null until then
            "rebaseable": None,
            "mergeable_state": "unknown",
            "merged_by": None,
            "comments": sum(
                1 for c in repo.issue_comments.values() if c.get("_number") == pull.number
            ),
            "review_comments": sum(
                1 for c in repo.review_comments.values() if c.get("_number") == pull.number
            ),
            "maintainer_can_modify": False,
            "commits": 1,
            "changed_files": len(files),
            "additions": sum(f.additions for f in files),
            "deletions": sum(f.deletions for f in files),
        }

    def _pull_ref_json(self, repo: Repo, pull: Pull) -> dict[str, Any]:
        """A pull request as check runs and check suites list it."""
        ref_repo = {"id": repo.id, "url": f"{self.url}/repos/{repo.full_name}", "name": repo.name}
        return {
            "url": f"{self.url}/repos/{repo.full_name}/pulls/{pull.number}",
            "id": pull.id,
            "number": pull.number,
            "head": {"ref": pull.head_ref, "sha": pull.head_sha, "repo": ref_repo},
            "base": {"ref": pull.base_ref, "sha": pull.base_sha, "repo": ref_repo},
        }

    def _check_suite_id(self, full_name: str, app_id: int, head_sha: str) -> int:
        """The check suite of an App's runs on a commit (GitHub makes one per App and
        commit by default)."""
        suites = self.__dict__.setdefault("_check_suite_ids", {})
        key = (full_name, app_id, head_sha)
        if key not in suites:
            suites[key] = self.next_id()
        return suites[key]

    def _check_run_json(self, full_name: str, run: CheckRun) -> dict[str, Any]:
        url = f"{self.url}/repos/{full_name}/check-runs/{run.id}"
        return {
            "id": run.id,
            "node_id": f"CR_{run.id}",
            "name": run.name,
            "head_sha": run.head_sha,
            "status": run.status,
            "conclusion": run.conclusion,
            "external_id": run.external_id,
            "details_url": run.details_url,
            "started_at": run.started_at,
            "completed_at": run.completed_at,
            "output": {
                "title": run.output.get("title"),
                "summary": run.output.get("summary"),
                "text": run.output.get("text"),
                "annotations_count": len(run.annotations),
                "annotations_url": f"{url}/annotations",
            },
            "check_suite": {"id": self._check_suite_id(full_name, run.app_id, run.head_sha)},
            "app": self._app_json(self.apps[run.app_id]),
            # "Pull requests that are open with a head_sha or head_branch that matches the check."
            "pull_requests": [
                self._pull_ref_json(self.repos[full_name], pull)
                for pull in self.repos[full_name].pulls.values()
                if pull.head_sha == run.head_sha and pull.state == "open"
            ],
            "url": url,
            "html_url": f"{self.url}/{full_name}/runs/{run.id}",
        }

    def _paginate(self, request: Request, items: list[Any]) -> tuple[list[Any], dict[str, str]]:
        try:
            per_page = min(100, max(1, int(request.arg("per_page", "30") or 30)))
            page = max(1, int(request.arg("page", "1") or 1))
        except ValueError as exc:
            raise HTTPError(422, "Invalid request: per_page and page must be integers") from exc
        last = max(1, -(-len(items) // per_page))
        chunk = items[(page - 1) * per_page : page * per_page]
        links = []
        params = {k: v[0] for k, v in request.query.items()}

        def link(number: int, rel: str) -> str:
            query = urlencode({**params, "per_page": per_page, "page": number})
            return f'<{self.url}{request.path}?{query}>; rel="{rel}"'

        if page < last:
            links += [link(page + 1, "next"), link(last, "last")]
        if page > 1:
            links += [link(1, "first"), link(page - 1, "prev")]
        return chunk, ({"Link": ", ".join(links)} if links else {})


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that hung up before its answer was written (a review stopped mid-call,
        # a request timed out on purpose) is GitHub's everyday life, not the fake's error:
        # a traceback for it on the run's output hid the ones that are.
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # A kept-alive connection answered in several writes meets Nagle's algorithm and the
    # client's delayed ACK: 40 ms a call that a real server does not take.
    disable_nagle_algorithm = True
    server: ThreadingHTTPServer

    def _serve(self) -> None:
        self.server.fake.handle(self)  # type: ignore[attr-defined]

    do_GET = do_POST = do_PATCH = do_PUT = do_DELETE = _serve

    def log_message(self, format: str, *args: Any) -> None:  # keep test output quiet
        pass
