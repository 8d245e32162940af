"""One connector call, end to end, as Tasuku makes it for an engine: the connector must be
one the reviewer may use (and enabled), the input must match its schema — both checked
before anything leaves — then the call (an HTTP endpoint with the stored credential, or
a built-in kind through the gateway), its answer bounded. Whatever goes wrong becomes an
answer the model reads (`refused` or `failed`), never an exception: a connector never
fails a review.

Who asks: the worker's bridge for the `local` and `docker` runners (reviews/engines/connectors.py)
and the runner API for the `actions` runner (reviews/actions/connectors.py); each records
the call on the run.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from repos.connectors import outbound
from repos.connectors.errors import Failed, Refused
from repos.connectors.github_issue import github_issue
from repos.connectors.models import Connector, ConnectorKind
from repos.connectors.templates import TemplateError, body_fill, url_fill
from repos.credentials import KeyUnreadable
from repos.github import GitHubGateway, RepoRef
from sandbox.contract import ConnectorAnswer, ConnectorTool

MAX_INPUT_ERRORS = 10


@dataclass(frozen=True)
class CallScope:
    """What a call is checked against and made with: the reviewer's connectors (enabled
    ones, by name: loaded before the engine starts), the pull request on GitHub (None: a
    review elsewhere) and the gateway for the built-in kinds."""

    allowed: Mapping[str, Connector]
    repo: RepoRef | None = None  # the run's pull request's repository
    gateway: GitHubGateway | None = None


def connectors_allowed(reviewer: Any) -> dict[str, Connector]:
    """The enabled connectors `reviewer` (a Reviewer row) may use, by name."""
    return {c.name: c for c in reviewer.connectors.filter(enabled=True).order_by("name")}


def connector_tools(reviewer: Any) -> tuple[ConnectorTool, ...]:
    """The reviewer's connectors as a job offers them: name, description, input schema
    and how long to wait — never the endpoint, never the credential."""
    return tuple(
        ConnectorTool(
            name=c.name,
            description=c.description,
            input_schema=c.schema,
            timeout_seconds=c.timeout_seconds,
        )
        for c in connectors_allowed(reviewer).values()
    )


def input_problems(schema: dict, arguments: Any) -> list[str]:
    from jsonschema import Draft202012Validator  # loaded by a call, not at every start

    validator = Draft202012Validator(schema)
    problems = []
    for error in sorted(validator.iter_errors(arguments), key=lambda e: list(e.path)):
        where = "/".join(str(part) for part in error.path) or "(the input)"
        problems.append(f"- {where}: {error.message[:300]}")
        if len(problems) >= MAX_INPUT_ERRORS:
            break
    return problems


def connector_call(name: str, arguments: Any, *, scope: CallScope) -> ConnectorAnswer:
    """Make one call for the model; its answer, or why there is none."""
    started = time.monotonic()

    def elapsed() -> int:
        return int((time.monotonic() - started) * 1000)

    try:
        text, read = _make(name, arguments, scope)
    except Refused as exc:
        return ConnectorAnswer(status="refused", content=str(exc), duration_ms=elapsed())
    except Failed as exc:
        return ConnectorAnswer(
            status="failed", content=str(exc), duration_ms=elapsed(), bytes=exc.read
        )
    return ConnectorAnswer(status="ok", content=text, duration_ms=elapsed(), bytes=read)


def _make(name: str, arguments: Any, scope: CallScope) -> tuple[str, int]:
    connector = scope.allowed.get(name)
    if connector is None or not connector.enabled:
        allowed = ", ".join(scope.allowed) or "none"
        raise Refused(
            f"This reviewer may not use a connector named {name!r} (it may use: {allowed})."
        )
    problems = input_problems(connector.schema, arguments)
    if problems:
        raise Refused(
            f"The input does not match {name}'s schema; nothing was sent. Fix it and call "
            "again:\n" + "\n".join(problems)
        )
    if connector.kind == ConnectorKind.GITHUB_ISSUE:
        text = github_issue(
            arguments,
            repo=scope.repo,
            gateway=scope.gateway,
            max_chars=connector.max_response_bytes,
        )
        return text, len(text.encode())
    return _http(connector, arguments)


def _http(connector: Connector, arguments: dict[str, Any]) -> tuple[str, int]:
    try:
        url = url_fill(connector.url_template, arguments)
        body = None
        if connector.method == "POST":
            text = (
                body_fill(connector.body_template, arguments)
                if connector.body_template
                else json.dumps(arguments, ensure_ascii=False)
            )
            body = text.encode()
    except TemplateError as exc:
        raise Refused(f"{exc} Nothing was sent.") from exc
    try:
        secret = connector.credential()
    except KeyUnreadable as exc:
        raise Failed(
            "The connector's credential cannot be read (Tasuku's SECRET_KEY changed): an "
            "operator must enter it again."
        ) from exc
    headers = (
        {connector.credential_header: secret} if secret and connector.credential_header else {}
    )
    answer = outbound.call(
        outbound.Request(
            method=connector.method,
            url=url,
            body=body,
            headers=headers,
            secret=secret,
            hosts=tuple(connector.hosts()),
            timeout=connector.timeout_seconds,
            max_bytes=connector.max_response_bytes,
        )
    )
    return answer.text, answer.read
