"""`manage.py evaluate` on a real repository's history: the static reviewer replayed over
the newest merged pull requests (every head each had), and the time each head's review
took — what a team waits for an evaluation of its own repository.

    .venv/bin/python benchmarks/evaluation.py --repo ~/src/project --count 100

Prints the evaluation's figures (as the command reports them) and the time per reviewed
head: median, p90, the slowest, and the total against the number of heads.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.isolation import arguments, own_database  # noqa: E402

PYTHON = sys.executable


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repo", required=True, help="a clone of the repository to replay")
    parser.add_argument("--count", type=int, default=100, help="merged pull requests (default 100)")
    parser.add_argument(
        "--max-heads", type=int, default=6, help="heads per pull request (default 6)"
    )
    parser.add_argument("--reviewer", default="static", help="reviewer slug (default static)")
    arguments(parser, database="sqlite", port=None)
    args = parser.parse_args()
    with own_database(args.database, script="evaluation", keep=args.keep_database) as db:
        env = {**os.environ, "DATABASE_URL": db.url}
        subprocess.run([PYTHON, str(ROOT / "manage.py"), "migrate", "--noinput", "-v", "0"],
                       check=True, env=env, cwd=ROOT)  # fmt: skip
        started = time.perf_counter()
        completed = subprocess.run(
            [PYTHON, str(ROOT / "manage.py"), "evaluate", "--repo", args.repo, "--count",
             str(args.count), "--max-heads", str(args.max_heads), "--reviewer", args.reviewer,
             "--format", "json"],
            env=env, cwd=ROOT, capture_output=True, text=True,
        )  # fmt: skip
        wall = time.perf_counter() - started
        if completed.returncode != 0:
            raise SystemExit(f"manage.py evaluate failed: {completed.stderr.strip()[-500:]}")
        data = json.loads(completed.stdout)
        env_db = {**env, "DJANGO_SETTINGS_MODULE": "tasuku.settings"}
        seconds = _head_seconds(env_db, data["evaluation"])
    (score,) = data["reviewers"]
    print(f"repository: {args.repo}")
    print(f"merged pull requests: {data['pull_requests']}; heads reviewed: {score['reviews']} "
          f"(failed: {score['failed_reviews']})")  # fmt: skip
    print(f"comments: {score['comments']} ({score['comments_per_pull_request']} a pull request); "
          f"outcomes: {score['outcomes']}")  # fmt: skip
    if seconds:
        ordered = sorted(seconds)
        median = ordered[len(ordered) // 2]
        p90 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.9))]
        print(f"time per head: median {median:.2f} s, p90 {p90:.2f} s, slowest {ordered[-1]:.2f} s")
    print(f"total: {wall:.1f} s for {score['reviews']} heads "
          f"({wall / max(score['reviews'], 1):.2f} s a head, with the scoring and the start-up)")  # fmt: skip


def _head_seconds(env: dict[str, str], name: str) -> list[float]:
    """Each reviewed head's seconds, as the evaluation kept them."""
    script = (
        "import django, json; django.setup()\n"
        "from reviews.models import EvaluationItem\n"
        f"print(json.dumps(list(EvaluationItem.objects.filter(evaluation__name={name!r}, "
        "failure='').values_list('seconds', flat=True))))\n"
    )
    out = subprocess.run([PYTHON, "-c", script], env=env, cwd=ROOT, capture_output=True,
                         text=True, check=True).stdout  # fmt: skip
    return json.loads(out.strip().splitlines()[-1])


if __name__ == "__main__":
    main()
