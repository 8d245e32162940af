from django.urls import path

from webhooks import views

app_name = "webhooks"

urlpatterns = [
    path("webhooks/github", views.github_webhook, name="github"),
    path("status/", views.status, name="status"),
    path("healthz", views.healthz, name="healthz"),
    path("livez", views.livez, name="livez"),
    path("status/deliveries/<int:pk>/", views.delivery_detail, name="delivery"),
    path("status/deliveries/<int:pk>/retry", views.delivery_retry_view, name="delivery_retry"),
]
