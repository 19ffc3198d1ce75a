from __future__ import annotations

from django.contrib import admin
from django.urls import include, path

from synapsia import health
from synapsia.api import api

urlpatterns = [
    path("healthz", health.healthz, name="healthz"),
    path("readyz", health.readyz, name="readyz"),
    path("api/", api.urls),
    path("admin/", admin.site.urls),
    path("practice/", include("practice.urls")),
    path("", include("frontend.urls")),
]
