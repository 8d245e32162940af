"""Pytest fixtures for the fake model servers.

Register with `pytest_plugins = ["tests.fakes.models.plugin"]` in the root conftest.
One server per dialect lives for the session; each test gets it emptied, with the SDKs'
environment pointed at it (so nothing can reach a real model API by accident).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.fakes.models.anthropic_api import ANTHROPIC_TEST_KEY, FakeAnthropic
from tests.fakes.models.openai_api import OPENAI_TEST_KEY, FakeOpenAI

# A developer's own settings must not leak into requests made under test.
_ANTHROPIC_ENV = (
    "ANTHROPIC_AUTH_TOKEN",
    "ANTHROPIC_CUSTOM_HEADERS",
    "ANTHROPIC_PROFILE",
    "ANTHROPIC_WORKSPACE_ID",
)
_OPENAI_ENV = ("OPENAI_ADMIN_KEY", "OPENAI_CUSTOM_HEADERS", "OPENAI_ORG_ID", "OPENAI_PROJECT_ID")


@pytest.fixture(scope="session")
def fake_anthropic_server() -> Iterator[FakeAnthropic]:
    fake = FakeAnthropic().start()
    yield fake
    fake.stop()


@pytest.fixture(scope="session")
def fake_openai_server() -> Iterator[FakeOpenAI]:
    fake = FakeOpenAI().start()
    yield fake
    fake.stop()


@pytest.fixture
def fake_anthropic(
    fake_anthropic_server: FakeAnthropic, monkeypatch: pytest.MonkeyPatch
) -> Iterator[FakeAnthropic]:
    """The fake Anthropic, emptied, with ANTHROPIC_BASE_URL and ANTHROPIC_API_KEY
    pointing the SDK at it."""
    fake = fake_anthropic_server
    fake.reset()
    for name in _ANTHROPIC_ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", fake.base_url)
    monkeypatch.setenv("ANTHROPIC_API_KEY", ANTHROPIC_TEST_KEY)
    yield fake
    fake.reset()  # also wakes any answer still hanging


@pytest.fixture
def fake_openai(
    fake_openai_server: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> Iterator[FakeOpenAI]:
    """The fake OpenAI, emptied, with OPENAI_BASE_URL (".../v1") and OPENAI_API_KEY
    pointing the SDK at it."""
    fake = fake_openai_server
    fake.reset()
    for name in _OPENAI_ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("OPENAI_BASE_URL", fake.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI_TEST_KEY)
    yield fake
    fake.reset()
