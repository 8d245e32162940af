"""Reads of review-pass tasks: the status row, the author's feedback, the board."""

from __future__ import annotations

import hashlib
import json
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db.models import QuerySet
from django.utils import timezone
from django.utils.translation import ngettext

from repos.policy import EffectiveConfig, ReviewerConfig
from reviews.core.modes import Continuation
from reviews.models import (
    TASK_FINAL_STATES,
    Answer,
    AnswerKind,
    AuthorMessage,
    Finding,
    FindingState,
    PassLink,
    PassStatus,
    Review,
    ReviewPass,
    ReviewRun,
    RunStatus,
    Task,
    TaskComment,
    TaskPullRequest,
    TaskState,
)
from reviews.validation.findings import INVALID
from sandbox.contract import SavedConversation


def _count(n: int, one: str, many: str) -> str:
    return ngettext(one, many, n) % {"count": n}


def task_checks(task: Task) -> list[dict[str, Any]]:
    """The required checks of every pull request of the task, as last read."""
    return [c for tpr in task.pulls.all() for c in tpr.checks]


def check_id(tpr: TaskPullRequest, name: str, head: str) -> str:
    """A failing check's id in the feedback: stable for one check on one head, so an
    answer to it holds until it fails again on another head."""
    digest = hashlib.sha256(f"{name}\0{head}".encode()).hexdigest()[:16]
    return f"{tpr.pk}.check.{digest}"


def failing_checks(task: Task) -> list[dict[str, Any]]:
    """Every failing required check of the task's pull requests, as last read, with its
    id, the head it failed on, and the author's answer to it there (None: unanswered)."""
    found = []
    for tpr in task.pulls.select_related("pull_request"):
        current = tpr.pull_request.head_sha if tpr.pull_request else ""
        answers = {
            (a.check_name, a.check_head): a
            for a in Answer.objects.filter(task_pull=tpr).exclude(check_name="")
        }
        for check in tpr.checks:
            if check.get("state") != "failure":
                continue
            head = check.get("head") or current
            answer = answers.get((check.get("name", ""), head))
            found.append(
                {
                    **check,
                    "id": check_id(tpr, check.get("name", ""), head),
                    "head": head,
                    "task_pull": tpr,
                    "answer": {"kind": answer.kind, "commit": answer.commit, "text": answer.text}
                    if answer
                    else None,
                }
            )
    return found


def unanswered_failing_checks(task: Task) -> list[dict[str, Any]]:
    return [c for c in failing_checks(task) if c["answer"] is None]


def task_status(task: Task) -> str:
    """The one-line status: "Reviewing · pass 2", "Waiting for a reviewer", "Author
    fixing · 3 blocking, 1 comment", "Approved · waiting for 2 checks", "Done ·
    approved", "Review stuck: <why>"."""
    last = latest_pass(task)
    if task.state == TaskState.STUCK:
        return f"Review stuck: {task.stuck_reason}"
    if task.state == TaskState.DONE:
        return "Done · approved" if task.passes_enabled else "Done · review passes off"
    if task.state == TaskState.RETURNED:
        return "Returned as is"
    if task.state == TaskState.RECALLED:
        return "Recalled"
    if task.state == TaskState.REVIEWING and last is not None:
        running = ReviewRun.objects.filter(
            pass_link__review_pass=last, status__in=(RunStatus.RUNNING, RunStatus.DISPATCHED)
        ).exists()
        return f"Reviewing · pass {last.number}" if running else "Waiting for a reviewer"
    if task.state == TaskState.APPROVED:
        pending = sum(1 for c in task_checks(task) if c.get("state") != "success")
        return (
            f"Approved · waiting for {_count(pending, '%(count)d check', '%(count)d checks')}"
            if pending
            else "Approved"
        )
    if task.state == TaskState.AUTHOR_FIXING and task.stuck_when_answered and last is not None:
        return (
            f"Waiting for the author's answers to pass {last.number} · then review stuck: "
            f"{task.stuck_when_answered}"
        )
    if task.state == TaskState.AUTHOR_FIXING:
        parts = []
        if last is not None and last.status in (PassStatus.FINDINGS, PassStatus.CLEAN):
            blocking = sum(1 for _, f in open_findings(task, last) if f.blocking)
            if blocking:
                parts.append(f"{blocking} blocking")
        comments = unanswered_comments(task).count()
        if comments:
            parts.append(_count(comments, "%(count)d comment", "%(count)d comments"))
        failing = len(unanswered_failing_checks(task))
        if failing:
            parts.append(_count(failing, "%(count)d failing check", "%(count)d failing checks"))
        if last is not None and last.status == PassStatus.CLEAN and heads_moved(task, last):
            parts.append(f"pushed since pass {last.number}: report done for another pass")
        if last is not None and last.status == PassStatus.SUPERSEDED:
            parts.append("heads moved during the pass")
        if task.told_to_push_at is not None:
            parts.append("told to push")
        return "Author fixing" + (f" · {', '.join(parts)}" if parts else "")
    if task.handed_off_at is None:
        return "Not handed off"
    if not task.passes_enabled:
        return "Handed off · review passes off"
    return "Handed off · waiting for the author"


def _finding(tpr, finding: Finding, answer: Answer | None, rulings: dict) -> dict[str, Any]:
    ruling = rulings.get(finding.fingerprint)
    return {
        "id": finding_id(tpr, finding.fingerprint),
        "pull_request": str(tpr),
        "blocking": finding.blocking,
        "severity": finding.severity,
        "category": finding.category,
        "title": finding.title,
        "how_it_fails": finding.body,
        "evidence": finding.evidence,
        "path": finding.path,
        "line": finding.start_line,
        "end_line": finding.end_line,
        "suggestion": finding.suggestion,
        "url": finding.github_comment_url,
        "first_seen": finding.first_seen_sha,
        "ruling": {"still_open": ruling.get("still_open"), "reason": ruling.get("reason", "")}
        if ruling
        else None,
        "answer": {"kind": answer.kind, "commit": answer.commit, "text": answer.text}
        if answer
        else None,
    }


def feedback_collect(task: Task, *, now=None) -> dict[str, Any]:
    """Everything the author must answer, as data: the open findings of the last pass
    (blocking and nits, each with how it fails, where, the suggestion, the reviewer's
    ruling on it), comments from people who count (others only counted), failing
    required checks, and messages. Comments are held back until none has arrived for
    TASUKU_FEEDBACK_QUIET_SECONDS, so a thread being written arrives whole."""
    now = now or timezone.now()
    last = latest_pass(task)
    findings: list[dict[str, Any]] = []
    if last is not None and last.status != PassStatus.RUNNING:
        answers = {
            (a.task_pull_id, a.fingerprint): a
            for a in Answer.objects.filter(review_pass=last, comment__isnull=True, check_name="")
        }
        rulings: dict[str, dict] = {}
        for run in last.runs.all():
            review = getattr(run, "review", None)
            for ruling in (review.rulings if review else []) or []:
                rulings[ruling.get("id", "")] = ruling
        for tpr, finding in open_findings(task, last):
            findings.append(
                _finding(tpr, finding, answers.get((tpr.pk, finding.fingerprint)), rulings)
            )
    quiet = timedelta(seconds=settings.TASUKU_FEEDBACK_QUIET_SECONDS)
    comments_qs = TaskComment.objects.filter(task=task).select_related("task_pull__repository")
    newest = comments_qs.order_by("-received_at").values_list("received_at", flat=True).first()
    settling = newest is not None and now - newest < quiet
    routed: list[dict[str, Any]] = []
    if not settling:
        for comment in unanswered_comments(task).select_related("task_pull__repository"):
            routed.append(
                {
                    "id": str(comment.pk),
                    "pull_request": str(comment.task_pull),
                    "kind": comment.kind,
                    "author": comment.login,
                    "association": comment.association,
                    "body": comment.body,
                    "path": comment.path or None,
                    "line": comment.line,
                    "url": comment.url,
                    "created_at": comment.created_at.isoformat(),
                }
            )
    checks = [
        {
            k: c.get(k)
            for k in (
                "id",
                "pull_request",
                "name",
                "head",
                "conclusion",
                "title",
                "summary",
                "output",
                "url",
                "answer",
            )
        }
        for c in failing_checks(task)
    ]
    return {
        "task": task.pk,
        "status": task_status(task),
        "state": task.state,
        "pass": last.number if last else None,
        "findings": findings,
        "comments": routed,
        "comments_not_routed": comments_qs.filter(counted=False).count(),
        "comments_held_back": comments_qs.filter(counted=True, answers__isnull=True).count()
        if settling
        else 0,
        "ready_at": (newest + quiet).isoformat() if settling else None,
        "failing_checks": checks,
        "messages": [
            {"kind": m.kind, "text": m.text, "sender": m.sent_by, "at": m.created_at.isoformat()}
            for m in AuthorMessage.objects.filter(task=task)
        ],
    }


def latest_review(tpr: TaskPullRequest) -> dict[str, Any] | None:
    """The pull request's latest review by Tasuku on GitHub: where it is (the review's
    `html_url` as GitHub gave it, or the pull request's page at the review's anchor for a
    review recorded without it), the head it reviewed, whether it approved. None when
    Tasuku has published none."""
    if tpr.pull_request_id is None:
        return None
    review = (
        Review.objects.filter(pull_request_id=tpr.pull_request_id, github_review_id__isnull=False)
        .select_related("pull_request")
        .order_by("-published_at", "-pk")
        .first()
    )
    if review is None:
        return None
    url = review.github_review_url
    if not url and review.pull_request.html_url:
        url = f"{review.pull_request.html_url}#pullrequestreview-{review.github_review_id}"
    return {
        "url": url or None,
        "head": review.head_sha,
        "approved": review.approved,
        "published_at": review.published_at.isoformat() if review.published_at else None,
    }


def open_task_naming(repository, number: int, *, besides: Task | None = None) -> Task | None:
    """The open task (not in a final state) one of whose pull requests is this one, the
    earliest if (from before this was checked) there are several; `besides` left out."""
    tasks = Task.objects.filter(pulls__repository=repository, pulls__number=number).exclude(
        state__in=TASK_FINAL_STATES
    )
    if besides is not None:
        tasks = tasks.exclude(pk=besides.pk)
    return tasks.order_by("pk").first()


def passes_of(task: Task) -> QuerySet[ReviewPass]:
    return task.passes.order_by("number")


STATE_ORDER = {
    TaskState.STUCK: 0,
    TaskState.AUTHOR_FIXING: 1,
    TaskState.REVIEWING: 2,
    TaskState.APPROVED: 3,
    TaskState.OPEN: 4,
    TaskState.DONE: 5,
    TaskState.RETURNED: 6,
    TaskState.RECALLED: 7,
}


def board(tasks: QuerySet[Task]) -> list[Task]:
    """Tasks for the board: the stuck ones first, then by what they wait on."""
    return sorted(
        tasks.select_related("reviewer", "owner"), key=lambda t: (STATE_ORDER[t.state], -t.pk)
    )


# --- Reads of passes, findings and answers ----------------------------------------------


def pass_reviews(review_pass: ReviewPass, runs: list[ReviewRun] | None = None) -> list[Review]:
    runs = runs if runs is not None else list(review_pass.runs.all())
    return list(Review.objects.filter(run__in=runs).select_related("run__pull_request"))


def pass_counts(review_pass: ReviewPass, runs: list[ReviewRun] | None = None) -> dict[str, int]:
    """Blocking findings open, and new in this pass (raised by no earlier pass of the
    task on that pull request); nits open; earlier findings resolved at its heads."""
    reviews = pass_reviews(review_pass, runs)
    open_findings = list(Finding.objects.filter(review__in=reviews, state=FindingState.OPEN))
    earlier_runs = ReviewRun.objects.filter(
        pass_link__review_pass__task=review_pass.task,
        pass_link__review_pass__number__lt=review_pass.number,
    )
    seen_before = set(
        Finding.objects.filter(review__run__in=earlier_runs).values_list(
            "pull_request_id", "fingerprint"
        )
    )
    blocking = [f for f in open_findings if f.blocking]
    heads = set(review_pass.heads.values())
    return {
        "blocking_open": len(blocking),
        "blocking_new": sum(
            1 for f in blocking if (f.pull_request_id, f.fingerprint) not in seen_before
        ),
        "nits_open": len(open_findings) - len(blocking),
        "resolved": Finding.objects.filter(
            pull_request__in=[r.pull_request_id for r in reviews],
            resolved_in_sha__in=heads,
            state__in=(FindingState.RESOLVED, FindingState.OUTDATED),
        ).count(),
    }


def latest_pass(task: Task) -> ReviewPass | None:
    return task.passes.order_by("-number").first()


def unanswered_comments(task: Task, since=None):
    comments = TaskComment.objects.filter(task=task, counted=True, answers__isnull=True)
    if since is not None:
        comments = comments.filter(created_at__gte=since)
    return comments


def heads_moved(task: Task, review_pass: ReviewPass) -> list[str]:
    """The pull requests whose head moved since the pass pinned it: what the pass
    approved is not what would merge, so the author reports done for another pass."""
    return [
        str(tpr)
        for tpr in task.pulls.select_related("pull_request", "repository")
        if tpr.pull_request is not None
        and review_pass.heads.get(str(tpr.pk), tpr.pull_request.head_sha)
        != tpr.pull_request.head_sha
    ]


def task_summary(task: Task) -> dict[str, Any]:
    """What the task comes back with: its passes (what each found and resolved), every
    finding raised along the way and how it ended (fixed, outdated, dismissed, skipped,
    a follow-up, or still open), and what is left open — in figures and in one note."""
    passes = list(passes_of(task))
    runs = ReviewRun.objects.filter(pass_link__review_pass__task=task)
    rows = (
        Finding.objects.filter(review__run__in=runs)
        .exclude(category=INVALID)  # what the engine sent unusable is no finding
        .select_related("review__run__pass_link__review_pass", "pull_request__repository")
        .order_by("pk")
    )
    latest: dict[tuple[int, str], Finding] = {}
    first_pass: dict[tuple[int, str], int] = {}
    for finding in rows:
        key = (finding.pull_request_id, finding.fingerprint)
        first_pass.setdefault(key, finding.review.run.pass_link.review_pass.number)
        latest[key] = finding
    answers = {
        (a.task_pull.pull_request_id, a.fingerprint): a
        for a in Answer.objects.filter(task=task, comment__isnull=True, check_name="")
        .select_related("task_pull")
        .order_by("pk")
    }
    findings = []
    for key, finding in latest.items():
        answer = answers.get(key)
        if finding.state == FindingState.RESOLVED:
            fate = f"fixed in {finding.resolved_in_sha[:7]}"
        elif finding.state == FindingState.OUTDATED:
            fate = "outdated: its code was removed"
        elif finding.state == FindingState.SUPPRESSED:
            fate = finding.suppression_reason or "suppressed"
        elif answer is not None and answer.kind == AnswerKind.SKIP:
            fate = "skipped by the author (a nit)"
        elif answer is not None and answer.kind == AnswerKind.FOLLOW_UP:
            fate = f"left for a follow-up: {answer.text[:200]}"
        else:
            fate = "still open"
        findings.append(
            {
                "pull_request": str(finding.pull_request),
                "title": finding.title,
                "blocking": finding.blocking,
                "raised_in_pass": first_pass[key],
                "fate": fate,
            }
        )
    still_open = [f for f in findings if f["fate"] == "still open"]
    per_pass = [
        f"pass {p.number}: {p.get_status_display()}"
        + (
            f" ({p.blocking_open} blocking and {p.nits_open} nits open, {p.resolved} resolved)"
            if p.status in (PassStatus.FINDINGS, PassStatus.CLEAN)
            else (f" ({p.reason})" if p.reason else "")
        )
        for p in passes
    ]
    note = [
        _count(len(passes), "%(count)d pass", "%(count)d passes")
        + (": " + "; ".join(per_pass) if per_pass else "")
        + ".",
        _count(len(findings), "%(count)d finding raised", "%(count)d findings raised")
        + ", "
        + _count(len(findings) - len(still_open), "%(count)d settled", "%(count)d settled")
        + ", "
        + _count(len(still_open), "%(count)d left open", "%(count)d left open")
        + ".",
    ]
    if still_open:
        note.append(
            "Left open: "
            + "; ".join(
                f"{f['title']} ({'blocking' if f['blocking'] else 'nit'}, {f['pull_request']})"
                for f in still_open
            )
            + "."
        )
    failing = [c for c in task_checks(task) if c.get("state") == "failure"]
    if failing:
        note.append("Failing checks: " + ", ".join(c["name"] for c in failing) + ".")
    return {
        "passes": len(passes),
        "findings": findings,
        "left_open": len(still_open),
        "note": " ".join(note),
    }


def author_told_at(task: Task):
    """When the author was last told something to act on: a pass ended (its findings), a
    counted comment arrived, an operator's message or the notice to push was left, its
    checks were read failing. None when it was never told anything."""
    last = latest_pass(task)
    moments = [
        last.finished_at if last is not None else None,
        task.told_to_push_at,
        AuthorMessage.objects.filter(task=task).order_by("-created_at")
        .values_list("created_at", flat=True).first(),
        TaskComment.objects.filter(task=task, counted=True).order_by("-received_at")
        .values_list("received_at", flat=True).first(),
    ]  # fmt: skip
    if any(c.get("state") == "failure" for c in task_checks(task)):
        moments += [tpr.checks_read_at for tpr in task.pulls.all()]
    known = [m for m in moments if m is not None]
    return max(known) if known else None


def author_came_back(task: Task, *, since) -> bool:
    """Whether the author answered, or pushed one of the task's pull requests, after
    `since` (reporting done moves the task on by itself)."""
    if Answer.objects.filter(task=task, created_at__gt=since).exists():
        return True
    last = latest_pass(task)
    if last is None:
        return False
    return any(
        tpr.pull_request is not None
        and tpr.pull_request.updated_at > since
        and last.heads.get(str(tpr.pk), tpr.pull_request.head_sha) != tpr.pull_request.head_sha
        for tpr in task.pulls.select_related("pull_request")
    )


def finding_id(tpr: TaskPullRequest, fingerprint: str) -> str:
    return f"{tpr.pk}.{fingerprint}"


def open_findings(
    task: Task, review_pass: ReviewPass | None = None
) -> list[tuple[TaskPullRequest, Finding]]:
    """The findings of the last pass still open, with their pull request."""
    review_pass = review_pass or latest_pass(task)
    if review_pass is None:
        return []
    pulls = {tpr.pull_request_id: tpr for tpr in task.pulls.all()}
    reviews = pass_reviews(review_pass)
    found = []
    for finding in Finding.objects.filter(review__in=reviews, state=FindingState.OPEN).order_by(
        "-blocking", "path", "start_line"
    ):
        tpr = pulls.get(finding.pull_request_id)
        if tpr is not None:
            found.append((tpr, finding))
    return found


def answer_text(answer: Answer) -> str:
    if answer.kind == AnswerKind.FIXED:
        return f"Fixed in {answer.commit[:12]}." + (f" {answer.text}" if answer.text else "")
    if answer.kind == AnswerKind.SKIP:
        return "Skipped (a nit)." + (f" {answer.text}" if answer.text else "")
    if answer.kind == AnswerKind.FOLLOW_UP:
        return f"Follow-up: {answer.text}"
    return answer.text


def pass_link(run: ReviewRun) -> PassLink | None:
    """The link of a run to its review pass (None: a run of no pass). Read once, then
    kept on the run, absent or not."""
    try:
        return run.pass_link
    except PassLink.DoesNotExist:
        return None


def previous_pass(run: ReviewRun) -> ReviewPass | None:
    """The pass before the one `run` belongs to (None outside a pass, or for pass 1)."""
    link = pass_link(run)
    if link is None:
        return None
    review_pass = link.review_pass
    return review_pass.task.passes.filter(number__lt=review_pass.number).order_by("-number").first()


def pass_continuation(run: ReviewRun, reviewer: ReviewerConfig) -> tuple[Continuation, str]:
    """The conversation of this pull request's review in the previous pass, when the same
    reviewer, engine and model can continue it within the reviewer's context budget;
    otherwise a fresh start with a summary of that review. With it, the note that says
    which, and why ("" for the first pass)."""
    previous = previous_pass(run)
    if previous is None:
        return Continuation(), ""
    earlier = (
        ReviewRun.objects.filter(pass_link__review_pass=previous, pull_request=run.pull_request)
        .select_related("review")
        .order_by("-pk")
        .first()
    )
    if earlier is None:
        return Continuation(), ""
    review = getattr(earlier, "review", None)
    summary = _pass_summary(previous.number, review)
    kept = (earlier.runner_result or {}).get("conversation")
    config = EffectiveConfig.model_validate(earlier.config or {})
    before = next((r for r in config.reviewers if r.slug == reviewer.slug), None)
    why = ""
    if kept is None:
        why = f"pass {previous.number} kept no conversation"
        if reviewer.engine not in CONVERSING_ENGINES:
            why += f" (the {reviewer.engine} engine keeps none)"
    elif before is None or before.engine != reviewer.engine:
        why = f"pass {previous.number} ran on another engine"
    elif before.model != reviewer.model:
        why = f"pass {previous.number} used {before.model or 'another model'}, this pass {reviewer.model}"
    elif len(json.dumps(kept.get("messages") or [])) // 4 > reviewer.context_budget_tokens:
        why = (
            f"pass {previous.number}'s conversation is larger than the reviewer's context "
            f"budget ({reviewer.context_budget_tokens:,} tokens)"
        )
    if why:
        return Continuation(summary=summary), f"a fresh start: {why}"
    return (
        Continuation(conversation=SavedConversation.model_validate(kept)),
        f"continues pass {previous.number}'s conversation (run {earlier.pk})",
    )


# The engines whose conversation is kept between passes: those on Tasuku's agent loop.
CONVERSING_ENGINES = ("anthropic", "openai")


def _pass_summary(number: int, review: Review | None) -> str:
    if review is None:
        return ""
    parts = [f"Pass {number} reviewed head {review.head_sha[:12]}."]
    if review.inspected_areas:
        parts.append("Inspected: " + "; ".join(review.inspected_areas))
    if review.validation:
        parts.append("How it was checked: " + review.validation)
    for ruling in review.rulings or []:
        state = "still open" if ruling.get("still_open") else "resolved"
        parts.append(f"Ruled {ruling.get('id', '?')}: {state} — {ruling.get('reason', '')}")
    return "\n".join(parts)[:4000]


def _previous_answers(run: ReviewRun):
    """The author's answers to this pull request's findings in the previous pass."""
    previous = previous_pass(run)
    if previous is None:
        return Answer.objects.none()
    return Answer.objects.filter(
        review_pass=previous,
        task_pull__pull_request=run.pull_request,
        comment__isnull=True,
        check_name="",
    )


def answers_for_run(run: ReviewRun) -> dict[str, str]:
    """The author's answers in the previous pass, as the reviewer will read them
    (fingerprint → text)."""
    return {a.fingerprint: answer_text(a) for a in _previous_answers(run)}


def disputed_fingerprints(run: ReviewRun) -> set[str]:
    """Findings the author answered with a reply (disputed) in the previous pass."""
    return set(
        _previous_answers(run).filter(kind=AnswerKind.REPLY).values_list("fingerprint", flat=True)
    )


def rulings_for_run(run: ReviewRun) -> dict[str, str]:
    """The reviewer's rulings on this pull request's findings in the previous pass
    (fingerprint → "still open: why" / "resolved: why"), for the next pass's job."""
    previous = previous_pass(run)
    review = (
        Review.objects.filter(
            run__pass_link__review_pass=previous, pull_request=run.pull_request
        ).first()
        if previous is not None
        else None
    )
    rulings: dict[str, str] = {}
    for ruling in (review.rulings if review else None) or []:
        if not isinstance(ruling, dict) or not ruling.get("id"):
            continue
        verdict = "still open" if ruling.get("still_open") else "resolved"
        reason = str(ruling.get("reason") or "").strip()
        rulings[str(ruling["id"])] = f"{verdict}: {reason}" if reason else verdict
    return rulings
