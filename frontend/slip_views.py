"""Owner pages for device keys and a room's permission slip.

Keys and slips are made and signed in the browser (``devicekeys.js``, ``slip.js``) through the
REST API; these views only render.
"""

from __future__ import annotations

from uuid import UUID

from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import render

from rooms import selectors as room_selectors
from rooms.errors import RoomError
from synapsia.owners import OwnerRequest


@login_required
def keys(request: OwnerRequest) -> HttpResponse:
    return render(request, "frontend/keys.html")


# --- the slip page ------------------------------------------------------------------------------
# The words the slip checklist shows for each code it signs (slip.js reads them from the page;
# the option values stay the codes the capability records carry).
SLIP_WORDS: dict[str, dict[str, str]] = {
    "resources": {
        "availability": "Your busy times (free/busy only, never titles)",
        "budget": "Your budget per person",
        "food_likes": "Food you like",
        "food_dislikes": "Food you would rather not eat",
        "allergies": "Your allergies",
        "neighbourhood": "Your home neighbourhood",
        "link": "Your links",
        "note": "Your notes",
    },
    "scopes": {
        "free_busy_24h": "Free/busy for the next 24 hours",
        "free_busy_7d": "Free/busy for the next 7 days",
        "free_busy_14d": "Free/busy for the next 14 days",
        "free_busy_30d": "Free/busy for the next 30 days",
        "band": "Share a rough budget band (rounded to 10)",
        "range": "Share the exact budget range",
        "list": "The whole list",
        "name": "The neighbourhood's name",
        "url": "The link",
        "text": "The note's text",
    },
    "operations": {
        "read": "Your agent may use it",
        "disclose": "Your agent may tell the other agent",
    },
    "recipients": {
        "own_agent": "your agent",
        "peer_agent": "the other agent",
        "both": "both agents",
    },
    "approvals": {"per_use": "Ask me before each use", "none": "Do not ask me"},
}


@login_required
def slip(request: OwnerRequest, room_id: UUID) -> HttpResponse:
    try:
        seat = room_selectors.room_seat(owner=request.user, room_id=room_id)
    except RoomError:
        return render(request, "frontend/not_found.html", status=404)
    return render(
        request,
        "frontend/slip.html",
        {"room": seat.room, "seat": seat, "slip_words": SLIP_WORDS},
    )
