"""The owner's ledger page: the receipt, and the chain verified by the browser itself."""

from __future__ import annotations

from uuid import UUID

from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import User
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from rooms import outcomes, selectors
from rooms.errors import RoomError
from rooms.ledger_api import deleted_room_for_owner


@login_required
def room_ledger(request: HttpRequest, room_id: UUID) -> HttpResponse:
    assert isinstance(request.user, User)  # login_required
    try:
        seat = selectors.room_seat(owner=request.user, room_id=room_id)
    except RoomError:
        # A deleted room's ledger stays, without content, for its own window: its former
        # owners may still read and check it; anyone else gets the same page as for no room.
        deleted = deleted_room_for_owner(owner=request.user, room_id=room_id)
        if deleted is None:
            return render(request, "frontend/not_found.html", status=404)
        return render(request, "rooms/deleted_room_ledger.html", {"deleted": deleted})
    # Data arrives through the API (rooms/ledger_api.py); the page only hosts the checker.
    # Each event's sentence comes with it (``words``, outside the hashed fields), so the
    # browser's hash check reads the raw events and the words never take part in it.
    # The receipt's outcome line comes from the ledger (codes only: ledger imports no app);
    # the plan's venue, time and price are room data, so this page adds them from rooms,
    # keeping dependencies pointing down (frontend -> rooms -> ledger) and the ledger free of
    # content.
    outcome = outcomes.room_outcome_for_owner(owner=request.user, room_id=seat.room_id)
    return render(request, "frontend/ledger.html", {"room": seat.room, "outcome": outcome})
