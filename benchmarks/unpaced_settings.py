"""Tasuku's settings without the pace it keeps between an installation's writes (a burst,
then one a second, as GitHub asks of integrations): what `benchmarks/latency.py
--no-throttle` runs its web and worker processes with, to measure Tasuku's own time."""

from tasuku.settings import *  # noqa: F403

GITHUB_SECONDS_BETWEEN_WRITES = "0"
