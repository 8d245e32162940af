"""A very large pull request through diff parsing, filters and compression.

    .venv/bin/python benchmarks/large_pr.py [--files 5000] [--lines 40] [--budget 120000]

A synthetic pull request of 5,000 files and ~200,000 changed lines (new and modified
files, lock files and build output among them) is parsed, filtered and compressed to a
reviewer's context budget, as the pipeline does before the engine runs. Beside it, the
time `unidiff` alone takes to parse the same diff: the floor for any parser built on it.
Prints both, their ratio, and the peak memory of the stages.
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
import tracemalloc
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from pipeline import synthetic_pr  # noqa: E402
from unidiff import PatchSet  # noqa: E402

from reviews.compression import compress  # noqa: E402
from reviews.diff import diff_parse  # noqa: E402
from reviews.filters import paths_filter  # noqa: E402


def best_of(runs: int, fn) -> float:
    timings = []
    for _ in range(runs):
        gc.collect()
        started = time.perf_counter()
        fn()
        timings.append(time.perf_counter() - started)
    return min(timings)


def stages(text: str, budget: int) -> dict[str, float]:
    timings = {}
    started = time.perf_counter()
    diff = diff_parse(text)
    timings["parse"] = time.perf_counter() - started
    started = time.perf_counter()
    kept, filtered = paths_filter(diff.paths, binary=[f.path for f in diff.files if f.binary])
    timings["filter"] = time.perf_counter() - started
    started = time.perf_counter()
    result = compress(diff, kept, budget)
    timings["compress"] = time.perf_counter() - started
    timings["_kept"] = len(kept)
    timings["_filtered"] = len(filtered)
    timings["_shown"] = len(result.included)
    timings["_omitted"] = len(result.omitted)
    timings["_tokens"] = result.tokens
    timings["_added"] = diff.added_lines
    return timings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=5000)
    parser.add_argument("--lines", type=int, default=40)
    parser.add_argument("--budget", type=int, default=120_000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()

    text, _ = synthetic_pr(args.files, args.lines)
    print(f"synthetic pull request: {args.files} files, {len(text) / 1e6:.1f} MB of diff")
    floor = best_of(args.runs, lambda: PatchSet(text))
    timings = stages(text, args.budget)
    best = {k: v for k, v in timings.items()}
    for _ in range(args.runs - 1):
        again = stages(text, args.budget)
        for key in ("parse", "filter", "compress"):
            best[key] = min(best[key], again[key])
    total = best["parse"] + best["filter"] + best["compress"]
    print(f"  unidiff alone (floor)  {floor * 1000:8.0f} ms")
    print(f"  parse                  {best['parse'] * 1000:8.0f} ms")
    print(f"  filter                 {best['filter'] * 1000:8.0f} ms")
    print(f"  compress               {best['compress'] * 1000:8.0f} ms")
    print(f"  total                  {total * 1000:8.0f} ms  ({total / floor:.2f}x the floor)")
    print(
        f"  {int(timings['_added'])} added lines; {int(timings['_kept'])} files reviewed, "
        f"{int(timings['_filtered'])} filtered; {int(timings['_shown'])} shown whole or in part "
        f"within {args.budget} tokens ({int(timings['_tokens'])} used), {int(timings['_omitted'])} named as omitted"
    )
    tracemalloc.start()
    stages(text, args.budget)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    print(
        f"peak memory of the stages (tracemalloc, beside the {len(text) / 1e6:.0f} MB diff text): {peak / 1e6:.0f} MB"
    )


if __name__ == "__main__":
    main()
