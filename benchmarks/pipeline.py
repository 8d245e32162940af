"""The review pipeline's own work on a large pull request, engine excluded.

    .venv/bin/python benchmarks/pipeline.py [--files 2000] [--lines 40] [--engine]

Builds a synthetic pull request of N changed files (default 2,000 files, ~80,000 changed
lines: new and modified Python, shell and JavaScript files plus lock files and build
output to be filtered) and times the stages Tasuku runs around the engine: parsing the
diff (unidiff), path filters, building the engine's job, the validation gate over
synthetic findings (one per ten files, some unanchorable, duplicated or malformed), and
publication planning (inline comment payloads, review body, check-run output). Prints
the time and the peak memory of those stages.

With --engine it also writes the files to a temporary checkout and runs the static
engine on it through the local runner, reported separately.
"""

from __future__ import annotations

import argparse
import gc
import os
import random
import resource
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tasuku.settings")
import django  # noqa: E402

django.setup()

from repos.policy import EffectiveConfig, ReviewerConfig  # noqa: E402
from reviews.core.stages import Core, job_build  # noqa: E402
from reviews.scope.diff import diff_parse  # noqa: E402
from reviews.scope.filters import paths_filter  # noqa: E402
from reviews.text.rendering import (  # noqa: E402
    ReviewContext,
    check_conclusion,
    check_output,
    comment_payload,
    review_body,
)
from reviews.validation.findings import GateConfig, gate  # noqa: E402
from sandbox.contract import ReviewJob, ReviewSummary, Severity  # noqa: E402
from sandbox.workspace import Checkout  # noqa: E402


def synthetic_pr(files: int, lines: int, seed: int = 7) -> tuple[str, dict[str, str]]:
    """(unified diff text, {path: new content}) for a pull request of `files` files."""
    rng = random.Random(seed)
    parts: list[str] = []
    contents: dict[str, str] = {}
    for index in range(files):
        kind = index % 20
        if kind == 18:
            path = f"web/pkg{index}/package-lock.json"
        elif kind == 19:
            path = f"dist/bundle{index}.min.js"
        elif kind % 3 == 0:
            path = f"scripts/task{index}.sh"
        elif kind % 3 == 1:
            path = f"web/src/component{index}.js"
        else:
            path = f"src/pkg{index // 100}/module{index}.py"
        if path.endswith(".sh"):
            new = [f"VALUE_{index}_{n}={rng.randint(0, 10**6)}" for n in range(lines)]
        elif path.endswith(".js"):
            new = [
                f"export const value_{index}_{n} = {rng.randint(0, 10**6)};" for n in range(lines)
            ]
        else:
            new = [f"value_{index}_{n} = {rng.randint(0, 10**6)}  # line {n}" for n in range(lines)]
        if index % 2 == 0:  # a new file
            parts.append(
                f"diff --git a/{path} b/{path}\nnew file mode 100644\nindex 0000000..1111111\n"
                f"--- /dev/null\n+++ b/{path}\n@@ -0,0 +1,{lines} @@\n"
                + "".join(f"+{text}\n" for text in new)
            )
            contents[path] = "\n".join(new) + "\n"
        else:  # a modified file: 3 context lines around each of two changed blocks
            old = [f"old_{index}_{n} = {n}" for n in range(lines + 6)]
            half = lines // 2
            body = [f" {old[0]}", f" {old[1]}", f" {old[2]}"]
            body += [f"-{old[3]}"] + [f"+{t}" for t in new[:half]]
            body += [f" {old[4]}", f" {old[5]}", f" {old[6]}"]
            body += [f"-{old[7]}"] + [f"+{t}" for t in new[half:]]
            body += [f" {old[8]}"]
            source_len = 9
            target_len = 7 + lines
            parts.append(
                f"diff --git a/{path} b/{path}\nindex 2222222..3333333 100644\n--- a/{path}\n+++ b/{path}\n"
                f"@@ -1,{source_len} +1,{target_len} @@\n" + "\n".join(body) + "\n"
            )
            contents[path] = (
                "\n".join(old[:3] + new[:half] + old[4:7] + new[half:] + old[8:9]) + "\n"
            )
    return "".join(parts), contents


def synthetic_findings(diff, count_every: int = 10) -> list[dict]:
    findings: list[dict] = []
    severities = [s.value for s in Severity]
    for index, file in enumerate(diff.files):
        if index % count_every or not file.added:
            continue
        line = file.added[len(file.added) // 2]
        findings.append(
            {
                "path": file.path, "start_line": line, "end_line": line + 1,
                "severity": severities[(index // 10) % 5], "category": "bug",
                "title": f"Problem {index % 7} in `{file.path}`", "body": "What goes wrong. " * 20,
                "evidence": "tool rule X", "confidence": 0.6 + (index % 4) / 10,
                "suggestion": "fixed = True\nalso = 1",
            }
        )  # fmt: skip
        if index % 30 == 0:
            findings.append({**findings[-1]})  # a duplicate
        if index % 50 == 0:
            findings.append(
                {**findings[-1], "start_line": 100_000, "end_line": 100_000, "title": "Elsewhere"}
            )
        if index % 70 == 0:
            findings.append({"path": file.path, "title": "malformed"})
    return findings


def stages(diff_text: str) -> dict[str, float]:
    timings: dict[str, float] = {}
    started = time.perf_counter()
    diff = diff_parse(diff_text)
    timings["parse"] = time.perf_counter() - started

    started = time.perf_counter()
    kept, filtered = paths_filter(
        diff.paths, policy_globs=["docs/**"], binary=[f.path for f in diff.files if f.binary]
    )
    timings["filter"] = time.perf_counter() - started

    started = time.perf_counter()
    core = Core(diff=diff, reviewed=kept, filtered=filtered, packs=[])
    checkout = Checkout(
        root=Path("."), head_sha="b" * 40, base_sha="a" * 40, merge_base="a" * 40, diff=diff_text
    )
    config = EffectiveConfig()
    job = job_build(
        core, checkout=checkout, reviewer=ReviewerConfig(slug="static", engine="static"),
        config=config, job_id="1",
        repository="acme/big", number=1, title="Big", deadline_seconds=1800,
    )  # fmt: skip
    job.model_dump_json()
    timings["job (incl. compression)"] = time.perf_counter() - started

    raw = synthetic_findings(diff)
    started = time.perf_counter()
    validated = gate(
        raw, diff, GateConfig(min_severity=Severity.LOW, min_confidence=0.5, comment_limit=25)
    )
    timings["validation"] = time.perf_counter() - started

    started = time.perf_counter()
    context = ReviewContext(
        run_id=1, reviewer="static", base_sha="a" * 40, head_sha="b" * 40,
        dashboard_url="http://127.0.0.1:8000/runs/1/",
        filtered=tuple((f.path, f.reason) for f in filtered),
    )  # fmt: skip
    payloads = [comment_payload(v) for v in validated if v.published]
    review_body(ReviewSummary(), validated, context)
    conclusion = check_conclusion(validated, Severity.HIGH)
    check_output(validated, conclusion, Severity.HIGH)
    timings["publication planning"] = time.perf_counter() - started
    timings["_files"] = len(diff.files)
    timings["_kept"] = len(kept)
    timings["_added"] = diff.added_lines
    timings["_findings"] = len(raw)
    timings["_published"] = len(payloads)
    return timings


def engine(contents: dict[str, str], diff_text: str) -> float:
    from sandbox.runners.local import engine_run

    diff = diff_parse(diff_text)
    kept, _ = paths_filter(diff.paths)
    with tempfile.TemporaryDirectory() as root:
        for path, text in contents.items():
            target = Path(root) / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text)
        job = ReviewJob(
            job_id="1", repository="acme/big", pull_request=1, base_sha="a" * 40, head_sha="b" * 40,
            changed_files=tuple(diff.get(path).changed_file() for path in kept),
        )  # fmt: skip
        started = time.perf_counter()
        result = engine_run("static", job, Path(root))
        elapsed = time.perf_counter() - started
    print(f"static engine on {len(kept)} files: {elapsed:.2f} s, {len(result.findings)} findings")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=2000)
    parser.add_argument("--lines", type=int, default=40)
    parser.add_argument("--engine", action="store_true", help="also run the static engine")
    args = parser.parse_args()

    diff_text, contents = synthetic_pr(args.files, args.lines)
    print(f"synthetic pull request: {args.files} files, {len(diff_text) / 1e6:.1f} MB of diff")
    gc.collect()
    baseline_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

    timings = stages(diff_text)  # timed without tracemalloc's overhead
    total = sum(v for k, v in timings.items() if not k.startswith("_"))
    for name, seconds in timings.items():
        if not name.startswith("_"):
            print(f"  {name:<22} {seconds * 1000:8.0f} ms")
    print(f"  {'total':<22} {total * 1000:8.0f} ms")
    print(
        f"  {timings['_files']} files ({timings['_kept']} reviewed), {timings['_added']} added lines, "
        f"{timings['_findings']} findings, {timings['_published']} published"
    )

    tracemalloc.start()
    stages(diff_text)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak memory of the stages (tracemalloc): {peak / 1e6:.0f} MB")
    print(
        f"process peak RSS: {rss:.0f} MB (before the stages: {baseline_rss:.0f} MB, incl. the diff text)"
    )
    if args.engine:
        engine(contents, diff_text)
    if os.environ.get("BENCH_ASSERT"):
        assert total <= 3.0 and peak <= 300e6, (total, peak)


if __name__ == "__main__":
    main()
