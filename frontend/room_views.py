"""The room page an owner watches: seats, state, outcome, grants, flares, transcript, whispers.

Renders or calls one service per request; the rules live in ``rooms.services``.
"""

from __future__ import annotations

from uuid import UUID

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import redirect, render

from frontend.forms import BindAgentForm
from rooms import outcomes, selectors, services
from rooms.errors import RoomError
from rooms.models import RoomState
from synapsia.owners import OwnerRequest


@login_required
def room(request: OwnerRequest, room_id: UUID) -> HttpResponse:
    try:
        seat = selectors.room_seat(owner=request.user, room_id=room_id)
    except RoomError:
        return render(request, "frontend/not_found.html", status=404)
    outcome = outcomes.room_outcome_for_owner(owner=request.user, room_id=room_id)
    if request.GET.get("part") == "outcome":  # room.js refreshes just this when the room moves
        return render(request, "frontend/_room_outcome.html", {"outcome": outcome})
    agents = [
        (str(a.id), a.name)
        for a in selectors.agents_of_owner(owner=request.user)
        if a.revoked_at is None
    ]
    bind_form = BindAgentForm(request.POST or None, agents=agents)
    invite_url = None
    if request.method == "POST":
        try:
            if "invite" in request.POST:
                issued = services.invite_create(owner=request.user, room_id=room_id)
                invite_url = request.build_absolute_uri(f"/invites/{issued.token}/")
            elif "state" in request.POST:
                services.room_transition(
                    owner=request.user, room_id=room_id, to=RoomState(request.POST["state"])
                )
                return redirect("room", room_id=room_id)
            elif bind_form.is_valid():
                services.room_bind_agent(
                    owner=request.user,
                    room_id=room_id,
                    agent_id=UUID(bind_form.cleaned_data["agent"]),
                )
                return redirect("room", room_id=room_id)
        except (RoomError, ValueError) as exc:
            messages.error(request, getattr(exc, "message", "That request is not valid."))
        seat = selectors.room_seat(owner=request.user, room_id=room_id)
    return render(
        request,
        "frontend/room.html",
        {
            "seat": seat,
            "room": seat.room,
            "seats": selectors.room_seats(room=seat.room),
            "bind_form": bind_form,
            "invite_url": invite_url,
            "outcome": outcome,
        },
    )
