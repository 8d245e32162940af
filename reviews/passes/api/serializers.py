"""What the review-pass API reads and writes. Input serializers check shapes; the
service (reviews/passes/handoff.py, flow.py, answers.py) checks meaning and answers with TaskError."""

from __future__ import annotations

from rest_framework import serializers

from reviews.models import AUTHOR_SILENCE_RANGE, MAX_PASSES_RANGE, AnswerKind, ReviewPass, Task
from reviews.passes.flow import ACTIONS
from reviews.passes.selectors import (
    latest_review,
    open_findings,
    task_status,
    task_summary,
    unanswered_comments,
    unanswered_failing_checks,
)


class AuthorSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=200)
    login = serializers.CharField(
        max_length=100,
        required=False,
        allow_blank=True,
        help_text="The author's GitHub login: its own comments are not feedback.",
    )


class TaskCreateSerializer(serializers.Serializer):
    title = serializers.CharField(max_length=300)
    description = serializers.CharField(
        max_length=8000,
        required=False,
        allow_blank=True,
        default="",
        help_text=(
            'What the task is for: the pass reviewer judges "the task not done" against '
            "it and the title (given to it as data, never as instructions)."
        ),
    )
    author = AuthorSerializer()
    pull_requests = serializers.ListField(
        child=serializers.CharField(max_length=300),
        min_length=1,
        help_text="owner/repo#number of each pull request of the task.",
    )


class ReviewerChoiceSerializer(serializers.Serializer):
    slug = serializers.CharField(help_text="A reviewer configured in the admin.")
    model = serializers.CharField(
        required=False,
        allow_blank=True,
        default="",
        max_length=1000,
        help_text="One of the reviewer's models (its configured model); empty: that one.",
    )
    skill = serializers.CharField(
        required=False,
        allow_blank=True,
        default="",
        max_length=1000,
        help_text=(
            "The name of a review skill configured in the admin for this reviewer (e.g. "
            "`3-tier-review`); any other is refused with the names it may use."
        ),
    )


class HandoffSerializer(serializers.Serializer):
    enabled = serializers.BooleanField()
    reviewer = ReviewerChoiceSerializer(required=False)
    max_passes = serializers.IntegerField(
        min_value=MAX_PASSES_RANGE[0], max_value=MAX_PASSES_RANGE[1], default=3
    )
    counted_bots = serializers.ListField(
        child=serializers.CharField(max_length=100),
        required=False,
        default=list,
        help_text="Bots whose comments are routed to the author like people's.",
    )
    required_checks = serializers.ListField(
        child=serializers.CharField(max_length=200),
        required=False,
        default=list,
        help_text="Checks that must be green, where branch protection names none.",
    )
    author_silence_minutes = serializers.IntegerField(
        required=False,
        allow_null=True,
        default=None,
        min_value=AUTHOR_SILENCE_RANGE[0],
        max_value=AUTHOR_SILENCE_RANGE[1],
        help_text=(
            "How long the author may stay silent after being told about feedback (no "
            "answer, no push, no done) before the task is stuck; default: the site's "
            "TASUKU_AUTHOR_SILENCE_MINUTES."
        ),
    )


class DoneSerializer(serializers.Serializer):
    heads = serializers.DictField(
        child=serializers.CharField(max_length=40),
        help_text="owner/repo#number → the head commit the author pushed.",
    )
    uncommitted = serializers.BooleanField(
        default=False, help_text="The author's own account: is anything left uncommitted?"
    )


class AnswerItemSerializer(serializers.Serializer):
    finding = serializers.CharField(required=False, help_text="A finding id from the feedback.")
    comment = serializers.CharField(required=False, help_text="A comment id from the feedback.")
    check = serializers.CharField(
        required=False,
        help_text=(
            "A failing check's id from the feedback (reply or fixed): it counts as handled "
            "until it fails again on a new head."
        ),
    )
    kind = serializers.ChoiceField(choices=AnswerKind.choices)
    commit = serializers.CharField(required=False, allow_blank=True, max_length=40)
    text = serializers.CharField(required=False, allow_blank=True, max_length=20_000)


class AnswersSerializer(serializers.Serializer):
    answers = AnswerItemSerializer(many=True, allow_empty=False)


class ActionSerializer(serializers.Serializer):
    action = serializers.ChoiceField(choices=[(a, a) for a in ACTIONS])
    text = serializers.CharField(required=False, allow_blank=True, default="", max_length=10_000)


class PassSerializer(serializers.ModelSerializer):
    class Meta:
        model = ReviewPass
        fields = (
            "number",
            "status",
            "blocking_open",
            "blocking_new",
            "nits_open",
            "resolved",
            "reason",
            "started_at",
            "finished_at",
        )


class TaskSerializer(serializers.ModelSerializer):
    status = serializers.SerializerMethodField()
    author = serializers.SerializerMethodField()
    pull_requests = serializers.SerializerMethodField()
    handoff = serializers.SerializerMethodField()
    passes = PassSerializer(many=True, read_only=True)
    open_items = serializers.SerializerMethodField()
    summary = serializers.SerializerMethodField(
        help_text=(
            "The passes, every finding raised and how it ended, what is left open, and a "
            "note saying so: what the task comes back with."
        )
    )

    class Meta:
        model = Task
        fields = (
            "id",
            "title",
            "description",
            "author",
            "state",
            "status",
            "stuck_reason",
            "pull_requests",
            "handoff",
            "passes",
            "open_items",
            "summary",
            "created_at",
            "done_at",
        )

    def get_summary(self, task: Task) -> dict:
        return task_summary(task)

    def get_status(self, task: Task) -> str:
        return task_status(task)

    def get_author(self, task: Task) -> dict[str, str]:
        return {"name": task.author_name, "login": task.author_login}

    def get_pull_requests(self, task: Task) -> list[dict]:
        return [
            {
                "ref": str(tpr),
                "head": tpr.pull_request.head_sha if tpr.pull_request else None,
                "reported_head": tpr.reported_head or None,
                "checks": tpr.checks,
                "latest_review": latest_review(tpr),
            }
            for tpr in task.pulls.select_related("repository", "pull_request")
        ]

    def get_handoff(self, task: Task) -> dict:
        return {
            "enabled": task.passes_enabled,
            "reviewer": task.reviewer.slug if task.reviewer else None,
            "model": task.reviewer_model or None,
            "skill": task.skill.name if task.skill else None,
            "max_passes": task.max_passes,
            "counted_bots": task.counted_bots,
            "required_checks": task.required_checks,
            "author_silence_minutes": task.author_silence_minutes,
        }

    def get_open_items(self, task: Task) -> dict[str, int]:
        findings = [f for _, f in open_findings(task)]
        return {
            "blocking": sum(1 for f in findings if f.blocking),
            "nits": sum(1 for f in findings if not f.blocking),
            "comments": unanswered_comments(task).count(),
            "failing_checks": len(unanswered_failing_checks(task)),
        }


class FindingFeedbackSerializer(serializers.Serializer):
    id = serializers.CharField()
    pull_request = serializers.CharField()
    blocking = serializers.BooleanField()
    severity = serializers.CharField()
    category = serializers.CharField()
    title = serializers.CharField()
    how_it_fails = serializers.CharField()
    evidence = serializers.CharField()
    path = serializers.CharField()
    line = serializers.IntegerField()
    end_line = serializers.IntegerField()
    suggestion = serializers.CharField(allow_null=True)
    url = serializers.CharField()
    first_seen = serializers.CharField()
    ruling = serializers.DictField(allow_null=True)
    answer = serializers.DictField(allow_null=True)


class CommentFeedbackSerializer(serializers.Serializer):
    id = serializers.CharField()
    pull_request = serializers.CharField()
    kind = serializers.CharField()
    author = serializers.CharField()
    association = serializers.CharField()
    body = serializers.CharField()
    path = serializers.CharField(allow_null=True)
    line = serializers.IntegerField(allow_null=True)
    url = serializers.CharField()
    created_at = serializers.DateTimeField()


class CheckFeedbackSerializer(serializers.Serializer):
    id = serializers.CharField(
        help_text="Answer it by this id (the check's name and the head it failed on)."
    )
    pull_request = serializers.CharField()
    name = serializers.CharField()
    head = serializers.CharField(help_text="The commit it failed on.")
    answer = serializers.DictField(
        allow_null=True, help_text="The author's answer on this head (None: unanswered)."
    )
    conclusion = serializers.CharField(allow_null=True)
    title = serializers.CharField()
    summary = serializers.CharField()
    output = serializers.CharField(help_text="The first lines of the check's output.")
    url = serializers.CharField()


class MessageSerializer(serializers.Serializer):
    kind = serializers.CharField()
    text = serializers.CharField()
    sender = serializers.CharField(
        help_text=(
            "Who it is from: the user who sent it (the task's owner, or an operator on the "
            "dashboard), or `Tasuku` for Tasuku's own notices."
        )
    )
    at = serializers.DateTimeField()


class FeedbackSerializer(serializers.Serializer):
    task = serializers.IntegerField()
    status = serializers.CharField()
    state = serializers.CharField()
    pass_number = serializers.IntegerField(source="pass", allow_null=True)
    findings = FindingFeedbackSerializer(many=True)
    comments = CommentFeedbackSerializer(many=True)
    comments_not_routed = serializers.IntegerField(
        help_text="Comments by people who do not count (not sent)."
    )
    comments_held_back = serializers.IntegerField(
        help_text="Comments held back until the conversation is quiet."
    )
    ready_at = serializers.DateTimeField(allow_null=True)
    failing_checks = CheckFeedbackSerializer(many=True)
    messages = MessageSerializer(many=True)


class ErrorSerializer(serializers.Serializer):
    error = serializers.CharField()
    details = serializers.JSONField(required=False)


class DoneResultSerializer(serializers.Serializer):
    done = serializers.BooleanField(help_text="Review passes off: the task is done as it is.")
    started_pass = serializers.IntegerField(allow_null=True)
    told = serializers.CharField(allow_blank=True)
    stuck = serializers.CharField(allow_blank=True)
    differing = serializers.ListField(child=serializers.DictField())
    task = TaskSerializer()
