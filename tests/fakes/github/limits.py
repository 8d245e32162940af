"""GitHub's rate limits by the clock, as its REST documentation describes them.

- **Primary**: each installation has a quota per resource (`core` for REST, `graphql`)
  that renews an hour after its window began. Every answer to an installation's token
  carries `x-ratelimit-limit`, `-remaining`, `-used`, `-reset` (epoch seconds) and
  `-resource`; once the quota is spent, calls are refused with 403 "API rate limit
  exceeded for installation ID N." and `x-ratelimit-remaining: 0` until the reset.
- **Secondary**: while a window lasts (GitHub's own, for too many writes at once), the
  calls it covers are refused with 403, "You have exceeded a secondary rate limit", and
  `retry-after` saying how many seconds are left.
- **Secondary, as documented** (always on): an installation's content-generating
  requests (POST, PATCH, PUT, DELETE and GraphQL mutations with its token) — "no more
  than 80 … per minute and no more than 500 … per hour" — and its requests at once (no
  more than 100) are counted; one past a limit is refused the same way, `retry-after`
  saying when the oldest counted request leaves the window, and recorded in `hits` so a
  test can show none was met.

The clock is the real one plus an offset a test moves (`advance`), so "three minutes of
a limit" needs no sleeping: the test moves Tasuku's waits into the past and this clock
forward by the same amount.
"""

from __future__ import annotations

import math
import re
import threading
import time
from dataclasses import dataclass, field

DOCS = "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api"
HOUR = 3600.0


class Refused(Exception):
    """A call the limits refuse: its status, headers and body."""

    def __init__(self, status: int, headers: dict[str, str], message: str) -> None:
        super().__init__(message)
        self.status, self.headers, self.message = status, headers, message


@dataclass
class Quota:
    limit: int
    window: float
    used: int = 0
    reset: float | None = None  # when the current window ends (None: not begun)


SECONDARY = (
    "You have exceeded a secondary rate limit. Please wait a few minutes before you try again."
)
TOO_QUICKLY = "was submitted too quickly"


@dataclass
class Window:
    """A secondary limit: calls matching `method`/`path` are refused until `until`."""

    until: float
    method: str | None = None
    path: str | None = None  # a regex searched in the request path
    status: int = 403
    refused: int = 0  # how many calls it refused
    message: str = SECONDARY
    retry_after: bool = True  # whether the answer carries `retry-after`

    def covers(self, method: str, path: str) -> bool:
        if self.method and self.method != method:
            return False
        return not (self.path and not re.search(self.path, path))


# GitHub's documented secondary limits ("Rate limits for the REST API").
CONTENT_PER_MINUTE = 80
CONTENT_PER_HOUR = 500
CONCURRENT = 100
WRITES = ("POST", "PATCH", "PUT", "DELETE")


@dataclass(frozen=True)
class Hit:
    """A request a documented secondary limit refused."""

    installation_id: int
    limit: str  # "per minute", "per hour", "at once"
    method: str
    path: str
    at: float


def content_generating(method: str, path: str, body: object = None) -> bool:
    """Whether a request creates content as GitHub's secondary limits count it: a write
    to the REST API (a token revoked is not content), or a GraphQL mutation."""
    if path == "/graphql":
        query = body.get("query", "") if isinstance(body, dict) else ""
        return method == "POST" and query.lstrip().startswith("mutation")
    return method in WRITES and path != "/installation/token"


@dataclass
class RateLimits:
    offset: float = 0.0
    default_limit: int = 5000
    quotas: dict[tuple[int, str], Quota] = field(default_factory=dict)
    windows: list[Window] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    per_minute: int = CONTENT_PER_MINUTE
    per_hour: int = CONTENT_PER_HOUR
    concurrent: int = CONCURRENT
    # installation -> when each of its content-generating requests of the last hour came
    content: dict[int, list[float]] = field(default_factory=dict)
    in_flight: dict[int, int] = field(default_factory=dict)
    most_in_flight: dict[int, int] = field(default_factory=dict)
    hits: list[Hit] = field(default_factory=list)

    def now(self) -> float:
        return time.time() + self.offset

    def advance(self, seconds: float) -> None:
        """Time passes for GitHub."""
        with self.lock:
            self.offset += seconds

    def clear(self) -> None:
        with self.lock:
            self.offset = 0.0
            self.quotas.clear()
            self.windows.clear()
            self.content.clear()
            self.in_flight.clear()
            self.most_in_flight.clear()
            self.hits.clear()
            self.per_minute, self.per_hour = CONTENT_PER_MINUTE, CONTENT_PER_HOUR
            self.concurrent = CONCURRENT

    def documented(
        self, installation_id: int, method: str, path: str, body: object, now: float
    ) -> tuple[str, float] | None:
        """The documented secondary limit this request would pass, and the seconds until
        it would not; None when it passes none (and it is counted). Under `lock`."""
        if self.in_flight.get(installation_id, 0) >= self.concurrent:
            return "at once", 1.0
        if not content_generating(method, path, body):
            return None
        sent = [t for t in self.content.get(installation_id, []) if t > now - HOUR]
        self.content[installation_id] = sent
        last_minute = [t for t in sent if t > now - 60]
        if len(last_minute) >= self.per_minute:
            return "per minute", last_minute[-self.per_minute] + 60 - now
        if len(sent) >= self.per_hour:
            return "per hour", sent[-self.per_hour] + HOUR - now
        sent.append(now)
        return None

    def begin(self, installation_id: int) -> None:
        """A request of the installation's is being answered (counted at once)."""
        with self.lock:
            flying = self.in_flight.get(installation_id, 0) + 1
            self.in_flight[installation_id] = flying
            self.most_in_flight[installation_id] = max(
                flying, self.most_in_flight.get(installation_id, 0)
            )

    def end(self, installation_id: int) -> None:
        with self.lock:
            self.in_flight[installation_id] = max(0, self.in_flight.get(installation_id, 0) - 1)

    def content_times(self, installation_id: int) -> list[float]:
        """When the installation's content-generating requests of the last hour came."""
        with self.lock:
            return list(self.content.get(installation_id, []))

    def primary(
        self,
        installation_id: int,
        *,
        remaining: int,
        reset_in: float,
        limit: int | None = None,
        resource: str = "core",
    ) -> Quota:
        """The installation's quota now: `remaining` calls until the reset `reset_in`
        seconds from now (then a full one, for an hour)."""
        limit = limit or self.default_limit
        with self.lock:
            quota = Quota(limit=limit, window=HOUR, used=limit - remaining,
                          reset=self.now() + reset_in)  # fmt: skip
            self.quotas[(installation_id, resource)] = quota
            return quota

    def secondary(
        self,
        seconds: float,
        *,
        method: str | None = None,
        path: str | None = None,
        status: int = 403,
    ) -> Window:
        """A secondary limit on the matching calls for the next `seconds`."""
        with self.lock:
            window = Window(until=self.now() + seconds, method=method, path=path, status=status)
            self.windows.append(window)
            return window

    def too_quickly(
        self, seconds: float, *, method: str | None = "POST", path: str | None = None
    ) -> Window:
        """GitHub's content-creation limit as it has been seen to answer a review with
        many comments, or posts in a row, for the next `seconds`: 422, "was submitted
        too quickly", no `retry-after` (observed, not documented: docs/operations.md)."""
        with self.lock:
            window = Window(until=self.now() + seconds, method=method, path=path, status=422,
                            message=TOO_QUICKLY, retry_after=False)  # fmt: skip
            self.windows.append(window)
            return window

    def meter(
        self,
        installation_id: int,
        method: str,
        path: str,
        *,
        who: str = "installation",
        body: object = None,
    ) -> dict[str, str]:
        """Count one call by an installation's token (`who`: "user", a person's token,
        counted under its user's id, negated): the headers of its answer, or `Refused`
        when a limit holds."""
        resource = "graphql" if path == "/graphql" else "core"
        with self.lock:
            now = self.now()
            quota = self.quotas.setdefault(
                (installation_id, resource), Quota(limit=self.default_limit, window=HOUR)
            )
            if quota.reset is None or now >= quota.reset:
                quota.used, quota.reset = 0, now + quota.window
            spent = quota.used >= quota.limit
            if not spent:
                quota.used += 1
            headers = {
                "x-ratelimit-limit": str(quota.limit),
                "x-ratelimit-remaining": str(max(0, quota.limit - quota.used)),
                "x-ratelimit-used": str(quota.used),
                "x-ratelimit-reset": str(math.ceil(quota.reset)),
                "x-ratelimit-resource": resource,
            }
            if spent:
                raise Refused(
                    403,
                    headers,
                    f"API rate limit exceeded for {who} ID {abs(installation_id)}.",
                )
            met = self.documented(installation_id, method, path, body, now)
            if met is not None:
                limit, wait = met
                self.hits.append(Hit(installation_id, limit, method, path, now))
                raise Refused(
                    403, {**headers, "retry-after": str(max(1, math.ceil(wait)))}, SECONDARY
                )
            for window in self.windows:
                if window.until > now and window.covers(method, path):
                    window.refused += 1
                    wait = str(max(1, math.ceil(window.until - now)))
                    raise Refused(
                        window.status,
                        {**headers, "retry-after": wait} if window.retry_after else headers,
                        window.message,
                    )
            return headers
