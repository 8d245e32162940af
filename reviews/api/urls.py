from __future__ import annotations

from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView
from rest_framework.routers import DefaultRouter

from reviews.actions.api import RunnerConnectorView, RunnerJobView, RunnerResultView
from reviews.passes.api.views import TaskViewSet


class Router(DefaultRouter):
    """Paths with and without the trailing slash: `POST /api/tasks/1/done` as the docs
    write it, and what DRF would generate (a redirect cannot carry a POST body)."""

    def __init__(self) -> None:
        super().__init__()
        self.trailing_slash = "/?"


router = Router()
router.register("tasks", TaskViewSet, basename="task")

urlpatterns = [
    path("", include(router.urls)),
    path("runner/job", RunnerJobView.as_view(), name="runner-job"),
    path("runner/result", RunnerResultView.as_view(), name="runner-result"),
    path("runner/connector", RunnerConnectorView.as_view(), name="runner-connector"),
    path("schema/", SpectacularAPIView.as_view(), name="api-schema"),
    # Swagger UI from the sidecar's own files: nothing loaded from another host. (ReDoc is
    # not offered: its page loads its fonts from Google's.)
    path("docs/", SpectacularSwaggerView.as_view(url_name="api-schema"), name="api-docs"),
]
