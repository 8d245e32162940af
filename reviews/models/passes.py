"""Review passes (docs/review-passes.md): a task handed off over the REST API, its pull requests,
each pass over them, the author's answers, and the feedback routed to the author.

A pass is a set of review runs (one per pull request of the task, each linked to it by its
`PassLink`, `run.pass_link`) run by the task's reviewer at pinned heads. The state lives here; the decisions live in
reviews/passes/handoff.py, flow.py and answers.py.
"""

from __future__ import annotations

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models

from repos.models import Installation, Repository, Reviewer, ReviewSkill
from reviews.models.runs import ReviewRun


class TaskState(models.TextChoices):
    OPEN = "open", "handed off, waiting for the author"
    REVIEWING = "reviewing", "reviewing"
    AUTHOR_FIXING = "author_fixing", "author fixing"
    APPROVED = "approved", "approved, waiting for checks"
    DONE = "done", "done"
    STUCK = "stuck", "review stuck"
    RETURNED = "returned", "returned as is"
    RECALLED = "recalled", "recalled"


TASK_FINAL_STATES = (TaskState.DONE, TaskState.RETURNED, TaskState.RECALLED)
MAX_PASSES_RANGE = (1, 10)
AUTHOR_SILENCE_RANGE = (5, 7 * 24 * 60)  # minutes: five minutes to a week


class ApiScope(models.Model):
    """What a user's API token may name: the repositories its tasks' pull requests may
    be in (these, and every repository of these installations). A user without one (and
    not a superuser) can read the API's description, and nothing more."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_scope"
    )
    installations = models.ManyToManyField(
        Installation,
        blank=True,
        related_name="+",
        help_text="Every repository of these installations, also ones added later.",
    )
    repositories = models.ManyToManyField(Repository, blank=True, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name = "API scope"

    def __str__(self) -> str:
        return f"API scope of {self.user}"

    def covers(self, repository: Repository) -> bool:
        return (
            self.repositories.filter(pk=repository.pk).exists()
            or self.installations.filter(pk=repository.installation_id).exists()
        )


class Task(models.Model):
    """Work handed off by an API client (the author): its pull requests are reviewed
    pass after pass until a pass is clean and the required checks are green."""

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="review_tasks"
    )
    title = models.CharField(max_length=300)
    # What the task is for, in the author's side's words: given to the pass reviewer as
    # fenced data (the goal "the task not done" is judged against), never instructions.
    description = models.TextField(blank=True, max_length=8000)
    author_name = models.CharField(max_length=200, help_text="Who does the work (an agent).")
    author_login = models.CharField(
        max_length=100, blank=True, help_text="The author's GitHub login (its own comments)."
    )
    state = models.CharField(max_length=16, choices=TaskState.choices, default=TaskState.OPEN)
    stuck_reason = models.TextField(blank=True)
    # Why the task becomes stuck once the author has answered the last pass (two passes
    # in a row found new blocking problems in its fixes): its owner decides then, with
    # the author's answers in hand. Empty: nothing pending.
    stuck_when_answered = models.TextField(blank=True)
    # When the task was handed off (with review passes on or off); None: not yet.
    handed_off_at = models.DateTimeField(null=True, blank=True)
    # Handoff: the review-pass settings of this task.
    passes_enabled = models.BooleanField(default=False)
    reviewer = models.ForeignKey(
        Reviewer, null=True, blank=True, on_delete=models.PROTECT, related_name="tasks"
    )
    reviewer_model = models.CharField(max_length=100, blank=True)
    skill = models.ForeignKey(
        ReviewSkill,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="tasks",
        help_text="The configured review skill the hand-off named.",
    )
    # Before skills were configured, a caller wrote the skill itself and its words went
    # into the reviewer's instructions. Kept to read; never sent to a reviewer.
    legacy_skill_text = models.TextField(
        blank=True,
        help_text="A skill the caller wrote itself, before skills were configured: not sent.",
    )
    max_passes = models.PositiveSmallIntegerField(
        default=3,
        validators=[MinValueValidator(MAX_PASSES_RANGE[0]), MaxValueValidator(MAX_PASSES_RANGE[1])],
    )
    counted_bots = models.JSONField(default=list, blank=True)
    required_checks = models.JSONField(
        default=list, blank=True, help_text="Used where branch protection names none."
    )
    extra_passes = models.PositiveSmallIntegerField(
        default=0, help_text="Passes granted past max_passes by 'run another pass'."
    )
    # How long the author may stay silent (no answer, no push, no done) after being told
    # about feedback before the task is stuck; None: TASUKU_AUTHOR_SILENCE_MINUTES.
    author_silence_minutes = models.PositiveIntegerField(
        null=True,
        blank=True,
        validators=[
            MinValueValidator(AUTHOR_SILENCE_RANGE[0]),
            MaxValueValidator(AUTHOR_SILENCE_RANGE[1]),
        ],
    )
    told_to_push_at = models.DateTimeField(null=True, blank=True)
    done_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"task {self.pk}: {self.title}"


class TaskPullRequest(models.Model):
    """One pull request of a task, with what the author last reported and the state of
    its checks as last read from GitHub."""

    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="pulls")
    repository = models.ForeignKey(Repository, on_delete=models.PROTECT, related_name="+")
    number = models.PositiveIntegerField()
    pull_request = models.ForeignKey(
        "reviews.PullRequest", null=True, on_delete=models.SET_NULL, related_name="task_links"
    )
    reported_head = models.CharField(max_length=40, blank=True)
    checks = models.JSONField(default=list, blank=True)
    checks_read_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["pk"]
        constraints = [
            models.UniqueConstraint(
                fields=["task", "repository", "number"], name="task_pull_request_unique"
            )
        ]

    def __str__(self) -> str:
        return f"{self.repository.full_name}#{self.number}"


class PassStatus(models.TextChoices):
    RUNNING = "running", "running"
    CLEAN = "clean", "clean"
    FINDINGS = "findings", "findings"
    FAILED = "failed", "failed"
    SUPERSEDED = "superseded", "superseded"  # a head moved while it ran


PASS_FINAL_STATES = (
    PassStatus.CLEAN,
    PassStatus.FINDINGS,
    PassStatus.FAILED,
    PassStatus.SUPERSEDED,
)


class ReviewPass(models.Model):
    """Pass N of a task: each pull request reviewed at a pinned head."""

    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="passes")
    number = models.PositiveSmallIntegerField()
    status = models.CharField(max_length=16, choices=PassStatus.choices, default=PassStatus.RUNNING)
    heads = models.JSONField(default=dict, help_text="Task pull request id → pinned head.")
    blocking_open = models.PositiveIntegerField(default=0)
    blocking_new = models.PositiveIntegerField(default=0)
    nits_open = models.PositiveIntegerField(default=0)
    resolved = models.PositiveIntegerField(default=0)
    reason = models.TextField(blank=True)
    started_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # Its runs, one per pull request (and those of a pass resumed), each by its link.
    runs = models.ManyToManyField(ReviewRun, through="PassLink", related_name="+")

    class Meta:
        ordering = ["task", "number"]
        constraints = [
            models.UniqueConstraint(fields=["task", "number"], name="review_pass_unique")
        ]

    def __str__(self) -> str:
        return f"pass {self.number} of task {self.task_id}"


class PassLink(models.Model):
    """A run's place in a review pass: a row exists only for a run of a pass (issue 37:
    the feature owns its link; the run knows nothing of passes). A run reads its pass
    as `run.pass_link.review_pass`; a pass its runs as `review_pass.runs`."""

    run = models.OneToOneField(
        ReviewRun, on_delete=models.CASCADE, primary_key=True, related_name="pass_link"
    )
    review_pass = models.ForeignKey(ReviewPass, on_delete=models.CASCADE, related_name="links")
    # Whether this run continued the reviewer's conversation of the previous pass, or
    # started fresh and why (shown on the run page).
    conversation_note = models.TextField(blank=True)

    class Meta:
        verbose_name = "review pass link"

    def __str__(self) -> str:
        return f"run {self.run_id} of pass {self.review_pass_id}"


class AnswerKind(models.TextChoices):
    FIXED = "fixed", "fixed"
    REPLY = "reply", "reply"
    SKIP = "skip", "skip"
    FOLLOW_UP = "follow_up", "follow-up"


class Answer(models.Model):
    """The author's answer to a finding or a person's comment, posted on the pull
    request as the author's App."""

    class Posting(models.TextChoices):
        QUEUED = "queued", "queued"
        POSTING = "posting", "posting"  # a worker holds it until `leased_until`
        POSTED = "posted", "posted"
        FAILED = "failed", "failed"

    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="answers")
    task_pull = models.ForeignKey(TaskPullRequest, on_delete=models.CASCADE, related_name="+")
    review_pass = models.ForeignKey(ReviewPass, on_delete=models.CASCADE, related_name="answers")
    fingerprint = models.CharField(max_length=64, blank=True, help_text="The finding answered.")
    comment = models.ForeignKey(
        "TaskComment", null=True, blank=True, on_delete=models.CASCADE, related_name="answers"
    )
    # A failing required check answered ("a flaky test"): its name and the head it failed
    # on. The answer holds for that head only: failing again on a new head asks again.
    check_name = models.CharField(max_length=200, blank=True)
    check_head = models.CharField(max_length=40, blank=True)
    kind = models.CharField(max_length=16, choices=AnswerKind.choices)
    commit = models.CharField(max_length=40, blank=True)
    text = models.TextField(blank=True)
    posting = models.CharField(max_length=16, choices=Posting.choices, default=Posting.QUEUED)
    github_comment_id = models.BigIntegerField(null=True, blank=True)
    error = models.TextField(blank=True)
    # A durable queue (tasuku/durable.py): tries that failed, tries put off by GitHub's
    # weather (5xx, no answer, a rate limit: not failures), when it is due again, the
    # lease of the worker posting it, its last doorbell.
    tries = models.PositiveSmallIntegerField(default=0)
    deferrals = models.PositiveSmallIntegerField(default=0)
    next_try_at = models.DateTimeField(null=True, blank=True)
    leased_until = models.DateTimeField(null=True, blank=True)
    rung_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["pk"]
        constraints = [
            models.UniqueConstraint(
                fields=["review_pass", "task_pull", "fingerprint"],
                condition=models.Q(comment__isnull=True, check_name=""),
                name="answer_once_per_finding_and_pass",
            ),
            models.UniqueConstraint(fields=["comment"], name="answer_once_per_comment"),
            models.UniqueConstraint(
                fields=["task_pull", "check_name", "check_head"],
                condition=~models.Q(check_name=""),
                name="answer_once_per_check_and_head",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.kind} on {self.check_name or self.fingerprint or self.comment_id}"


class TaskComment(models.Model):
    """A comment on one of the task's pull requests by someone other than the author
    and Tasuku: routed to the author when the commenter counts (owner, member,
    collaborator, or a counted bot); counted otherwise."""

    class Kind(models.TextChoices):
        ISSUE_COMMENT = "issue_comment", "conversation comment"
        REVIEW_COMMENT = "review_comment", "inline comment"
        REVIEW = "review", "review"

    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="comments")
    task_pull = models.ForeignKey(
        TaskPullRequest, on_delete=models.CASCADE, related_name="comments"
    )
    kind = models.CharField(max_length=16, choices=Kind.choices)
    github_id = models.BigIntegerField()
    login = models.CharField(max_length=100)
    association = models.CharField(max_length=32, blank=True)
    counted = models.BooleanField(help_text="Routed to the author.")
    body = models.TextField(blank=True)
    url = models.URLField(max_length=500, blank=True)
    path = models.CharField(max_length=1024, blank=True)
    line = models.PositiveIntegerField(null=True, blank=True)
    in_reply_to = models.BigIntegerField(null=True, blank=True)
    created_at = models.DateTimeField()
    received_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at", "pk"]
        constraints = [
            models.UniqueConstraint(
                fields=["task_pull", "kind", "github_id"], name="task_comment_unique"
            )
        ]

    def __str__(self) -> str:
        return f"{self.kind} {self.github_id} by {self.login}"


class AuthorMessage(models.Model):
    """Something said to the author as data in its feedback: an operator's message, or
    the one notice to push or discard what differs from the pull requests' heads."""

    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="messages")
    kind = models.CharField(max_length=32)
    text = models.TextField()
    # Who sent an operator's message (the task's owner over the API, or someone on the
    # dashboard); empty for Tasuku's own notices. The name is kept as it was when sent,
    # so the author's feedback still says who spoke after the account is gone.
    sender = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="author_messages",
    )
    sender_name = models.CharField(max_length=150, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["pk"]

    def __str__(self) -> str:
        return f"{self.kind} to task {self.task_id}"

    @property
    def sent_by(self) -> str:
        """Who the message is from, as the author is told: a person's name, or Tasuku."""
        return self.sender_name or "Tasuku"
