"""The task board: every review-pass task with its status row, the stuck ones first,
a task's page with its passes, open items and the four actions, and the hand-off form
(the API's task creation and hand-off, through the same services)."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.admin.views.decorators import staff_member_required
from django.http import HttpRequest, HttpResponse, HttpResponseForbidden
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from repos.github import GitHubError
from reviews.models import Task
from reviews.passes import handoff
from reviews.passes.flow import ACTIONS, action_take, review_in_flight
from reviews.passes.forms import HandoffForm
from reviews.passes.handoff import TaskError
from reviews.passes.selectors import board, feedback_collect, latest_review, task_status


def may_act(user) -> bool:
    """Staff may look; acting on a task needs the change-task permission."""
    return user.has_perm("reviews.change_task")


@staff_member_required
def task_board(request: HttpRequest) -> HttpResponse:
    tasks = board(Task.objects.all())
    rows = [{"task": t, "status": task_status(t), "reviewing": review_in_flight(t)} for t in tasks]
    return render(
        request,
        "reviews/tasks.html",
        {
            "rows": rows,
            "may_act": may_act(request.user),
            "may_hand_off": request.user.has_perm("reviews.add_task"),
        },
    )


@staff_member_required
def task_detail(request: HttpRequest, pk: int) -> HttpResponse:
    task = get_object_or_404(Task.objects.select_related("reviewer", "owner", "skill"), pk=pk)
    return render(
        request,
        "reviews/task.html",
        {
            "task": task,
            "status": task_status(task),
            "feedback": feedback_collect(task),
            "passes": task.passes.order_by("number"),
            "pulls": [
                {"tpr": tpr, "review": latest_review(tpr)}
                for tpr in task.pulls.select_related("repository", "pull_request")
            ],
            "runs": [run for p in task.passes.order_by("number") for run in p.runs.order_by("pk")],
            "actions": ACTIONS,
            "may_act": may_act(request.user),
            # Return as is waits for the review under way to end; recall does not.
            "reviewing": review_in_flight(task),
        },
    )


@staff_member_required
@require_POST
def task_action(request: HttpRequest, pk: int) -> HttpResponse:
    task = get_object_or_404(Task, pk=pk)
    if not may_act(request.user):
        return HttpResponseForbidden("You may look at tasks but not act on them.")
    action = request.POST.get("action", "")
    try:
        action_take(task, action, text=request.POST.get("text", ""), sender=request.user)
    except TaskError as exc:
        messages.error(request, str(exc))
    except GitHubError as exc:
        messages.error(request, f"GitHub refused: {exc.message}")
    else:
        messages.success(request, f"{action.replace('_', ' ').capitalize()}: done.")
    return redirect("reviews:task", pk=task.pk)


@staff_member_required
def task_new(request: HttpRequest) -> HttpResponse:
    """Hand a task off from the dashboard, as a client does over the API. Steps: the
    form's shapes; the hand-off's choices (`handoff_check`, before anything is made);
    the task (`task_create`: the user's API scope, pull requests the author's App opened
    and no other open task holds); its hand-off (`task_handoff`). A hand-off refused
    after the task was made (a reviewer disabled meanwhile) removes that task."""
    if not request.user.has_perm("reviews.add_task"):
        return HttpResponseForbidden("You may look at tasks but not hand them off.")
    form = HandoffForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        values = form.cleaned_data
        choices = {
            "enabled": values["enabled"],
            "reviewer": values["reviewer"] or None,
            "model": values["model"],
            "skill": values["skill"],
            "max_passes": values["max_passes"],
            "counted_bots": values["counted_bots"],
            "required_checks": values["required_checks"],
            "author_silence_minutes": values["author_silence_minutes"],
        }
        try:
            handoff.handoff_check(**choices)
            task = handoff.task_create(
                owner=request.user,
                title=values["title"],
                description=values["description"],
                author_name=values["author_name"],
                author_login=values["author_login"],
                pulls=values["pull_requests"],
            )
        except TaskError as exc:
            form.add_error(None, str(exc))
        else:
            try:
                handoff.task_handoff(task, **choices)
            except TaskError as exc:
                Task.objects.filter(pk=task.pk, handed_off_at__isnull=True).delete()
                form.add_error(None, str(exc))
            else:
                messages.success(request, f"Task {task.pk} handed off.")
                return redirect("reviews:task", pk=task.pk)
    return render(request, "reviews/task_new.html", {"form": form})
