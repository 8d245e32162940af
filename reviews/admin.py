from __future__ import annotations

from django.contrib import admin
from django.http import HttpRequest

from reviews.models import PullRequest, ReviewRun


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
