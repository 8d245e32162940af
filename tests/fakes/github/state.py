"""The fake GitHub's state and request plumbing types."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

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
    # The head branch's repository: "" the base's own; "owner/name" a fork; None a fork
    # since deleted (GitHub then answers `"repo": null`; the head stays reachable from
    # the base's refs/pull/<n>/head).
    head_repo: str | None = ""
    body: str | None = ""
    author_login: str = "octocat"
    author_type: str = "User"
    author_id: int = 583231
    state: str = "open"
    draft: bool = False
    merged: bool = False
    files: list[PullFile] = field(default_factory=list)
    id: int = 0
    requested_reviewers: list[str] = field(default_factory=list)


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
    git_dir: Path | None = None  # a bare repository served over smart HTTP
    reviews: dict[int, dict[str, Any]] = field(default_factory=dict)
    review_comments: dict[int, dict[str, Any]] = field(default_factory=dict)
    # thread id -> {"id", "first": top-level comment id, "isResolved", "resolvedBy"}
    threads: dict[str, dict[str, Any]] = field(default_factory=dict)
    # (path, line) that GitHub does not count as part of a pull request's diff (RIGHT)
    outside_diff: set[tuple[str, int]] = field(default_factory=set)
    issue_comments: dict[int, dict[str, Any]] = field(default_factory=dict)
    # branch -> names of its required status checks ([]: protected, none required)
    protection: dict[str, list[str]] = field(default_factory=dict)
    statuses: list[dict[str, Any]] = field(default_factory=list)  # commit statuses, oldest first
    # installations of other Apps that were also given this repository
    other_installation_ids: set[int] = field(default_factory=set)
    # login -> role: admin | maintain | write | triage | read (collaborators, teams and
    # organisation base permissions folded into one, as GitHub's permission endpoint does)
    collaborators: dict[str, str] = field(default_factory=dict)

    @property
    def installation_ids(self) -> set[int]:
        """Every installation that reaches this repository (one per App at most)."""
        own = {self.installation_id} if self.installation_id is not None else set()
        return own | self.other_installation_ids

    @property
    def owner(self) -> str:
        return self.full_name.split("/", 1)[0]

    @property
    def name(self) -> str:
        return self.full_name.split("/", 1)[1]


@dataclass
class Token:
    token: str
    installation_id: int | None  # None: a person's token (`login`)
    repository_ids: frozenset[int] | None  # None: every repository of the installation
    permissions: dict[str, str]
    expires_at: float
    # A person's token (a classic personal access token with the `repo` scope, or the
    # one `gh auth token` prints): it acts as this user, on what the user may reach.
    login: str | None = None
    user_id: int = 0


@dataclass
class Injection:
    """What the next `count` matching calls get instead of (or after) normal handling."""

    count: int
    status: int | None = 502  # None: answer normally (with `delay`, a slow GitHub)
    method: str | None = None
    path: str | None = None  # a regex searched in the request path
    headers: dict[str, str] = field(default_factory=dict)
    body: Any = None
    after: bool = False  # handle the call first (its effect happens), then fail
    disconnect: bool = False  # close the connection without an answer
    delay: float = 0.0  # seconds to wait (before handling, or after it with `after`)
    skip: int = 0  # matching calls to let through untouched first

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
    token: str = ""  # the installation token it was made with, if any
    at: float = field(default_factory=time.monotonic)  # when it arrived


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
    raw: bytes = b""

    def arg(self, name: str, default: str | None = None) -> str | None:
        values = self.query.get(name)
        return values[0] if values else default


@dataclass(frozen=True)
class RawBody:
    """A non-JSON answer (git's smart HTTP, a diff)."""

    data: bytes
    content_type: str


Response = tuple[int, Any, dict[str, str]]
Route = tuple[str, re.Pattern[str], str, Callable[[Request], Response]]
