from django.urls import path

from reviews import views

app_name = "reviews"

urlpatterns = [
    path("", views.overview, name="overview"),
    path("runs/<int:pk>/", views.run_detail, name="run"),
    path("repos/", views.repositories, name="repositories"),
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
