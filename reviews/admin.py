from __future__ import annotations

from django.contrib import admin
from django.http import HttpRequest

from reviews.models import (
    ApiScope,
    MemoryFold,
    PullRequest,
    ReviewPass,
    ReviewRun,
    Task,
    TaskPullRequest,
)


class ReadOnlyAdmin(admin.ModelAdmin):
    def get_readonly_fields(self, request: HttpRequest, obj: object = None) -> list[str]:
        return [f.name for f in self.model._meta.fields]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False


@admin.register(PullRequest)
class PullRequestAdmin(ReadOnlyAdmin):
    list_display = ("__str__", "title", "author_login", "state", "draft", "head_sha")
    list_filter = ("state", "draft")
    search_fields = ("repository__full_name", "title", "author_login", "=number")


@admin.register(ReviewRun)
class ReviewRunAdmin(ReadOnlyAdmin):
    list_display = ("pk", "pull_request", "reviewer", "trigger", "status", "stage", "created_at")
    list_filter = ("status", "stage", "trigger", "reviewer")
    search_fields = ("pull_request__repository__full_name", "head_sha")
    list_select_related = ("pull_request__repository", "reviewer")


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

    list_display = ("created_at", "repository", "review", "model", "cost_usd", "changed", "note")
    list_filter = ("changed", "model")
    search_fields = ("repository__full_name",)
    list_select_related = ("repository",)
