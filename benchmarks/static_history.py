"""The static reviewer on real history: what it would have said on a repository's merged
work, graded, and what it cost against the bare tools (`static_quality.py --history`).

Ranges come from the default branch's first-parent history, newest first: a merge
commit's pull request (the merge base of its parents .. its second parent, the branch
as it was merged), or a squash-merged commit (its parent .. it). Each range is
reviewed exactly as a user runs `manage.py review --format json`; every comment a pull
request would get (an open finding published inline) is printed with its rule, where
it is and the code there, and looked up in the graded set (`benchmarks/data/
static_grades.json`, keyed by repository, head, path, rule and line). Grades are given
by a person reading the code at the head (how: benchmarks/README.md); ungraded comments
are written with their code to `--to-grade` so a grader can add them.

The bare tools (ruff, shellcheck, oxlint, hadolint, zizmor and detect-secrets, each on
the changed files of its kind, run one after another in a checkout of the head, as a CI
job that already has the checkout runs them) are timed on the same ranges, and each
command's peak memory is the largest sum of proportional resident memory (PSS: a page
shared by forked processes counted once) of its process tree, sampled every 10 ms.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

ROOT = Path(__file__).resolve().parents[1]
PYTHON = sys.executable
BIN = Path(PYTHON).parent
GRADES = ROOT / "benchmarks" / "data" / "static_grades.json"
CONTEXT_LINES = 3


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True
    ).stdout.decode(errors="replace")


@dataclass
class Range:
    repository: str
    base: str
    head: str
    subject: str


def ranges(repo: Path, count: int, skip: int = 0, *, first_push: bool = False) -> list[Range]:
    """The newest `count` ranges of the default branch's first-parent history (after
    skipping `skip`): one per merged pull request. With `first_push`, a merged pull
    request of several commits also gives the range to its first commit — the branch as
    a first review would have seen it, before the fixes its author made."""
    listed = git(repo, "log", "--first-parent", "--format=%H %P%x09%s", "HEAD").splitlines()
    found: list[Range] = []
    for line in listed[skip:]:
        shas, _, subject = line.partition("\t")
        commit, *parents = shas.split()
        if len(parents) == 2:
            base = git(repo, "merge-base", parents[0], parents[1]).strip()
            head = parents[1]
        elif len(parents) == 1:
            base, head = parents[0], commit
        else:
            continue  # the root commit: nothing before it to compare with
        # Without rename detection, which reads the files: a snapshot lacking one of
        # them still lists its ranges (`complete` skips those, saying so).
        if not git(repo, "diff", "--no-renames", "--name-only", base, head).strip():
            continue
        found.append(Range(repo.name, base, head, subject[:100]))
        if first_push and len(parents) == 2:
            commits = git(
                repo, "rev-list", "--first-parent", "--reverse", f"{base}..{head}"
            ).split()
            if (
                len(commits) > 1
                and git(repo, "diff", "--no-renames", "--name-only", base, commits[0]).strip()
            ):
                found.append(Range(repo.name, base, commits[0], f"{subject[:80]} (first push)"))
        if len(found) >= count:
            break
    return found[:count]


# --- peak memory of a process tree --------------------------------------------------------


def _memory(pid: int) -> int:
    """A process's proportional resident memory (PSS: a page shared by n processes counts
    1/n in each — a forked process shares its parent's pages), else its resident size."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as handle:
            for line in handle:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    with open(f"/proc/{pid}/statm") as handle:
        return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _cmdline(pid: int) -> bytes:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            return handle.read()
    except OSError:
        return b""


def _tree_rss(pid: int, *, forks_of_root: bool = True) -> int:
    """Memory of `pid` and every process below it (`_memory` of each). Without
    `forks_of_root`, a child of `pid` still running `pid`'s program is left out: the
    moment between fork and exec of a subprocess `pid` starts, whose pages are `pid`'s
    (read one after the other, the two would count them twice)."""
    total, queue, seen = 0, [pid], set()
    root = _cmdline(pid)
    while queue:
        current = queue.pop()
        if current in seen:
            continue
        seen.add(current)
        try:
            if not forks_of_root and current != pid and _cmdline(current) == root:
                continue
            total += _memory(current)
            for task in os.listdir(f"/proc/{current}/task"):
                with open(f"/proc/{current}/task/{task}/children") as handle:
                    queue += [int(p) for p in handle.read().split()]
        except (OSError, ValueError):
            continue
    return total


def measured(command: list[str], **kwargs) -> tuple[subprocess.CompletedProcess, float, int]:
    """Run `command`: (its result, wall seconds, peak resident bytes of its tree)."""
    started = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kwargs)
    peak = 0
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not done.is_set():
            peak = max(peak, _tree_rss(process.pid))
            done.wait(0.01)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    out, err = process.communicate()
    done.set()
    sampler.join()
    elapsed = time.perf_counter() - started
    return subprocess.CompletedProcess(command, process.returncode, out, err), elapsed, peak


# --- the bare tools -------------------------------------------------------------------------


def bare_commands(changed: list[str]) -> list[list[str]]:
    """Each bare tool on the changed files of its kind (as `./name`, after `--`)."""
    sys.path.insert(0, str(ROOT))
    from sandbox.engines.static.hadolint import applies as is_dockerfile
    from sandbox.engines.static.oxlint import EXTENSIONS as SCRIPT_EXTENSIONS
    from sandbox.engines.static.ruff import IGNORE, SELECT

    def named(paths):
        return ["--", *(f"./{p}" for p in paths)]

    python = [p for p in changed if p.endswith((".py", ".pyi"))]
    shell = [p for p in changed if p.endswith((".sh", ".bash", ".bats"))]
    scripts = [p for p in changed if p.lower().endswith(SCRIPT_EXTENSIONS)]

    class _Named:
        def __init__(self, path: str) -> None:
            self.path = path

    docker = [p for p in changed if is_dockerfile(_Named(p))]
    workflows = [
        p for p in changed if p.startswith(".github/workflows/") and p.endswith((".yml", ".yaml"))
    ]
    commands = []
    if python:
        commands.append([str(BIN / "ruff"), "check", "--isolated", "--no-cache", "--exit-zero",
                         "--output-format", "json", "--select", ",".join(SELECT), "--ignore",
                         ",".join(IGNORE), *named(python)])  # fmt: skip
    if shell:
        commands.append([str(BIN / "shellcheck"), "-f", "json", *named(shell)])
    if scripts:
        commands.append([str(BIN / "oxlint"), "--format", "json", *named(scripts)])
    if docker:
        commands.append([str(BIN / "hadolint"), "--no-fail", "-f", "json", *named(docker)])
    if workflows:
        commands.append([str(BIN / "zizmor"), "--offline", "--no-progress", "--format", "json",
                         *named(workflows)])  # fmt: skip
    if changed:
        commands.append([str(BIN / "detect-secrets"), "scan", *(f"./{p}" for p in changed)])
    return commands


def complete(repo: Path, item: Range) -> bool:
    """Whether the clone holds every file of the range's base and head (a snapshot of a
    public repository can lack its largest files: such a range is skipped, and said so)."""
    listed = [*git(repo, "ls-tree", "-r", item.head).splitlines(),
              *git(repo, "ls-tree", "-r", item.base).splitlines()]  # fmt: skip
    blobs = [line.split()[2] for line in listed if line.split()[1:2] == ["blob"]]
    check = subprocess.run(
        ["git", "-C", str(repo), "cat-file", "--batch-check"],
        input="\n".join(blobs) + "\n", capture_output=True, text=True,
    )  # fmt: skip
    return " missing" not in check.stdout


def bare_tools(repo: Path, item: Range, where: Path) -> tuple[float, int]:
    """The bare tools one after another on the range's changed files, in a checkout of
    its head: (wall seconds, the largest peak of any one of them)."""
    checkout = where / "bare"
    git(repo, "worktree", "add", "--detach", "--force", str(checkout), item.head)
    try:
        changed = [
            p
            for p in git(repo, "diff", "--name-only", "--diff-filter=AMR", "-z", item.base,
                         item.head).split("\0")
            if p and (checkout / p).is_file() and not (checkout / p).is_symlink()
        ]  # fmt: skip
        seconds, peak = 0.0, 0
        for command in bare_commands(changed):
            _, elapsed, used = measured(command, cwd=checkout)
            seconds += elapsed
            peak = max(peak, used)
        return seconds, peak
    finally:
        git(repo, "worktree", "remove", "--force", str(checkout))


# --- grades ---------------------------------------------------------------------------------


@dataclass
class Graded:
    repositories: dict = field(default_factory=dict)
    grades: dict[tuple, dict] = field(default_factory=dict)

    @classmethod
    def load(cls, path: Path) -> Graded:
        if not path.exists():
            return cls()
        data = json.loads(path.read_text())
        grades = {_key(g["repository"], g["head"], g["path"], g["rule"], g["line"]): g
                  for g in data.get("grades", [])}  # fmt: skip
        return cls(data.get("repositories", {}), grades)


def _key(repository: str, head: str, path: str, rule: str, line: int) -> tuple:
    return (repository, head[:12], path, rule, int(line))


def code_around(repo: Path, head: str, path: str, line: int) -> str:
    """The lines around `line` of `path` at `head`, numbered."""
    try:
        text = git(repo, "show", f"{head}:{path}")
    except subprocess.CalledProcessError:
        return ""
    lines = text.split("\n")
    first, last = max(1, line - CONTEXT_LINES), min(len(lines), line + CONTEXT_LINES)
    return "\n".join(
        f"{n:5}{'>' if n == line else ' '} {lines[n - 1]}" for n in range(first, last + 1)
    )


def suggestion_breaks(repo: Path, head: str, finding: dict) -> bool | None:
    """Whether applying the finding's suggestion leaves its file unparseable (Python:
    compile; shell: `bash -n`); None when there is no suggestion or no way to tell."""
    suggestion = finding.get("suggestion")
    if suggestion is None:
        return None
    path = finding["path"]
    try:
        text = git(repo, "show", f"{head}:{path}")
    except subprocess.CalledProcessError:
        return None
    lines = text.split("\n")
    start, end = finding["start_line"], finding["end_line"]
    patched = "\n".join([*lines[: start - 1], *suggestion.split("\n"), *lines[end:]])
    if path.endswith(".py"):
        try:
            compile(patched, path, "exec")
        except SyntaxError:
            try:
                compile(text, path, "exec")
            except SyntaxError:
                return None  # it did not parse before either (another Python version)
            return True
        return False
    if path.endswith((".sh", ".bash")):
        with tempfile.NamedTemporaryFile("w", suffix=".sh") as handle:
            handle.write(patched)
            handle.flush()
            return subprocess.run(["bash", "-n", handle.name], capture_output=True).returncode != 0
    return None


# --- the run --------------------------------------------------------------------------------


def stage_seconds(env: dict[str, str], run_id: int) -> float:
    """The review's own stages (admission to publication: checkout, engine, validation),
    from its attempt's stage times: what a worker spends, without the command's start-up
    (Python, Django, the database). 0 when the database is not a SQLite file."""
    url = env.get("DATABASE_URL", "")
    if not url.startswith("sqlite:///"):
        return 0.0
    import sqlite3

    with sqlite3.connect(url.removeprefix("sqlite://")) as db:
        row = db.execute(
            "SELECT stage_times FROM reviews_runattempt WHERE run_id = ? ORDER BY number DESC",
            (run_id,),
        ).fetchone()
    return sum(s.get("seconds") or 0 for s in json.loads(row[0])) if row else 0.0


def in_process(
    repo: Path, item: Range, env: dict[str, str]
) -> tuple[subprocess.CompletedProcess, float, int]:
    """The review in this process, as a worker makes it: Django set up once, the engine's
    fork server warm after the first. (result, wall seconds, the most memory the review
    added to this process's tree above what it held at rest before it: the engine, its
    checkers and what the review keeps while it runs — not the worker's own standing
    memory, which no review adds)."""
    import io

    os.environ["DATABASE_URL"] = env["DATABASE_URL"]
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tasuku.settings")
    import django
    from django.core.management import call_command

    django.setup()
    out = io.StringIO()
    at_rest = _tree_rss(os.getpid(), forks_of_root=False)
    peak = at_rest
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not done.is_set():
            peak = max(peak, _tree_rss(os.getpid(), forks_of_root=False))
            done.wait(0.01)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    started = time.perf_counter()
    code = 0
    try:
        call_command("review", "--repo", str(repo), "--base", item.base, "--head", item.head,
                     "--format", "json", stdout=out)  # fmt: skip
    except SystemExit as exc:
        code = int(exc.code or 0)
    except Exception as exc:  # noqa: BLE001 - a failed review is counted and said
        return subprocess.CompletedProcess([], 2, b"", str(exc).encode()), 0.0, 0
    finally:
        done.set()
        sampler.join()
    elapsed = time.perf_counter() - started
    added = max(peak - at_rest, 0)
    return subprocess.CompletedProcess([], code, out.getvalue().encode(), b""), elapsed, added


def run(repos: list[Path], count: int, skip: int, env: dict[str, str], grades_path: Path,
        to_grade: Path | None, *, first_push: bool = False, warm: bool = False,
        whole_tree: bool = False) -> None:  # fmt: skip
    graded = Graded.load(grades_path)
    if whole_tree:
        os.environ["DATABASE_URL"] = env["DATABASE_URL"]
        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tasuku.settings")
        import django

        django.setup()
        from reviews.core import stages

        stages.materialise_for = lambda reviewer: None  # every file written, as before
    totals: Counter = Counter()
    by_rule: dict[str, Counter] = {}
    ungraded: list[dict] = []
    times: list[tuple[float, float, int, int]] = []
    languages_unchecked: Counter = Counter()
    with tempfile.TemporaryDirectory(prefix="tasuku-history-") as scratch:
        where = Path(scratch)
        for repo in repos:
            for item in ranges(repo, count, skip, first_push=first_push):
                if not complete(repo, item):
                    totals["skipped"] += 1
                    print(f"\n## {repo.name} {item.base[:8]}..{item.head[:8]} skipped: this "
                          "clone lacks a file of its head (a snapshot without its largest files)")  # fmt: skip
                    continue
                totals["ranges"] += 1
                if warm:
                    completed, seconds, peak = in_process(repo, item, env)
                else:
                    completed, seconds, peak = measured(
                        [PYTHON, str(ROOT / "manage.py"), "review", "--repo", str(repo),
                         "--base", item.base, "--head", item.head, "--format", "json"],
                        env=env, cwd=ROOT,
                    )  # fmt: skip
                bare_s, bare_peak = bare_tools(repo, item, where)
                times.append((seconds, bare_s, peak, bare_peak))
                span = f"{repo.name} {item.base[:8]}..{item.head[:8]}"
                if completed.returncode not in (0, 1):
                    totals["failed"] += 1
                    tail = completed.stderr.decode(errors="replace").strip()[-300:]
                    print(f"\n## {span} FAILED: {tail}")
                    continue
                data = json.loads(completed.stdout)
                review, findings = data["review"], data["findings"]
                stages = stage_seconds(env, review["run"])
                times[-1] = (seconds, bare_s, peak, bare_peak, stages)
                coverage = review.get("coverage") or []
                totals["files"] += len(coverage)
                unreviewed = []
                for entry in coverage:
                    reason = entry.get("reason") or ""
                    if entry.get("status") != "not reviewed":
                        continue
                    unreviewed.append(f"{entry['path']} ({reason})")
                    if reason.startswith("no checker for"):
                        languages_unchecked[reason.split(" (", 1)[0][len("no checker for ") :]] += 1
                comments = [f for f in findings if f.get("published")]
                print(f"\n## {span}  {item.subject}")
                print(f"   {len(coverage)} files, {len(comments)} comments, {seconds:.1f} s, its "
                      f"stages {stages:.1f} s (bare tools {bare_s:.1f} s), state {review['state']}")  # fmt: skip
                for said in unreviewed[:10]:
                    print(f"   not reviewed: {said}")
                for finding in comments:
                    totals["comments"] += 1
                    rule = finding.get("rule") or ""
                    key = _key(repo.name, item.head, finding["path"], rule, finding["start_line"])
                    grade = graded.grades.get(key, {}).get("grade", "")
                    totals[grade or "ungraded"] += 1
                    totals["blocking"] += bool(finding["blocking"])
                    if grade == "noise" and finding["blocking"]:
                        totals["blocking noise"] += 1
                    breaks = suggestion_breaks(repo, item.head, finding)
                    if breaks is not None:
                        totals["suggestions"] += 1
                        totals["suggestions that break"] += int(breaks)
                    family = rule.split(":", 1)[0] + ":" + rule.split(":", 1)[-1].split(" ")[0]
                    by_rule.setdefault(family, Counter())[grade or "ungraded"] += 1
                    where_ = f"{finding['path']}:{finding['start_line']}"
                    print(f"   - [{grade or 'ungraded'}] {where_} {rule} {finding['severity']}"
                          f"{' blocking' if finding['blocking'] else ''}: {finding['title']}")  # fmt: skip
                    if not grade:
                        ungraded.append({
                            "repository": repo.name, "base": item.base, "head": item.head,
                            "subject": item.subject, "path": finding["path"],
                            "line": finding["start_line"], "rule": rule,
                            "severity": finding["severity"], "title": finding["title"],
                            "body": finding["body"], "suggestion": finding.get("suggestion"),
                            "code": code_around(repo, item.head, finding["path"],
                                                finding["start_line"]),
                            "grade": "", "why": "",
                        })  # fmt: skip
    _report(totals, by_rule, times, languages_unchecked, warm=warm)
    if to_grade is not None:
        to_grade.write_text("".join(json.dumps(u) + "\n" for u in ungraded))
        print(f"\n{len(ungraded)} ungraded comments written to {to_grade}")


def _report(
    totals: Counter, by_rule: dict[str, Counter], times, unchecked: Counter, *, warm: bool = False
) -> None:
    graded = totals["useful"] + totals["acceptable"] + totals["noise"]
    print("\n# Figures")
    print(f"ranges reviewed: {totals['ranges']} ({totals['failed']} failed, must be 0; "
          f"{totals['skipped']} skipped, their clone incomplete); changed files: "
          f"{totals['files']}")  # fmt: skip
    print(f"comments a pull request would get: {totals['comments']} "
          f"({totals['blocking']} blocking); graded {graded}, ungraded {totals['ungraded']}")  # fmt: skip
    if graded:
        good = totals["useful"] + totals["acceptable"]
        print(f"  useful {totals['useful']}, acceptable {totals['acceptable']}, noise "
              f"{totals['noise']}: useful or acceptable {good / graded:.0%} (aim: at least 75 %), "
              f"noise {totals['noise'] / graded:.0%} (aim: at most 10 %)")  # fmt: skip
    print(f"blocking comments graded noise: {totals['blocking noise']} (must be 0)")
    print(f"suggestions checked: {totals['suggestions']}; that break the file: "
          f"{totals['suggestions that break']} (must be 0)")  # fmt: skip
    if unchecked:
        print("changed files no checker reads, by language: "
              + ", ".join(f"{k} {v}" for k, v in unchecked.most_common()))  # fmt: skip
    if by_rule:
        print("\nby rule (useful / acceptable / noise / ungraded):")
        for rule, counts in sorted(by_rule.items(), key=lambda kv: -sum(kv[1].values())):
            print(f"  {rule:48} {counts['useful']:3} {counts['acceptable']:3} "
                  f"{counts['noise']:3} {counts['ungraded']:3}")  # fmt: skip
    if times:
        tasuku = sum(t[0] for t in times)
        bare = sum(t[1] for t in times)
        peaks = sorted(t[2] / t[3] for t in times if t[3])
        stages = sum(t[4] for t in times if len(t) > 4)
        if warm:
            print(f"\ntime: reviews in one warm process (as a worker makes them: checkout, "
                  f"engine, validation, the database) {tasuku:.1f} s, bare tools {bare:.1f} s "
                  f"({tasuku / bare:.2f}x)")  # fmt: skip
            mb = 1024 * 1024
            added = sorted(t[2] for t in times)
            if peaks and added:
                print(f"peak memory a review adds to the worker (PSS of its process tree above "
                      f"the worker at rest): median {added[len(added) // 2] / mb:.0f} MB, "
                      f"largest {added[-1] / mb:.0f} MB; bare tools median "
                      f"{sorted(t[3] for t in times)[len(times) // 2] / mb:.0f} MB; ratio "
                      f"median {peaks[len(peaks) // 2]:.1f}x")  # fmt: skip
            return
        print(f"\ntime: manage.py review {tasuku:.1f} s, bare tools {bare:.1f} s "
              f"({tasuku / bare:.1f}x; it includes starting Python and Django and its database)")  # fmt: skip
        if stages:
            print(f"      the reviews' own stages (checkout, engine, validation; the engine's "
                  f"fork server started cold each time) {stages:.1f} s "
                  f"({stages / bare:.1f}x the bare tools)")  # fmt: skip
        mb = 1024 * 1024
        if peaks:
            print(f"peak memory (PSS of the process tree): Tasuku median "
                  f"{sorted(t[2] for t in times)[len(times) // 2] / mb:.0f} MB, bare tools "
                  f"median {sorted(t[3] for t in times)[len(times) // 2] / mb:.0f} MB; ratio "
                  f"median {peaks[len(peaks) // 2]:.1f}x")  # fmt: skip


def repo_name(path: Path) -> str:
    return PurePosixPath(path).name
