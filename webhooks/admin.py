from __future__ import annotations

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from webhooks.models import DeliveryStatus, WebhookDelivery
from webhooks.services import delivery_retry


@admin.register(WebhookDelivery)
class WebhookDeliveryAdmin(admin.ModelAdmin):
    list_display = (
        "received_at",
        "event",
        "action",
        "repository_full_name",
        "pr_number",
        "status",
        "decision",
        "attempts",
        "outcome",
    )
    list_filter = ("status", "event", "decision")
    search_fields = ("delivery_id", "repository_full_name", "=pr_number")
    date_hierarchy = "received_at"
    actions = ("retry",)

    def get_readonly_fields(self, request: HttpRequest, obj: object = None) -> list[str]:
        return [f.name for f in self.model._meta.fields]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    @admin.action(description="Retry the selected failed deliveries")
    def retry(self, request: HttpRequest, queryset: QuerySet) -> None:
        retried = sum(delivery_retry(d) for d in queryset.filter(status=DeliveryStatus.FAILED))
        skipped = queryset.count() - retried
        self.message_user(request, f"{retried} deliveries queued again.", messages.SUCCESS)
        if skipped:
            self.message_user(
                request, f"{skipped} were not failed and were left alone.", messages.WARNING
            )
