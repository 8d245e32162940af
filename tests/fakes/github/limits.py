"""GitHub's rate limits by the clock, as its REST documentation describes them.

- **Primary**: each installation has a quota per resource (`core` for REST, `graphql`)
  that renews an hour after its window began. Every answer to an installation's token
  carries `x-ratelimit-limit`, `-remaining`, `-used`, `-reset` (epoch seconds) and
  `-resource`; once the quota is spent, calls are refused with 403 "API rate limit
  exceeded for installation ID N." and `x-ratelimit-remaining: 0` until the reset.
- **Secondary**: while a window lasts (GitHub's own, for too many writes at once), the
  calls it covers are refused with 403, "You have exceeded a secondary rate limit", and
  `retry-after` saying how many seconds are left.

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


@dataclass
class RateLimits:
    offset: float = 0.0
    default_limit: int = 5000
    quotas: dict[tuple[int, str], Quota] = field(default_factory=dict)
    windows: list[Window] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

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
        self, installation_id: int, method: str, path: str, *, who: str = "installation"
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
