"""Where the suite's time goes, by cause (`pytest --costs`; docs/testing.md).

Each test's wall time (set-up, call and tear-down) is measured, and what the test did is
watched as it runs: the processes it started (`subprocess.Popen`, by what they run), the
seconds it slept (`time.sleep`, in any thread of the test process) and the fixtures it
asked for. A test is then put under the first cause that it has, in this order:

    browser        it drives Chromium (the `browser` marker)
    benchmark      it runs a benchmark script (tests/test_benchmarks.py)
    process        it started a Python process (a worker, a server, manage.py, the demo)
    sandbox tool   it started another program than git (a linter, an engine's CLI, docker)
    sleep          it slept for a third of its time or more (fixed delays, polling turns)
    git            it started git processes (repository builds, clones, diffs)
    database set-up  its set-up made a test database (the first test of each process)
    in-process     none of these: function calls, the fake servers already running

The causes are what the test *does*, not proof of what its time was spent on: a test that
starts a worker and sleeps is counted as `process`. The table sums each cause's tests,
seconds and CPU seconds; `--costs-json=PATH` writes every test's figures for a closer look.

A test's CPU seconds are those of the test process (its own threads: the fake servers
answer there) and of the processes it started and waited for (git, a worker, a script),
and of the engines the sandbox's fork server started for it. On a machine shared with
other work wall times swell and shrink with the load; CPU seconds far less, so two runs
are compared by them. A process a test leaves running (and never waits for) is not
counted.

Under pytest-xdist each test's figures travel back on its report (`user_properties`), so
the table is the whole suite's.
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from collections import defaultdict
from pathlib import Path

import pytest

CAUSES = (
    "browser",
    "benchmark",
    "process",
    "sandbox tool",
    "sleep",
    "git",
    "database set-up",
    "in-process",
)

_real_sleep = time.sleep
_real_popen_init = subprocess.Popen.__init__


class _Watch:
    """What the running test does; reset at each test's set-up."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.reset()

    def reset(self) -> None:
        with self.lock:
            self.slept = 0.0
            self.programs: dict[str, int] = defaultdict(int)
            self.cpu_at = _cpu()

    def sleep(self, seconds: float) -> None:
        with self.lock:
            self.slept += max(0.0, float(seconds))

    def started(self, args: object) -> None:
        program = _program(args)
        with self.lock:
            self.programs[program] += 1


def _cpu() -> float:
    """CPU seconds so far of this process, of its children it waited for, and of the
    engines the fork server (if one runs) started and reaped."""
    times = os.times()
    seconds = times.user + times.system + times.children_user + times.children_system
    try:
        from sandbox.runners import forkserver
    except ImportError:  # pragma: no cover - the suite always has the sandbox
        return seconds
    server = forkserver._server
    pid = getattr(server, "pid", None)
    if pid is not None and server.alive:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return seconds
        # utime, stime, cutime, cstime: fields 14 to 17 of proc(5), in clock ticks
        seconds += sum(int(fields[i]) for i in range(11, 15)) / os.sysconf("SC_CLK_TCK")
    return seconds


_watch = _Watch()


def _program(args: object) -> str:
    if isinstance(args, (str, bytes, os.PathLike)):
        argv = [os.fsdecode(args).split()[0] if isinstance(args, (str, bytes)) else args]
    else:
        argv = list(args)  # type: ignore[call-overload]
    if not argv:
        return "?"
    name = Path(os.fsdecode(argv[0])).name
    if name.startswith("python"):
        return "python"
    if name in ("sh", "bash", "env") and len(argv) > 1:
        return Path(os.fsdecode(argv[-1]).split()[0]).name if name == "sh" else name
    return name


def _sleep(seconds: float) -> None:
    _watch.sleep(seconds)
    _real_sleep(seconds)


def _popen_init(self, args, *rest, **kwargs):  # type: ignore[no-untyped-def]
    _watch.started(args)
    _real_popen_init(self, args, *rest, **kwargs)


def _watch_fork_server() -> None:
    """An engine the sandbox's fork server starts is a process too, though no Popen of
    the test's starts it (the server was started once, by an earlier test)."""
    from sandbox.runners import forkserver

    spawn = forkserver.ForkServer.spawn

    def watched(self, module, *args, **kwargs):  # type: ignore[no-untyped-def]
        _watch.started(["python", "-m", module])
        return spawn(self, module, *args, **kwargs)

    forkserver.ForkServer.spawn = watched  # type: ignore[method-assign]


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("costs")
    group.addoption(
        "--costs", action="store_true", help="print the suite's time by cause (tests/costs.py)"
    )
    group.addoption(
        "--costs-json", metavar="PATH", help="also write every test's figures to PATH (JSON)"
    )


def _on(config: pytest.Config) -> bool:
    return bool(config.getoption("--costs") or config.getoption("--costs-json"))


def pytest_configure(config: pytest.Config) -> None:
    if _on(config):
        time.sleep = _sleep
        subprocess.Popen.__init__ = _popen_init  # type: ignore[method-assign]
        _watch_fork_server()
        config._costs_collected = _Collected()  # type: ignore[attr-defined]
        config.pluginmanager.register(config._costs_collected, "costs-collected")


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    if _on(item.config):
        _watch.reset()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):  # type: ignore[no-untyped-def]
    outcome = yield
    if not _on(item.config) or call.when != "teardown":
        return
    report = outcome.get_result()
    with _watch.lock:
        figures = {
            "cpu": round(max(0.0, _cpu() - _watch.cpu_at), 3),
            "slept": round(_watch.slept, 3),
            "programs": dict(_watch.programs),
            "browser": item.get_closest_marker("browser") is not None,
        }
    report.user_properties.append(("costs", figures))


def cause(nodeid: str, seconds: float, setup: float, figures: dict) -> str:
    programs = figures.get("programs", {})
    if figures.get("browser"):
        return "browser"
    if nodeid.startswith("tests/test_benchmarks.py"):
        return "benchmark"
    if programs.get("python"):
        return "process"
    if any(name != "git" for name in programs):
        return "sandbox tool"
    if seconds > 0 and figures.get("slept", 0) >= seconds / 3:
        return "sleep"
    if programs.get("git"):
        return "git"
    if setup >= 1.0 and setup >= seconds / 2:
        return "database set-up"
    return "in-process"


class _Collected:
    """The reports' figures, gathered where the terminal summary is written (the
    controller under pytest-xdist)."""

    def __init__(self) -> None:
        self.phases: dict[str, dict[str, float]] = defaultdict(dict)
        self.figures: dict[str, dict] = {}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.phases[report.nodeid][report.when] = report.duration
        for name, value in report.user_properties:
            if name == "costs":
                self.figures[report.nodeid] = value


def rows(collected: _Collected) -> list[dict]:
    out = []
    for nodeid, phases in collected.phases.items():
        seconds = sum(phases.values())
        figures = collected.figures.get(nodeid, {})
        out.append({
            "test": nodeid,
            "seconds": round(seconds, 3),
            "setup": round(phases.get("setup", 0.0), 3),
            "cause": cause(nodeid, seconds, phases.get("setup", 0.0), figures),
            **figures,
        })  # fmt: skip
    return out


def table(tests: list[dict]) -> list[str]:
    by_cause: dict[str, list[dict]] = defaultdict(list)
    for test in tests:
        by_cause[test["cause"]].append(test)
    total = sum(test["seconds"] for test in tests) or 1.0
    total_cpu = sum(test.get("cpu", 0.0) for test in tests) or 1.0
    lines = [f"{'cause':<16} {'tests':>6} {'seconds':>9} {'share':>6} {'CPU s':>8} {'share':>6}"]
    for name in CAUSES:
        members = by_cause.get(name, [])
        seconds = sum(test["seconds"] for test in members)
        cpu = sum(test.get("cpu", 0.0) for test in members)
        lines.append(
            f"{name:<16} {len(members):>6} {seconds:>9.1f} {seconds / total:>6.0%}"
            f" {cpu:>8.1f} {cpu / total_cpu:>6.0%}"
        )
    lines.append(f"{'all':<16} {len(tests):>6} {total:>9.1f} {'':>6} {total_cpu:>8.1f}")
    return lines


def pytest_terminal_summary(terminalreporter, config: pytest.Config) -> None:  # type: ignore[no-untyped-def]
    if not _on(config) or not hasattr(config, "_costs_collected"):
        return
    tests = rows(config._costs_collected)
    if not tests:
        return
    terminalreporter.section("time by cause (tests/costs.py; summed over processes)")
    for line in table(tests):
        terminalreporter.write_line(line)
    path = config.getoption("--costs-json")
    if path:
        Path(path).write_text(json.dumps(sorted(tests, key=lambda t: -t["seconds"]), indent=1))
        terminalreporter.write_line(f"every test's figures: {path}")
