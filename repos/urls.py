from __future__ import annotations

from django.urls import path

from repos import setup

app_name = "repos"

urlpatterns = [
    path("setup/github/", setup.setup_github, name="setup_github"),
    path("setup/github/created", setup.setup_github_created, name="setup_github_created"),
]
