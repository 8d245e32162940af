"""The App's credentials (from settings, or the App created on the setup page) and the
gateway's retry policy."""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from django.conf import settings

from repos.credentials import KeyUnreadable, key_open
from repos.github.errors import GitHubError, GitHubNotConfigured


@dataclass(frozen=True)
class AppCredentials:
    app_id: int
    private_key: str
    webhook_secret: str
    slug: str
    base_url: str


@dataclass(frozen=True)
class RetryPolicy:
    max_attempts: int
    backoff: float
    max_rate_limit_wait: float
    timeout: int
    seconds_between_requests: float | None
    # An installation's writes: `write_burst` at once, then one every
    # `seconds_between_writes` (repos/github/pacing.py); None: not paced.
    seconds_between_writes: float | None
    write_burst: int = 1
    # GitHub's documented secondary limits for an installation's content-creating
    # requests, and how many of its writes may be in flight at once (the budget every
    # process shares: repos/github/budget.py).
    writes_per_minute: int = 80
    writes_per_hour: int = 500
    writes_at_once: int = 10


def private_key_text() -> tuple[str, str | None]:
    """The PEM text of the App's private key and the variable it came from.

    Raises ValueError naming the variable when the key cannot be read.
    """
    inline = settings.GITHUB_PRIVATE_KEY.strip()
    path = settings.GITHUB_PRIVATE_KEY_PATH.strip()
    if inline and path:
        raise ValueError(
            "GITHUB_PRIVATE_KEY and GITHUB_PRIVATE_KEY_PATH are both set; set only one."
        )
    if inline:
        # Keys pasted into one-line environment files arrive with literal "\n".
        return inline.replace("\\n", "\n"), "GITHUB_PRIVATE_KEY"
    if path:
        try:
            return Path(path).expanduser().read_text(), "GITHUB_PRIVATE_KEY_PATH"
        except OSError as exc:
            raise ValueError(
                f"GITHUB_PRIVATE_KEY_PATH: cannot read {path!r}: {exc.strerror or exc}"
            ) from exc
    return "", None


@functools.lru_cache(maxsize=8)
def private_key_problem(pem: str, variable: str) -> str | None:
    """Why `pem` is not an RSA private key GitHub could have issued, or None. Parsing an
    RSA key costs tens of milliseconds, and every gateway checks its key: the verdict
    on a key is kept."""
    try:
        key = serialization.load_pem_private_key(pem.encode(), password=None)
    except (ValueError, TypeError) as exc:
        return f"{variable} is not a PEM private key ({exc})."
    if not isinstance(key, rsa.RSAPrivateKey):
        return f"{variable} is not an RSA key; GitHub App keys are RSA (RS256)."
    return None


# --- The App created from a manifest (repos/setup.py), when no setting names one ---

REGISTRATION_TTL = 30.0  # seconds a process keeps what it read (another may have set one)
_registration: tuple[float, Any] | None = None


def settings_name_an_app() -> bool:
    return bool(
        settings.GITHUB_APP_ID
        or settings.GITHUB_PRIVATE_KEY
        or settings.GITHUB_PRIVATE_KEY_PATH
        or settings.GITHUB_WEBHOOK_SECRET
    )


def registration() -> Any:
    """The App created on the setup page (repos.models.AppRegistration), while no
    GITHUB_* setting names an App (settings win), else None. Read at most every
    REGISTRATION_TTL seconds; None when the database cannot say."""
    global _registration
    if settings_name_an_app():
        return None
    now = time.monotonic()
    if _registration is not None and now - _registration[0] < REGISTRATION_TTL:
        return _registration[1]
    from django.apps import apps

    try:
        found = apps.get_model("repos", "AppRegistration").objects.first()
    except Exception:  # no table yet (before migrate), no database: it cannot say
        return None
    _registration = (now, found)
    return found


def registration_forget() -> None:
    """Read the registration afresh next time (after the setup page saved one)."""
    global _registration
    _registration = None


def webhook_secret() -> str:
    """The secret GitHub signs deliveries with: GITHUB_WEBHOOK_SECRET, or the created
    App's."""
    if settings.GITHUB_WEBHOOK_SECRET or settings_name_an_app():
        return settings.GITHUB_WEBHOOK_SECRET
    found = registration()
    if found is None:
        return ""
    return _opened(found.webhook_secret_sealed)


@functools.lru_cache(maxsize=4)
def _opened(sealed: str) -> str:
    """A sealed secret, opened once: the webhook intake asks for it on every delivery."""
    return key_open(sealed)


def missing_settings() -> list[str]:
    """Names of the variables without which Tasuku cannot talk to GitHub (none when the
    App was created on the setup page)."""
    if not settings_name_an_app() and registration() is not None:
        return []
    missing = []
    if not settings.GITHUB_APP_ID:
        missing.append("GITHUB_APP_ID")
    if not (settings.GITHUB_PRIVATE_KEY or settings.GITHUB_PRIVATE_KEY_PATH):
        missing.append("GITHUB_PRIVATE_KEY or GITHUB_PRIVATE_KEY_PATH")
    if not settings.GITHUB_WEBHOOK_SECRET:
        missing.append("GITHUB_WEBHOOK_SECRET")
    return missing


def credentials() -> AppCredentials:
    """The App's credentials, or GitHubNotConfigured naming what is missing.

    Malformed values are reported by the system checks at start-up; here they are
    permanent errors (a run cannot fix them).
    """
    missing = missing_settings()
    if missing:
        raise GitHubNotConfigured(missing)
    found = registration()
    if found is not None:
        try:
            pem, secret = key_open(found.private_key_sealed), key_open(found.webhook_secret_sealed)
        except KeyUnreadable as exc:
            raise GitHubError(
                f"The GitHub App created on the setup page cannot be read: {exc}",
                permanent=True,
                code="github-credentials",
            ) from exc
        return AppCredentials(
            app_id=found.app_id,
            private_key=pem,
            webhook_secret=secret,
            slug=found.slug,
            base_url=found.api_url.rstrip("/"),
        )
    try:
        app_id = int(settings.GITHUB_APP_ID)
        pem, variable = private_key_text()
    except ValueError as exc:
        raise GitHubError(
            f"GitHub App misconfigured: {exc}", permanent=True, code="github-credentials"
        ) from exc
    problem = private_key_problem(pem, variable or "")
    if problem:
        raise GitHubError(
            f"GitHub App misconfigured: {problem}", permanent=True, code="github-credentials"
        )
    return AppCredentials(
        app_id=app_id,
        private_key=pem,
        webhook_secret=settings.GITHUB_WEBHOOK_SECRET,
        slug=settings.GITHUB_APP_SLUG,
        base_url=settings.GITHUB_API_URL,
    )


def retry_policy() -> RetryPolicy:
    return RetryPolicy(
        max_attempts=max(1, int(settings.GITHUB_MAX_ATTEMPTS)),
        backoff=float(settings.GITHUB_RETRY_BACKOFF),
        max_rate_limit_wait=float(settings.GITHUB_MAX_RATE_LIMIT_WAIT),
        timeout=int(float(settings.GITHUB_TIMEOUT)),
        seconds_between_requests=settings.GITHUB_SECONDS_BETWEEN_REQUESTS,
        seconds_between_writes=float(settings.GITHUB_SECONDS_BETWEEN_WRITES or 0) or None,
        write_burst=max(1, int(settings.GITHUB_WRITE_BURST)),
        writes_per_minute=max(2, int(settings.GITHUB_WRITES_PER_MINUTE)),
        writes_per_hour=max(2, int(settings.GITHUB_WRITES_PER_HOUR)),
        writes_at_once=max(1, int(settings.GITHUB_WRITES_AT_ONCE)),
    )
