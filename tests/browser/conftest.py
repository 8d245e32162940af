"""A real browser for the dashboard's tests: Playwright driving Debian's Chromium
(`apt-get install chromium`; .ci/run installs it). Playwright's own browser download is
never used. Without /usr/bin/chromium the tests are skipped, saying why."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

CHROMIUM = Path(os.environ.get("TASUKU_CHROMIUM", "/usr/bin/chromium"))
# Screenshots of the main pages, taken on every run; git-ignored (tests/artifacts/).
SCREENSHOTS = Path(__file__).resolve().parents[1] / "artifacts" / "screenshots"


@pytest.fixture(scope="session")
def browser() -> Iterator[object]:
    if not CHROMIUM.exists():
        pytest.skip(f"no Chromium at {CHROMIUM}: apt-get install chromium (.ci/run does)")
    playwright_api = pytest.importorskip("playwright.sync_api")
    # Playwright's sync API runs an event loop in this thread; the tests' own ORM calls
    # are still synchronous, which Django would otherwise refuse beside a running loop.
    previous = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    manager = playwright_api.sync_playwright().start()
    chromium = manager.chromium.launch(
        executable_path=str(CHROMIUM),
        headless=True,
        args=["--no-sandbox", "--disable-background-networking", "--disable-dev-shm-usage"],
    )
    try:
        yield chromium
    finally:
        chromium.close()
        manager.stop()
        if previous is None:
            os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        else:
            os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = previous


@pytest.fixture
def page(browser, live_server) -> Iterator[object]:
    context = browser.new_context(base_url=live_server.url, viewport={"width": 1360, "height": 900})
    context.set_default_timeout(15_000)
    tab = context.new_page()
    try:
        yield tab
    finally:
        context.close()


@pytest.fixture
def screenshot(page):
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)

    def take(name: str, *, full_page: bool = True) -> Path:
        path = SCREENSHOTS / f"{name}.png"
        page.screenshot(path=str(path), full_page=full_page)
        return path

    return take
