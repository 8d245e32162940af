"""The dashboard's evaluations (`manage.py evaluate`, docs/evaluation.md): each one's
figures per reviewer with a small chart, every comment with its outcome and a grade a
person can give it, and the same as CSV and JSON."""

from __future__ import annotations

import csv
import json
from decimal import Decimal, InvalidOperation

from django.contrib import messages
from django.contrib.admin.views.decorators import staff_member_required
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from repos.models import Repository, Reviewer
from reviews.dashboard.views import may_act as may_act_on_runs
from reviews.evaluation.replay import (
    CHANGED_AFTER_MERGE,
    bug_scores_of,
    evaluation_queue,
    scores_of,
)
from reviews.models import Evaluation, EvaluationGrade, EvaluationKind, Grade

CHART_WIDTH = 320
# A cell a spreadsheet would run as a formula: titles and subjects are a model's or a
# commit author's words (OWASP's CSV injection).
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


class _SafeWriter:
    """csv.writer whose text cells never start a formula (quoted with a leading ')."""

    def __init__(self, writer) -> None:
        self.writer = writer

    def writerow(self, row) -> None:
        self.writer.writerow(
            [
                f"'{cell}" if isinstance(cell, str) and cell.startswith(FORMULA_START) else cell
                for cell in row
            ]  # fmt: skip
        )


@staff_member_required
def evaluation_list(request: HttpRequest) -> HttpResponse:
    page = Paginator(Evaluation.objects.all(), 50).get_page(request.GET.get("page"))
    may_act = may_act_on_runs(request.user)
    return render(
        request,
        "reviews/evaluations.html",
        {
            "page": page,
            "may_act": may_act,
            "repositories": Repository.objects.filter(enabled=True).order_by("full_name")
            if may_act
            else [],
            "reviewers": Reviewer.objects.filter(enabled=True).order_by("slug") if may_act else [],
            "kinds": EvaluationKind.choices,
        },
    )


@staff_member_required
@require_POST
def evaluation_new(request: HttpRequest) -> HttpResponse:
    """Queue an evaluation of a repository Tasuku knows (the same as `manage.py evaluate`
    on a clone, run by a worker): for people who may act on runs — it spends what the
    reviewers cost."""
    if not may_act_on_runs(request.user):
        messages.error(request, "Only people who may retry runs start evaluations.")
        return redirect("reviews:evaluations")
    repository = Repository.objects.filter(
        pk=request.POST.get("repository") or 0, enabled=True
    ).first()
    slugs = [s for s in request.POST.getlist("reviewer") if s]
    known = set(
        Reviewer.objects.filter(enabled=True, slug__in=slugs).values_list("slug", flat=True)
    )
    kind = request.POST.get("kind", EvaluationKind.HISTORY)
    problems = []
    if repository is None:
        problems.append("choose a repository")
    if not slugs or set(slugs) - known:
        problems.append("choose one or more enabled reviewers")
    if kind not in EvaluationKind.values:
        problems.append("choose what to replay")
    try:
        count = int(request.POST.get("count") or 20)
        budget = request.POST.get("budget_usd") or ""
        if budget and Decimal(budget) <= 0:
            raise InvalidOperation
    except (ValueError, InvalidOperation):
        problems.append("a count is a whole number, a budget a positive amount")
        count, budget = 0, ""
    if not 1 <= count <= 500:
        problems.append("a count from 1 to 500")
    if problems:
        messages.error(request, "Nothing was queued: " + "; ".join(problems) + ".")
        return redirect("reviews:evaluations")
    options = {"reviewers": slugs, "budget_usd": budget}
    options["bug_fixes" if kind == EvaluationKind.BUG_FIXES else "count"] = count
    record = evaluation_queue(repository, kind, options, requested_by=request.user)
    messages.success(request, f"Queued: {record.name}.")
    return redirect("reviews:evaluation", pk=record.pk)


def _scores(evaluation: Evaluation):
    if evaluation.kind == EvaluationKind.BUG_FIXES:
        return bug_scores_of(evaluation)
    return scores_of(evaluation)


def _bars(rows: list[dict], key: str) -> list[dict]:
    """One bar per reviewer, scaled to the largest (a chart of SVG rectangles)."""
    values = [row[key] or 0 for row in rows]
    top = max(values, default=0) or 1
    return [
        {
            "reviewer": row["reviewer"],
            "value": row[key],
            "y": 4 + index * 22,
            "width": round(CHART_WIDTH * (value / top), 1),
        }  # fmt: skip
        for index, (row, value) in enumerate(zip(rows, values, strict=True))
    ]


@staff_member_required
def evaluation_detail(request: HttpRequest, pk: int) -> HttpResponse:
    evaluation = get_object_or_404(Evaluation, pk=pk)
    scores = _scores(evaluation)
    rows = [s.as_dict() for s in scores]
    for row in rows:
        if "outcomes" in row:  # names a template can say
            row["changed_after_merge"] = row["outcomes"][CHANGED_AFTER_MERGE]
            row["graded"] = sum(row["grades"].values())
    context = {"evaluation": evaluation, "rows": rows, "grades": Grade.choices,
               "chart_height": 8 + 22 * len(rows), "chart_width": CHART_WIDTH + 160}  # fmt: skip
    if evaluation.kind == EvaluationKind.BUG_FIXES:
        context["catch_bars"] = _bars(rows, "catch_rate")
    else:
        context["addressed_bars"] = _bars(rows, "addressed_rate")
        context["per_pull_bars"] = _bars(rows, "comments_per_pull_request")
    return render(request, "reviews/evaluation.html", context)


@staff_member_required
@require_POST
def evaluation_grade(request: HttpRequest, pk: int) -> HttpResponse:
    """A person's grade of one comment (kept by what the comment is, so the same comment in
    another evaluation of the repository shows it too)."""
    evaluation = get_object_or_404(Evaluation, pk=pk)
    grade = request.POST.get("grade", "")
    try:
        line = int(request.POST.get("line", ""))
    except ValueError:
        line = 0
    head, path = request.POST.get("head", ""), request.POST.get("path", "")
    if grade not in Grade.values or line < 1 or len(head) != 40 or not path:
        messages.error(request, "That grade was not understood: nothing was recorded.")
        return redirect("reviews:evaluation", pk=pk)
    EvaluationGrade.objects.update_or_create(
        repository_path=evaluation.repository_path, head=head, path=path[:1000], line=line,
        rule=request.POST.get("rule", "")[:200],
        defaults={"grade": grade, "note": request.POST.get("note", "")[:500],
                  "graded_by": request.user},
    )  # fmt: skip
    messages.success(request, f"{path}:{line} graded {grade}.")
    return redirect("reviews:evaluation", pk=pk)


@staff_member_required
def evaluation_export(request: HttpRequest, pk: int, fmt: str) -> HttpResponse:
    if fmt not in ("csv", "json"):
        raise Http404("An evaluation is exported as .csv or .json.")
    evaluation = get_object_or_404(Evaluation, pk=pk)
    scores = _scores(evaluation)
    if fmt == "json":
        body = json.dumps({"evaluation": evaluation.name, "kind": evaluation.kind,
                           "repository": evaluation.repository_path, "status": evaluation.status,
                           "stopped": evaluation.stopped_reason,
                           "reviewers": [s.as_dict() for s in scores]}, indent=2)  # fmt: skip
        response = HttpResponse(body, content_type="application/json")
    else:
        response = HttpResponse(content_type="text/csv; charset=utf-8")
        writer = _SafeWriter(csv.writer(response))
        if evaluation.kind == EvaluationKind.BUG_FIXES:
            writer.writerow(
                [
                    "reviewer",
                    "fix",
                    "subject",
                    "caught",
                    "comment_on",
                    "path",
                    "line",
                    "rule",
                    "title",
                ]
            )
            for score in scores:
                for case in score.cases:
                    said = [("bug", c) for c in case["on_the_bug"]] + [
                        ("elsewhere", c) for c in case["elsewhere"]
                    ]
                    for where, c in said or [("", {})]:
                        writer.writerow([score.reviewer, case["fix"], case["subject"], case["caught"], where,
                                         c.get("path", ""), c.get("line", ""), c.get("rule", ""), c.get("title", "")])  # fmt: skip
        else:
            writer.writerow(["reviewer", "merge", "head", "head_number", "path", "start_line", "end_line",
                             "rule", "severity", "blocking", "outcome", "decided_by", "grade", "title"])  # fmt: skip
            for score in scores:
                for c in score.comments:
                    writer.writerow([score.reviewer, c.merge, c.head, c.at + 1, c.path, c.start_line, c.end_line,
                                     c.rule, c.severity, c.blocking, c.outcome, c.decided_by, c.grade, c.title])  # fmt: skip
    response["Content-Disposition"] = f'attachment; filename="evaluation-{evaluation.pk}.{fmt}"'
    return response
