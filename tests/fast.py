"""The inner loop: `pytest --fast` (`make test-fast`) runs every test that starts no process
and drives no browser (docs/testing.md).

Which tests start one is known from what they did, not guessed: `tests/external.txt`
lists every test (by its function: all its parametrisations together) that, in a run
watched by tests/costs.py, started a process (git, a worker, a server, a linter, an
engine of the sandbox's fork server) or drove Chromium, with the seconds it took then.
`--fast` deselects those; a whole run starts them first, the longest first (the tail of
a run on several processes is then short tests, not a long one begun last). A run with
`--external-update` adds the tests it saw start one and writes the seconds each took (a
listed test keeps its line: some start a process only in some orders; delete the line of
one that no longer does), so after adding such tests:

    make test PYTEST_ARGS=--external-update

and when `make test-fast` names tests that started a process anyway, the same option on
it lists them: `make test-fast PYTEST_ARGS=--external-update`.

A test that starts a process under `--fast` anyway (new, or changed since the list was
written) still runs and passes or fails as it would; the run names it at the end.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

LIST = Path(__file__).resolve().parent / "external.txt"
HEADER = (
    "# Tests that start a process or drive a browser: `pytest --fast` (make test-fast)\n"
    "# leaves them out. Written by `make test PYTEST_ARGS=--external-update` (tests/fast.py),\n"
    "# each with the seconds it took then: `make test` starts the longest first.\n"
)


def key(nodeid: str) -> str:
    """A test's function, all its parametrisations together."""
    return re.sub(r"\[.*\]$", "", nodeid)


def weights() -> dict[str, float]:
    """Each listed test and the seconds it took in the run that listed it (0 where the
    line gives none)."""
    if not LIST.exists():
        return {}
    found: dict[str, float] = {}
    for line in LIST.read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        name, _, seconds = line.strip().partition(" ")
        try:
            found[name] = float(seconds or 0)
        except ValueError:
            found[name] = 0.0
    return found


def listed() -> set[str]:
    return set(weights())


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("fast")
    group.addoption(
        "--fast",
        action="store_true",
        help="only the tests that start no process and drive no browser (tests/fast.py)",
    )
    group.addoption(
        "--external-update",
        action="store_true",
        help="rewrite tests/external.txt from what this run's tests did",
    )


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    if config.getoption("--fast") or config.getoption("--external-update"):
        # What each test starts is watched by tests/costs.py.
        config.option.costs = True


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    weight = weights()
    external = set(weight)
    if not config.getoption("--fast"):
        # The tests that start processes take most of the time: they go first, the longest
        # first, so that the processes of `make test` end on quick tests rather than wait
        # for a long one begun last (tests run in any order: tests/conftest.py).
        items.sort(key=lambda item: -weight.get(key(item.nodeid), -1.0))
        return
    kept, left = [], []
    for item in items:
        if key(item.nodeid) in external or item.get_closest_marker("browser"):
            left.append(item)
        else:
            kept.append(item)
    if left:
        config.hook.pytest_deselected(items=left)
        items[:] = kept


def started_something(figures: dict) -> bool:
    return bool(figures.get("programs")) or bool(figures.get("browser"))


def pytest_terminal_summary(terminalreporter, config: pytest.Config) -> None:  # type: ignore[no-untyped-def]
    collected = getattr(config, "_costs_collected", None)
    if collected is None:
        return
    doing = {
        key(nodeid) for nodeid, figures in collected.figures.items() if started_something(figures)
    }
    if config.getoption("--external-update"):
        # Every listed test keeps its line, whether this run ran it or not: some start a
        # process only in some orders (the first to need a mirror or the fork server), and
        # one dropped for starting nothing this time would start one under --fast next.
        kept = weights()
        seconds: dict[str, float] = {}
        for nodeid, phases in collected.phases.items():
            if key(nodeid) in doing:
                seconds[key(nodeid)] = seconds.get(key(nodeid), 0.0) + sum(phases.values())
        kept.update(seconds)
        LIST.write_text(HEADER + "".join(f"{name} {kept[name]:.1f}\n" for name in sorted(kept)))
        terminalreporter.write_line(
            f"tests/external.txt: {len(kept)} tests that start a process or a browser"
        )
    elif config.getoption("--fast") and doing:
        terminalreporter.section("tests that started a process under --fast")
        for name in sorted(doing):
            terminalreporter.write_line(name)
        terminalreporter.write_line(
            "They ran; list them for the next --fast with "
            "`make test-fast PYTEST_ARGS=--external-update` (tests/fast.py)."
        )
