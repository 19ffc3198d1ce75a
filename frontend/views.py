"""Owner pages. Each view renders or calls one service; rules live in ``rooms.services``."""

from __future__ import annotations

from datetime import timedelta
from uuid import UUID

from django.contrib import messages
from django.contrib.auth import login
from django.contrib.auth.decorators import login_required
from django.contrib.auth.forms import UserCreationForm
from django.contrib.auth.models import User
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.http import require_POST

from frontend.forms import AgentForm, BindAgentForm, RoomForm
from rooms import notifications, outcomes, selectors, services
from rooms.errors import RoomError
from rooms.models import RoomState
from synapsia.owners import OwnerRequest


def signup(request: HttpRequest) -> HttpResponse:
    form: UserCreationForm[User] = UserCreationForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        user = form.save()
        login(request, user)
        return redirect("dashboard")
    return render(request, "registration/signup.html", {"form": form})


def _dashboard(
    request: OwnerRequest,
    *,
    agent_form: AgentForm | None = None,
    room_form: RoomForm | None = None,
    issued_token: tuple[str, str] | None = None,
) -> HttpResponse:
    return render(
        request,
        "frontend/dashboard.html",
        {
            "agents": selectors.agents_of_owner(owner=request.user),
            "rooms": selectors.rooms_of_owner(owner=request.user),
            "notifications": notifications.notifications_for(
                owner=request.user, since=timezone.now() - timedelta(days=1)
            ),
            "agent_form": agent_form or AgentForm(prefix="agent"),
            "room_form": room_form or RoomForm(prefix="room"),
            # (agent name, token): shown on this one response only, never stored.
            "issued_token": issued_token,
        },
    )


@login_required
def dashboard(request: OwnerRequest) -> HttpResponse:
    if request.method != "POST":
        return _dashboard(request)
    agent_form = AgentForm(request.POST, prefix="agent")
    room_form = RoomForm(request.POST, prefix="room")
    try:
        if "agent-name" in request.POST and agent_form.is_valid():
            issued = services.agent_register(
                owner=request.user, name=agent_form.cleaned_data["name"]
            )
            return _dashboard(request, issued_token=(issued.agent.name, issued.token))
        if "room-purpose" in request.POST and room_form.is_valid():
            room = services.room_create(owner=request.user, **room_form.cleaned_data)
            return redirect("room", room_id=room.id)
    except RoomError as exc:
        messages.error(request, exc.message)
    bound = "agent-name" in request.POST
    return _dashboard(
        request, agent_form=agent_form if bound else None, room_form=None if bound else room_form
    )


@login_required
@require_POST
def agent_rotate(request: OwnerRequest, agent_id: UUID) -> HttpResponse:
    try:
        issued = services.agent_rotate_token(owner=request.user, agent_id=agent_id)
    except RoomError as exc:
        messages.error(request, exc.message)
        return redirect("dashboard")
    return _dashboard(request, issued_token=(issued.agent.name, issued.token))


@login_required
@require_POST
def agent_revoke(request: OwnerRequest, agent_id: UUID) -> HttpResponse:
    try:
        services.agent_revoke(owner=request.user, agent_id=agent_id)
        messages.success(request, "Agent revoked; its token no longer works.")
    except RoomError as exc:
        messages.error(request, exc.message)
    return redirect("dashboard")


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


@login_required
def invite(request: OwnerRequest, token: str) -> HttpResponse:
    if request.method == "POST":
        try:
            seat = services.invite_accept(owner=request.user, token=token)
        except RoomError as exc:
            messages.error(request, exc.message)
            return redirect("dashboard")
        return redirect("room", room_id=seat.room_id)
    return render(request, "frontend/invite.html", {"token": token})
