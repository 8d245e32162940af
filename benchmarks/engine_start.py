"""How long an engine run takes on the local runner, started from the worker's fork
server and as a fresh Python process.

    .venv/bin/python benchmarks/engine_start.py [--runs 6] [--engines anthropic static]

Runs the `anthropic` engine (against the fake Anthropic API of tests/fakes, answering
at once with an empty review: what is left is starting the engine and its SDK) and the
`static` engine (on a one-file checkout) through `sandbox.runners.local.engine_run`,
`--runs` times each, with TASUKU_ENGINE_FORK_SERVER off and on in turn (A B A B).
Prints the first run of each (the fork server's includes starting the server and its
imports) and the median of the rest, wall time; the CPU a run costs (the reaped
children's for the subprocesses, the fork server's children's for the fork server);
and the fork server's own CPU, spent once per worker process (read from /proc, which is
why this is Linux's).
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tasuku.settings")


def _cpu_of(pid: int) -> tuple[float, float]:
    """Seconds of CPU of `pid` itself and of the children it reaped (utime + stime,
    cutime + cstime: /proc/<pid>/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    utime, stime, cutime, cstime = (int(v) for v in fields[11:15])
    tick = os.sysconf("SC_CLK_TCK")
    return (utime + stime) / tick, (cutime + cstime) / tick


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=6, help="runs of each engine each way")
    parser.add_argument("--engines", nargs="+", default=["anthropic", "static"],
                        choices=["anthropic", "static"])  # fmt: skip
    args = parser.parse_args()

    import django

    django.setup()
    from django.conf import settings

    from sandbox.contract import ChangedFile, Limits, LineRange, Price, ReviewJob
    from sandbox.runners import forkserver
    from sandbox.runners.local import engine_run, scrubbed_environment
    from tests.fakes.models.anthropic_api import ANTHROPIC_TEST_KEY, FakeAnthropic
    from tests.fakes.models.script import ToolCall

    fake = FakeAnthropic().start()
    root = Path(tempfile.mkdtemp(prefix="tasuku-bench-engine-"))
    (root / "app").mkdir()
    (root / "app" / "pay.py").write_text("def refund(amount):\n    return amount\n")
    job = ReviewJob(
        job_id="1", repository="acme/shop", pull_request=1, title="Refunds",
        base_sha="a" * 40, head_sha="b" * 40,
        diff="+++ b/app/pay.py\n@@ -0,0 +1,2 @@\n+def refund(amount):\n+    return amount\n",
        changed_files=(ChangedFile(path="app/pay.py", status="added",
                                   added=(LineRange(start=1, end=2),)),),
        model="claude-sonnet-5-5", price=Price(input_per_mtok=3, output_per_mtok=15),
        limits=Limits(steps=5),
    )  # fmt: skip
    env = {"ANTHROPIC_API_KEY": ANTHROPIC_TEST_KEY, "ANTHROPIC_BASE_URL": fake.base_url}
    submit = ToolCall(
        "submit_review",
        {"findings": [], "summary": {"inspected_areas": ["refunds"], "confidence": 0.8}},
        usage=(100, 10),
    )
    print(f"{os.cpu_count()} CPUs; {args.runs} runs of each engine each way, interleaved")
    results: dict[tuple[str, str], list[float]] = {}
    cpu: dict[tuple[str, str], float] = {}
    server_start: list[float] = []
    try:
        for engine in args.engines:
            for way in ("subprocess", "fork server", "subprocess", "fork server"):
                settings.TASUKU_ENGINE_FORK_SERVER = way == "fork server"
                forkserver.fork_server_stop()  # each round starts its own (its first run)
                children = resource.getrusage(resource.RUSAGE_CHILDREN)
                times = []
                children_cpu = 0.0
                for _ in range(args.runs):
                    fake.reset()
                    fake.script(submit)
                    started = time.perf_counter()
                    engine_run(engine, job, root, allow_env=env if engine == "anthropic" else {})
                    times.append(time.perf_counter() - started)
                # Read before the server is stopped: reaped by this process, it would add
                # its own CPU and its children's to ours.
                after = resource.getrusage(resource.RUSAGE_CHILDREN)
                if way == "fork server":
                    server = forkserver.fork_server(scrubbed_environment(""))
                    own, children_cpu = _cpu_of(server.pid)
                    server_start.append(own)  # its imports, then forks: next to nothing
                    forkserver.fork_server_stop()
                reaped = (after.ru_utime - children.ru_utime) + (after.ru_stime - children.ru_stime)
                key = (engine, way)
                results.setdefault(key, []).extend(times)
                cpu[key] = cpu.get(key, 0.0) + reaped + children_cpu
                print(f"  {engine:<10} {way:<12} first {times[0]:6.2f} s, then median "
                      f"{statistics.median(times[1:]):6.3f} s", flush=True)  # fmt: skip
    finally:
        forkserver.fork_server_stop()
        fake.stop()
        shutil.rmtree(root, ignore_errors=True)
    print(f"\n{'engine':<10} {'started as':<12} {'median run':>11} {'CPU per run':>12}")
    for (engine, way), times in results.items():
        per_run = cpu[(engine, way)] / len(times)
        print(f"{engine:<10} {way:<12} {statistics.median(times):10.3f}s {per_run:11.2f}s")
    if server_start:
        print(f"the fork server's own CPU, once per worker process (its imports): "
              f"median {statistics.median(server_start):.2f}s")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
