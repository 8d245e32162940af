from django.urls import path

from webhooks import views

app_name = "webhooks"

urlpatterns = [
    path("webhooks/github", views.github_webhook, name="github"),
]
