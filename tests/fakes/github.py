"""A stateful fake of GitHub's REST API, served over real HTTP on 127.0.0.1.

Tasuku talks to it through its real gateway (PyGithub underneath), pointed here by
GITHUB_API_URL, so what is tested is the product's actual HTTP behaviour. The fake is
faithful where Tasuku's correctness depends on it:

- App JWTs are verified (RS256 against the test App's public key, `iss`, `exp` no more
  than 10 minutes ahead, `iat` not in the future) and refused with 401 otherwise.
- Installation tokens are minted by `POST /app/installations/{id}/access_tokens`,
  scoped to the repositories and permissions asked for (never more than the
  installation has: 422), expire, and are refused with 401 "Bad credentials" when
  unknown or expired. A repository outside a token's scope answers 404, a missing
  permission 403 "Resource not accessible by integration", as GitHub does.
- Lists paginate with `per_page` (max 100) and absolute `Link` headers on this host.
- Errors carry GitHub's body shape: {"message", "documentation_url", "status"}, and
  422s an `errors` list.
- A test can make the next N matching calls answer 5xx, a 403/429 rate limit, or drop
  the connection, either before or after the call took effect (`inject`).
"""

from __future__ import annotations

import json
import re
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import jwt

DOCS = "https://docs.github.com/rest"
PERMISSION_LEVELS = {"read": 1, "write": 2, "admin": 3}
DEFAULT_PERMISSIONS = {
    "checks": "write",
    "contents": "write",
    "metadata": "read",
    "pull_requests": "write",
    "issues": "write",
    "actions": "write",
}


def rsa_keypair() -> tuple[str, str]:
    """A new App key: (private PEM, public PEM)."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    private = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption(),
    ).decode()
    public = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return private, public.decode()


def iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class HTTPError(Exception):
    def __init__(
        self,
        status: int,
        message: str,
        *,
        errors: list[Any] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.errors = errors
        self.headers = headers or {}

    def body(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "message": self.message,
            "documentation_url": DOCS,
            "status": str(self.status),
        }
        if self.errors is not None:
            body["errors"] = self.errors
        return body


@dataclass
class App:
    id: int
    slug: str
    public_key: str
    name: str = "Tasuku (test)"


@dataclass
class Installation:
    id: int
    app_id: int
    account_login: str
    account_type: str = "Organization"
    account_id: int = 1000
    permissions: dict[str, str] = field(default_factory=lambda: dict(DEFAULT_PERMISSIONS))
    repository_selection: str = "selected"
    suspended: bool = False


@dataclass
class CheckRun:
    id: int
    name: str
    head_sha: str
    status: str
    conclusion: str | None
    external_id: str | None
    details_url: str | None
    output: dict[str, Any]
    started_at: str
    completed_at: str | None
    app_id: int
    actions: list[dict[str, Any]] = field(default_factory=list)
    annotations: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class PullFile:
    filename: str
    status: str = "modified"
    additions: int = 1
    deletions: int = 0
    patch: str | None = None
    previous_filename: str | None = None


@dataclass
class Pull:
    number: int
    title: str
    head_sha: str
    base_sha: str
    head_ref: str = "feature"
    base_ref: str = "main"
    body: str | None = ""
    author_login: str = "octocat"
    author_type: str = "User"
    author_id: int = 583231
    state: str = "open"
    draft: bool = False
    merged: bool = False
    files: list[PullFile] = field(default_factory=list)
    id: int = 0


@dataclass
class Repo:
    id: int
    full_name: str
    installation_id: int | None
    default_branch: str = "main"
    private: bool = False
    owner_type: str = "Organization"
    owner_id: int = 1000
    pulls: dict[int, Pull] = field(default_factory=dict)
    commits: set[str] = field(default_factory=set)

    @property
    def owner(self) -> str:
        return self.full_name.split("/", 1)[0]

    @property
    def name(self) -> str:
        return self.full_name.split("/", 1)[1]


@dataclass
class Token:
    token: str
    installation_id: int
    repository_ids: frozenset[int] | None  # None: every repository of the installation
    permissions: dict[str, str]
    expires_at: float


@dataclass
class Injection:
    """What the next `count` matching calls get instead of (or after) normal handling."""

    count: int
    status: int = 502
    method: str | None = None
    path: str | None = None  # a regex searched in the request path
    headers: dict[str, str] = field(default_factory=dict)
    body: Any = None
    after: bool = False  # handle the call first (its effect happens), then fail
    disconnect: bool = False  # close the connection without an answer

    def matches(self, method: str, path: str) -> bool:
        if self.method and self.method != method:
            return False
        return not (self.path and not re.search(self.path, path))


@dataclass
class Call:
    method: str
    path: str
    query: dict[str, list[str]]
    body: Any
    status: int
    auth: str


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, list[str]]
    body: Any
    headers: dict[str, str]
    params: dict[str, str]
    app: App | None = None
    token: Token | None = None

    def arg(self, name: str, default: str | None = None) -> str | None:
        values = self.query.get(name)
        return values[0] if values else default


Response = tuple[int, Any, dict[str, str]]
Route = tuple[str, re.Pattern[str], str, Callable[[Request], Response]]


class FakeGitHub:
    def __init__(self, *, token_ttl: float = 3600, port: int = 0) -> None:
        self.lock = threading.RLock()
        self.token_ttl = token_ttl
        self.apps: dict[int, App] = {}
        self.installations: dict[int, Installation] = {}
        self.repos: dict[str, Repo] = {}
        self.tokens: dict[str, Token] = {}
        self.check_runs: dict[int, tuple[str, CheckRun]] = {}  # id -> (repo full name, run)
        self.injections: list[Injection] = []
        self.calls: list[Call] = []
        self._ids = iter(range(10_000_000, 100_000_000))
        self.routes: list[Route] = []
        self._register_routes()
        self.server = ThreadingHTTPServer(("127.0.0.1", port), _Handler)
        self.server.daemon_threads = True
        self.server.fake = self  # type: ignore[attr-defined]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    # --- lifecycle ---

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> FakeGitHub:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def reset(self) -> None:
        with self.lock:
            self.installations.clear()
            self.repos.clear()
            self.tokens.clear()
            self.check_runs.clear()
            self.injections.clear()
            self.calls.clear()

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

    def add_pull(self, full_name: str, pull: Pull) -> Pull:
        with self.lock:
            repo = self.repos[full_name]
            pull.id = pull.id or self.next_id()
            repo.pulls[pull.number] = pull
            repo.commits.update({pull.head_sha, pull.base_sha})
            return pull

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

    def handle(self, handler: _Handler) -> None:
        parts = urlsplit(handler.path)
        path, query = parts.path.rstrip("/") or "/", parse_qs(parts.query)
        length = int(handler.headers.get("Content-Length") or 0)
        raw = handler.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        method = handler.command
        headers = {k.lower(): v for k, v in handler.headers.items()}

        injection = self._take_injection(method, path)
        if injection and not injection.after:
            self._record(method, path, query, body, injection.status, "injected")
            self._answer_injection(handler, injection)
            return

        status, payload, extra, auth = self._dispatch(method, path, query, body, headers)
        if injection:  # after=True: the call took effect, its answer is lost
            self._record(method, path, query, body, injection.status, f"{auth}, answer lost")
            self._answer_injection(handler, injection)
            return
        self._record(method, path, query, body, status, auth)
        self._send(handler, status, payload, extra)

    def _take_injection(self, method: str, path: str) -> Injection | None:
        with self.lock:
            for injection in self.injections:
                if injection.count > 0 and injection.matches(method, path):
                    injection.count -= 1
                    return injection
        return None

    def _answer_injection(self, handler: _Handler, injection: Injection) -> None:
        if injection.disconnect:
            handler.close_connection = True
            handler.connection.shutdown(2)
            return
        body = injection.body
        if body is None:
            body = {
                "message": "Server Error",
                "documentation_url": DOCS,
                "status": str(injection.status),
            }
        self._send(handler, injection.status, body, injection.headers)

    def _send(self, handler: _Handler, status: int, payload: Any, headers: dict[str, str]) -> None:
        data = b"" if payload is None else json.dumps(payload).encode()
        handler.send_response(status)
        handler.send_header("Content-Type", "application/json; charset=utf-8")
        handler.send_header("Content-Length", str(len(data)))
        handler.send_header("X-GitHub-Request-Id", secrets.token_hex(8).upper())
        for name, value in headers.items():
            handler.send_header(name, value)
        handler.end_headers()
        if data:
            handler.wfile.write(data)

    def _record(
        self, method: str, path: str, query: Any, body: Any, status: int, auth: str
    ) -> None:
        with self.lock:
            self.calls.append(Call(method, path, query, body, status, auth))

    def _dispatch(
        self,
        method: str,
        path: str,
        query: dict[str, list[str]],
        body: Any,
        headers: dict[str, str],
    ) -> tuple[int, Any, dict[str, str], str]:
        auth_kind = "none"
        try:
            for route_method, pattern, auth, fn in self.routes:
                match = pattern.fullmatch(path)
                if not match or route_method != method:
                    continue
                request = Request(method, path, query, body, headers, match.groupdict())
                auth_kind = auth
                if auth == "jwt":
                    request.app = self._authenticate_app(headers)
                elif auth == "token":
                    request.token = self._authenticate_token(headers)
                with self.lock:
                    status, payload, extra = fn(request)
                return status, payload, extra, auth_kind
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
        installation = self.installations.get(token.installation_id)
        if installation is None or installation.suspended:
            raise HTTPError(401, "Bad credentials")
        return token

    def _repo_for_token(self, request: Request, permission: str, level: str) -> Repo:
        repo = self.repos.get(f"{request.params['owner']}/{request.params['repo']}")
        token = request.token
        assert token is not None
        if (
            repo is None
            or repo.installation_id != token.installation_id
            or (token.repository_ids is not None and repo.id not in token.repository_ids)
        ):
            raise HTTPError(404, "Not Found")
        granted = token.permissions.get(permission)
        if not granted or PERMISSION_LEVELS[granted] < PERMISSION_LEVELS[level]:
            raise HTTPError(403, "Resource not accessible by integration")
        return repo

    # --- routes ---

    def _register_routes(self) -> None:
        owner_repo = r"/repos/(?P<owner>[^/]+)/(?P<repo>[^/]+)"
        table: list[tuple[str, str, str, Callable[[Request], Response]]] = [
            ("GET", r"/app", "jwt", self._get_app),
            ("GET", r"/app/installations", "jwt", self._list_installations),
            ("GET", r"/app/installations/(?P<id>\d+)", "jwt", self._get_installation),
            ("POST", r"/app/installations/(?P<id>\d+)/access_tokens", "jwt", self._create_token),
            ("GET", owner_repo + r"/installation", "jwt", self._get_repo_installation),
            ("GET", r"/installation/repositories", "token", self._list_installation_repos),
            ("GET", owner_repo, "token", self._get_repo),
            ("GET", owner_repo + r"/pulls/(?P<number>\d+)", "token", self._get_pull),
            ("GET", owner_repo + r"/pulls/(?P<number>\d+)/files", "token", self._list_pull_files),
            ("POST", owner_repo + r"/check-runs", "token", self._create_check_run),
            ("GET", owner_repo + r"/check-runs/(?P<id>\d+)", "token", self._get_check_run),
            ("PATCH", owner_repo + r"/check-runs/(?P<id>\d+)", "token", self._update_check_run),
            (
                "GET",
                owner_repo + r"/commits/(?P<ref>[^/]+)/check-runs",
                "token",
                self._list_check_runs,
            ),
        ]
        self.routes = [(m, re.compile(p), a, fn) for m, p, a, fn in table]

    # --- JSON shapes ---

    def _user_json(self, login: str, kind: str = "User", user_id: int = 1) -> dict[str, Any]:
        return {
            "login": login,
            "id": user_id,
            "node_id": f"U_{user_id}",
            "type": kind,
            "site_admin": False,
            "url": f"{self.url}/users/{login}",
            "html_url": f"{self.url}/{login}",
        }

    def _installation_json(self, installation: Installation) -> dict[str, Any]:
        return {
            "id": installation.id,
            "app_id": installation.app_id,
            "app_slug": self.apps[installation.app_id].slug,
            "account": self._user_json(
                installation.account_login, installation.account_type, installation.account_id
            ),
            "repository_selection": installation.repository_selection,
            "permissions": installation.permissions,
            "events": ["pull_request", "installation_repositories"],
            "target_type": installation.account_type,
            "access_tokens_url": f"{self.url}/app/installations/{installation.id}/access_tokens",
            "repositories_url": f"{self.url}/installation/repositories",
            "html_url": f"{self.url}/settings/installations/{installation.id}",
            "created_at": "2026-01-01T00:00:00Z",
            "updated_at": "2026-01-01T00:00:00Z",
            "suspended_at": "2026-01-02T00:00:00Z" if installation.suspended else None,
        }

    def _repo_json(self, repo: Repo) -> dict[str, Any]:
        return {
            "id": repo.id,
            "node_id": f"R_{repo.id}",
            "name": repo.name,
            "full_name": repo.full_name,
            "private": repo.private,
            "owner": self._user_json(repo.owner, repo.owner_type, repo.owner_id),
            "default_branch": repo.default_branch,
            "url": f"{self.url}/repos/{repo.full_name}",
            "html_url": f"{self.url}/{repo.full_name}",
        }

    def _pull_json(self, repo: Repo, pull: Pull) -> dict[str, Any]:
        base = f"{self.url}/repos/{repo.full_name}/pulls/{pull.number}"
        return {
            "id": pull.id,
            "node_id": f"PR_{pull.id}",
            "number": pull.number,
            "state": pull.state,
            "title": pull.title,
            "body": pull.body,
            "draft": pull.draft,
            "merged": pull.merged,
            "user": self._user_json(pull.author_login, pull.author_type, pull.author_id),
            "head": {"sha": pull.head_sha, "ref": pull.head_ref, "repo": self._repo_json(repo)},
            "base": {"sha": pull.base_sha, "ref": pull.base_ref, "repo": self._repo_json(repo)},
            "changed_files": len(pull.files),
            "additions": sum(f.additions for f in pull.files),
            "deletions": sum(f.deletions for f in pull.files),
            "url": base,
            "html_url": f"{self.url}/{repo.full_name}/pull/{pull.number}",
        }

    def _check_run_json(self, full_name: str, run: CheckRun) -> dict[str, Any]:
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
            },
            "app": {"id": run.app_id, "slug": self.apps[run.app_id].slug},
            "pull_requests": [],
            "url": f"{self.url}/repos/{full_name}/check-runs/{run.id}",
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

    # --- handlers ---

    def _get_app(self, request: Request) -> Response:
        app = request.app
        assert app is not None
        return (
            200,
            {
                "id": app.id,
                "slug": app.slug,
                "name": app.name,
                "owner": self._user_json("tasuku-org", "Organization"),
            },
            {},
        )

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
        own = {r.id: r for r in self.repos.values() if r.installation_id == installation.id}
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

    def _get_repo_installation(self, request: Request) -> Response:
        repo = self.repos.get(f"{request.params['owner']}/{request.params['repo']}")
        installation = (
            self.installations.get(repo.installation_id) if repo and repo.installation_id else None
        )
        if installation is None or request.app is None or installation.app_id != request.app.id:
            raise HTTPError(404, "Not Found")
        return 200, self._installation_json(installation), {}

    def _list_installation_repos(self, request: Request) -> Response:
        token = request.token
        assert token is not None
        repos = [
            self._repo_json(r)
            for r in sorted(self.repos.values(), key=lambda r: r.id)
            if r.installation_id == token.installation_id
            and (token.repository_ids is None or r.id in token.repository_ids)
        ]
        chunk, headers = self._paginate(request, repos)
        return 200, {"total_count": len(repos), "repositories": chunk}, headers

    def _get_repo(self, request: Request) -> Response:
        return 200, self._repo_json(self._repo_for_token(request, "metadata", "read")), {}

    def _pull(self, request: Request, repo: Repo) -> Pull:
        pull = repo.pulls.get(int(request.params["number"]))
        if pull is None:
            raise HTTPError(404, "Not Found")
        return pull

    def _get_pull(self, request: Request) -> Response:
        repo = self._repo_for_token(request, "pull_requests", "read")
        return 200, self._pull_json(repo, self._pull(request, repo)), {}

    def _list_pull_files(self, request: Request) -> Response:
        repo = self._repo_for_token(request, "pull_requests", "read")
        pull = self._pull(request, repo)
        files = []
        for f in pull.files[:3000]:  # "Responses include a maximum of 3000 files."
            item: dict[str, Any] = {
                "sha": secrets.token_hex(20),
                "filename": f.filename,
                "status": f.status,
                "additions": f.additions,
                "deletions": f.deletions,
                "changes": f.additions + f.deletions,
                "blob_url": f"{self.url}/{repo.full_name}/blob/{pull.head_sha}/{f.filename}",
                "raw_url": f"{self.url}/{repo.full_name}/raw/{pull.head_sha}/{f.filename}",
                "contents_url": f"{self.url}/repos/{repo.full_name}/contents/{f.filename}?ref={pull.head_sha}",
            }
            if f.patch is not None:  # absent for binary and very large files
                item["patch"] = f.patch
            if f.previous_filename:
                item["previous_filename"] = f.previous_filename
            files.append(item)
        chunk, headers = self._paginate(request, files)
        return 200, chunk, headers

    def _check_run_fields(self, body: dict[str, Any], run: CheckRun | None) -> dict[str, Any]:
        statuses = ("queued", "in_progress", "completed")
        conclusions = (
            "action_required", "cancelled", "failure", "neutral", "success", "skipped", "stale", "timed_out",
        )  # fmt: skip
        fields: dict[str, Any] = {}
        status = body.get("status")
        if status is not None and status not in statuses:
            raise HTTPError(
                422,
                f"Invalid request.\n\nFor 'properties/status', \"{status}\" is not a member of {list(statuses)}.",
            )
        conclusion = body.get("conclusion")
        if conclusion is not None:
            if conclusion not in conclusions:
                raise HTTPError(
                    422,
                    f"Invalid request.\n\nFor 'properties/conclusion', \"{conclusion}\" is not a member of {list(conclusions)}.",
                )
            if conclusion == "stale":
                raise HTTPError(
                    422, "Invalid request.\n\nConclusion stale can only be set by GitHub."
                )
            fields["conclusion"] = conclusion
            fields["status"] = "completed"
            fields["completed_at"] = body.get("completed_at") or iso(time.time())
        elif status == "completed" or body.get("completed_at"):
            raise HTTPError(422, 'Invalid request.\n\n"conclusion" wasn\'t supplied.')
        elif status:
            fields["status"] = status
        if "output" in body:
            output = body["output"] or {}
            if not output.get("title") or not output.get("summary"):
                raise HTTPError(
                    422, 'Invalid request.\n\n"title" and "summary" are required in "output".'
                )
            for key in ("summary", "text"):
                if output.get(key) and len(output[key]) > 65535:
                    raise HTTPError(
                        422, f'Invalid request.\n\nOnly 65535 characters are allowed in "{key}".'
                    )
            annotations = output.get("annotations") or []
            if len(annotations) > 50:
                raise HTTPError(422, "Invalid request.\n\nAt most 50 annotations per request.")
            fields["output"] = {k: output.get(k) for k in ("title", "summary", "text")}
            fields["annotations"] = (run.annotations if run else []) + annotations
        if "actions" in body:
            if len(body["actions"] or []) > 3:
                raise HTTPError(422, "Invalid request.\n\nAt most 3 actions are allowed.")
            fields["actions"] = body["actions"]
        for key in ("details_url", "external_id", "name"):
            if key in body:
                fields[key] = body[key]
        return fields

    def _create_check_run(self, request: Request) -> Response:
        repo = self._repo_for_token(request, "checks", "write")
        body = request.body if isinstance(request.body, dict) else {}
        for key in ("name", "head_sha"):
            if not body.get(key):
                raise HTTPError(422, f'Invalid request.\n\n"{key}" wasn\'t supplied.')
        if body["head_sha"] not in repo.commits:
            raise HTTPError(422, f"No commit found for SHA: {body['head_sha']}")
        fields = self._check_run_fields(body, None)
        token = request.token
        assert token is not None
        run = CheckRun(
            id=self.next_id(),
            name=body["name"],
            head_sha=body["head_sha"],
            status=fields.get("status", "queued"),
            conclusion=fields.get("conclusion"),
            external_id=fields.get("external_id"),
            details_url=fields.get("details_url"),
            output=fields.get("output", {}),
            started_at=body.get("started_at") or iso(time.time()),
            completed_at=fields.get("completed_at"),
            app_id=self.installations[token.installation_id].app_id,
            actions=fields.get("actions", []),
            annotations=fields.get("annotations", []),
        )
        self.check_runs[run.id] = (repo.full_name, run)
        return 201, self._check_run_json(repo.full_name, run), {}

    def _check_run(self, request: Request, repo: Repo) -> CheckRun:
        found = self.check_runs.get(int(request.params["id"]))
        if found is None or found[0] != repo.full_name:
            raise HTTPError(404, "Not Found")
        return found[1]

    def _get_check_run(self, request: Request) -> Response:
        repo = self._repo_for_token(request, "checks", "read")
        return 200, self._check_run_json(repo.full_name, self._check_run(request, repo)), {}

    def _update_check_run(self, request: Request) -> Response:
        repo = self._repo_for_token(request, "checks", "write")
        run = self._check_run(request, repo)
        token = request.token
        assert token is not None
        if run.app_id != self.installations[token.installation_id].app_id:
            raise HTTPError(
                403,
                f"Invalid app_id `{run.app_id}` - check run can only be modified by the "
                "GitHub App that created it.",
            )
        body = request.body if isinstance(request.body, dict) else {}
        for key, value in self._check_run_fields(body, run).items():
            setattr(run, key, value)
        if body.get("status") and body["status"] != "completed" and not body.get("conclusion"):
            run.conclusion = None
            run.completed_at = None
        return 200, self._check_run_json(repo.full_name, run), {}

    def _list_check_runs(self, request: Request) -> Response:
        repo = self._repo_for_token(request, "checks", "read")
        ref = request.params["ref"]
        name = request.arg("check_name")
        runs = [
            self._check_run_json(repo.full_name, run)
            for full_name, run in sorted(self.check_runs.values(), key=lambda item: -item[1].id)
            if full_name == repo.full_name
            and run.head_sha == ref
            and (name is None or run.name == name)
        ]
        chunk, headers = self._paginate(request, runs)
        return 200, {"total_count": len(runs), "check_runs": chunk}, headers


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: ThreadingHTTPServer

    def _serve(self) -> None:
        self.server.fake.handle(self)  # type: ignore[attr-defined]

    do_GET = do_POST = do_PATCH = do_PUT = do_DELETE = _serve

    def log_message(self, format: str, *args: Any) -> None:  # keep test output quiet
        pass
