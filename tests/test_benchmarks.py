"""The benchmark scripts still run against the code they measure (figures not checked:
speed belongs to benchmarks/, not to the test suite).

A script that migrates a database of its own is handed, on SQLite, a copy of one
database migrated once for the whole run (`migrated_sqlite`): migrating afresh took each
script 5 to 7 s of CPU. The script still runs its `migrate`, which finds nothing to do;
a fresh database's migration is what tests/test_migrations.py and
tests/test_production_path.py prove.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def bench_sqlite(migrated_sqlite, tmp_path) -> str:
    """`--database` for a script: a copy of the migrated database, in the test's folder."""
    path = tmp_path / "bench.sqlite3"
    shutil.copyfile(migrated_sqlite, path)
    return f"sqlite:///{path}"


# The parametrised scripts that migrate a database of their own (--database).
_MIGRATES = ("static_quality.py", "slow_clients.py")


@pytest.mark.parametrize(
    ("script", "args", "expect"),
    [
        ("pipeline.py", ["--files", "60", "--engine"], "static engine on"),
        ("large_pr.py", ["--files", "60", "--runs", "1", "--release"], "by reviewability (now)"),
        ("agent_tools.py", ["--files", "60"], "search_code rare pattern"),
        ("engine_start.py", ["--runs", "2", "--engines", "static"], "fork server"),
        ("static_quality.py", ["--cases", "2"], "recall against the bare tools"),
        ("yardstick.py", ["--rounds", "1"], "CPU s a round"),
        ("slow_clients.py", ["--duration", "1", "--slow", "1"], "1 slow clients:"),
        # The floor and Tasuku side by side, one pair: the floor's INSERT still matches
        # the table (it failed unnoticed for a while when the table grew).
        (
            "webhook_intake.py",
            [
                "--databases",
                "sqlite",
                "--duration",
                "0.5",
                "--pairs",
                "1",
                "--concurrency",
                "1",
                "--gunicorn-workers",
                "1",
                "--warmup",
                "0.2",
            ],
            "deliveries lost (202 answered but not stored): 0",
        ),
    ],
)
def test_a_benchmark_script_runs(script, args, expect, request):
    if script in _MIGRATES:
        args = [*args, "--database", request.getfixturevalue("bench_sqlite")]
    if script == "webhook_intake.py":  # its SQLite run on the migrated copy
        args = [a if a != "sqlite" else request.getfixturevalue("bench_sqlite") for a in args]
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / script), *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert expect in done.stdout


def test_the_dashboard_benchmark_seeds_its_own_database_and_times_every_page(
    tmp_path, bench_sqlite
):
    # DATABASE_URL is the developer's database: a benchmark never reads it.
    env = {**os.environ, "DATABASE_URL": f"sqlite:///{tmp_path / 'mine.sqlite3'}"}
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "dashboard.py"),
         "--database", bench_sqlite, "--keep-database",
         "--runs", "300", "--findings", "2000", "--requests", "2", "--busy-hour", "20"],
        capture_output=True, text=True, timeout=300, cwd=ROOT, env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    for page in ("overview", "repositories", "pull request", "run (failed)", "diagnostics",
                 "status", "metrics"):  # fmt: skip
        assert f"\n{page} " in done.stdout, page
    assert (tmp_path / "bench.sqlite3").exists() and not (tmp_path / "mine.sqlite3").exists()


def test_the_history_benchmark_lists_a_range_whose_file_its_clone_lacks(tmp_path):
    """A public repository's snapshot can lack a file's contents (seen in mozilla/sops):
    listing the ranges crashed on git's rename detection, which reads them. The range is
    listed, and `complete` says it cannot be reviewed."""
    sys.path.insert(0, str(ROOT))
    from benchmarks.static_history import complete, ranges

    def run(*args: str) -> str:
        return subprocess.run(["git", "-C", str(tmp_path), *args], check=True,
                              capture_output=True, text=True).stdout.strip()  # fmt: skip

    run("init", "-q", "-b", "main")
    run("config", "user.email", "a@b.c")
    run("config", "user.name", "a")
    (tmp_path / "old.txt").write_text("".join(f"line {n}\n" for n in range(200)))
    run("add", ".")
    run("commit", "-qm", "base")
    lost = run("rev-parse", "HEAD:old.txt")
    run("mv", "old.txt", "new.txt")
    (tmp_path / "new.txt").write_text("".join(f"line {n}\n" for n in range(201)))
    run("add", ".")
    run("commit", "-qm", "rename with an edit")
    (tmp_path / ".git" / "objects" / lost[:2] / lost[2:]).unlink()
    [listed] = ranges(tmp_path, 5)
    assert not complete(tmp_path, listed)


def test_a_benchmark_drops_the_database_it_created_and_keeps_one_it_was_given(tmp_path):
    import sqlite3

    from benchmarks.isolation import own_database

    with own_database("sqlite", script="t") as db:
        made = Path(db.name)
        sqlite3.connect(made).execute("CREATE TABLE t (x)")
        assert db.created
    assert not made.exists()
    given = tmp_path / "given.sqlite3"
    sqlite3.connect(given).execute("CREATE TABLE t (x)")
    with own_database(f"sqlite:///{given}", script="t") as db:
        assert not db.created
    assert given.exists()


def test_a_benchmark_server_must_answer_with_its_own_token(tmp_path):
    import http.server
    import threading

    from benchmarks.isolation import Served, identity

    class Impostor(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            body = b'{"token": "not yours", "pid": 1}'
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    impostor = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Impostor)
    threading.Thread(target=impostor.serve_forever, daemon=True).start()
    port = impostor.server_address[1]
    assert identity(port) == {"token": "not yours", "pid": 1}
    served = Served("benchmarks.floor_app:application", port=port, gunicorn=["--workers", "1"],
                    env={"GITHUB_WEBHOOK_SECRET": "s", "BENCH_DATABASE": "sqlite",
                         "BENCH_DSN": str(tmp_path / "x.sqlite3"), "PATH": "/usr/bin:/bin"},
                    log=subprocess.DEVNULL)  # fmt: skip
    try:
        with pytest.raises(RuntimeError, match="another server answers there"), served:
            pass
    finally:
        impostor.shutdown()


def test_the_rereview_benchmark_runs_on_a_database_of_its_own(bench_sqlite):
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "rereview.py"), "--files", "40",
         "--history", "3", "--database", bench_sqlite],
        capture_output=True, text=True, timeout=300, cwd=ROOT,
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


def test_the_latency_benchmark_times_a_review_from_its_webhook_to_github(request):
    url = os.environ.get("DATABASE_URL", "")
    env = dict(os.environ)
    if url.startswith("postgres"):  # a database of its own on the suite's server
        database = "postgres"
        env["BENCH_POSTGRES_URL"] = url.rsplit("/", 1)[0]
    else:
        database = request.getfixturevalue("bench_sqlite")
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "latency.py"), "--warm", "1", "--gap", "0",
         "--no-throttle", "--database", database],
        capture_output=True, text=True, timeout=300, cwd=ROOT, env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    for line in ("webhook -> review on GitHub", "stage: sandbox", "GitHub API requests"):
        assert line in done.stdout, line


def test_the_evaluation_benchmark_replays_a_history_and_times_each_head(tmp_path, bench_sqlite):
    def git(*args: str) -> None:
        subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)

    repo = tmp_path / "project"
    repo.mkdir()
    git("init", "-q", "-b", "main")
    git("config", "user.email", "dev@example.com")
    git("config", "user.name", "Dev")
    for n, text in enumerate(("x = 1\n", "import os\nx = 2\n", "x = 3\n")):
        (repo / "app.py").write_text(text)
        git("add", "-A")
        git("commit", "-q", "-m", f"change {n}")
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "evaluation.py"), "--repo", str(repo),
         "--count", "2", "--database", bench_sqlite],
        capture_output=True, text=True, timeout=300, cwd=ROOT,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert "merged pull requests: 2; heads reviewed: 2 (failed: 0)" in done.stdout
    assert "time per head: median" in done.stdout


def test_the_busy_installation_benchmark_meets_no_secondary_limit_and_loses_nothing(request):
    url = os.environ.get("DATABASE_URL", "")
    env = dict(os.environ)
    if url.startswith("postgres"):  # a database of its own on the suite's server
        database = "postgres"
        env["BENCH_POSTGRES_URL"] = url.rsplit("/", 1)[0]
    else:
        database = request.getfixturevalue("bench_sqlite")
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "busy_installation.py"), "--pulls", "3",
         "--clusters", "1", "--workers", "2", "--database", database],
        capture_output=True, text=True, timeout=300, cwd=ROOT, env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    for line in ("secondary limits hit (must be 0)", "deliveries lost (must be 0)",
                 "writes at the peak minute", "time in all"):  # fmt: skip
        assert line in done.stdout, line
