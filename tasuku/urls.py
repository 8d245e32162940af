from django.contrib import admin
from django.urls import include, path

admin.site.site_header = "Tasuku administration"
admin.site.site_title = "Tasuku"
admin.site.index_title = "Policy and configuration"

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/", include("reviews.api.urls")),
    path("", include("webhooks.urls")),
    path("", include("repos.urls")),
    path("", include("reviews.urls")),
]
