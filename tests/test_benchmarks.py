"""The benchmark scripts still run against the code they measure (figures not checked:
speed belongs to benchmarks/, not to the test suite)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(
    ("script", "args", "expect"),
    [
        ("pipeline.py", ["--files", "60", "--engine"], "static engine on"),
        ("large_pr.py", ["--files", "60", "--runs", "1"], "peak memory"),
        ("agent_tools.py", ["--files", "60"], "search_code rare pattern"),
    ],
)
def test_a_benchmark_script_runs(script, args, expect):
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / script), *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert expect in done.stdout
