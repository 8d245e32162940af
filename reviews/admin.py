from __future__ import annotations

from django.contrib import admin
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html

from reviews.models import (
    ApiScope,
    FixProposal,
    MemoryFold,
    PullRequest,
    ReviewPass,
    ReviewRun,
    SandboxTestRun,
    Task,
    TaskPullRequest,
)


class ReadOnlyAdmin(admin.ModelAdmin):
    """Rows Tasuku writes and people read: shown, never saved, added or deleted here (a
    deleted run or task would leave its queue and history without it). What can be done
    to them is done on the dashboard (Retry, Review now) or the task board."""

    def get_readonly_fields(self, request: HttpRequest, obj: object = None) -> list[str]:
        return [f.name for f in self.model._meta.fields]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False  # the page is a view: no Save button over read-only fields

    def has_delete_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


@admin.register(PullRequest)
class PullRequestAdmin(ReadOnlyAdmin):
    list_display = ("__str__", "title", "author_login", "state", "draft", "head_sha")
    list_filter = ("state", "draft")
    search_fields = ("repository__full_name", "title", "author_login", "=number")


@admin.register(SandboxTestRun)
class SandboxTestRunAdmin(ReadOnlyAdmin):
    """The pull requests' own tests (reviews/pr_tests/suite.py): where each head's stands,
    why, and what the tests printed last."""

    list_display = ("pk", "pull_request", "head_sha", "status", "check_conclusion", "created_at")
    list_filter = ("status",)
    search_fields = ("pull_request__repository__full_name", "head_sha")
    list_select_related = ("pull_request__repository",)


@admin.register(ReviewRun)
class ReviewRunAdmin(ReadOnlyAdmin):
    list_display = ("pk", "pull_request", "reviewer", "trigger", "status", "stage", "created_at")
    list_filter = ("status", "stage", "trigger", "reviewer")
    search_fields = ("pull_request__repository__full_name", "head_sha")
    list_select_related = ("pull_request__repository", "reviewer")
    # The run's page on the dashboard tells a run whole (attempts, findings, transcript):
    # here, what identifies it and where it stands, and the way there.
    fields = (
        "run_page", "pull_request", "reviewer", "trigger", "status", "stage", "reason",
        "head_sha", "base_sha", "attempts", "created_at", "started_at", "finished_at",
    )  # fmt: skip

    def get_readonly_fields(self, request: HttpRequest, obj: object = None) -> list[str]:
        return list(self.fields)

    @admin.display(description="Run page")
    def run_page(self, run: ReviewRun) -> str:
        url = reverse("reviews:run", args=[run.pk])
        return format_html('<a href="{}">the run on the dashboard</a>', url)


# --- Review passes: read here, acted on from the task board (/tasks/) or the API ---------


class TaskPullRequestInline(admin.TabularInline):
    model = TaskPullRequest
    fields = ("repository", "number", "reported_head", "checks_read_at")
    readonly_fields = fields
    extra = 0
    can_delete = False

    def has_add_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


class ReviewPassInline(admin.TabularInline):
    model = ReviewPass
    fields = ("number", "status", "blocking_open", "blocking_new", "nits_open", "reason")
    readonly_fields = fields
    extra = 0
    can_delete = False

    def has_add_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


@admin.register(Task)
class TaskAdmin(ReadOnlyAdmin):
    """Tasks are created over the API (`POST /api/tasks/`, with a token from "Tokens"
    above) and acted on from the task board, where the four actions are."""

    list_display = ("pk", "title", "owner", "author_name", "state", "reviewer", "created_at")
    list_filter = ("state", "reviewer")
    search_fields = ("title", "author_name", "author_login", "pulls__repository__full_name")
    list_select_related = ("owner", "reviewer")
    inlines = (TaskPullRequestInline, ReviewPassInline)


@admin.register(ApiScope)
class ApiScopeAdmin(admin.ModelAdmin):
    """Which repositories a user's API token may name in a task (review passes). A
    token's user needs one; a superuser's token may name any repository."""

    list_display = ("user", "created_at")
    search_fields = ("user__username",)
    filter_horizontal = ("installations", "repositories")
    autocomplete_fields = ("user",)


@admin.register(MemoryFold)
class MemoryFoldAdmin(ReadOnlyAdmin):
    """Each fold of a review or a closed pull request into a repository's memory, with its
    model, cost and why it changed nothing when it did not (the memory itself is edited
    on its repository's page)."""

    list_display = (
        "created_at", "repository", "review", "status", "model", "cost_usd", "changed", "note",
    )  # fmt: skip
    list_filter = ("status", "changed", "model")
    search_fields = ("repository__full_name",)
    list_select_related = ("repository",)


@admin.register(FixProposal)
class FixProposalAdmin(ReadOnlyAdmin):
    """Each pull request's one-click fixes proposed as a pull request of Tasuku's
    (reviews/publication/fixes.py): where they stand on GitHub, what was applied and left out, and
    GitHub's reason when it refused. *Send again* asks for them afresh."""

    list_display = ("pull_request", "branch", "status", "state", "number", "outcome", "updated_at")
    list_filter = ("status", "state")
    search_fields = ("pull_request__repository__full_name", "branch")
    list_select_related = ("pull_request__repository",)
    actions = ("send_again",)

    @admin.action(description="Send again")
    def send_again(self, request: HttpRequest, queryset) -> None:
        from reviews.publication.fixes import fixes_request

        for row in queryset.select_related("pull_request"):
            # A person's ask overrules a closed one's no (`reviews.publication.fixes.DECLINED`).
            FixProposal.objects.filter(pk=row.pk, state="declined").update(state="closed")
            fixes_request(row.pull_request)
        self.message_user(request, f"Asked for {queryset.count()} fixes pull request(s) again.")
