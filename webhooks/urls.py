from django.urls import path

from webhooks import views
from webhooks.intake import INTAKE_PATH

app_name = "webhooks"

urlpatterns = [
    path(INTAKE_PATH.lstrip("/"), views.github_webhook, name="github"),
]
