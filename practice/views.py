"""The one-time login page for the practice room's demo owners.

GET only shows whom the link signs in (link previewers must not use it up); the POST with its
CSRF token uses the link (``practice.login_links``) and signs the demo owner in.
"""

from __future__ import annotations

from django.contrib.auth import login
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_http_methods

from practice.errors import LoginLinkUnusable
from practice.login_links import login_link_check, login_link_consume


@never_cache
@require_http_methods(["GET", "POST"])
def login_link(request: HttpRequest, token: str) -> HttpResponse:
    try:
        link = (
            login_link_consume(token=token)
            if request.method == "POST"
            else login_link_check(token=token)
        )
    except LoginLinkUnusable as refused:
        return render(
            request,
            "practice/login_refused.html",
            {"message": refused.message},
            status=refused.status,
        )
    if request.method == "GET":
        return render(request, "practice/login.html", {"username": link.owner.get_username()})
    login(request, link.owner, backend="django.contrib.auth.backends.ModelBackend")
    if link.room_id is not None:
        return redirect("room", room_id=link.room_id)
    return redirect("dashboard")
