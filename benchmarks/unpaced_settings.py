"""Tasuku's settings without the pauses it keeps between GitHub requests (0.25 s, and 1 s
between writes, as GitHub asks of integrations): what `benchmarks/latency.py
--no-throttle` runs its web and worker processes with, to measure Tasuku's own time."""

from tasuku.settings import *  # noqa: F403

GITHUB_SECONDS_BETWEEN_REQUESTS = 0
GITHUB_SECONDS_BETWEEN_WRITES = 0
