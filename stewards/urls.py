from __future__ import annotations

from django.urls import path

from stewards import views

app_name = "stewards"

urlpatterns = [
    path("rooms/<uuid:room_id>/exit-note/", views.exit_note, name="exit-note"),
    path("rooms/<uuid:room_id>/report/", views.report, name="report"),
    path("operator/", views.operator_dashboard, name="operator"),
    path("operator/reports/", views.operator_reports, name="operator-reports"),
    path("operator/reports/<uuid:report_id>/", views.operator_report, name="operator-report"),
    path(
        "operator/reports/<uuid:report_id>/resolve/",
        views.operator_report_resolve,
        name="operator-report-resolve",
    ),
]
