"""Middleware for the owner's pages: the Content-Security-Policy, and the owner's time zone."""

from __future__ import annotations

from collections.abc import Callable

from csp.middleware import CSPMiddleware, PolicyParts
from django.core.exceptions import DisallowedHost
from django.http import HttpRequest, HttpResponse
from django.http.response import HttpResponseBase
from django.utils import timezone

from rooms.notifications import owner_time_zone


class ContentSecurityPolicyMiddleware(CSPMiddleware):
    """django-csp's policy (``settings.CONTENT_SECURITY_POLICY``), with this host's WebSocket
    origin added to ``connect-src``: CSP 3 counts ``ws://``/``wss://`` of the same host as
    'self', but older engines do not, and the room page's live socket must connect there."""

    def get_policy_parts(
        self, request: HttpRequest, response: HttpResponseBase, report_only: bool = False
    ) -> PolicyParts:
        parts = super().get_policy_parts(request, response, report_only)
        if report_only or parts.update is not None:
            return parts
        try:
            host = request.get_host()
        except DisallowedHost:
            return parts  # a refused Host gets the policy without a socket origin
        scheme = "wss" if request.is_secure() else "ws"
        parts.update = {"connect-src": [f"{scheme}://{host}"]}
        return parts


class OwnerTimeZoneMiddleware:
    """Shows a signed-in owner's pages in the zone they chose in Settings (UTC until then):
    ``{{ when|date }}`` in templates and form fields read and write local times."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        user = getattr(request, "user", None)
        if user is not None and user.is_authenticated:
            timezone.activate(owner_time_zone(owner=user))
        else:
            timezone.deactivate()
        try:
            return self.get_response(request)
        finally:
            # The thread (or async task) serves other requests next: never leak a zone.
            timezone.deactivate()
