"""Owner pages. Each view renders or calls one service; rules live in ``rooms.services``."""

from __future__ import annotations

from datetime import timedelta
from typing import Any
from uuid import UUID

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.http import require_POST

from dining import CatalogueInvalid, catalogues_registered
from frontend.forms import AgentForm, RoomForm
from rooms import notifications, selectors, services
from rooms.errors import RoomError
from synapsia.owners import OwnerRequest


class DinnerTermsForm(forms.Form):
    """The optional dinner terms of a new room; what is left empty takes the catalogue's
    defaults (checked, with errors in words, by ``rooms.services.room_terms_check``)."""

    catalogue = forms.ChoiceField(choices=[], required=False, label="Venue catalogue")
    time_zone = forms.CharField(
        required=False, max_length=64, help_text="IANA time zone; empty: the catalogue city's."
    )
    horizon_days = forms.IntegerField(
        required=False, min_value=1, max_value=60, help_text="Days ahead to plan in (default 14)."
    )
    dinner_minutes = forms.IntegerField(
        required=False, min_value=30, max_value=300, help_text="Default 90."
    )
    party_size = forms.IntegerField(
        required=False, min_value=1, max_value=20, help_text="Default 2."
    )
    travel_limit_minutes = forms.IntegerField(
        required=False, min_value=0, max_value=240, help_text="Minutes each way (default 45)."
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        try:
            offered = [(c.id, f"{c.name} ({c.city.name})") for c in catalogues_registered()]
        except CatalogueInvalid:
            offered = []  # nothing to choose from: the room cannot be a dinner right now
        self.fields["catalogue"].choices = offered  # type: ignore[attr-defined]

    def terms(self) -> dict[str, Any]:
        """The terms given (empty fields left out, so they take the defaults)."""
        return {k: v for k, v in self.cleaned_data.items() if v not in (None, "")}


def _dashboard(
    request: OwnerRequest,
    *,
    agent_form: AgentForm | None = None,
    room_form: RoomForm | None = None,
    terms_form: DinnerTermsForm | None = None,
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
            "terms_form": terms_form or DinnerTermsForm(prefix="terms"),
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
    terms_form = DinnerTermsForm(request.POST, prefix="terms")
    try:
        if "agent-name" in request.POST and agent_form.is_valid():
            issued = services.agent_register(
                owner=request.user, name=agent_form.cleaned_data["name"]
            )
            return _dashboard(request, issued_token=(issued.agent.name, issued.token))
        if "room-purpose" in request.POST and room_form.is_valid() and terms_form.is_valid():
            room = services.room_create(
                owner=request.user, **room_form.cleaned_data, terms=terms_form.terms()
            )
            return redirect("room", room_id=room.id)
    except RoomError as exc:
        messages.error(request, exc.message)
    bound = "agent-name" in request.POST
    return _dashboard(
        request,
        agent_form=agent_form if bound else None,
        room_form=None if bound else room_form,
        terms_form=None if bound else terms_form,
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
def invite(request: OwnerRequest, token: str) -> HttpResponse:
    if request.method == "POST":
        try:
            seat = services.invite_accept(owner=request.user, token=token)
        except RoomError as exc:
            messages.error(request, exc.message)
            return redirect("dashboard")
        return redirect("room", room_id=seat.room_id)
    return render(request, "frontend/invite.html", {"token": token})
