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
        ("large_pr.py", ["--files", "60", "--runs", "1", "--release"], "by reviewability (now)"),
        ("agent_tools.py", ["--files", "60"], "search_code rare pattern"),
        ("static_quality.py", ["--cases", "2"], "recall against the bare tools"),
        ("slow_clients.py", ["--duration", "1", "--slow", "1"], "1 slow clients:"),
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


def test_the_dashboard_benchmark_seeds_its_own_database_and_times_every_page(tmp_path):
    import os

    env = {**os.environ, "DATABASE_URL": f"sqlite:///{tmp_path / 'bench.sqlite3'}"}
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "dashboard.py"),
         "--runs", "300", "--findings", "2000", "--requests", "2"],
        capture_output=True, text=True, timeout=300, cwd=ROOT, env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    for page in ("overview", "repositories", "pull request", "run (failed)", "diagnostics",
                 "status", "metrics"):  # fmt: skip
        assert f"\n{page} " in done.stdout, page


def test_the_dashboard_benchmark_refuses_to_run_without_a_database_of_its_own():
    import os

    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "dashboard.py")],
        capture_output=True, text=True, timeout=60, cwd=ROOT, env=env,
    )  # fmt: skip
    assert done.returncode != 0 and "DATABASE_URL" in done.stderr


def test_the_rereview_benchmark_runs_on_a_database_of_its_own(tmp_path):
    import os

    env = {**os.environ, "DATABASE_URL": f"sqlite:///{tmp_path / 'bench.sqlite3'}"}
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "rereview.py"), "--files", "40",
         "--history", "3"],
        capture_output=True, text=True, timeout=300, cwd=ROOT, env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert "same head asked again (engine result reused)" in done.stdout


def test_the_large_pr_benchmark_reads_a_real_pull_request_from_a_repository(tmp_path):
    def git(*args):
        subprocess.run(["git", "-C", str(tmp_path), *args], check=True, capture_output=True)

    git("init", "-q")
    (tmp_path / "app.py").write_text("x = 1\n")
    git("add", "-A")
    git("-c", "user.name=b", "-c", "user.email=b@b", "commit", "-qm", "base")
    (tmp_path / "app.py").write_text("x = 1\n" + "y = 2\n" * 50)
    (tmp_path / "locale" / "fr").mkdir(parents=True)
    (tmp_path / "locale" / "fr" / "django.po").write_text('msgstr "x"\n' * 400)
    (tmp_path / "CHANGELOG.md").write_text("* a change\n" * 300)
    git("add", "-A")
    git("-c", "user.name=b", "-c", "user.email=b@b", "commit", "-qm", "head")
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "large_pr.py"), "--repo", str(tmp_path),
         "--base", "HEAD~1", "--head", "HEAD", "--budget", "1000"],
        capture_output=True, text=True, timeout=120, cwd=ROOT,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert "(ranked low as a translation)" in done.stdout
    assert "(ranked low as release notes)" in done.stdout
