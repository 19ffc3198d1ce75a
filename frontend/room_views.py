"""The room page an owner watches: seats, state, outcome, grants, flares, transcript, whispers.

Renders or calls one service per request; the rules live in ``rooms.services``. Parts of the
page are re-read by room.js as server-rendered fragments (``?part=...``) when the room's socket
rings: the socket frame is only a doorbell, the words always come from here.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from uuid import UUID

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import User
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import dateformat, timezone
from django.utils.cache import add_never_cache_headers

from artifacts.selectors import artifact_publishers
from frontend import transcript
from frontend.connect import TOKEN_PLACEHOLDER, agent_connect_command
from frontend.forms import BindAgentForm
from frontend.reveal import reveal_forget, reveal_keep, reveal_take
from gatekeeper.owner_limits import OwnerLimitReached
from gatekeeper.reasons import vault_kind_words
from gatekeeper.standing import flare_holding_resume
from ledger.models import LedgerEvent
from rooms import context, outcomes, selectors, services
from rooms.errors import RoomError
from rooms.models import Room, RoomMember, RoomState
from rooms.retention import retention_schedule
from slips import selectors as slip_selectors
from slips.models import Tier
from slips.verification import room_tier
from synapsia.owners import OwnerRequest


@dataclass(frozen=True)
class RoomStatus:
    """The room's state, clocks and controls in words, for one owner."""

    state: str  # the RoomState value (for the page's data attribute)
    badge: str  # "Open"
    since: str  # "Open since 13:02"
    retention: tuple[str, ...]
    tier: str  # "Room Only"
    tier_words: str  # who chose it and what it does (slips.selectors.room_tier_words)
    conflicts: tuple[str, ...]  # where the owners' rules differ and which applies
    can_open: bool
    can_resume: bool
    can_pause: bool
    can_close: bool
    waiting_for: str  # why Resume is not offered: another owner's unanswered flare


def _moment(when: datetime) -> str:
    """ "13:02" today, "1 Dec, 14:10" otherwise, in the owner's time zone."""
    local = timezone.localtime(when)
    if local.date() == timezone.localdate():
        return dateformat.format(local, "H:i")
    return dateformat.format(local, "j M, H:i")


def _day(when: datetime) -> str:
    return dateformat.format(timezone.localtime(when), "j M Y")


def _retention(room: Room) -> tuple[str, ...]:
    """Every data class of the retention schedule (rooms.retention), with this room's dates
    where its clock has started: the schedule shown is the schedule the purge applies."""
    lines = []
    for row in retention_schedule():
        if not row.in_rooms:
            continue
        default = " (the default)" if row.days == row.default_days else ""
        if row.key == "transcript" and room.state == RoomState.CLOSED:
            until = _day(room.state_changed_at + timedelta(days=row.days))
            lines.append(
                f"Transcript kept until {until} ({row.period} after closing"
                f"{', the default' if default else ''})"
            )
        elif row.key == "transcript":
            lines.append(f"Transcript kept {row.period} after the room closes{default}")
        elif row.key == "ledger":
            words = f"Ledger events kept {row.period} each"
            latest = LedgerEvent.objects.filter(room_id=room.id).order_by("-seq")
            last = latest.only("occurred_at").first()
            if last is not None:
                words += f", the latest until {_day(last.occurred_at + timedelta(days=row.days))}"
            lines.append(words)
        else:
            lines.append(row.words() + default)
    return tuple(lines)


def room_status(*, owner: User, seat: RoomMember) -> RoomStatus:
    room = seat.room
    state = RoomState(room.state)
    since = {
        RoomState.DRAFT: "Being set up: not open yet",
        RoomState.OPEN: f"Open since {_moment(room.state_changed_at)}",
        RoomState.PAUSED: f"Paused since {_moment(room.state_changed_at)}",
        RoomState.CLOSED: f"Closed {_moment(room.state_changed_at)}",
    }[state]
    holding = flare_holding_resume(owner.pk, selectors.flares_unanswered(room_id=room.id))
    waiting_for = ""
    if state == RoomState.PAUSED and holding is not None:
        name = transcript.owner_name(holding.seat.owner)
        waiting_for = (
            f"Waiting for {name} to answer their agent's Signal Flare: the room resumes when "
            f"{name} does."
        )
    return RoomStatus(
        state=state.value,
        badge=state.label,
        since=since,
        retention=_retention(room),
        tier=Tier(room_tier(room_id=room.id)).label,
        tier_words=slip_selectors.room_tier_words(room.id, reader_id=owner.pk),
        conflicts=tuple(slip_selectors.conflicts_in_words(room_id=room.id, reader_id=owner.pk)),
        can_open=state == RoomState.DRAFT,
        can_resume=state == RoomState.PAUSED and holding is None,
        can_pause=state == RoomState.OPEN,
        can_close=state != RoomState.CLOSED,
        waiting_for=waiting_for,
    )


def _turn_items(*, owner: User, seat: RoomMember, agent_id: UUID, turn: int) -> list[str]:
    """What fed one agent's turn, in words: vault items ("Bob's budget") and shared
    artifacts ("A document Bob's agent published"; never its title)."""
    seats = selectors.room_seats(room=seat.room)
    names = {str(s.owner_id): transcript.owner_name(s.owner) for s in seats}
    items = context.context_turn_items(room_id=seat.room_id, agent_id=agent_id, turn=turn)
    item_ids = [i.item_id for i in items]
    kinds = selectors.vault_item_kinds(item_ids=item_ids)
    published = artifact_publishers(room_id=seat.room_id, ids=item_ids)
    words = []
    for item in items:
        yours = item.owner_id == str(owner.pk)
        whose = "Your" if yours else f"{names.get(item.owner_id, 'A')}'s"
        kind = kinds.get(item.item_id)
        if kind:
            words.append(f"{whose} {vault_kind_words(kind)}")
        elif item.item_id in published:
            words.append(f"A document {'your' if yours else whose} agent published")
        else:
            # Gone from both the vault and the room's artifacts: either was possible.
            words.append(f"{whose} vault item or document (since deleted)")
    return words


def _number(request: OwnerRequest, name: str) -> int | None:
    """A message number the page was asked for (``after``, ``before``); None if absent or not
    a number (the page then shows what it shows without it)."""
    try:
        return max(int(request.GET[name]), 0)
    except (KeyError, ValueError):
        return None


def _part(request: OwnerRequest, seat: RoomMember) -> HttpResponse | None:
    """One fragment of the page, for room.js; None when the request is for the whole page."""
    part = request.GET.get("part")
    owner, room_id = request.user, seat.room_id
    if part == "outcome":  # room.js refreshes just this when the room moves
        outcome = outcomes.room_outcome_for_owner(owner=owner, room_id=room_id)
        return render(request, "frontend/_room_outcome.html", {"outcome": outcome})
    if part == "transcript":
        read = transcript.transcript_after(
            owner=owner, room_id=room_id, after=_number(request, "after") or 0
        )
        return render(
            request, "frontend/_room_entries.html", {"entries": read.entries, "more": read.more}
        )
    if part == "status":
        status = room_status(owner=owner, seat=seat)
        return render(request, "frontend/_room_status.html", {"status": status, "room": seat.room})
    if part == "turn":
        try:
            agent_id, turn = UUID(request.GET.get("agent", "")), int(request.GET.get("turn", ""))
        except ValueError:
            return HttpResponse("Choose an agent and a turn number.", status=400)
        items = _turn_items(owner=owner, seat=seat, agent_id=agent_id, turn=turn)
        return render(request, "frontend/_room_turn.html", {"items": items})
    return None


@login_required
def room(request: OwnerRequest, room_id: UUID) -> HttpResponse:
    try:
        seat = selectors.room_seat(owner=request.user, room_id=room_id)
    except RoomError:
        return render(request, "frontend/not_found.html", status=404)
    if request.method == "GET" and (fragment := _part(request, seat)) is not None:
        return fragment
    agents = [
        (str(a.id), a.name)
        for a in selectors.agents_of_owner(owner=request.user)
        if a.revoked_at is None
    ]
    bind_form = BindAgentForm(request.POST or None, agents=agents)
    if request.method == "POST":
        try:
            if "invite" in request.POST:
                issued = services.invite_create(owner=request.user, room_id=room_id)
                return _invite_shown_next(request, room_id, issued.token)
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
        except (RoomError, ValueError, OwnerLimitReached) as exc:
            messages.error(request, getattr(exc, "message", "That request is not valid."))
            if "state" in request.POST:
                return redirect("room", room_id=room_id)
        seat = selectors.room_seat(owner=request.user, room_id=room_id)
    seats = selectors.room_seats(room=seat.room)
    # ?before=N: the page of older messages that ends before number N (not live).
    before = _number(request, "before")
    shown = transcript.transcript_page(owner=request.user, room_id=room_id, before=before)
    entries = shown.entries
    invite = reveal_take(request, name=INVITE_REVEAL)
    if invite.lost:
        messages.warning(request, INVITE_LOST)
    response = render(
        request,
        "frontend/room.html",
        {
            "seat": seat,
            "room": seat.room,
            "seats": seats,
            "seat_words": [
                (
                    "You" if s.owner_id == request.user.pk else transcript.owner_name(s.owner),
                    s.get_role_display(),
                    s.agent.name if s.agent else None,
                    s.get_standing_display(),
                    s.standing,
                )
                for s in seats
            ],
            "bind_form": bind_form,
            "invite_url": invite.fields["url"] if invite.fields else None,
            "outcome": outcomes.room_outcome_for_owner(owner=request.user, room_id=room_id),
            "status": room_status(owner=request.user, seat=seat),
            "entries": entries,
            "earlier": shown.earlier,
            "history": before is not None,
            "last_seq": entries[-1].seq if entries else 0,
            "whispers": selectors.whispers_of_owner(owner=request.user, room_id=room_id),
            # Bound but not connected yet: the exact command, with this room's address.
            "connect_command": (
                agent_connect_command(request, room_id=str(room_id), token=TOKEN_PLACEHOLDER)
                if seat.agent_id is not None and seat.room.state != "closed"
                else None
            ),
            "token_placeholder": TOKEN_PLACEHOLDER,
        },
    )
    reveal_forget(request, response, name=INVITE_REVEAL, path=_room_path(room_id))
    if invite.fields:
        add_never_cache_headers(response)  # the link is on it: never kept by a cache
    return response


# A new invitation's link travels from the POST to the room's page sealed (frontend.reveal):
# shown once, and a reload neither shows it again nor makes another invitation.
INVITE_REVEAL = "invite_link"
INVITE_LOST = (
    "An invitation link was made, but this browser no longer holds what is needed to show it "
    "(it refuses cookies, or the page opened more than five minutes later). Nobody else can "
    "see it either: make a new invitation and send that one."
)


def _invite_shown_next(request: OwnerRequest, room_id: UUID, token: str) -> HttpResponse:
    """Back to the room's page, which shows the invitation's link once."""
    response = redirect("room", room_id=room_id)
    url = request.build_absolute_uri(f"/invites/{token}/")
    reveal_keep(request, response, {"url": url}, name=INVITE_REVEAL, path=_room_path(room_id))
    return response


def _room_path(room_id: UUID) -> str:
    return reverse("room", kwargs={"room_id": room_id})
