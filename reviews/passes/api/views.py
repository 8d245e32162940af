"""The review-pass API: thin views over the review-pass services (reviews/passes/).

Who may do what (README, *Who may use the API*):
- Every endpoint works on the caller's own tasks only: another token's task is not found
  (404), whatever the endpoint.
- A task names only pull requests in repositories the caller's API scope grants (404
  for any other: its existence is not told) and opened by the author's App (403 for a
  person's pull request), and none already in another open task (409: a pull request
  belongs to one open task at a time).
- Acting on a task (hand-off, done, answers, actions) needs every one of its
  repositories still in the caller's scope (403 once one has left it); reading it does
  not.
"""

from __future__ import annotations

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import PermissionDenied
from rest_framework.request import Request
from rest_framework.response import Response

from reviews.models import Task
from reviews.passes import answers, flow, handoff
from reviews.passes.api.serializers import (
    ActionSerializer,
    AnswersSerializer,
    DoneResultSerializer,
    DoneSerializer,
    ErrorSerializer,
    FeedbackSerializer,
    HandoffSerializer,
    TaskCreateSerializer,
    TaskSerializer,
)
from reviews.passes.handoff import TaskError
from reviews.passes.selectors import feedback_collect

REFUSED = {
    400: OpenApiResponse(ErrorSerializer, description="Malformed or refused"),
    403: OpenApiResponse(ErrorSerializer, description="Not yours to do"),
    404: OpenApiResponse(description="Not one of your tasks"),
    409: OpenApiResponse(ErrorSerializer, description="Not now, in the task's state"),
    422: OpenApiResponse(ErrorSerializer, description="Cannot be honoured"),
}


def refused(error: TaskError) -> Response:
    body = {"error": str(error)}
    if error.details is not None:
        body["details"] = error.details
    return Response(body, status=error.status)


class TaskViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    serializer_class = TaskSerializer

    def get_queryset(self):
        return Task.objects.filter(owner=self.request.user).prefetch_related("passes")

    def acted_on(self) -> Task:
        """The caller's task, to act on: 404 if it is not theirs, 403 if one of its
        repositories has left their API scope."""
        task = self.get_object()
        why = handoff.scope_refusal(task)
        if why:
            raise PermissionDenied({"error": why})
        return task

    @extend_schema(request=TaskCreateSerializer, responses={201: TaskSerializer, **REFUSED})
    def create(self, request: Request) -> Response:
        data = TaskCreateSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        values = data.validated_data
        try:
            task = handoff.task_create(
                owner=request.user,
                title=values["title"],
                description=values["description"],
                author_name=values["author"]["name"],
                author_login=values["author"].get("login", ""),
                pulls=values["pull_requests"],
            )
        except TaskError as exc:
            return refused(exc)
        return Response(TaskSerializer(task).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=HandoffSerializer, responses={200: TaskSerializer, **REFUSED})
    @action(detail=True, methods=["post"])
    def handoff(self, request: Request, pk: str | None = None) -> Response:
        task = self.acted_on()
        data = HandoffSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        values = data.validated_data
        reviewer = values.get("reviewer") or {}
        try:
            task = handoff.task_handoff(
                task,
                enabled=values["enabled"],
                reviewer=reviewer.get("slug"),
                model=reviewer.get("model", ""),
                skill=reviewer.get("skill", ""),
                max_passes=values["max_passes"],
                counted_bots=values["counted_bots"],
                required_checks=values["required_checks"],
                author_silence_minutes=values.get("author_silence_minutes"),
            )
        except TaskError as exc:
            return refused(exc)
        return Response(TaskSerializer(task).data)

    @extend_schema(
        request=DoneSerializer,
        responses={
            200: DoneResultSerializer,
            202: DoneResultSerializer,
            409: DoneResultSerializer,
            400: ErrorSerializer,
            404: OpenApiResponse(description="Not one of your tasks"),
        },
        description=(
            "The author finished. Handed off with review passes off, the task is done (200). "
            "Otherwise every pull request's head on GitHub must be the one reported, "
            "with nothing uncommitted; otherwise the author is told once (409, and in its "
            "feedback) to push or discard, and a second time the task is stuck. The next "
            "pass starts (202). While the task waits for the author's answers before its "
            "owner decides, done is refused (409)."
        ),
    )
    @action(detail=True, methods=["post"])
    def done(self, request: Request, pk: str | None = None) -> Response:
        task = self.acted_on()
        data = DoneSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        try:
            outcome = flow.task_done(
                task,
                heads=data.validated_data["heads"],
                uncommitted=data.validated_data["uncommitted"],
            )
        except TaskError as exc:
            return refused(exc)
        task.refresh_from_db()
        body = {
            "done": outcome.done,
            "started_pass": outcome.started.number if outcome.started else None,
            "told": outcome.told,
            "stuck": outcome.stuck,
            "differing": outcome.differing,
            "task": TaskSerializer(task).data,
        }
        if outcome.done:
            return Response(body)
        return Response(
            body, status=status.HTTP_202_ACCEPTED if outcome.started else status.HTTP_409_CONFLICT
        )

    @extend_schema(
        responses={
            200: FeedbackSerializer,
            404: OpenApiResponse(description="Not one of your tasks"),
        }
    )
    @action(detail=True, methods=["get"])
    def feedback(self, request: Request, pk: str | None = None) -> Response:
        task = self.get_object()
        return Response(FeedbackSerializer(feedback_collect(task)).data)

    @extend_schema(request=AnswersSerializer, responses={202: TaskSerializer, **REFUSED})
    @action(detail=True, methods=["post"])
    def answers(self, request: Request, pk: str | None = None) -> Response:
        task = self.acted_on()
        data = AnswersSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        try:
            answers.answers_record(task, [dict(a) for a in data.validated_data["answers"]])
        except TaskError as exc:
            return refused(exc)
        task.refresh_from_db()
        return Response(TaskSerializer(task).data, status=status.HTTP_202_ACCEPTED)

    @extend_schema(request=ActionSerializer, responses={200: TaskSerializer, **REFUSED})
    @action(detail=True, methods=["post"])
    def actions(self, request: Request, pk: str | None = None) -> Response:
        task = self.acted_on()
        data = ActionSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        try:
            task = flow.action_take(
                task,
                data.validated_data["action"],
                text=data.validated_data["text"],
                sender=request.user,
            )
        except TaskError as exc:
            return refused(exc)
        return Response(TaskSerializer(task).data)
