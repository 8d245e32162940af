"""Where the intake learns how deliveries are signed. The app that holds the GitHub App's
credentials registers the source when Django starts (repos/apps.py); the intake imports
nothing above it. With no source registered, the webhook answers "not configured"."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Source:
    secret: Callable[[], str]  # the secret GitHub signs deliveries with
    missing: Callable[[], list[str]]  # what must be set before a delivery is taken


NOT_REGISTERED = ["a source of the webhook secret (the repos app is not installed)"]
_source: Source | None = None


def source_register(source: Source) -> None:
    global _source
    _source = source


def missing() -> list[str]:
    return _source.missing() if _source is not None else list(NOT_REGISTERED)


def secret() -> str:
    return _source.secret() if _source is not None else ""
