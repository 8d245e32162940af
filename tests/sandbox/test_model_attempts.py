"""A model call is tried again on a transient failure, and every try and wait fits in the
time the call was given (sandbox/agent/attempts.py): a model that does not answer cannot
carry a review past its deadline."""

from __future__ import annotations

import importlib
import time
from types import ModuleType

import httpx2 as httpx  # what both SDKs speak HTTP with
import pytest

from sandbox.agent import attempts
from sandbox.agent.attempts import asked_wait, retry_wait, within
from sandbox.agent.loop import DEADLINE_MARGIN
from tests.fakes.models import Fail, Hang, Loop, Reply
from tests.sandbox.test_agent_reach import checkout_made, job, provider_for

REQUEST = httpx.Request("POST", "http://model.invalid/v1/messages")


@pytest.fixture(params=["anthropic", "openai"])
def model(request, fake_anthropic, fake_openai):
    """Each engine through its real SDK, against its fake server."""
    return provider_for(request.param, fake_anthropic, fake_openai)


@pytest.fixture
def sdk(request) -> ModuleType:
    """The SDK a test is given by name, imported as the test runs: importing both at
    collection cost every test process about 2 CPU s, most of whose tests never use them."""
    return importlib.import_module(request.param)


SDKS = ["anthropic", "openai"]


@pytest.fixture
def tree(tmp_path):
    return checkout_made(tmp_path)


def status_error(sdk, status: int, headers: dict[str, str] | None = None):
    response = httpx.Response(status, headers=headers or {}, request=REQUEST)
    return sdk.APIStatusError(f"HTTP {status}", response=response, body=None)


class Clock:
    """A clock that moves only when the code sleeps or a try takes time."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def tries(clock: Clock, outcomes: list, *, takes: float = 0.0):
    """A call that, try after try, takes `takes` seconds and raises or returns the next
    outcome; the timeouts it was given are kept on it."""
    given: list[float] = []

    def call(seconds: float):
        given.append(seconds)
        clock.now += min(takes, seconds)
        outcome = outcomes.pop(0)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    call.given = given  # type: ignore[attr-defined]
    return call


# --- through the real SDKs, against the fake model servers -----------------------------


def test_a_model_that_never_answers_stops_the_review_at_its_deadline_after_one_try(model, tree):
    # The sandbox's limit is 21 s and the loop keeps 20 of them: the call has 1 s. With the
    # SDKs retrying themselves it was tried five times, 1 s each, with 6 s of waits
    # between: 11 s, and a call given more than 4 s outlasted the sandbox's limit.
    model.fake.script(Loop(Hang(60)))
    started = time.monotonic()
    result = model.review(job(model, limits={"deadline_seconds": 21}), tree)
    took = time.monotonic() - started
    assert result.incomplete.startswith("stopped at the deadline (21 s)")
    assert len(model.fake.model_requests) == 1
    assert took < DEADLINE_MARGIN  # within the time kept to hand the result back


def test_an_overloaded_model_is_tried_again_as_the_server_asks(model, tree):
    model.fake.script(
        Fail(529 if model.engine == "anthropic" else 503, headers={"retry-after-ms": "50"}),
        Fail(500, headers={"retry-after-ms": "50"}),
        Loop(Reply("no tool call")),
    )
    result = model.review(job(model, limits={"steps": 1}), tree)
    # Two failures, then the answer: three requests for the one step.
    assert len(model.fake.model_requests) == 3
    assert "step ceiling" in result.incomplete


def test_a_refused_key_is_not_tried_again(model, tree):
    model.fake.script(Loop(Fail(401)))
    with pytest.raises(Exception, match="refused the API key"):
        model.review(job(model), tree)
    assert len(model.fake.model_requests) == 1


# --- the rules, on a clock of their own ------------------------------------------------


@pytest.mark.parametrize("sdk", SDKS, indirect=True)
def test_each_try_gets_only_the_time_left_and_a_wait_past_it_is_not_waited(sdk):
    clock = Clock()
    timeout = sdk.APITimeoutError(request=REQUEST)
    call = tries(clock, [timeout, timeout, timeout], takes=3.0)
    with pytest.raises(sdk.APITimeoutError):
        within(sdk, call, 5.0, clock=clock, sleep=clock.sleep)
    # 3 s, then a wait of 0.375-0.5 s, then the 1.5-1.625 s left; then no time for a
    # wait and a try: the last failure is raised when the 5 s are up, not after them.
    first, second = call.given
    assert first == 5.0
    assert 1.5 <= second <= 1.625
    assert len(clock.slept) == 1
    assert clock.now <= 1005.0


@pytest.mark.parametrize("sdk", SDKS, indirect=True)
def test_at_most_four_tries_again_then_the_failure(sdk):
    clock = Clock()
    failures = [status_error(sdk, 503) for _ in range(6)]
    call = tries(clock, failures)
    with pytest.raises(sdk.APIStatusError):
        within(sdk, call, 600.0, clock=clock, sleep=clock.sleep)
    assert len(call.given) == 1 + attempts.RETRIES
    # The SDKs' backoff: 0.5 s doubling, each less up to a quarter.
    for n, waited in enumerate(clock.slept):
        assert 0.5 * 2**n * 0.75 <= waited <= 0.5 * 2**n


@pytest.mark.parametrize("sdk", SDKS, indirect=True)
def test_what_is_tried_again(sdk):
    connection = sdk.APIConnectionError(request=REQUEST)
    assert retry_wait(sdk, connection, 0) is not None
    for status in (408, 409, 429, 500, 502, 529):
        assert retry_wait(sdk, status_error(sdk, status), 0) is not None, status
    for status in (400, 401, 403, 404, 413, 422):
        assert retry_wait(sdk, status_error(sdk, status), 0) is None, status
    # The server's word overrides the status, either way.
    assert retry_wait(sdk, status_error(sdk, 400, {"x-should-retry": "true"}), 0) is not None
    assert retry_wait(sdk, status_error(sdk, 503, {"x-should-retry": "false"}), 0) is None
    # A response that is not what the SDK expects is not a transient failure.
    assert retry_wait(sdk, ValueError("not JSON"), 0) is None


def test_the_wait_a_server_asks_for():
    anthropic = importlib.import_module("anthropic")
    assert asked_wait(httpx.Headers({"retry-after-ms": "250"})) == 0.25
    assert asked_wait(httpx.Headers({"retry-after": "2"})) == 2.0
    assert asked_wait(httpx.Headers({})) is None
    assert asked_wait(httpx.Headers({"retry-after": "soon"})) is None
    later = time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime(time.time() + 30))
    assert 25 <= asked_wait(httpx.Headers({"retry-after": later})) <= 31
    # Asked for more than a minute, the SDKs' own backoff is used instead.
    error = status_error(anthropic, 429, {"retry-after": "3600"})
    assert retry_wait(anthropic, error, 0) <= 0.5
    assert retry_wait(anthropic, status_error(anthropic, 429, {"retry-after": "7"}), 0) == 7.0


def test_an_answer_after_a_failure_is_returned():
    anthropic = importlib.import_module("anthropic")
    clock = Clock()
    call = tries(clock, [status_error(anthropic, 529), "the answer"])
    assert within(anthropic, call, 60.0, clock=clock, sleep=clock.sleep) == "the answer"
    assert len(call.given) == 2
