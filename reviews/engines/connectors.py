"""A run's connector calls on the worker (the `local` and `docker` runners): the engine's
bridge (sandbox/connectors.py) hands each call to `RunConnectors.handle`, which checks
and makes it (repos/connectors/calls.py) and keeps Tasuku's record of it; the records
are written once the engine has ended (`save`).

Everything a call needs is read before the engine starts — the reviewer's connectors,
the pull request's repository, the gateway — so the bridge's thread never touches the
database: a run's connectors are the ones allowed when its engine started. The run is
live while its lease is held (`live`); the bridge closes with the engine.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from repos.connectors.calls import CallScope, connector_call, connectors_allowed
from repos.github import GitHubGateway, RepoRef
from reviews.models import ConnectorCall, ReviewRun
from sandbox.agent.tools.connectors import input_summary
from sandbox.connectors import refused
from sandbox.contract import ConnectorAnswer

logger = logging.getLogger(__name__)


def call_record(
    run: ReviewRun, attempt: int, name: str, arguments: Any, answer: ConnectorAnswer
) -> ConnectorCall:
    """Tasuku's record of one call (not saved): the input summarised, how it went."""
    return ConnectorCall(
        run=run,
        attempt=attempt,
        name=name[:100],
        input=input_summary(arguments)[:500],
        status=answer.status,
        detail="" if answer.status == "ok" else answer.content[:1000],
        duration_ms=answer.duration_ms,
        bytes=answer.bytes,
    )


class RunConnectors:
    """The connector calls of one attempt of one run, made by the worker."""

    def __init__(
        self,
        run: ReviewRun,
        attempt: int,
        *,
        gateway: GitHubGateway | None,
        max_calls: int,
        live: Callable[[], bool] = lambda: True,
    ) -> None:
        self.run = run
        self.attempt = attempt
        self.live = live
        self.max_calls = max_calls
        self.scope = CallScope(
            allowed=connectors_allowed(run.reviewer),
            repo=RepoRef.of(run.pull_request.repository) if gateway is not None else None,
            gateway=gateway,
        )
        self.records: list[ConnectorCall] = []
        self._lock = threading.Lock()

    def handle(self, name: str, arguments: Any) -> ConnectorAnswer:
        """The bridge's handler (its thread): one call, checked, made and recorded."""
        with self._lock:
            made = len(self.records)
        if made >= self.max_calls:
            answer = refused(f"This review's {self.max_calls} connector calls are used up.")
        else:
            answer = connector_call(name, arguments, scope=self.scope)
        with self._lock:
            self.records.append(call_record(self.run, self.attempt, name, arguments, answer))
        logger.info(
            "run %s: connector %s %s in %d ms (%d bytes)",
            self.run.pk,
            name[:60],
            answer.status,
            answer.duration_ms,
            answer.bytes,
        )
        return answer

    def save(self) -> None:
        """Write the records once the bridge is closed. (A call still being made then —
        its engine was killed while waiting, and the bridge's thread not yet done — is
        not recorded.)"""
        with self._lock:
            records, self.records = self.records, []
        if records:
            ConnectorCall.objects.bulk_create(records)
