"""Webhook payloads held to GitHub's published schemas (@octokit/webhooks-schemas,
vendored in `github-webhooks.json.gz` by tests/contract/vendor.py).

The schema holds one definition per event and action (`pull_request$opened`) and one per
event without actions (`ping$event`); a payload is checked against the one its
`X-GitHub-Event` header and `action` member name. `tests.helpers.post_webhook` checks
every payload a test sends (`validate=False` for the ones a test sends malformed on
purpose). jsonschema-rs gives the verdict; python's `jsonschema` names the problems of a
payload it rejects, and its verdict stands (as for the REST checks:
tests/fakes/github/contract.py).
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import jsonschema_rs

from tests.fakes.github.contract import (
    _format_checker,
    _problem,
    compile_fast,
    fast_accepts,
    fast_formats,
)

WEBHOOKS_FILE = Path(__file__).resolve().parent / "github-webhooks.json.gz"


@cache
def webhook_schema() -> dict[str, Any]:
    with gzip.open(WEBHOOKS_FILE, "rt", encoding="utf-8") as f:
        return json.load(f)


def _schema_of(definition: str) -> dict[str, Any]:
    # The one definition, beside all of them (its $refs point into `definitions`).
    return {
        "$schema": webhook_schema()["$schema"],
        "definitions": webhook_schema()["definitions"],
        "$ref": f"#/definitions/{definition}",
    }


@cache
def _validator(definition: str) -> jsonschema.Draft7Validator:
    return jsonschema.Draft7Validator(_schema_of(definition), format_checker=_format_checker())


@cache
def _fast_validator(definition: str) -> jsonschema_rs.Validator | None:
    return compile_fast(_schema_of(definition), jsonschema_rs.Draft7Validator, _fast_formats())


@cache
def _fast_formats() -> dict[str, Callable[[Any], bool]]:
    return fast_formats(webhook_schema())


def definition_for(event: str, action: str | None) -> str | None:
    """The schema's definition of `event` with `action` (None if it has none)."""
    definitions = webhook_schema()["definitions"]
    for name in (f"{event}${action}" if action is not None else None, f"{event}$event"):
        if name is not None and name in definitions:
            return name
    return None


def webhook_violations(event: str, payload: Any) -> list[str]:
    """Each way `payload`, sent as `event`, departs from GitHub's schema: `/pointer:
    complaint` lines, empty when it conforms."""
    action = payload.get("action") if isinstance(payload, dict) else None
    definition = definition_for(event, action)
    if definition is None:
        return [f"GitHub's webhook schema has no event {event!r} with action {action!r}"]
    if fast_accepts(_fast_validator(definition), payload):
        return []
    errors = sorted(
        _validator(definition).iter_errors(payload), key=lambda e: list(e.absolute_path)
    )
    return [f"{pointer or '/'}: {message}" for pointer, message in map(_problem, errors)]


def assert_valid_webhook(event: str, payload: Any) -> None:
    """Fail the test when `payload` is not what GitHub sends as `event`."""
    problems = webhook_violations(event, payload)
    if problems:
        action = payload.get("action") if isinstance(payload, dict) else None
        lines = "\n  ".join(problems[:20])
        more = f"\n  … and {len(problems) - 20} more" if len(problems) > 20 else ""
        raise AssertionError(
            f"webhook {event} (action {action!r}) is not what GitHub sends, by "
            f"@octokit/webhooks-schemas:\n  {lines}{more}\n(a payload sent malformed on "
            "purpose: post_webhook(..., validate=False))"
        )
