"""A fresh clone's first run: the test files' rewritten code written once, not once a process.

pytest rewrites every test module's `assert`s before importing it and keeps the result in
`__pycache__` (`*.pyc` tagged `pytest-…`). On a fresh clone there is none, so each of the
`-n` processes rewrote all of them while it collected: some 7 CPU seconds a process on the
project's 2-core machine, where collecting with them cached takes 6. Before the processes
start, the process that starts them writes the missing ones, on every core at once, with
pytest's own rewriter; the processes then find them. Nothing happens when they are there,
when bytecode is not written (`PYTHONDONTWRITEBYTECODE`), when asserts are not rewritten
(`--assert=plain`), or when the run has no processes of its own (`-n 0`).
"""

from __future__ import annotations

import multiprocessing
import os
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pytest

try:  # pytest's own rewriter (pytest 8 and 9); if its internals move, nothing is done here
    from _pytest.assertion import rewrite

    _HAVE = all(
        hasattr(rewrite, name)
        for name in ("get_cache_dir", "PYC_TAIL", "_read_pyc", "_rewrite_test", "_write_pyc",
                     "try_makedirs", "assertstate_key")
    )  # fmt: skip
except ImportError:  # pragma: no cover
    _HAVE = False

TESTS = Path(__file__).resolve().parent
_config: pytest.Config | None = None


def _stale(path: Path) -> bool:
    pyc = rewrite.get_cache_dir(path) / (path.name[:-3] + rewrite.PYC_TAIL)
    return rewrite._read_pyc(path, pyc) is None


def _rewrite(path: Path) -> None:
    assert _config is not None
    state = _config.stash[rewrite.assertstate_key]
    pyc = rewrite.get_cache_dir(path) / (path.name[:-3] + rewrite.PYC_TAIL)
    if not rewrite.try_makedirs(pyc.parent):
        return
    source_hash, code = rewrite._rewrite_test(path, _config)
    rewrite._write_pyc(state, code, source_hash, pyc)


def pytest_configure(config: pytest.Config) -> None:
    global _config
    processes = getattr(config.option, "numprocesses", None)
    if (
        not _HAVE
        or hasattr(config, "workerinput")  # a process the run started: it only reads them
        or not processes
        or sys.dont_write_bytecode
        or config.getoption("assertmode") != "rewrite"
        or rewrite.assertstate_key not in config.stash
    ):
        return
    files = [
        p for p in TESTS.rglob("*.py") if p.name.startswith("test_") or p.name == "conftest.py"
    ]
    stale = [p for p in files if _stale(p)]
    if len(stale) < 8:  # a few edited files: each process rewrites them quicker than a pool
        return
    _config = config
    # Forked: the children have this configuration (the rewriter reads its ini options).
    with ProcessPoolExecutor(
        max_workers=os.cpu_count() or 2, mp_context=multiprocessing.get_context("fork")
    ) as pool:
        list(pool.map(_rewrite, stale, chunksize=4))
    _config = None
