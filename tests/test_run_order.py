"""The order a whole run starts its tests in (tests/fast.py): each process of `make test`
starts on its share of the long tests and ends on quick ones."""

from __future__ import annotations

import pytest

from tests.fast import dealt


def parts(items: list, workers: int) -> list[list]:
    """What pytest-xdist's `worksteal` gives each process at the start: the run's tests
    cut in order, each part the tests left over the processes left to serve."""
    cut, start, left = [], 0, len(items)
    for served in range(workers):
        size = left // (workers - served)
        cut.append(items[start : start + size])
        start, left = start + size, left - size
    return cut


@pytest.mark.parametrize(("tests", "workers"), [(2490, 4), (2493, 4), (10, 3), (7, 2), (3, 4)])
def test_each_process_starts_on_its_share_of_the_long_tests(tests, workers):
    seconds = sorted(range(tests), reverse=True)  # the longest first, as the run sorts them
    laid = dealt(seconds, workers)
    assert sorted(laid) == sorted(seconds)  # every test, once
    cut = parts(laid, workers)
    firsts = [part[0] for part in cut if part]
    assert set(firsts) <= set(seconds[: workers + 1])  # each begins with one of the longest
    totals = [sum(part) for part in cut]
    assert max(totals) - min(totals) <= max(seconds, default=0) + workers
    for part in filter(None, cut):  # each ends on its quickest (what others steal first)
        assert part[-1] <= min(part[:-1], default=part[-1]) + workers
