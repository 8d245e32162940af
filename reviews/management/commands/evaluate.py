"""`manage.py evaluate`: replay reviewers over a local repository's merged pull requests
and score their comments by what the authors did next (reviews/evaluation/replay.py)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from datetime import date
from decimal import Decimal, InvalidOperation
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from reviews.evaluation.replay import (
    ADDRESSED,
    CHANGED_AFTER_MERGE,
    NOT_SCORED,
    SURVIVED,
    BugScore,
    EvaluationError,
    Limits,
    ReviewerScore,
    bug_fixes,
    bug_replay,
    evaluate,
    evaluation_open,
    pull_histories,
)
from reviews.local.review import LocalReviewError, reviewer_enabled
from reviews.models import Evaluation, EvaluationKind


def _positive(kind):
    def parse(text: str):
        try:
            value = kind(text)
        except (ValueError, InvalidOperation) as exc:
            raise ValueError(text) from exc
        if value <= 0:
            raise ValueError(text)
        return value

    parse.__name__ = f"positive {kind.__name__}"
    return parse


def _date(text: str) -> str:
    """A day as YYYY-MM-DD (argparse says `invalid day value` otherwise)."""
    try:
        return date.fromisoformat(text).isoformat()
    except ValueError as exc:
        raise ValueError(text) from exc


_date.__name__ = "day"


class Command(BaseCommand):
    help = (
        "Replay reviewers over a repository's merged pull requests (each head in turn, as "
        "its pushes came) and score every comment by what happened next: addressed by a "
        "later head, survived to the merge, or changed on the default branch soon after. "
        "Nothing is posted anywhere."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("--repo", required=True, help="path to a local git repository")
        parser.add_argument(
            "--reviewer",
            action="append",
            help="reviewer slug, as configured in the admin (repeat to compare; default: static)",
        )
        parser.add_argument(
            "--count", type=_positive(int), default=20, help="merged pull requests (default 20)"
        )
        parser.add_argument(
            "--skip", type=int, default=0, help="newest merged pull requests to skip"
        )
        parser.add_argument(
            "--ref", default="HEAD", help="the branch whose history is read (default: HEAD)"
        )
        parser.add_argument("--since", type=_date, help="merged on or after this day (YYYY-MM-DD)")
        parser.add_argument("--until", type=_date, help="merged on or before this day (YYYY-MM-DD)")
        parser.add_argument(
            "--sample-every", type=_positive(int), default=1, metavar="K",
            help="one merged pull request in K: a sample spread over the window (default 1: all)",
        )  # fmt: skip
        parser.add_argument(
            "--max-heads", type=_positive(int), default=6,
            help="heads reviewed per pull request: its first ones and the merged one (default 6)",
        )  # fmt: skip
        parser.add_argument(
            "--window", type=int, default=20,
            help="default-branch commits after a merge that count as 'changed after merge' (default 20)",
        )  # fmt: skip
        parser.add_argument(
            "--budget-usd", type=_positive(Decimal), help="stop once this much is spent"
        )
        parser.add_argument(
            "--time-limit", type=_positive(float), help="stop after this many seconds"
        )
        parser.add_argument(
            "--bug-fixes", type=_positive(int), metavar="N",
            help="instead: put back the bugs the newest N fix commits fixed, one pull request "
            "each, and score whether each reviewer points at the bug and what else it says",
        )  # fmt: skip
        parser.add_argument(
            "--name",
            help="the evaluation's name on the dashboard; an unfinished one of that name "
            "(a killed run) goes on where it stopped (default: the repository, kind and time)",
        )
        parser.add_argument("--format", choices=["text", "json"], default="text")

    def handle(self, *args, **options) -> None:
        repo = Path(options["repo"]).expanduser()
        if not repo.is_dir():
            raise CommandError(f"not a directory: {options['repo']}")
        slugs = options["reviewer"] or ["static"]
        limits = Limits(budget_usd=options["budget_usd"], seconds=options["time_limit"])
        if options["bug_fixes"]:
            self._bug_replay(repo, slugs, options, limits)
            return
        try:
            reviewers = [reviewer_enabled(slug) for slug in dict.fromkeys(slugs)]
            histories = pull_histories(
                repo, options["count"], skip=max(options["skip"], 0), max_heads=options["max_heads"],
                ref=options["ref"], since=options["since"], until=options["until"],
                every=options["sample_every"],
            )  # fmt: skip
        except (LocalReviewError, EvaluationError) as exc:
            raise CommandError(str(exc)) from exc
        if not histories:
            raise CommandError(
                f"no merged pull request in the first-parent history of {options['ref']} "
                "(a merge commit, or a commit with one parent)"
            )
        text = options["format"] == "text"
        record = self._record(
            repo, EvaluationKind.HISTORY, options, len(histories),
            {"reviewers": [r.slug for r in reviewers], "count": options["count"],
             "skip": max(options["skip"], 0), "ref": options["ref"],
             "max_heads": options["max_heads"], "window": max(options["window"], 0),
             "since": options["since"], "until": options["until"],
             "sample_every": options["sample_every"]},
        )  # fmt: skip

        started = time.monotonic()

        def progress(done: int, total: int, scores: list[ReviewerScore]) -> None:
            if text:
                comments = sum(len(s.comments) for s in scores)
                print(_progress_line(done, total, "pull requests", started, scores, comments),
                      file=sys.stderr)  # fmt: skip

        try:
            scores, stopped = evaluate(
                repo,
                reviewers,
                histories,
                record,
                window=max(options["window"], 0),
                ref=options["ref"],
                limits=limits,
                progress=progress,
            )
        except EvaluationError as exc:
            raise CommandError(str(exc)) from exc
        if not text:
            self.stdout.write(
                json.dumps(
                    {
                        "evaluation": record.name,
                        "pull_requests": len(histories),
                        "stopped": stopped,
                        "reviewers": [s.as_dict() for s in scores],
                    },
                    indent=2,
                )  # fmt: skip
            )
            return
        self.stdout.write(report_text(scores, len(histories), stopped, name=record.name))

    def _record(self, repo: Path, kind: str, options: dict, units: int, asked: dict):
        root = Path(
            subprocess.run(["git", "-C", str(repo), "rev-parse", "--show-toplevel"],  # noqa: S603, S607
                           capture_output=True, text=True, check=False).stdout.strip() or repo
        ).resolve()  # fmt: skip
        name = options["name"]
        if not name:  # a new one, named by what and when (a second one that second: "(2)")
            name = given = f"{root.name} {kind} {timezone.now():%Y-%m-%d %H:%M:%S}"
            number = 1
            while Evaluation.objects.filter(name=name).exists():
                number += 1
                name = f"{given} ({number})"
        try:
            return evaluation_open(name, str(root), kind, asked, units)
        except EvaluationError as exc:
            raise CommandError(str(exc)) from exc

    def _bug_replay(self, repo: Path, slugs: list[str], options: dict, limits: Limits) -> None:
        try:
            reviewers = [reviewer_enabled(slug) for slug in dict.fromkeys(slugs)]
            fixes = bug_fixes(repo, options["bug_fixes"], skip=max(options["skip"], 0),
                              ref=options["ref"], since=options["since"],
                              until=options["until"])  # fmt: skip
        except (LocalReviewError, EvaluationError) as exc:
            raise CommandError(str(exc)) from exc
        if not fixes:
            raise CommandError(
                f"no fix commit of one bug's size in the first-parent history of {options['ref']} "
                "(a message that says fix, bug, revert, regression or crash; at most 5 files "
                "and 80 lines; some line of code changed)"
            )
        record = self._record(
            repo, EvaluationKind.BUG_FIXES, options, len(fixes),
            {"reviewers": [r.slug for r in reviewers], "bug_fixes": options["bug_fixes"],
             "skip": max(options["skip"], 0), "ref": options["ref"],
             "since": options["since"], "until": options["until"]},
        )  # fmt: skip
        started = time.monotonic()

        def progress(done: int, total: int, scores: list[BugScore]) -> None:
            if options["format"] == "text":
                said = sum(s.caught + s.other_comments for s in scores)
                print(_progress_line(done, total, "fixes", started, scores, said), file=sys.stderr)

        try:
            scores, stopped = bug_replay(
                repo, reviewers, fixes, record, limits=limits, progress=progress
            )
        except EvaluationError as exc:
            raise CommandError(str(exc)) from exc
        if options["format"] == "json":
            self.stdout.write(json.dumps(
                {"evaluation": record.name, "bug_fixes": len(fixes), "stopped": stopped,
                 "reviewers": [s.as_dict() for s in scores]}, indent=2))  # fmt: skip
            return
        self.stdout.write(bug_report_text(scores, len(fixes), stopped, name=record.name))


def _progress_line(done, total, unit, started, scores, comments: int) -> str:
    """`  12/40 pull requests, 7 comments, $0.42 so far, about 3 min left`."""
    spent = sum((s.cost_usd for s in scores), Decimal(0))
    elapsed = time.monotonic() - started
    left = elapsed / done * (total - done) if done else 0
    when = f"about {left / 60:.0f} min left" if left >= 90 else f"about {left:.0f} s left"
    return f"  {done}/{total} {unit}, {comments} comments, ${spent:.2f} so far, {when}"


def report_text(scores: list[ReviewerScore], pulls: int, stopped: str, *, name: str = "") -> str:
    lines = [
        f"Evaluated on {pulls} merged pull requests"
        + (f" (stopped: {stopped})" if stopped else "")
        + (f" — evaluation {name!r}" if name else ""),
        "",
        f"{'reviewer':<20} {'reviews':>7} {'failed':>6} {'comments':>8} {'/PR':>5} "
        f"{'addressed':>10} {'survived':>8} {'chg after':>9} {'blocking':>8} {'s/review':>8} "
        f"{'cost $':>8} {'coverage':>8} {'graded':>6} {'precision':>9}",
    ]
    for score in scores:
        data = score.as_dict()
        outcomes = data["outcomes"]
        rate = f"{data['addressed_rate']:.0%}" if data["addressed_rate"] is not None else "-"
        coverage = f"{data['coverage']:.0%}" if data["coverage"] is not None else "-"
        graded = sum(data["grades"].values())
        precision = f"{data['precision']:.0%}" if data["precision"] is not None else "-"
        lines.append(
            f"{score.reviewer:<20} {score.reviews:>7} {score.failed:>6} {len(score.comments):>8} "
            f"{data['comments_per_pull_request']:>5} {outcomes[ADDRESSED]:>4} {rate:>5} "
            f"{outcomes[SURVIVED]:>8} {outcomes[CHANGED_AFTER_MERGE]:>9} "
            f"{data['blocking_share']:>8.0%} {data['seconds_per_review']:>8} "
            f"{data['cost_usd']:>8} {coverage:>8} {graded:>6} {precision:>9}"
        )
        if outcomes[NOT_SCORED]:
            lines.append(f"  ({outcomes[NOT_SCORED]} comments on removed lines: not scored)")
        if data["suggestions"]:
            said = ", ".join(f"{n} {what}" for what, n in sorted(data["suggestions"].items()))
            lines.append(f"  one-click suggestions, applied to their file: {said}")
    lines += [
        "",
        "addressed: a later head of the pull request changed those lines; survived: they "
        "reached the merge as commented; chg after: changed on the default branch soon after "
        "the merge; precision: of the comments a person graded (the dashboard's Evaluations), "
        "the share useful or acceptable. None of the outcomes says a comment was right: read "
        "them below.",
    ]
    lines += side_by_side(scores)
    for score in scores:
        if not score.comments and not score.failures:
            continue
        lines += ["", f"## {score.reviewer}"]
        for failure in score.failures:
            lines.append(f"  review failed: {failure}")
        by_rule: dict[str, list] = {}
        for comment in score.comments:
            by_rule.setdefault(comment.rule or "(no rule)", []).append(comment)
        for rule, comments in sorted(by_rule.items(), key=lambda kv: -len(kv[1])):
            lines.append(f"  {rule} ({len(comments)})")
            for c in comments:
                decided = f" at {c.decided_by[:8]}" if c.decided_by else ""
                graded = f" [{c.grade}]" if c.grade else ""
                suggested = f" — its suggestion {c.suggestion}" if c.suggestion else ""
                lines.append(
                    f"    {c.outcome}{decided}{graded}: {c.path}:{c.start_line} (head {c.at + 1}, "
                    f"{c.head[:8]}, merged in {c.merge[:8]}) {c.title[:120]}{suggested}"
                )
    return "\n".join(lines) + "\n"


def side_by_side(scores: list[ReviewerScore]) -> list[str]:
    """For two reviewers or more: what each said that the others did not (the same file
    and line at the same head is the same place)."""
    if len(scores) < 2:
        return []
    places = {s.reviewer: {(c.head, c.path, c.start_line) for c in s.comments} for s in scores}
    lines = ["", "Side by side (the same file and line at the same head):"]
    for score in scores:
        others = set().union(*(p for r, p in places.items() if r != score.reviewer))
        only = [c for c in score.comments if (c.head, c.path, c.start_line) not in others]
        addressed = sum(c.outcome == ADDRESSED for c in only)
        lines.append(
            f"  only {score.reviewer}: {len(only)} comments ({addressed} addressed), "
            f"{len(score.comments) - len(only)} where another reviewer commented too"
        )
    return lines


def bug_report_text(scores: list[BugScore], fixes: int, stopped: str, *, name: str = "") -> str:
    lines = [
        f"Put back the bugs of {fixes} fix commits, one pull request each"
        + (f" (stopped: {stopped})" if stopped else "")
        + (f" — evaluation {name!r}" if name else ""),
        "",
        f"{'reviewer':<20} {'fixes':>5} {'failed':>6} {'caught':>6} {'rate':>5} "
        f"{'other comments':>14} {'comments/catch':>14} {'s/review':>8} {'cost $':>8}",
    ]
    for score in scores:
        data = score.as_dict()
        rate = f"{data['catch_rate']:.0%}" if data["catch_rate"] is not None else "-"
        per = (
            data["comments_per_caught_bug"] if data["comments_per_caught_bug"] is not None else "-"
        )
        lines.append(
            f"{score.reviewer:<20} {score.fixes:>5} {score.failed:>6} {score.caught:>6} "
            f"{rate:>5} {score.other_comments:>14} {per:>14} {data['seconds_per_review']:>8} "
            f"{data['cost_usd']:>8}"
        )
    lines += [
        "",
        "caught: a comment on a line the fix had changed (the bug, put back); other "
        "comments: everything else it said on the same change — counted against it.",
    ]
    for score in scores:
        lines += ["", f"## {score.reviewer}"]
        for failure in score.failures:
            lines.append(f"  review failed: {failure}")
        for case in score.cases:
            verdict = "caught" if case["caught"] else "missed"
            lines.append(f"  {verdict}: {case['fix'][:8]} {case['subject'][:100]}")
            for where, said in (
                ("on the bug", case["on_the_bug"]),
                ("elsewhere", case["elsewhere"]),
            ):
                for c in said:
                    lines.append(
                        f"      {where}: {c['path']}:{c['line']} {c['rule']} {c['title'][:100]}"
                    )
    return "\n".join(lines) + "\n"
