"""Replay reviewers over a repository's own history and score what they would have said
by what its authors did next (`manage.py evaluate`, docs/evaluation.md).

A merged pull request is read from the default branch's first-parent history: a merge
commit's second parent is the branch as merged, and its first-parent chain back to the
merge base the heads the pull request had (a squash merge is one head). Each head is
reviewed in turn as a push would be, through the one pipeline on a local pull request of
the evaluation's own (`evaluate/<merge>`): nothing is posted anywhere, and no real pull
request's state is touched. Each comment a head's review would have published is then
scored from what happened next:

- **addressed**: a later head of the same pull request changed or removed its lines;
- **survived**: it reached the merge untouched;
- **changed after merge**: it survived, and a commit on the default branch within the
  window after the merge changed those lines (a fix or a revert the review might have
  prevented).

None of these says a comment was right; they are the proxies a person reads beside the
comments themselves (grouped by rule in the report).
"""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import timedelta
from decimal import Decimal
from pathlib import Path

from django.conf import settings
from django.db import transaction
from django.db.models import Q, Sum
from django.utils import timezone

from repos import github
from repos.github import GitHubError, RepoRef
from repos.models import Repository
from reviews.local.review import (
    Local,
    LocalReviewError,
    local_pull_request,
    local_repository,
    review_execute,
    reviewer_enabled,
)
from reviews.models import (
    Evaluation,
    EvaluationGrade,
    EvaluationItem,
    EvaluationKind,
    EvaluationStatus,
    Finding,
    FindingState,
)
from sandbox.errors import CloneError
from sandbox.git import Git, git_env
from sandbox.workspace import remove_tree
from tasuku import durable

ADDRESSED = "addressed"
SURVIVED = "survived"
CHANGED_AFTER_MERGE = "changed after merge"
NOT_SCORED = "not scored"  # a comment on a removed line: nothing later to follow
OUTCOMES = (ADDRESSED, SURVIVED, CHANGED_AFTER_MERGE, NOT_SCORED)
HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@", re.MULTILINE)


class EvaluationError(Exception):
    """What the caller must change for an evaluation to run (said as it is)."""


def _git(repo: Path, *args: str, env: dict[str, str] | None = None) -> str:
    completed = subprocess.run(  # noqa: S603
        ["git", "-C", str(repo), *args],  # noqa: S607
        capture_output=True,
        check=False,
        env={**os.environ, **env} if env else None,
    )
    if completed.returncode != 0:
        said = completed.stderr.decode(errors="replace").strip().splitlines()
        raise EvaluationError(f"git {args[0]} failed: {said[-1] if said else 'no output'}")
    return completed.stdout.decode(errors="replace")


@dataclass
class PullHistory:
    """A merged pull request as history keeps it: the merge base, the heads it had
    (oldest first; the last is what was merged), the commit that merged it."""

    base: str
    heads: list[str]
    merge: str
    subject: str


def _window(since: str | None, until: str | None) -> list[str]:
    """git log's date bounds (commit dates, YYYY-MM-DD)."""
    bounds = []
    if since:
        bounds.append(f"--since={since} 00:00")
    if until:
        bounds.append(f"--until={until} 23:59:59")
    return bounds


def pull_histories(
    repo: Path,
    count: int,
    *,
    skip: int = 0,
    max_heads: int = 6,
    ref: str = "HEAD",
    since: str | None = None,
    until: str | None = None,
    every: int = 1,
) -> list[PullHistory]:
    """The newest `count` merged pull requests of `ref`'s first-parent history (after
    skipping `skip`; merged between `since` and `until`, when given; with `every` > 1,
    one in that many: a sample spread over the window). Of a pull request with more
    than `max_heads` heads, the first `max_heads - 1` and the last are kept (the merged
    head is always one)."""
    if count < 1 or max_heads < 1 or every < 1:
        raise EvaluationError("count, max heads and the sampling step are at least 1")
    listed = _git(
        repo, "log", "--first-parent", "--format=%H %P%x09%s", *_window(since, until), ref, "--"
    ).splitlines()
    found: list[PullHistory] = []
    seen = 0
    for line in listed[skip:]:
        if len(found) >= count:
            break
        shas, _, subject = line.partition("\t")
        commit, *parents = shas.split()
        if len(parents) == 2:
            base = _git(repo, "merge-base", parents[0], parents[1]).strip()
            heads = _git(
                repo, "rev-list", "--first-parent", "--reverse", f"{base}..{parents[1]}", "--"
            ).split()
        elif len(parents) == 1:
            base, heads = parents[0], [commit]
        else:
            continue  # the root commit: nothing before it
        if not heads or not _git(repo, "diff", "--name-only", base, heads[-1], "--").strip():
            continue
        seen += 1
        if (seen - 1) % every:
            continue  # not in the sample
        if len(heads) > max_heads:
            heads = heads[: max_heads - 1] + heads[-1:]
        found.append(PullHistory(base, heads, commit, subject[:200]))
    return found


def _changed_lines(
    repo: Path, old: str, new: str, path: str
) -> tuple[list[tuple[int, int, int, int]], bool]:
    """The hunks of `path` between two commits, as (old start, old count, new start, new
    count), and whether the file is gone in `new`."""
    text = _git(
        repo, "diff", "--no-ext-diff", "--no-color", "-U0", "--no-renames", old, new, "--", path
    )
    gone = "\n+++ /dev/null" in text
    hunks = [
        (int(a), int(b) if b else 1, int(c), int(d) if d else 1)
        for a, b, c, d in HUNK.findall(text)
    ]
    return hunks, gone


def _touched(hunks, start: int, end: int) -> bool:
    """Whether a hunk changed or removed any of the old lines `start..end`, or added
    lines inside them."""
    for old_start, old_count, _, _ in hunks:
        if old_count == 0:
            # Lines added after old line `old_start`: inside the range when strictly within.
            if start <= old_start < end:
                return True
            continue
        if old_start <= end and start <= old_start + old_count - 1:
            return True
    return False


def _moved(hunks, line: int) -> int:
    """Where the old `line` (untouched by `hunks`) is in the new file."""
    shift = 0
    for old_start, old_count, _, new_count in hunks:
        last_old = old_start + old_count - 1 if old_count else old_start
        if last_old < line:
            shift += new_count - old_count
    return line + shift


def score(
    repo: Path, history: PullHistory, at: int, path: str, start: int, end: int, *, window: list[str]
) -> tuple[str, str]:
    """The outcome of a comment on `path` lines `start..end` at head number `at`, and the
    commit that decided it ("" for survived): see the module's docstring. `window`: the
    default branch's commits after the merge that count (oldest first)."""
    head = history.heads[at]
    for later in history.heads[at + 1 :]:
        hunks, gone = _changed_lines(repo, head, later, path)
        if gone or _touched(hunks, start, end):
            return ADDRESSED, later
    if at + 1 < len(history.heads):  # where those lines are in the merged head
        hunks, _ = _changed_lines(repo, head, history.heads[-1], path)
        start, end = _moved(hunks, start), _moved(hunks, end)
    # To the merge commit (the base may have moved under the branch), then after it.
    hunks, gone = _changed_lines(repo, history.heads[-1], history.merge, path)
    if gone or _touched(hunks, start, end):
        return ADDRESSED, history.merge  # the merge itself changed them
    start, end = _moved(hunks, start), _moved(hunks, end)
    if window:
        hunks, gone = _changed_lines(repo, history.merge, window[-1], path)
        if gone or _touched(hunks, start, end):
            return CHANGED_AFTER_MERGE, _first_changing(
                repo, history.merge, window, path, start, end
            )
    return SURVIVED, ""


def _first_changing(
    repo: Path, merge: str, window: list[str], path: str, start: int, end: int
) -> str:
    previous, lines = merge, (start, end)
    for commit in window:
        hunks, gone = _changed_lines(repo, previous, commit, path)
        if gone or _touched(hunks, *lines):
            return commit
        lines = (_moved(hunks, lines[0]), _moved(hunks, lines[1]))
        previous = commit
    return window[-1]


def after_merge(repo: Path, merge: str, commits: int, ref: str = "HEAD") -> list[str]:
    """The first `commits` commits of `ref`'s first-parent history after `merge`."""
    if commits < 1:
        return []
    listed = _git(repo, "rev-list", "--first-parent", "--reverse", f"{merge}..{ref}", "--").split()
    return listed[:commits]


@dataclass
class Comment:
    merge: str
    head: str
    at: int  # which head of the pull request (0: the first)
    path: str
    start_line: int
    end_line: int
    rule: str
    severity: str
    blocking: bool
    title: str
    outcome: str = NOT_SCORED
    decided_by: str = ""
    grade: str = ""  # a person's, when one was given (EvaluationGrade)
    # Its one-click suggestion, applied to the file at its head: "applies", "breaks the
    # file" (Python that no longer compiles, shell `bash -n` refuses), "does not apply"
    # (its lines are not in the file); "" when it has none.
    suggestion: str = ""


@dataclass
class ReviewerScore:
    reviewer: str
    pulls: int = 0
    reviews: int = 0
    failed: int = 0
    seconds: float = 0.0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: Decimal = Decimal(0)
    files: int = 0
    files_checked: int = 0
    comments: list[Comment] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)

    def outcomes(self) -> Counter:
        return Counter(c.outcome for c in self.comments)

    def precision(self) -> float | None:
        """Of the comments a person graded, the share useful or acceptable."""
        graded = [c.grade for c in self.comments if c.grade]
        if not graded:
            return None
        return round(sum(g in ("useful", "acceptable") for g in graded) / len(graded), 3)

    def as_dict(self) -> dict:
        scored = [c for c in self.comments if c.outcome != NOT_SCORED]
        counts = self.outcomes()
        return {
            "reviewer": self.reviewer,
            "pull_requests": self.pulls,
            "reviews": self.reviews,
            "failed_reviews": self.failed,
            "failures": self.failures,
            "comments": len(self.comments),
            "comments_per_pull_request": round(len(self.comments) / self.pulls, 2)
            if self.pulls
            else 0,
            "blocking_share": round(sum(c.blocking for c in self.comments) / len(self.comments), 3)
            if self.comments
            else 0,
            "outcomes": {o: counts.get(o, 0) for o in OUTCOMES},
            "addressed_rate": round(counts.get(ADDRESSED, 0) / len(scored), 3) if scored else None,
            "seconds_per_review": round(self.seconds / self.reviews, 2) if self.reviews else 0,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cost_usd": str(self.cost_usd),
            "coverage": round(self.files_checked / self.files, 3) if self.files else None,
            "grades": dict(Counter(c.grade for c in self.comments if c.grade)),
            "suggestions": dict(Counter(c.suggestion for c in self.comments if c.suggestion)),
            "precision": self.precision(),
            "by_rule": _by_rule(self.comments),
            "comment_list": [c.__dict__ for c in self.comments],
        }


def _by_rule(comments: list[Comment]) -> dict[str, dict[str, int]]:
    rules: dict[str, Counter] = {}
    for c in comments:
        rules.setdefault(c.rule or "(no rule)", Counter())[c.outcome] += 1
    return {
        rule: dict(counts)
        for rule, counts in sorted(rules.items(), key=lambda kv: -sum(kv[1].values()))
    }


@dataclass
class Limits:
    """When an evaluation stops early: money spent, seconds taken (None: no bound)."""

    budget_usd: Decimal | None = None
    seconds: float | None = None


def evaluate(
    repo: Path,
    reviewers: list,
    histories: list[PullHistory],
    record: Evaluation,
    *,
    window: int = 20,
    limits: Limits | None = None,
    progress=None,
    ref: str = "HEAD",
) -> tuple[list[ReviewerScore], str]:
    """Each reviewer over each pull request's heads, each reviewed head kept in `record`
    as it is done (a head already there is not reviewed again: a killed evaluation goes
    on where it stopped); the scores, and why it stopped early ("" when it did not)."""
    limits = limits or Limits()
    root = Path(_git(repo, "rev-parse", "--show-toplevel").strip())
    repository = local_repository(root)
    started = time.monotonic()
    done = {(i.reviewer, i.unit, i.at) for i in record.items.all()}
    stopped = ""
    for index, history in enumerate(histories):
        window_commits = after_merge(root, history.merge, window, ref=ref)
        for reviewer in reviewers:
            branch = f"evaluate/{reviewer.slug}/{history.merge[:12]}"
            for at, head in enumerate(history.heads):
                if (reviewer.slug, history.merge, at) in done:
                    continue
                stopped = _stop(limits, record, started)
                if stopped:
                    return _finish(record, reviewers, stopped)
                pull_request = local_pull_request(repository, branch, history.base, head)
                item = EvaluationItem(
                    evaluation=record, reviewer=reviewer.slug, unit=history.merge, at=at,
                    head=head, subject=history.subject[:300],
                )  # fmt: skip
                began = time.monotonic()
                try:
                    result = review_execute(pull_request, reviewer, history.base, head, Local(root))
                except Exception as exc:  # noqa: BLE001 - a review's boundary: a failed review is counted and said, the evaluation goes on
                    item.failure = str(exc)[:2000] or type(exc).__name__
                    item.save()
                    continue
                _measured(item, result, time.monotonic() - began)
                item.comments = [
                    _scored(root, history, at, finding, window_commits).__dict__
                    for finding in result.review.findings.filter(
                        published=True, state=FindingState.OPEN, first_seen_sha=head
                    )
                ]
                item.save()
        Evaluation.objects.filter(pk=record.pk).update(units_done=index + 1)
        if progress is not None:
            progress(index + 1, len(histories), scores_of(record, reviewers))
    return _finish(record, reviewers, "")


def _measured(item: EvaluationItem, result, seconds: float) -> None:
    review = result.review
    item.run = result.run
    item.seconds = seconds
    item.input_tokens, item.output_tokens = review.input_tokens, review.output_tokens
    item.cost_usd = review.cost_usd
    added = [e for e in review.coverage or [] if e.get("adds")]
    item.files = len(added)
    item.files_checked = sum(e.get("status") == "reviewed" for e in added)


def _finish(record: Evaluation, reviewers: list, stopped: str):
    Evaluation.objects.filter(pk=record.pk).update(
        status=EvaluationStatus.STOPPED if stopped else EvaluationStatus.DONE,
        stopped_reason=stopped[:500],
        finished_at=timezone.now(),
    )
    if record.kind == EvaluationKind.BUG_FIXES:
        return bug_scores_of(record, reviewers), stopped
    return scores_of(record, reviewers), stopped


def grades_for(repository_path: str) -> dict[tuple, str]:
    """(head, path, line, rule) -> the grade a person gave that comment."""
    return {
        (g.head, g.path, g.line, g.rule): g.grade
        for g in EvaluationGrade.objects.filter(repository_path=repository_path)
    }


def scores_of(record: Evaluation, reviewers: list | None = None) -> list[ReviewerScore]:
    """The scores of an evaluation's reviewed heads, a reviewer at a time (in the order
    asked), each comment with the grade a person gave it, if any."""
    slugs = [r.slug for r in reviewers] if reviewers else record.options.get("reviewers", [])
    grades = grades_for(record.repository_path)
    scores = {slug: ReviewerScore(slug) for slug in slugs}
    units: dict[str, set[str]] = {slug: set() for slug in slugs}
    for item in record.items.all():
        tally = scores.get(item.reviewer)
        if tally is None:
            continue
        units[item.reviewer].add(item.unit)
        if item.failure:
            tally.failed += 1
            tally.failures.append(f"{item.head[:12]}: {item.failure[:300]}")
            continue
        tally.reviews += 1
        tally.seconds += item.seconds
        tally.input_tokens += item.input_tokens
        tally.output_tokens += item.output_tokens
        tally.cost_usd += item.cost_usd
        tally.files += item.files
        tally.files_checked += item.files_checked
        for data in item.comments:
            comment = Comment(**data)
            comment.grade = grades.get(
                (comment.head, comment.path, comment.start_line, comment.rule), ""
            )
            tally.comments.append(comment)
    for slug, tally in scores.items():
        tally.pulls = len(units[slug])
    return list(scores.values())


def _scored(
    root: Path, history: PullHistory, at: int, finding: Finding, window: list[str]
) -> Comment:
    comment = Comment(
        merge=history.merge, head=history.heads[at], at=at, path=finding.path,
        start_line=finding.start_line, end_line=finding.end_line, rule=finding.rule,
        severity=finding.severity, blocking=finding.blocking, title=finding.title,
    )  # fmt: skip
    if finding.side == "RIGHT":
        comment.outcome, comment.decided_by = score(
            root, history, at, finding.path, finding.start_line, finding.end_line, window=window
        )
    if finding.suggestion is not None:
        comment.suggestion = suggestion_applied(
            root, history.heads[at], finding.path, finding.start_line, finding.end_line,
            finding.suggestion,
        )  # fmt: skip
    return comment


SUGGESTION_APPLIES, SUGGESTION_BREAKS, SUGGESTION_MISSES = (
    "applies", "breaks the file", "does not apply",
)  # fmt: skip


def suggestion_applied(root: Path, head: str, path: str, start: int, end: int, text: str) -> str:
    """What applying a suggestion to `path` at `head` does (see `Comment.suggestion`)."""
    try:
        before = _git(root, "show", f"{head}:{path}")
    except EvaluationError:
        return SUGGESTION_MISSES
    lines = before.split("\n")
    if start < 1 or end > len(lines) or start > end:
        return SUGGESTION_MISSES
    patched = "\n".join([*lines[: start - 1], *text.split("\n"), *lines[end:]])
    if path.endswith((".py", ".pyw")):
        try:
            compile(patched, path, "exec")
        except (SyntaxError, ValueError):
            try:
                compile(before, path, "exec")
            except (SyntaxError, ValueError):
                return SUGGESTION_APPLIES  # it did not compile before either: not its doing
            return SUGGESTION_BREAKS
    elif path.endswith((".sh", ".bash")):
        checked = subprocess.run(  # noqa: S603
            ["bash", "-n"],
            input=patched.encode(),
            capture_output=True,
            check=False,  # noqa: S607
        )
        if checked.returncode != 0:
            return SUGGESTION_BREAKS
    return SUGGESTION_APPLIES


def _stop(limits: Limits, record: Evaluation, started: float) -> str:
    spent = record.items.aggregate(total=Sum("cost_usd"))["total"] or Decimal(0)
    if limits.budget_usd is not None and spent >= limits.budget_usd:
        return f"the budget of ${limits.budget_usd} was spent (${spent})"
    if limits.seconds is not None and time.monotonic() - started >= limits.seconds:
        return f"the time limit of {limits.seconds:.0f} s was reached"
    return ""


# --- bug-fix replay --------------------------------------------------------------------

# A commit message that says it fixes something (or reverts what broke it).
FIX_MESSAGE = re.compile(
    r"\b(fix(es|ed)?|bug|bugfix|hotfix|revert(s|ed)?|regression|crash(es|ed)?)\b"
    r"|\b(closes|fixes|resolves) #\d+",
    re.IGNORECASE,
)
# Fixes larger than this are not one bug a reviewer could point at.
FIX_MAX_FILES = 5
FIX_MAX_LINES = 80
NEAR = 1  # a comment this many lines from a bug's line still points at it
TEST_PATH = re.compile(
    r"(^|/)(tests?|spec|__tests__)/|(^|/)(test_[^/]*|[^/]*_test\.[a-z]+|[^/]*\.(test|spec)\.[a-z]+)$"
)


@dataclass
class BugFix:
    """A commit of the default branch that fixed something: `parent` had the bug."""

    parent: str
    fix: str
    subject: str


def bug_fixes(
    repo: Path,
    count: int,
    *,
    skip: int = 0,
    ref: str = "HEAD",
    since: str | None = None,
    until: str | None = None,
) -> list[BugFix]:
    """The newest `count` first-parent commits whose message says they fix something and
    whose change is one bug's size: at most FIX_MAX_FILES files and FIX_MAX_LINES lines,
    and some line of code (not a test) removed or changed — the line a reviewer of the
    bug would have had to point at."""
    listed = _git(
        repo, "log", "--first-parent", "--format=%H %P%x09%s", *_window(since, until), ref, "--"
    ).splitlines()
    found: list[BugFix] = []
    for line in listed[skip:]:
        if len(found) >= count:
            break
        shas, _, subject = line.partition("\t")
        commit, *parents = shas.split()
        if not parents or not FIX_MESSAGE.search(subject):
            continue
        numstat = _git(
            repo, "diff", "--numstat", "--no-renames", parents[0], commit, "--"
        ).splitlines()
        rows = [row.split("\t", 2) for row in numstat if row.count("\t") >= 2]
        if not rows or len(rows) > FIX_MAX_FILES or any(a == "-" for a, _, _ in rows):
            continue  # nothing, too much, or binary
        if sum(int(a) + int(d) for a, d, _ in rows) > FIX_MAX_LINES:
            continue
        if not any(int(d) > 0 and not TEST_PATH.search(p) for _, d, p in rows):
            continue  # only additions, or only tests: no line of the bug to put back
        found.append(BugFix(parents[0], commit, subject[:200]))
    return found


@dataclass
class BugScore:
    reviewer: str
    fixes: int = 0
    caught: int = 0
    other_comments: int = 0
    failed: int = 0
    seconds: float = 0.0
    cost_usd: Decimal = Decimal(0)
    cases: list[dict] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)

    def as_dict(self) -> dict:
        reviewed = self.fixes - self.failed
        return {
            "reviewer": self.reviewer,
            "bug_fixes": self.fixes,
            "failed_reviews": self.failed,
            "failures": self.failures,
            "caught": self.caught,
            "catch_rate": round(self.caught / reviewed, 3) if reviewed else None,
            "other_comments": self.other_comments,
            "comments_per_caught_bug": round((self.caught + self.other_comments) / self.caught, 2)
            if self.caught
            else None,
            "seconds_per_review": round(self.seconds / reviewed, 2) if reviewed else 0,
            "cost_usd": str(self.cost_usd),
            "cases": self.cases,
        }


def _bug_lines(repo: Path, base: str, head: str) -> dict[str, set[int]]:
    """The lines the bug's return adds (the fix's removed lines), by path."""
    text = _git(
        repo, "diff", "--no-ext-diff", "--no-color", "-U0", "--no-renames", base, head, "--"
    )
    lines: dict[str, set[int]] = {}
    path = None
    for row in text.splitlines():
        if row.startswith("+++ "):
            path = row[6:] if row.startswith("+++ b/") else None
        elif row.startswith("@@") and path and not TEST_PATH.search(path):
            match = HUNK.match(row)
            if match:
                start = int(match.group(3))
                count = int(match.group(4)) if match.group(4) else 1
                lines.setdefault(path, set()).update(range(start, start + count))
    return {p: ls for p, ls in lines.items() if ls}


def bug_replay(
    repo: Path,
    reviewers: list,
    fixes: list[BugFix],
    record: Evaluation,
    *,
    limits: Limits | None = None,
    progress=None,
) -> tuple[list[BugScore], str]:
    """Each fix undone — a pull request onto the fixed commit that puts the bug back (its
    tree is the commit before the fix) — reviewed by each reviewer; caught when a comment
    lands on a line the bug's return adds (within NEAR lines), and every other comment
    counted beside it. Built in a scratch clone sharing the repository's objects: the
    repository itself is never written to. Each case is kept in `record` as it is done."""
    limits = limits or Limits()
    source = Path(_git(repo, "rev-parse", "--show-toplevel").strip())
    started = time.monotonic()
    done = {(i.reviewer, i.unit) for i in record.items.all()}
    with tempfile.TemporaryDirectory(prefix="tasuku-bug-replay-") as scratch:
        root = Path(scratch) / f"{source.name}-bug-replay"
        _git(source, "clone", "--quiet", "--shared", "--no-checkout", str(source), str(root))
        repository = local_repository(root)
        for index, fix in enumerate(fixes):
            # The same tree, parent, message, author and dates give the same commit id in
            # every replay: a resumed one reviews the same pull request.
            tree = _git(root, "rev-parse", f"{fix.parent}^{{tree}}").strip()
            head = _git(
                root, "-c", "user.name=Tasuku evaluation", "-c", "user.email=evaluate@tasuku.invalid",
                "commit-tree", tree, "-p", fix.fix, "-m", f"Put back the bug fixed by {fix.fix[:12]}",
                env={"GIT_AUTHOR_DATE": "2000-01-01T00:00:00Z", "GIT_COMMITTER_DATE": "2000-01-01T00:00:00Z"},
            ).strip()  # fmt: skip
            bug = _bug_lines(root, fix.fix, head)
            for reviewer in reviewers:
                if (reviewer.slug, fix.fix) in done:
                    continue
                stopped = _stop(limits, record, started)
                if stopped:
                    return _finish(record, reviewers, stopped)
                branch = f"evaluate-bug/{reviewer.slug}/{fix.fix[:12]}"
                pull_request = local_pull_request(repository, branch, fix.fix, head)
                item = EvaluationItem(
                    evaluation=record, reviewer=reviewer.slug, unit=fix.fix, head=head,
                    subject=fix.subject[:300],
                )  # fmt: skip
                began = time.monotonic()
                try:
                    result = review_execute(pull_request, reviewer, fix.fix, head, Local(root))
                except Exception as exc:  # noqa: BLE001 - a review's boundary: a failed review is counted and said, the replay goes on
                    item.failure = str(exc)[:2000] or type(exc).__name__
                    item.save()
                    continue
                _measured(item, result, time.monotonic() - began)
                on_bug, elsewhere = [], []
                for finding in result.review.findings.filter(
                    published=True, state=FindingState.OPEN
                ):
                    lines = bug.get(finding.path, set())
                    near = finding.side == "RIGHT" and any(
                        finding.start_line - NEAR <= line <= finding.end_line + NEAR
                        for line in lines
                    )
                    (on_bug if near else elsewhere).append(
                        {
                            "path": finding.path,
                            "line": finding.start_line,
                            "rule": finding.rule,
                            "title": finding.title,
                        }  # fmt: skip
                    )
                item.bug = {
                    "fix": fix.fix, "subject": fix.subject,
                    "bug_lines": {p: sorted(ls) for p, ls in bug.items()},
                    "caught": bool(on_bug), "on_the_bug": on_bug, "elsewhere": elsewhere,
                }  # fmt: skip
                item.save()
            Evaluation.objects.filter(pk=record.pk).update(units_done=index + 1)
            if progress is not None:
                progress(index + 1, len(fixes), bug_scores_of(record, reviewers))
    return _finish(record, reviewers, "")


def bug_scores_of(record: Evaluation, reviewers: list | None = None) -> list[BugScore]:
    slugs = [r.slug for r in reviewers] if reviewers else record.options.get("reviewers", [])
    scores = {slug: BugScore(slug) for slug in slugs}
    for item in record.items.all():
        tally = scores.get(item.reviewer)
        if tally is None:
            continue
        tally.fixes += 1
        if item.failure:
            tally.failed += 1
            tally.failures.append(f"{item.unit[:12]}: {item.failure[:300]}")
            continue
        tally.seconds += item.seconds
        tally.cost_usd += item.cost_usd
        tally.caught += bool(item.bug.get("caught"))
        tally.other_comments += len(item.bug.get("elsewhere", []))
        tally.cases.append(item.bug)
    return list(scores.values())


def evaluation_open(
    name: str, repository_path: str, kind: str, options: dict, units: int
) -> Evaluation:
    """The evaluation called `name`: a new one, or the one a killed run left unfinished
    (asked the same; otherwise an error that says what differs)."""
    record = Evaluation.objects.filter(name=name).first()
    if record is None:
        return Evaluation.objects.create(
            name=name, repository_path=repository_path, kind=kind, options=options,
            units_total=units,
        )  # fmt: skip
    if record.status == EvaluationStatus.DONE:
        raise EvaluationError(
            f"the evaluation {name!r} is done (its report: the dashboard's Evaluations); "
            "give a new one another --name"
        )
    asked = {"repository": repository_path, "kind": kind, **options}
    kept = {"repository": record.repository_path, "kind": record.kind, **record.options}
    differing = sorted(k for k in set(asked) | set(kept) if asked.get(k) != kept.get(k))
    if differing:
        raise EvaluationError(
            f"the evaluation {name!r} was started with other settings ({', '.join(differing)}); "
            "resume it with the same ones, or give a new one another --name"
        )
    Evaluation.objects.filter(pk=record.pk).update(
        status=EvaluationStatus.RUNNING, stopped_reason=""
    )
    record.refresh_from_db()
    return record


# --- a repository Tasuku knows, on the worker queue ------------------------------------

EVALUATE_TASK = "reviews.tasks.evaluation_run"
# A worker holds an evaluation this long past its last progress (each pull request done
# renews it); then the reaper's sweep hands it to another, which goes on where it stopped.
EVALUATION_LEASE = timedelta(minutes=15)
EVALUATIONS = durable.Queue(
    model="reviews.Evaluation",
    task=EVALUATE_TASK,
    name="evaluation",
    waiting=(EvaluationStatus.QUEUED,),
    working=EvaluationStatus.RUNNING,
    failed=EvaluationStatus.FAILED,
    lease="leased_until",
    installation="repository__installation__github_id",
    max_attempts=3,
    lease_for=lambda: EVALUATION_LEASE,
)


def evaluation_queue(
    repository: Repository, kind: str, options: dict, *, requested_by=None
) -> Evaluation:
    """A new evaluation of a repository Tasuku knows, queued for a worker (the dashboard's
    Evaluate form)."""
    given = f"{repository.full_name} {kind} {timezone.now():%Y-%m-%d %H:%M:%S}"
    name, number = given, 1
    while Evaluation.objects.filter(name=name).exists():
        number += 1
        name = f"{given} ({number})"
    with transaction.atomic():
        record = Evaluation.objects.create(
            name=name, repository_path=f"github:{repository.full_name}", kind=kind,
            options=options, repository=repository, requested_by=requested_by,
            status=EvaluationStatus.QUEUED,
        )  # fmt: skip
        EVALUATIONS.ring(record.pk)
    return record


class EvaluationRun(durable.Job):
    """Run (or go on with) a queued evaluation: a clone of the repository made with the
    App's read-only token for this one repository, the reviewers replayed over it as
    `manage.py evaluate` does, the clone removed after. A durable Queue's row: one worker
    at a time, GitHub's weather waited out, a dead worker's evaluation handed on.

    GitHub's weather, or a clone that failed, is the queue's verdict; what the
    evaluation asks that cannot be done stops it, said and not retried."""

    queue = EVALUATIONS
    retry_on = (CloneError, GitHubError)
    related = ("repository__installation",)
    claim_where = Q(repository__isnull=False)
    log_as = "evaluation"

    def work(self) -> str:
        record = self.row
        parent = Path(settings.TASUKU_WORKSPACE_ROOT or tempfile.gettempdir())
        where = Path(tempfile.mkdtemp(prefix=f"tasuku-evaluation-{self.pk}-", dir=parent))
        try:
            root = where / record.repository.full_name.split("/")[-1]
            return _evaluation_go(record, self.attempt, root)
        except EvaluationError as exc:
            self.finish(EvaluationStatus.STOPPED, stopped_reason=f"it could not run: {exc}"[:500],
                        finished_at=timezone.now())  # fmt: skip
            return f"stopped: {exc}"
        finally:
            remove_tree(where)

    def failure_fields(self, exc: BaseException, verdict: durable.Verdict) -> dict:
        return {"stopped_reason": str(exc)[:500]}

    def failed(self, exc: BaseException, verdict: durable.Verdict) -> str:
        return f"{verdict.kind}: {exc}"


evaluation_run = EvaluationRun.run  # the task's body (reviews/tasks.py)


def _evaluation_go(record: Evaluation, attempt: int, root: Path) -> str:
    repository = record.repository
    gateway = github.gateway()
    repo = RepoRef.of(repository)
    info = gateway.repository_get(repo)
    token = gateway.contents_token(repo)
    root.parent.mkdir(parents=True, exist_ok=True)
    Git(root.parent, git_env(token, root.parent))(
        "clone", "--quiet", "--no-checkout", "--branch", info.default_branch, "--",
        info.clone_url, str(root), what="clone the repository to evaluate",
    )  # fmt: skip
    ref = f"refs/heads/{info.default_branch}"  # its history is what is replayed
    options = record.options
    try:
        reviewers = [reviewer_enabled(slug) for slug in options.get("reviewers") or ["static"]]
    except LocalReviewError as exc:
        raise EvaluationError(str(exc)) from exc
    limits = Limits(
        budget_usd=Decimal(options["budget_usd"]) if options.get("budget_usd") else None
    )

    def renew(done: int, total: int, scores) -> None:
        EVALUATIONS.renew(record.pk, attempt)

    if record.kind == EvaluationKind.BUG_FIXES:
        fixes = bug_fixes(root, int(options.get("bug_fixes") or 20), ref=ref)
        Evaluation.objects.filter(pk=record.pk).update(units_total=len(fixes))
        _, stopped = bug_replay(root, reviewers, fixes, record, limits=limits, progress=renew)
    else:
        histories = pull_histories(
            root, int(options.get("count") or 20), max_heads=int(options.get("max_heads") or 6),
            ref=ref,
        )  # fmt: skip
        Evaluation.objects.filter(pk=record.pk).update(units_total=len(histories))
        _, stopped = evaluate(
            root, reviewers, histories, record, window=int(options.get("window", 20)),
            limits=limits, progress=renew, ref=ref,
        )  # fmt: skip
    Evaluation.objects.filter(pk=record.pk).update(leased_until=None)
    return f"stopped: {stopped}" if stopped else "done"


def evaluations_sweep() -> int:
    """The reaper's pass over queued evaluations: one whose worker died is waiting again
    (it goes on where it stopped) or failed on its last attempt; due ones are rung."""
    lost = {"stopped_reason": "Its worker stopped; another goes on where it stopped."}
    last = {"stopped_reason": "Its worker stopped on its last attempt."}
    return EVALUATIONS.sweep(lost=lost, lost_last=last)["rung"]
