"""Template context every page gets: what the shell (``frontend/base.html``) shows."""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib.auth.models import User
from django.http import HttpRequest
from django.utils import timezone
from django.utils.functional import SimpleLazyObject

from gatekeeper.records import Grant, GrantStatus
from rooms.models import Flare
from rooms.notifications import preferences_of

# Which of the owner's places (the header's links) each page belongs to, by URL name.
PLACES: dict[str, str] = {
    "dashboard": "rooms",
    "room": "rooms",
    "room-ledger": "rooms",
    "room-slip": "rooms",
    "invite": "rooms",
    "vault": "vault",
    "keys": "keys",
    "agents": "agents",
    "agent-rotate": "agents",
    "agent-revoke": "agents",
    "settings": "settings",
    "password_change": "settings",
    "login": "login",
    "signup": "signup",
}


@dataclass(frozen=True)
class OwnerAlerts:
    """What the header counts next to Rooms: flares always (the Urgent Beacon), forks
    waiting only while the owner keeps the Gentle Tap badge on (0 when off)."""

    flares: int
    forks: int


def _alerts_of(owner: User) -> OwnerAlerts:
    flares = Flare.objects.filter(seat__owner=owner, resolved_at__isnull=True).count()
    if not preferences_of(owner=owner).badge:
        return OwnerAlerts(flares, 0)
    forks = Grant.objects.filter(owner=owner, status=GrantStatus.PENDING).count()
    return OwnerAlerts(flares, forks)


def owner_time_zone(request: HttpRequest) -> dict[str, object]:
    """``owner_time_zone``: the IANA zone the page's times are in (the owner's choice, UTC
    otherwise), for ``<body data-time-zone>`` so scripts format times the same way.
    ``owner_place``: the header link to mark as the current page. ``owner_alerts``: counted
    only if a page renders the header for a signed-in owner."""
    match = getattr(request, "resolver_match", None)
    user = getattr(request, "user", None)
    context: dict[str, object] = {
        "owner_time_zone": timezone.get_current_timezone_name(),
        "owner_place": PLACES.get(match.url_name or "", "") if match else "",
    }
    if isinstance(user, User) and user.is_authenticated:
        context["owner_alerts"] = SimpleLazyObject(lambda: _alerts_of(user))
    return context
