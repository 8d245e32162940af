"""How fast this machine is now: the CPU seconds of a fixed workload shaped like the
test suite's (Python code, Python processes that load Django, short programs).

Machines of the project's kind run the same code at speeds a factor of two apart, and
one machine drifts within the hour (docs/testing.md, *CPU seconds, not minutes*). A
suite's time means little without the machine's: run this beside it (`.ci/run` prints
it before the tests) and compare runs by their ratio to it. Nothing here is Tasuku's
code, so a change to Tasuku never moves it.

    .venv/bin/python benchmarks/yardstick.py              # three rounds, the median
    .venv/bin/python benchmarks/yardstick.py --rounds 1   # about 2 s
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import time

# A Python process that loads Django with its contrib apps, as the suite's processes do
# (without Tasuku's apps: their code changes; Django's is pinned).
DJANGO_START = """
import django
from django.conf import settings
settings.configure(
    INSTALLED_APPS=["django.contrib.admin", "django.contrib.auth",
                    "django.contrib.contenttypes", "django.contrib.sessions",
                    "django.contrib.messages", "django.contrib.staticfiles"],
    DATABASES={"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}},
)
django.setup()
"""


def python_work() -> None:
    """Interpreted work of the kinds the suite does most: building and reading dicts,
    formatting and parsing text, regular expressions, sorting."""
    words = re.compile(r"[a-z]+_\d+")
    rows = []
    for i in range(60_000):
        row = {"id": i, "path": f"src/module_{i % 97}/file_{i}.py", "line": i % 400}
        row["key"] = json.dumps(row, sort_keys=True)
        rows.append(row)
    rows.sort(key=lambda r: (r["line"], r["path"]))
    found = sum(len(words.findall(r["path"])) for r in rows)
    assert found == 2 * len(rows)


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _self_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _django_start() -> None:
    # Compiled once and read from __pycache__ after, as the suite's processes do.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    subprocess.run([sys.executable, "-c", DJANGO_START], check=True, env=env)  # noqa: S603


def round_once() -> dict[str, float]:
    """One round: each part's CPU seconds."""
    out: dict[str, float] = {}
    before = _self_cpu()
    python_work()
    out["python"] = _self_cpu() - before
    before = _children_cpu()
    for _ in range(2):
        _django_start()
    out["django start x2"] = _children_cpu() - before
    before = _children_cpu()
    for _ in range(100):
        subprocess.run(["git", "--version"], check=True, stdout=subprocess.DEVNULL)  # noqa: S607
    out["git x100"] = _children_cpu() - before
    out["all"] = sum(out.values())
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    _django_start()  # unmeasured: writes Django's bytecode where none is yet
    start = time.monotonic()
    rounds = [round_once() for _ in range(max(1, args.rounds))]
    wall = time.monotonic() - start
    parts = ", ".join(
        f"{name} {statistics.median(r[name] for r in rounds):.2f}"
        for name in rounds[0]
        if name != "all"
    )
    alls = sorted(r["all"] for r in rounds)
    print(
        f"yardstick: {statistics.median(alls):.2f} CPU s a round (median of {len(rounds)}; "
        f"{alls[0]:.2f} to {alls[-1]:.2f}); {parts}; {wall:.1f} s in all"
    )


if __name__ == "__main__":
    main()
