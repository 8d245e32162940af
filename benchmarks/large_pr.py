"""A very large pull request through diff parsing, filters and compression.

    .venv/bin/python benchmarks/large_pr.py [--files 5000] [--lines 40] [--budget 120000]
    .venv/bin/python benchmarks/large_pr.py --repo PATH --base REF --head REF [--budget 120000]

Synthetic (the default): a pull request of 5,000 files and ~200,000 changed lines (new
and modified files, lock files and build output among them; `--release` makes a tenth
of them translation catalogs, release notes, documentation and tests, as a release's
pull request has) is parsed, filtered and compressed to a reviewer's context budget,
as the pipeline does before the engine runs. Beside it, the time `unidiff` alone takes
to parse the same diff: the floor for any parser built on it. Prints both, their ratio,
and the peak memory of the stages.

Real (`--repo`): the diff between two commits of a local git repository, computed as
the workspace computes it, filtered with the head's files at hand (generated markers,
build folders), and compressed.

Either way it prints how the budget was spent by class of file (source, tests,
documentation, translations, release notes, data: reviews/scope/reviewability.py), ranked by
reviewability as Tasuku ranks now and by change volume alone as it used to, and what was
clipped and why.
"""

from __future__ import annotations

import argparse
import gc
import io
import subprocess
import sys
import tarfile
import time
import tracemalloc
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from pipeline import synthetic_pr  # noqa: E402
from unidiff import PatchSet  # noqa: E402

from reviews.scope.compression import compress, over_budget  # noqa: E402
from reviews.scope.diff import diff_parse  # noqa: E402
from reviews.scope.filters import paths_filter  # noqa: E402
from reviews.scope.reviewability import CLASSES, classify  # noqa: E402
from sandbox.git import DIFF  # noqa: E402


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


def release_mix(files: int, lines: int) -> str:
    """A release-shaped slice of a pull request: translation catalogs (long, and many),
    release notes, documentation, tests and a data file, a tenth of `files` in all."""
    parts = []
    count = max(files // 10, 6)
    for index in range(count):
        kind = index % 6
        if kind in (0, 1):
            path, line = f"app/locale/l{index}/LC_MESSAGES/django.po", 'msgstr "Traduction {n}"'
            size = lines * 6
        elif kind == 2:
            path, line = f"docs/releases/5.{index}.txt", "* A release note about change {n}."
            size = lines * 4
        elif kind == 3:
            path, line = f"docs/topics/t{index}.txt", "Documentation of topic {n}."
            size = lines * 2
        elif kind == 4:
            path, line = f"tests/t{index}/test_m{index}.py", "    assert value_{n} == {n}"
            size = lines
        else:
            path, line = f"data/table{index}.csv", "{n},name {n},value {n}"
            size = lines * 3
        body = "".join("+" + line.format(n=n) + "\n" for n in range(size))
        parts.append(
            f"diff --git a/{path} b/{path}\nnew file mode 100644\nindex 0000000..1111111\n"
            f"--- /dev/null\n+++ b/{path}\n@@ -0,0 +1,{size} @@\n{body}"
        )
    return "".join(parts)


def real_pr(repo: Path, base: str, head: str) -> tuple[str, object, list[str]]:
    """The diff between two commits of `repo` as the workspace computes it, with a way
    to read the start of each head file and the head's tree (for the filters)."""
    git = ["git", "-C", str(repo)]
    text = subprocess.run(  # noqa: S603
        [*git, *DIFF, "--find-renames", "--unified=3", base, head, "--"],
        capture_output=True, text=True, check=True, errors="surrogateescape",
    ).stdout  # fmt: skip
    tree = subprocess.run(  # noqa: S603
        [*git, "ls-tree", "-r", "-z", "--name-only", head],
        capture_output=True, text=True, check=True,
    ).stdout.split("\0")  # fmt: skip
    # The start of each of the head's regular files, from `git archive`, read in memory:
    # the repository's index and work tree untouched, nothing written (a link is no file).
    archive = subprocess.run(  # noqa: S603
        [*git, "archive", "--format=tar", head], capture_output=True, check=True
    ).stdout
    starts: dict[str, bytes] = {}
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        for member in tar:
            if member.isfile():
                starts[member.name] = tar.extractfile(member).read(4096)

    def read(path: str) -> str | None:
        start = starts.get(path)
        return None if start is None else start.decode(errors="replace")

    return text, read, [p for p in tree if p]


def budget_by_class(text: str, budget: int, *, head=None, tree=()) -> None:
    """How the budget was spent by class of file, ranked as Tasuku ranks now and by
    change volume alone (as it used to); what was clipped and why."""
    diff = diff_parse(text)
    kept, filtered = paths_filter(
        diff.paths, binary=[f.path for f in diff.files if f.binary], head=head, tree=tree
    )
    now = compress(diff, kept, budget)
    before = compress(diff, kept, budget, classify=None)
    names = list(dict.fromkeys(c.name for c in CLASSES))
    changed = Counter(classify(p).name for p in kept)
    print(f"\nbudget by class of file ({budget:,} tokens; {len(diff.files)} files changed, "
          f"{len(filtered)} filtered, {len(kept)} reviewed):")  # fmt: skip
    print(f"  {'class':<14} {'files':>6}   {'by change volume (before)':>27}   "
          f"{'by reviewability (now)':>27}")  # fmt: skip
    for name in names:
        cells = []
        for result in (before, now):
            tokens = sum(n for path, n in result.spent if classify(path).name == name)
            shown = sum(1 for path, _ in result.spent if classify(path).name == name)
            cells.append(f"{tokens / budget:>5.1%} ({shown:>4} files shown)")
        print(f"  {name:<14} {changed.get(name, 0):>6}   {cells[0]:>27}   {cells[1]:>27}")
    for label, result in (("before", before), ("now", now)):
        print(f"  {label}: {result.tokens:,} tokens used, {len(result.included)} files shown "
              f"whole or in part, {sum(1 for o in result.omitted if over_budget(o.reason))} "
              "left out for room")  # fmt: skip
    reasons = Counter(o.reason for o in now.omitted)
    print("  now, what was left out and why:")
    for reason, count in reasons.most_common():
        print(f"    {count:>5}  {reason}")
    top = sorted(before.spent, key=lambda item: -item[1])[:6]
    print("  before, the largest shares: " + "; ".join(
        f"{path} {n / budget:.1%}" for path, n in top))  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=5000)
    parser.add_argument("--lines", type=int, default=40)
    parser.add_argument("--budget", type=int, default=120_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--release", action="store_true", help="a release-shaped mix of files")
    parser.add_argument("--repo", type=Path, help="a local git repository: a real pull request")
    parser.add_argument("--base", help="with --repo: the base commit")
    parser.add_argument("--head", help="with --repo: the head commit")
    args = parser.parse_args()

    if args.repo:
        if not (args.base and args.head):
            parser.error("--repo needs --base and --head")
        text, read, tree = real_pr(args.repo, args.base, args.head)
        print(f"{args.repo} {args.base}..{args.head}: {len(text) / 1e6:.1f} MB of diff")
        timings = stages(text, args.budget)
        print(f"  parse {timings['parse'] * 1000:.0f} ms, filter {timings['filter'] * 1000:.0f} "
              f"ms, compress {timings['compress'] * 1000:.0f} ms")  # fmt: skip
        budget_by_class(text, args.budget, head=read, tree=tree)
        return

    text, _ = synthetic_pr(args.files, args.lines)
    if args.release:
        text += release_mix(args.files, args.lines)
    print(
        f"synthetic pull request: {text.count('diff --git ')} files, "
        f"{len(text) / 1e6:.1f} MB of diff"
    )
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
    budget_by_class(text, args.budget)


if __name__ == "__main__":
    main()
