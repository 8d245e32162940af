from django.urls import path

from reviews.dashboard import evaluations, status, views
from reviews.passes import views as task_views

app_name = "reviews"

urlpatterns = [
    path("", views.overview, name="overview"),
    path("runs/<int:pk>/", views.run_detail, name="run"),
    path("runs/<int:pk>/status", views.run_status, name="run_status"),
    path("runs/<int:pk>/retry", views.run_retry_view, name="run_retry"),
    path("runs/<int:pk>/cancel", views.run_cancel_view, name="run_cancel"),
    path("diagnostics/", views.diagnostics, name="diagnostics"),
    path("search/", views.search, name="search"),
    path("status/", status.status, name="status"),
    path("status/deliveries/<int:pk>/", status.delivery_detail, name="delivery"),
    path("status/deliveries/<int:pk>/retry", status.delivery_retry_view, name="delivery_retry"),
    path("healthz", status.healthz, name="healthz"),
    path("livez", status.livez, name="livez"),
    path("metrics", views.metrics, name="metrics"),
    path("repos/", views.repositories, name="repositories"),
    path("evaluations/", evaluations.evaluation_list, name="evaluations"),
    path("evaluations/new", evaluations.evaluation_new, name="evaluation_new"),
    path("evaluations/<int:pk>/", evaluations.evaluation_detail, name="evaluation"),
    path("evaluations/<int:pk>/grade", evaluations.evaluation_grade, name="evaluation_grade"),
    path(
        "evaluations/<int:pk>.<str:fmt>",
        evaluations.evaluation_export,
        name="evaluation_export",
    ),
    path("tasks/", task_views.task_board, name="tasks"),
    path("tasks/new", task_views.task_new, name="task_new"),
    path("tasks/<int:pk>/", task_views.task_detail, name="task"),
    path("tasks/<int:pk>/action", task_views.task_action, name="task_action"),
    path(
        "repos/<str:owner>/<str:name>/pulls/<int:number>/review",
        views.pull_request_review,
        name="pull_request_review",
    ),
    path(
        "repos/<str:owner>/<str:name>/pulls/<int:number>/",
        views.pull_request_detail,
        name="pull_request",
    ),
]
