"""Routes and set-up for the App's webhook delivery log on the fake GitHub.

- `GET /app/hook/deliveries` (App JWT) answers as GitHub's "list deliveries for an App
  webhook" does: the App's delivery attempts newest first, `per_page` (at most 100) a
  page, the next page named by a `cursor` in an absolute `Link` header, `status=success`
  / `failure` by status-code range.
- `POST /app/hook/deliveries/{id}/attempts` (App JWT): 202 `{}`; the fake records the
  ask and adds the redelivery attempt to the log (`redelivery: true`, the same `guid`),
  answered with `redelivery_status` (a test sets what Tasuku "answered" then). An
  unknown id is 404.

A test records what GitHub tried to deliver with `hook_delivery_add` (e.g. an attempt
Tasuku answered 503 because its database was down).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from tests.fakes.github.state import HTTPError, Request, Response, iso


@dataclass
class HookAttempt:
    id: int
    guid: str
    app_id: int
    event: str
    action: str | None
    status_code: int
    delivered_at: datetime
    redelivery: bool = False
    installation_id: int | None = None
    repository_id: int | None = None

    def json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "guid": self.guid,
            "delivered_at": iso(self.delivered_at.timestamp()),
            "redelivery": self.redelivery,
            "duration": 0.05,
            "status": "OK" if 200 <= self.status_code < 400 else (
                f"Invalid HTTP Response: {self.status_code}" if self.status_code
                else "We couldn't deliver this payload: timed out"
            ),
            "status_code": self.status_code,
            "event": self.event,
            "action": self.action,
            "installation_id": self.installation_id,
            "repository_id": self.repository_id,
            "throttled_at": None,
        }  # fmt: skip


@dataclass
class HookLog:
    attempts: list[HookAttempt] = field(default_factory=list)
    asked: list[int] = field(default_factory=list)  # attempt ids asked to be redelivered
    next_id: int = 9_000_000_001
    redelivery_status: int = 202  # what a redelivery attempt gets from Tasuku


class HookRoutes:
    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)  # type: ignore[call-arg]
        self.hooks = HookLog()
        table = [
            ("GET", r"/app/hook/deliveries", "jwt", self._hook_deliveries),
            ("POST", r"/app/hook/deliveries/(?P<id>\d+)/attempts", "jwt", self._hook_redeliver),
        ]
        self.routes += [(m, re.compile(p), a, fn) for m, p, a, fn in table]  # type: ignore[attr-defined]

    def reset(self) -> None:
        super().reset()  # type: ignore[misc]
        with self.lock:  # type: ignore[attr-defined]
            self.hooks = HookLog()

    def hook_delivery_add(
        self, app_id: int, guid: str, event: str, *, status_code: int, delivered_at: datetime,
        action: str | None = None, installation_id: int | None = None,
    ) -> HookAttempt:  # fmt: skip
        with self.lock:  # type: ignore[attr-defined]
            attempt = HookAttempt(
                id=self.hooks.next_id, guid=guid, app_id=app_id, event=event, action=action,
                status_code=status_code, delivered_at=delivered_at,
                installation_id=installation_id,
            )  # fmt: skip
            self.hooks.next_id += 1
            self.hooks.attempts.append(attempt)
            return attempt

    def _hook_deliveries(self, request: Request) -> Response:
        assert request.app is not None
        items = sorted(
            (a for a in self.hooks.attempts if a.app_id == request.app.id),
            key=lambda a: (a.delivered_at, a.id),
            reverse=True,
        )
        wanted = request.arg("status")
        if wanted == "success":
            items = [a for a in items if 200 <= a.status_code < 400]
        elif wanted == "failure":
            items = [a for a in items if not 200 <= a.status_code < 400]
        per_page = min(100, int(request.arg("per_page") or 30))
        cursor = request.arg("cursor")
        start = 0
        if cursor:
            ids = [str(a.id) for a in items]
            if cursor not in ids:
                raise HTTPError(422, "Validation Failed", errors=[{"message": "bad cursor"}])
            start = ids.index(cursor)
        page = items[start : start + per_page]
        headers = {}
        if start + per_page < len(items):
            following = items[start + per_page].id
            url = f"{self.url}/app/hook/deliveries?per_page={per_page}&cursor={following}"  # type: ignore[attr-defined]
            headers["Link"] = f'<{url}>; rel="next"'
        return 200, [a.json() for a in page], headers

    def _hook_redeliver(self, request: Request) -> Response:
        assert request.app is not None
        attempt_id = int(request.params["id"])
        found = next(
            (a for a in self.hooks.attempts if a.id == attempt_id and a.app_id == request.app.id),
            None,
        )
        if found is None:
            raise HTTPError(404, "Not Found")
        self.hooks.asked.append(attempt_id)
        again = HookAttempt(
            id=self.hooks.next_id, guid=found.guid, app_id=found.app_id, event=found.event,
            action=found.action, status_code=self.hooks.redelivery_status,
            delivered_at=datetime.now(tz=found.delivered_at.tzinfo), redelivery=True,
            installation_id=found.installation_id,
        )  # fmt: skip
        self.hooks.next_id += 1
        self.hooks.attempts.append(again)
        return 202, {}, {}
