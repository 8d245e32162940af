"""How good the `static` reviewer's comments are, on a built-in corpus of real-world-shaped
cases (or on ranges of repositories you pass).

For each case: a git repository is built (or yours is used), `manage.py review --format
json` reviews it exactly as a user runs it, and the bare tools (ruff with Tasuku's rule
selection, shellcheck, detect-secrets) run on the same head, restricted to the lines the
change added — as reviewdog does. Printed:

- recall: the bare tools' diagnostics on added lines that Tasuku also reports;
- findings off an added line (must be 0);
- published findings labelled worth a comment / noise (the corpus labels what it planted);
- blocking findings that are noise (must be 0);
- failed reviews (must be 0);
- time as a ratio to the bare tools.

    .venv/bin/python benchmarks/static_quality.py                 # the built-in corpus
    .venv/bin/python benchmarks/static_quality.py --repo PATH --base REF --head REF
    .venv/bin/python benchmarks/static_quality.py --history PATH [--history PATH …] \
        [--ranges 8] [--skip 0] [--to-grade ungraded.jsonl]       # real merged work, graded

`--history` reviews each repository's newest merged pull requests and prints every
comment with its grade from benchmarks/data/static_grades.json, precision, the rules'
record, and time and peak memory against the bare tools (benchmarks/static_history.py).

The reviews' rows go to --database (benchmarks/isolation.py; default: a SQLite file of
the run's own).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.isolation import arguments, own_database  # noqa: E402

PYTHON = sys.executable
AWS = "AKIAIOSFODNN7EXAMPLE"
AWS_REAL = "AKIAJ3PKQ5XW7ZC2LRMA"
GITHUB_TOKEN = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"


@dataclass
class Case:
    name: str
    base: dict[str, str | bytes]
    head: dict[str, str | bytes]
    # (path, line or 0 for any, rule prefix) -> "worth" | "noise" | "nit" (fine to say,
    # never blocking: a test key, a docs example)
    labels: dict[tuple[str, int, str], str] = field(default_factory=dict)


def corpus() -> list[Case]:
    shell = "#!/bin/bash\nset -e\n"
    return [
        Case("python bugs", {"app.py": "import os\n"}, {"app.py": (
            "import os\nimport sys\nimport subprocess\n\n\n"
            "def run(cmd, seen=[]):\n"
            "    seen.append(cmd)\n"
            "    return subprocess.call(cmd, shell=True)\n\n\n"
            "def parse(text):\n    return eval(text)\n\n\n"
            "def total(rows):\n    for i in range(len(rows)):\n        pass\n    return undefined_name\n"
        )}, {("app.py", 8, "ruff:S602"): "worth", ("app.py", 6, "ruff:B006"): "worth",
             ("app.py", 12, "ruff:S307"): "worth", ("app.py", 18, "ruff:F821"): "worth",
             ("app.py", 16, "ruff:B007"): "worth", ("app.py", 2, "ruff:F401"): "worth"}),
        Case("secrets in a README", {"README.md": "# Shop\n"}, {"README.md": (
            f"# Shop\n\nSet `GITHUB_TOKEN={GITHUB_TOKEN}` and\n`AWS_ACCESS_KEY_ID={AWS_REAL}`.\n"
        )}, {("README.md", 3, "detect-secrets"): "worth", ("README.md", 4, "detect-secrets"): "worth"}),
        Case("a secret in a comment", {"cfg.py": "X = 1\n"}, {"cfg.py": (
            f"X = 1\n# deploy key: {AWS_REAL}\n"
        )}, {("cfg.py", 2, "detect-secrets"): "worth"}),
        Case("a reStructuredText underline", {"docs/index.rst": "Intro\n"}, {"docs/index.rst": (
            "Intro\n=======\n\nText.\n"
        )}, {("docs/index.rst", 0, "hygiene"): "noise"}),
        Case("a real conflict", {"m.py": "A = 1\n"}, {"m.py": (
            "<<<<<<< HEAD\nA = 1\n=======\nA = 2\n>>>>>>> feature\n"
        )}, {("m.py", 1, "hygiene"): "worth"}),
        Case("Python 3.12 syntax", {"pyproject.toml": '[project]\nname = "x"\nrequires-python = ">=3.12"\n'},
             {"types_.py": "type Pair = tuple[int, int]\n"}, {("types_.py", 0, "ruff:invalid-syntax"): "noise"}),
        Case("test keys and docs examples", {"README.md": "# Doc\n"}, {
            "tests/fixtures/aws.json": f'{{"key": "{AWS}"}}\n',
            "docs/setup.md": "Set `password = \"changeme\"` in `local.cfg`.\n",
        }, {("tests/fixtures/aws.json", 0, "detect-secrets"): "nit",
            ("docs/setup.md", 0, "detect-secrets"): "nit"}),
        Case("a shell script with a dot in its name", {"README.md": "# x\n"}, {
            "install.nvm.sh": shell + "cp build/app.tar.gz $TARGET_DIR\n",
        }, {("install.nvm.sh", 3, "shellcheck:SC2086"): "worth"}),
        Case("a sourced sibling", {"lib.sh": shell + "greet() { echo hi; }\n"}, {
            "main.sh": shell + ". ./lib.sh\ngreet\n",
        }, {("main.sh", 0, "shellcheck:SC1091"): "noise"}),
        Case("a 3 MB shell script", {"README.md": "# x\n"}, {
            "big.sh": shell + "cp a $TARGET\n" + ("# " + "x" * 98 + "\n") * 31_000,
        }),
        Case("a Latin-1 file", {"README.md": "# x\n"}, {
            "legacy.py": ("# Déjà vu\nimport subprocess\nsubprocess.call(input(), shell=True)\n").encode("latin-1"),
        }, {("legacy.py", 3, "ruff:S602"): "worth"}),
    ]  # fmt: skip


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True
    ).stdout.decode()


def build(case: Case, where: Path) -> tuple[Path, str, str]:
    repo = where / case.name.replace(" ", "-")
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "user.email", "bench@example.com")
    git(repo, "config", "user.name", "Bench")
    for files, message in ((case.base, "base"), (case.head, "head")):
        for path, text in files.items():
            target = repo / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(text if isinstance(text, bytes) else text.encode())
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "-m", message)
    return repo, git(repo, "rev-parse", "HEAD~1").strip(), git(repo, "rev-parse", "HEAD").strip()


def added_lines(repo: Path, base: str, head: str) -> dict[str, set[int]]:
    """{path: head-side line numbers the change adds}, from git's own numbering."""
    out = subprocess.run(
        ["git", "-C", str(repo), "-c", "core.quotePath=false", "diff", "-U0", "--no-color",
         "--no-ext-diff", "--no-textconv", base, head],
        check=True, capture_output=True,
    ).stdout.decode(errors="replace")  # fmt: skip
    added: dict[str, set[int]] = {}
    path = ""
    for line in out.splitlines():
        if line.startswith("+++ "):
            path = line[6:] if line.startswith("+++ b/") else ""
        elif line.startswith("@@") and path:
            target = line.split("+", 1)[1].split(" ", 1)[0]
            start, _, count = target.partition(",")
            count_n = int(count) if count else 1
            added.setdefault(path, set()).update(range(int(start), int(start) + count_n))
    return added


# What the bare tools say that is not a diagnostic of the code: shellcheck's "not following
# a sourced file" (it ran without -x, which Tasuku uses), ruff's "could not read" (a file
# that is not UTF-8; Tasuku reads it with replacement).
NOT_DIAGNOSTICS = ("shellcheck:SC1091", "ruff:E902")


def bare_tools(repo: Path, added: dict[str, set[int]]) -> tuple[set[tuple[str, int, str]], float]:
    """The bare tools' diagnostics on added lines, as (path, line, rule), and their time."""
    sys.path.insert(0, str(ROOT))
    from sandbox.engines.static.ruff import IGNORE, SELECT

    found: set[tuple[str, int, str]] = set()
    started = time.perf_counter()
    python = [p for p in added if p.endswith(".py")]
    if python:
        run = subprocess.run(
            [str(Path(PYTHON).parent / "ruff"), "check", "--isolated", "--no-cache", "--exit-zero",
             "--output-format", "json", "--select", ",".join(SELECT), "--ignore", ",".join(IGNORE), "--", *python],
            cwd=repo, capture_output=True,
        )  # fmt: skip
        for item in json.loads(run.stdout or b"[]"):
            code = item.get("code") or "invalid-syntax"
            found.add(
                (os.path.relpath(item["filename"], repo), item["location"]["row"], f"ruff:{code}")
            )
    shells = [p for p in added if p.endswith(".sh")]
    if shells:
        shellcheck = str(Path(PYTHON).parent / "shellcheck")
        run = subprocess.run(
            [shellcheck, "-f", "json", "--", *shells], cwd=repo, capture_output=True
        )
        for item in json.loads(run.stdout or b"[]"):
            found.add((item["file"], item["line"], f"shellcheck:SC{item['code']}"))
    run = subprocess.run(
        [str(Path(PYTHON).parent / "detect-secrets"), "scan", "--all-files"], cwd=repo,
        capture_output=True,
    )  # fmt: skip
    for path, secrets in (json.loads(run.stdout or b"{}").get("results") or {}).items():
        for secret in secrets:
            found.add((path, secret["line_number"], "detect-secrets"))
    elapsed = time.perf_counter() - started
    on_added = {
        (p, n, r) for p, n, r in found if n in added.get(p, set()) and r not in NOT_DIAGNOSTICS
    }
    return on_added, elapsed


def review(repo: Path, base: str, head: str, env: dict[str, str]) -> tuple[dict | None, float, str]:
    started = time.perf_counter()
    run = subprocess.run(
        [PYTHON, str(ROOT / "manage.py"), "review", "--repo", str(repo), "--base", base,
         "--head", head, "--format", "json"],
        capture_output=True, env=env, cwd=ROOT,
    )  # fmt: skip
    elapsed = time.perf_counter() - started
    if run.returncode not in (0, 1):
        return None, elapsed, run.stderr.decode(errors="replace").strip()[-300:]
    return json.loads(run.stdout), elapsed, ""


def matches(finding: dict, rule: str) -> bool:
    return (finding.get("rule") or "").startswith(rule) or (
        rule == "detect-secrets" and (finding.get("rule") or "").startswith("detect-secrets")
    )


def label_of(case: Case, finding: dict) -> str:
    for (path, line, rule), label in case.labels.items():
        if (
            finding["path"] == path
            and (line == 0 or finding["start_line"] == line)
            and matches(finding, rule)
        ):
            return label
    return ""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", help="review this repository instead of the corpus")
    parser.add_argument("--base")
    parser.add_argument("--head", default="HEAD")
    parser.add_argument("--cases", type=int, help="only the first N cases of the corpus")
    parser.add_argument("--history", action="append", help="a clone whose history to review")
    parser.add_argument("--ranges", type=int, default=8, help="ranges per repository")
    parser.add_argument("--skip", type=int, default=0, help="newest ranges to skip")
    parser.add_argument("--grades", type=Path, default=None, help="the graded set")
    parser.add_argument("--to-grade", type=Path, help="write ungraded comments here (JSON lines)")
    parser.add_argument(
        "--first-push", action="store_true",
        help="also review each merged pull request at its first commit",
    )  # fmt: skip
    parser.add_argument(
        "--warm", action="store_true",
        help="review in this one process, as a worker does (no start-up per review)",
    )  # fmt: skip
    parser.add_argument(
        "--whole-tree", action="store_true",
        help="with --warm: write every file of the head for the static reviewer, as "
        "before it wrote only what it reads (to compare the two: the same comments)",
    )  # fmt: skip
    arguments(parser, database="sqlite", port=None)
    args = parser.parse_args()
    if args.whole_tree and not args.warm:
        parser.error("--whole-tree needs --warm (the review in this process)")
    if args.history:
        from benchmarks.static_history import GRADES
        from benchmarks.static_history import run as history

        with own_database(args.database, script="static_quality", keep=args.keep_database) as db:
            env = {**os.environ, "DATABASE_URL": db.url}
            subprocess.run([PYTHON, str(ROOT / "manage.py"), "migrate", "--noinput", "-v", "0"],
                           check=True, env=env, cwd=ROOT)  # fmt: skip
            repos = [Path(p).resolve() for p in args.history]
            history(repos, args.ranges, args.skip, env, args.grades or GRADES, args.to_grade,
                    first_push=args.first_push, warm=args.warm,
                    whole_tree=args.whole_tree)  # fmt: skip
        return

    with (
        tempfile.TemporaryDirectory(prefix="tasuku-quality-") as tmp,
        own_database(args.database, script="static_quality", keep=args.keep_database) as db,
    ):
        where = Path(tmp)
        env = {**os.environ, "DATABASE_URL": db.url}
        subprocess.run([PYTHON, str(ROOT / "manage.py"), "migrate", "--noinput", "-v", "0"],
                       check=True, env=env, cwd=ROOT)  # fmt: skip
        if args.repo:
            repo = Path(args.repo).resolve()
            base = args.base or git(repo, "merge-base", "HEAD", "main").strip()
            cases = [
                (Case(repo.name, {}, {}), repo, base, git(repo, "rev-parse", args.head).strip())
            ]
        else:
            cases = [(case, *build(case, where)) for case in corpus()[: args.cases]]

        totals = dict(bare=0, recalled=0, off_line=0, worth=0, noise=0, nits=0, unlabelled=0,
                      blocking_noise=0, failed=0, engine_s=0.0, bare_s=0.0)  # fmt: skip
        print(f"{'case':38} {'recall':>8} {'off-line':>8} {'worth':>6} {'noise':>6} {'time':>8}")
        for case, repo, base, head in cases:
            added = added_lines(repo, base, head)
            truth, bare_s = bare_tools(repo, added)
            data, engine_s, error = review(repo, base, head, env)
            totals["bare_s"] += bare_s
            totals["engine_s"] += engine_s
            if data is None:
                totals["failed"] += 1
                print(f"{case.name:38} FAILED: {error}")
                continue
            findings = data["findings"]
            conflicted = {f["path"] for f in findings if "conflict" in (f["title"] or "").lower()}
            # Conflict markers make the file unparseable: ruff's syntax errors on them are
            # the conflict Tasuku reports once.
            truth = {t for t in truth if not (t[0] in conflicted and t[2] == "ruff:invalid-syntax")}
            reported = {(f["path"], f["start_line"], f.get("rule") or "") for f in findings}
            recalled = sum(
                1
                for p, n, r in truth
                if any(fp == p and fn == n and fr.startswith(r) for fp, fn, fr in reported)
            )
            off_line = sum(
                1 for f in findings
                if f["state"] == "open" and f["side"] == "RIGHT" and f["start_line"] not in added.get(f["path"], set())
            )  # fmt: skip
            published = [f for f in findings if f["state"] == "open"]
            labels = [label_of(case, f) for f in published]
            worth, noise = labels.count("worth"), labels.count("noise")
            totals["nits"] += labels.count("nit")
            totals["blocking_noise"] += sum(
                1
                for f, label in zip(published, labels, strict=True)
                if label in ("noise", "nit") and f["blocking"]
            )
            totals["bare"] += len(truth)
            totals["recalled"] += recalled
            totals["off_line"] += off_line
            totals["worth"] += worth
            totals["noise"] += noise
            totals["unlabelled"] += labels.count("")
            recall = f"{recalled}/{len(truth)}"
            print(
                f"{case.name:38} {recall:>8} {off_line:>8} {worth:>6} {noise:>6} {engine_s:7.1f}s"
            )

        recall = totals["recalled"] / totals["bare"] if totals["bare"] else 1.0
        labelled = totals["worth"] + totals["noise"]
        print()
        print(
            f"recall against the bare tools on added lines: {totals['recalled']}/{totals['bare']} = {recall:.0%}"
        )
        print(f"findings off an added line: {totals['off_line']} (must be 0)")
        print(f"failed reviews: {totals['failed']} (must be 0)")
        print(
            f"published findings worth a comment: {totals['worth']} of {labelled} labelled"
            f" ({totals['worth'] / labelled:.0%})"
            if labelled
            else "no labelled findings"
        )
        print(f"nits (test keys, docs examples) published as non-blocking: {totals['nits']}")
        print(f"unlabelled published findings: {totals['unlabelled']}")
        print(f"blocking findings that are noise or nits: {totals['blocking_noise']} (must be 0)")
        ratio = totals["engine_s"] / totals["bare_s"] if totals["bare_s"] else 0
        print(
            f"time: Tasuku {totals['engine_s']:.1f} s, bare tools {totals['bare_s']:.1f} s"
            f" ({ratio:.1f}x, Tasuku's includes the process start-up, checkout and database)"
        )


if __name__ == "__main__":
    main()
