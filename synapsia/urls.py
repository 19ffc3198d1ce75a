from __future__ import annotations

from django.contrib import admin
from django.templatetags.static import static
from django.urls import include, path
from django.views.generic import RedirectView

from synapsia import health, metrics
from synapsia.api import api

# Error pages are the templates 400.html, 403.html, 403_csrf.html, 404.html and 500.html in
# frontend/templates (Django's default handlers render them when DEBUG is off).
urlpatterns = [
    path("healthz", health.healthz, name="healthz"),
    path("readyz", health.readyz, name="readyz"),
    path("metrics", metrics.metrics, name="metrics"),
    # Browsers ask for /favicon.ico whatever the page links: send them to the SVG.
    path(
        "favicon.ico",
        RedirectView.as_view(url=static("frontend/favicon.svg"), permanent=True),
        name="favicon",
    ),
    path("api/", api.urls),
    path("admin/", admin.site.urls),
    path("practice/", include("practice.urls")),
    # Exit notes and reports (owners), the operator's dashboard and reports (staff).
    path("", include("stewards.urls")),
    path("", include("frontend.urls")),
]
