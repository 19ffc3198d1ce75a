"""The confirmation pages of what cannot be undone: closing a room, deleting a room for both
sides, deleting one's account; and dismissing the notice that a partner deleted a room.

Each GET says in words what goes and what stays; each POST calls one service
(``rooms.services.room_transition``, ``rooms.deletion.room_delete`` / ``account_delete``) and
redirects (POST-redirect-GET). The rules live in those services.
"""

from __future__ import annotations

from uuid import UUID

from django import forms
from django.contrib import messages
from django.contrib.auth import logout
from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.html import format_html
from django.views.decorators.http import require_POST

from frontend import transcript
from rooms import selectors, services
from rooms.deletion import account_delete, room_delete
from rooms.errors import RoomError
from rooms.models import Message, RoomDeletionNotice, RoomMember, RoomState, Whisper
from rooms.retention import retention_row
from synapsia.owners import OwnerRequest


class ConfirmDeleteRoomForm(forms.Form):
    confirm = forms.BooleanField(
        label="I understand: the room is deleted for both of us, now, and cannot be restored.",
        error_messages={"required": "Tick the box to confirm; nothing was deleted."},
    )


class ConfirmDeleteAccountForm(forms.Form):
    password = forms.CharField(
        label="Your password",
        strip=False,
        widget=forms.PasswordInput(attrs={"autocomplete": "current-password"}),
        help_text="To be sure it is you.",
        error_messages={"required": "Enter your password; nothing was deleted."},
    )


def _not_found(request: OwnerRequest) -> HttpResponse:
    return render(request, "frontend/not_found.html", status=404)


def _partners(request: OwnerRequest, seat: RoomMember) -> list[str]:
    return [
        transcript.owner_name(s.owner)
        for s in selectors.room_seats(room=seat.room)
        if s.owner_id != request.user.pk
    ]


@login_required
def room_close(request: OwnerRequest, room_id: UUID) -> HttpResponse:
    """Closing asks first and says it cannot be undone."""
    try:
        seat = selectors.room_seat(owner=request.user, room_id=room_id)
    except RoomError:
        return _not_found(request)
    if request.method == "POST":
        try:
            services.room_transition(owner=request.user, room_id=room_id, to=RoomState.CLOSED)
        except RoomError as exc:
            messages.error(request, f"The room was not closed: {exc.message}")
        else:
            messages.success(request, "The room is closed. No agent can speak in it again.")
        return redirect("room", room_id=room_id)
    if seat.room.state == RoomState.CLOSED:
        messages.info(request, "This room is already closed.")
        return redirect("room", room_id=room_id)
    return render(
        request,
        "frontend/room_close.html",
        {
            "room": seat.room,
            "partners": _partners(request, seat),
            "transcript_words": retention_row("transcript").words(),
        },
    )


@login_required
def room_delete_confirm(request: OwnerRequest, room_id: UUID) -> HttpResponse:
    """Deleting a room for both sides: what goes, what stays, then one confirmed POST."""
    try:
        seat = selectors.room_seat(owner=request.user, room_id=room_id)
    except RoomError:
        return _not_found(request)
    form = ConfirmDeleteRoomForm(request.POST if request.method == "POST" else None)
    if request.method == "POST" and form.is_valid():
        try:
            deleted = room_delete(owner=request.user, room_id=room_id)
        except RoomError:
            return _not_found(request)
        told = " The other owner has been told." if deleted.told else ""
        # format_html escapes the purpose; the link is ours (the message keeps it safe).
        messages.success(
            request,
            format_html(
                "The room “{}” was deleted for both sides.{} "
                '<a href="{}">Its ledger</a> stays, without content, for its own window.',
                deleted.purpose,
                told,
                reverse("room-ledger", args=[room_id]),
            ),
        )
        return redirect("dashboard")
    return render(
        request,
        "frontend/room_delete.html",
        {
            "room": seat.room,
            "form": form,
            "partners": _partners(request, seat),
            "messages_count": Message.objects.filter(room_id=room_id).count(),
            "whispers_count": Whisper.objects.filter(room_id=room_id).count(),
            "ledger_days": retention_row("ledger").days,
        },
        status=422 if request.method == "POST" else 200,
    )


@login_required
def account_delete_confirm(request: OwnerRequest) -> HttpResponse:
    """Deleting one's account (asks for the password): every room for both sides."""
    form = ConfirmDeleteAccountForm(request.POST if request.method == "POST" else None)
    if request.method == "POST" and form.is_valid():
        if not request.user.check_password(form.cleaned_data["password"]):
            form.add_error("password", "That is not your password; nothing was deleted.")
        else:
            done = account_delete(owner=request.user)
            logout(request)
            count = len(done.rooms)
            messages.success(
                request,
                f"Your account was deleted, and with it {count} room{'s' if count != 1 else ''} "
                "for both sides. The other owners have been told.",
            )
            return redirect("login")
    seats = RoomMember.objects.filter(owner=request.user).select_related("room")
    # Sorted here: the purpose is sealed at rest, so the database would order ciphertext.
    rooms = sorted(
        ((s.room.purpose, ", ".join(_partners(request, s)) or "no one yet") for s in seats),
        key=lambda pair: pair[0].casefold(),
    )
    return render(
        request,
        "frontend/account_delete.html",
        {"form": form, "rooms": rooms, "ledger_days": retention_row("ledger").days},
        status=422 if request.method == "POST" else 200,
    )


@login_required
@require_POST
def notice_dismiss(request: OwnerRequest, notice_id: int) -> HttpResponse:
    """Dismissing the notice deletes it (it held the room's name)."""
    RoomDeletionNotice.objects.filter(id=notice_id, recipient=request.user).delete()
    return redirect("dashboard")
