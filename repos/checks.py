"""System checks for the GitHub App settings: a bad value is reported by variable name
at start-up (`manage.py check`, `runserver`, `migrate`, `worker`)."""

from __future__ import annotations

from urllib.parse import urlsplit

from django.conf import settings
from django.core.checks import Error, Warning, register

from repos.github import missing_settings
from repos.github.config import private_key_problem, private_key_text, settings_name_an_app


def _url_problem(value: str) -> str | None:
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        return "must be an absolute http(s) URL"
    return None


def _number_problem(value: str, *, minimum: float, integer: bool = False) -> str | None:
    try:
        number = int(value) if integer else float(value)
    except ValueError:
        return "must be a number" if not integer else "must be a whole number"
    if number < minimum:
        return f"must be at least {minimum:g}"
    return None


@register("tasuku")
def github_settings_check(app_configs: object = None, **kwargs: object) -> list:
    messages: list = []
    app_id = settings.GITHUB_APP_ID.strip()
    if app_id and not app_id.isdigit():
        messages.append(
            Error(
                f"GITHUB_APP_ID must be the App's numeric id, not {app_id!r}.",
                hint="Find it on the App's settings page (App ID).",
                id="tasuku.E001",
            )
        )
    try:
        pem, variable = private_key_text()
    except ValueError as exc:
        messages.append(Error(str(exc), id="tasuku.E002"))
    else:
        if variable:
            problem = private_key_problem(pem, variable)
            if problem:
                messages.append(
                    Error(
                        problem,
                        hint="Use the .pem file generated on the App's settings page.",
                        id="tasuku.E003",
                    )
                )
    for variable in ("GITHUB_API_URL", "TASUKU_BASE_URL"):
        problem = _url_problem(getattr(settings, variable))
        if problem:
            messages.append(
                Error(f"{variable} {problem}: {getattr(settings, variable)!r}.", id="tasuku.E004")
            )
    slug = settings.GITHUB_APP_SLUG
    if slug and not all(c.isalnum() or c == "-" for c in slug):
        messages.append(Error(f"GITHUB_APP_SLUG is not an App slug: {slug!r}.", id="tasuku.E005"))
    for variable, minimum, integer in (
        ("GITHUB_MAX_ATTEMPTS", 1, True),
        ("GITHUB_RETRY_BACKOFF", 0, False),
        ("GITHUB_MAX_RATE_LIMIT_WAIT", 0, False),
        ("GITHUB_TIMEOUT", 1, False),
        ("GITHUB_SECONDS_BETWEEN_WRITES", 0, False),
        ("GITHUB_WRITE_BURST", 1, True),
        ("GITHUB_WRITES_PER_MINUTE", 2, True),
        ("GITHUB_WRITES_PER_HOUR", 2, True),
        ("GITHUB_WRITES_AT_ONCE", 1, True),
    ):
        problem = _number_problem(
            str(getattr(settings, variable)), minimum=minimum, integer=integer
        )
        if problem:
            messages.append(
                Error(f"{variable} {problem}: {getattr(settings, variable)!r}.", id="tasuku.E006")
            )
    missing = missing_settings()
    if missing:
        messages.append(
            Warning(
                "The GitHub App is not configured (missing: " + ", ".join(missing) + ").",
                hint=(
                    "The admin, dashboard and local reviews work; the webhook endpoint "
                    "answers 503 until these are set, or until the App is created on the "
                    "setup page (/setup/github/). See the README, 'Connect a GitHub App'."
                ),
                id="tasuku.W001",
            )
        )
    elif not settings.GITHUB_APP_SLUG and settings_name_an_app():
        messages.append(
            Warning(
                "GITHUB_APP_SLUG is not set.",
                hint="Comment commands (@<slug> review) need the App's slug.",
                id="tasuku.W002",
            )
        )
    return messages


# Values people paste from examples and tutorials.
WELL_KNOWN_SECRET_KEYS = {
    "changeme", "change-me", "secret", "secret-key", "secretkey", "your-secret-key",
    "django-insecure", "please-change-me", "development", "test",
}  # fmt: skip


@register("tasuku")
def secret_key_check(app_configs: object = None, **kwargs: object) -> list:
    """A SECRET_KEY from the environment that is short, repetitive or a well-known value
    signs Tasuku's markers and seals reviewer keys weakly: an error outside DEBUG."""
    if settings.DEBUG or not getattr(settings, "SECRET_KEY_FROM_ENV", False):
        return []
    key = settings.SECRET_KEY
    weak = (
        len(key) < 32
        or len(set(key)) < 8
        or key.lower() in WELL_KNOWN_SECRET_KEYS
        or key.startswith("django-insecure")
    )
    if not weak:
        return []
    return [
        Error(
            "SECRET_KEY is weak (shorter than 32 characters, repetitive, or a well-known "
            "value): it signs Tasuku's markers and seals reviewer keys.",
            hint='Generate one: python -c "import secrets; print(secrets.token_urlsafe(50))" '
            "— and keep the old one in SECRET_KEY_FALLBACKS until `manage.py reseal_keys` "
            "has run.",
            id="tasuku.E040",
        )
    ]
