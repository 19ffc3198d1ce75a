from __future__ import annotations

from django.urls import path

from practice import views

urlpatterns = [
    path("login/<str:token>/", views.login_link, name="practice-login"),
]
