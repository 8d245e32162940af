"""One model call, tried again on a transient failure, all of it within its timeout.

Both SDKs retry a failed request themselves, but each try gets the call's whole timeout
and the waits between tries come on top: a call given the 1 s left before a review's
deadline took 11 s against a model that did not answer (five tries of 1 s and 6 s of
waits), and one given 30 s could outlast the 20 s the loop keeps to hand its result
back, so the sandbox killed the engine and the review said so instead of "stopped at
the deadline". Here the SDK makes one try a call (its clients are made with
`max_retries=0`), each try gets only the time left, and a wait that would end past the
timeout is not waited: the last failure is raised at once.

What is tried again, and how long to wait, follow the SDKs' own rules (both are
generated alike): a connection error or timeout, HTTP 408, 409, 429 and 5xx, unless the
server's `x-should-retry` says otherwise; the wait the server asks for in
`retry-after-ms` or `retry-after` (up to 60 s), else 0.5 s doubling to at most 8 s, less
up to a quarter at random.
"""

from __future__ import annotations

import email.utils
import random
import time
from collections.abc import Callable
from types import ModuleType
from typing import TypeVar

T = TypeVar("T")

RETRIES = 4  # tries after the first, as the SDKs' clients had
# A try is not started with less time than this left: it could not finish.
LEAST_TRY = 0.5
RETRIED_STATUSES = frozenset({408, 409, 429})
LONGEST_ASKED_WAIT = 60.0


def within(
    sdk: ModuleType,
    call: Callable[[float], T],
    timeout: float,
    *,
    retries: int = RETRIES,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    """`call(seconds)` (one request with that timeout, from the SDK module `sdk`),
    tried again as the SDKs would, every try and wait within `timeout` seconds of now.
    Raises the SDK's exception of the last try."""
    deadline = clock() + timeout
    attempt = 0
    while True:
        try:
            return call(max(deadline - clock(), 0.001))
        except sdk.APIError as exc:
            wait = retry_wait(sdk, exc, attempt)
            if wait is None or attempt >= retries or clock() + wait + LEAST_TRY > deadline:
                raise
        sleep(wait)
        attempt += 1


def retry_wait(sdk: ModuleType, exc: Exception, attempt: int) -> float | None:
    """Seconds to wait before trying again after `exc` (the `attempt`th retry counts
    from 0), or None when it is not tried again."""
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None) or {}
    should = str(headers.get("x-should-retry", "")).lower()
    if should == "false":
        return None
    if should != "true":
        if isinstance(exc, sdk.APIStatusError):
            status = exc.status_code
            if status not in RETRIED_STATUSES and status < 500:
                return None
        elif not isinstance(exc, sdk.APIConnectionError):
            return None
    asked = asked_wait(headers)
    if asked is not None and 0 < asked <= LONGEST_ASKED_WAIT:
        return asked
    return min(0.5 * 2**attempt, 8.0) * (1 - 0.25 * random.random())  # noqa: S311 (jitter)


def asked_wait(headers) -> float | None:  # type: ignore[no-untyped-def]
    """The wait a response asks for (`retry-after-ms`, then `retry-after` in seconds or
    as an HTTP date), or None."""
    try:
        return float(headers.get("retry-after-ms")) / 1000
    except (TypeError, ValueError):
        pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        pass
    try:
        when = email.utils.parsedate_to_datetime(str(value))
    except (TypeError, ValueError, IndexError):
        return None
    return when.timestamp() - time.time()
