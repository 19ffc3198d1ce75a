"""Owner pages: the rooms page (with the first-run checklist and room creation), the agents
page, and the invitation. Each view renders or calls one service; rules live in
``rooms.services``."""

from __future__ import annotations

import shlex
from collections import Counter
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, TypedDict, cast
from uuid import UUID

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import AnonymousUser, User
from django.contrib.auth.views import redirect_to_login
from django.core.paginator import Page, Paginator
from django.db.models import Count, QuerySet
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.cache import add_never_cache_headers
from django.utils.formats import date_format
from django.views.decorators.http import require_POST

from dining import CatalogueInvalid, catalogues_registered
from frontend.connect import agent_connect_argv, agent_socket_url
from frontend.forms import AgentForm, RoomForm
from frontend.onboarding import onboarding_complete, onboarding_steps
from frontend.reveal import reveal_forget, reveal_keep, reveal_take
from gatekeeper.owner_limits import OwnerLimitReached
from gatekeeper.records import Grant, GrantStatus
from rooms import notifications, outcomes, selectors, services
from rooms.bearer import secret_digest
from rooms.errors import RoomError
from rooms.models import Flare, OutcomeKind, Room, RoomInvite, RoomMember, RoomState
from synapsia.owners import OwnerRequest, request_owner


class DinnerTermsForm(forms.Form):
    """The optional dinner terms of a new room; what is left empty takes the catalogue's
    defaults (checked, with errors in words, by ``rooms.services.room_terms_check``)."""

    catalogue = forms.ChoiceField(
        choices=[],
        required=False,
        label="Venue catalogue",
        help_text="The restaurants the agents choose from.",
    )
    time_zone = forms.CharField(
        required=False,
        max_length=64,
        label="Time zone",
        help_text="Such as Europe/Berlin. Leave empty for the catalogue city's own.",
    )
    horizon_days = forms.IntegerField(
        required=False,
        min_value=1,
        max_value=60,
        label="Days ahead to plan",
        help_text="From 1 to 60; 14 if empty.",
        error_messages={
            "invalid": "Enter the days ahead as a whole number, such as 14.",
            "min_value": "Plan at least 1 day ahead.",
            "max_value": "Plan at most 60 days ahead.",
        },
    )
    dinner_minutes = forms.IntegerField(
        required=False,
        min_value=30,
        max_value=300,
        label="Dinner length (minutes)",
        help_text="From 30 to 300; 90 if empty.",
        error_messages={
            "invalid": "Enter the dinner length in whole minutes, such as 90.",
            "min_value": "A dinner lasts at least 30 minutes.",
            "max_value": "A dinner lasts at most 300 minutes.",
        },
    )
    party_size = forms.IntegerField(
        required=False,
        min_value=1,
        max_value=20,
        label="Party size",
        help_text="How many people eat, from 1 to 20; 2 if empty.",
        error_messages={
            "invalid": "Enter the party size as a whole number, such as 2.",
            "min_value": "A party is at least 1 person.",
            "max_value": "A party is at most 20 people.",
        },
    )
    travel_limit_minutes = forms.IntegerField(
        required=False,
        min_value=0,
        max_value=240,
        label="Travel limit (minutes)",
        help_text="The longest trip each way to the restaurant, up to 240; 45 if empty.",
        error_messages={
            "invalid": "Enter the travel limit in whole minutes, such as 45.",
            "min_value": "The travel limit cannot be below zero.",
            "max_value": "The travel limit is at most 240 minutes.",
        },
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


# --- the rooms page -----------------------------------------------------------------------

# What each room state means to the owner reading the list.
STATE_HINTS: dict[str, str] = {
    RoomState.DRAFT: "Being set up: invite the other owner, bind your agent, sign your slip.",
    RoomState.OPEN: "The agents are talking.",
    RoomState.PAUSED: "Stopped until an owner decides.",
    RoomState.CLOSED: "Ended.",
}

# The Ambient Digest counts ledger events per kind; each kind as a counted noun (one, many).
DIGEST_WORDS: dict[str, tuple[str, str]] = {
    "join": ("arrival", "arrivals"),
    "leave": ("departure", "departures"),
    "slip_signed": ("slip signed", "slips signed"),
    "slip_rejected": ("slip refused", "slips refused"),
    "key_enrolled": ("device key enrolled", "device keys enrolled"),
    "key_rotated": ("device key replaced", "device keys replaced"),
    "key_revoked": ("device key revoked", "device keys revoked"),
    "disclosure": ("disclosure", "disclosures"),
    "denial": ("denial", "denials"),
    "action_requested": ("action requested", "actions requested"),
    "grant_requested": ("grant requested", "grants requested"),
    "grant_approved": ("grant approved", "grants approved"),
    "grant_denied": ("grant denied", "grants denied"),
    "grant_expired": ("grant expired", "grants expired"),
    "action_executed": ("action carried out", "actions carried out"),
    "fork_opened": ("fork opened", "forks opened"),
    "fork_resolved": ("fork resolved", "forks resolved"),
    "outcome_recorded": ("outcome recorded", "outcomes recorded"),
    "offer_sealed": ("sealed offer", "sealed offers"),
    "offers_revealed": ("reveal of sealed offers", "reveals of sealed offers"),
    "flare_raised": ("Signal Flare", "Signal Flares"),
    "injection_suspected": ("suspected injection", "suspected injections"),
    "room_paused": ("pause", "pauses"),
    "room_resumed": ("resumption", "resumptions"),
    "room_closed": ("closing", "closings"),
    "room_content_deleted": ("content deletion", "content deletions"),
    "retention_purge": ("retention purge", "retention purges"),
    "abuse_reported": ("report to the operator", "reports to the operator"),
    "abuse_report_resolved": ("report resolved", "reports resolved"),
}


def digest_words(counts: dict[str, int]) -> str:
    """``{"disclosure": 3, "grant_approved": 1}`` -> ``"3 disclosures, 1 grant approved"``."""
    parts = []
    for kind, count in counts.items():
        one, many = DIGEST_WORDS.get(kind, (kind.replace("_", " "),) * 2)
        parts.append(f"{count} {one if count == 1 else many}")
    return ", ".join(parts)


@dataclass(frozen=True)
class RoomCard:
    """One room as its owner sees it in the list."""

    room_id: UUID
    purpose: str
    state: str  # a RoomState value (for styling)
    state_words: str
    state_hint: str
    other_owner: str | None  # None while the second seat is empty
    forks_waiting: int
    flares_unanswered: int
    outcome: str | None


def _outcome_line(outcome: outcomes.OutcomeWords | None) -> str | None:
    """One line for the list: an agreed plan's venue and time; otherwise the headline (the
    room page has each side's reason)."""
    if outcome is None:
        return None
    if outcome.kind == OutcomeKind.AGREED and outcome.lines:
        return f"{outcome.headline}: {', '.join(outcome.lines[:2])}"
    return f"{outcome.headline}."


# The closed rooms the rooms page lists at a time, most recently closed first. An owner's closed
# rooms keep adding up (a purged room keeps its place, as "A closed room"); the rooms not closed
# are all listed, always: they are the ones that may need the owner, and their number is held
# by the owner's limit.
CLOSED_ROOMS_PER_PAGE = 20


@dataclass(frozen=True)
class ClosedRooms:
    """One page of the owner's closed rooms, and the way to the others, in words."""

    cards: list[RoomCard]
    shown: str  # "Closed rooms 21 to 40 of 45, newest first." ("" when all fit on one page)
    newer: int | None  # the page number of the newer ones, if any
    older: int | None


def _room_cards(owner: User, rooms: list[Room]) -> list[RoomCard]:
    """The cards of ``rooms`` (the owner's), read together: a few statements however many."""
    ids = [r.id for r in rooms]
    others: dict[UUID, str] = {}
    for member in (
        RoomMember.objects.filter(room_id__in=ids).exclude(owner=owner).select_related("owner")
    ):
        others[member.room_id] = member.owner.get_username()
    forks_per_room = Counter(
        {
            row["room_id"]: row["n"]
            for row in Grant.objects.filter(
                owner=owner, status=GrantStatus.PENDING, room_id__in=ids
            )
            .values("room_id")
            .annotate(n=Count("id"))
        }
    )
    flares_per_room = Counter(
        {
            row["room_id"]: row["n"]
            for row in Flare.objects.filter(seat__owner=owner, resolved_at__isnull=True)
            .values("room_id")
            .annotate(n=Count("id"))
        }
    )
    said = outcomes.room_outcomes_for_owner(owner=owner, room_ids=ids)
    cards = []
    for room in rooms:
        outcome = said.get(room.id)
        cards.append(
            RoomCard(
                room_id=room.id,
                purpose=room.purpose,
                state=room.state,
                state_words=RoomState(room.state).label,
                state_hint=STATE_HINTS[room.state],
                other_owner=others.get(room.id),
                forks_waiting=forks_per_room[room.id],
                flares_unanswered=flares_per_room[room.id],
                outcome=_outcome_line(outcome),
            )
        )
    return cards


def _rooms_page(
    request: OwnerRequest,
    *,
    room_form: RoomForm | None = None,
    terms_form: DinnerTermsForm | None = None,
    create_error: str | None = None,
    status: int = 200,
) -> HttpResponse:
    heard = notifications.notifications_for(
        owner=request.user, since=timezone.now() - timedelta(days=1)
    )
    steps = onboarding_steps(owner=request.user)
    mine = selectors.rooms_of_owner(owner=request.user)
    active = list(mine.exclude(state=RoomState.CLOSED).order_by("-created_at"))
    page = _closed_page(mine, request.GET.get("closed"))
    # Every card read together (one set of statements for both lists), then split.
    cards = _room_cards(request.user, active + list(page))
    closed = _closed_rooms(page, cards[len(active) :])
    return render(
        request,
        "frontend/dashboard.html",
        {
            "rooms": cards[: len(active)],
            "closed": closed,
            "notifications": heard,
            # The Gentle Tap badge is the owner's choice (Settings); flares are always urgent.
            "badge_enabled": heard.badge_enabled,
            "digest": [(d.room_id, d.purpose, digest_words(d.counts)) for d in heard.digest],
            "steps": steps,
            "steps_done": sum(step.done for step in steps),
            "onboarding_complete": onboarding_complete(steps),
            "room_form": room_form or RoomForm(prefix="room"),
            "terms_form": terms_form or DinnerTermsForm(prefix="terms"),
            "create_error": create_error,
        },
        status=status,
    )


def _closed_page(mine: QuerySet[Room], page: str | None) -> Page[Room]:
    """The page ``page`` of the owner's closed rooms (a page number; past the end, the last
    page; anything else, the first)."""
    closed = mine.filter(state=RoomState.CLOSED).order_by("-state_changed_at", "-created_at")
    return Paginator(closed, CLOSED_ROOMS_PER_PAGE).get_page(page)


def _closed_rooms(shown: Page[Room], cards: list[RoomCard]) -> ClosedRooms:
    """The page of closed rooms ``shown``, its ``cards``, and the way to the others."""
    words = ""
    if shown.paginator.num_pages > 1:
        first, last, count = shown.start_index(), shown.end_index(), shown.paginator.count
        which = f"room {first}" if first == last else f"rooms {first} to {last}"
        words = f"Closed {which} of {count}, newest first."
    return ClosedRooms(
        cards=cards,
        shown=words,
        newer=shown.previous_page_number() if shown.has_previous() else None,
        older=shown.next_page_number() if shown.has_next() else None,
    )


@login_required
def dashboard(request: OwnerRequest) -> HttpResponse:
    """The rooms page; a POST creates a room and goes to it (PRG)."""
    if request.method != "POST":
        return _rooms_page(request)
    room_form = RoomForm(request.POST, prefix="room")
    terms_form = DinnerTermsForm(request.POST, prefix="terms")
    if room_form.is_valid() and terms_form.is_valid():
        try:
            room = services.room_create(
                owner=request.user, **room_form.cleaned_data, terms=terms_form.terms()
            )
        except (RoomError, OwnerLimitReached) as exc:
            return _rooms_page(
                request,
                room_form=room_form,
                terms_form=terms_form,
                create_error=f"The room was not created: {exc.message}",
                status=422,
            )
        messages.success(request, "Room created. Next: invite the other owner.")
        return redirect("room", room_id=room.id)
    return _rooms_page(
        request,
        room_form=room_form,
        terms_form=terms_form,
        create_error="The room was not created: correct what is marked below.",
        status=422,
    )


# --- the agents page ----------------------------------------------------------------------

# The one-time token travels from the POST to the next GET sealed (frontend.reveal), never in
# a URL; the GET opens and forgets it, so it is shown once and a reload neither shows it again
# nor repeats the POST.
# What the owner replaces in the connect command (the room's code is in the room page's
# address, after /rooms/): the agents page is not about one room.
ROOM_PLACEHOLDER = "ROOM-ID"


class IssuedToken(TypedDict):
    agent_name: str
    token: str
    rotated: bool


def _issued_token_shown_next(
    request: HttpRequest, issued: services.IssuedAgent, *, rotated: bool
) -> HttpResponse:
    """Back to the agents page, which shows ``issued``'s token once."""
    response = redirect("agents")
    shown = IssuedToken(agent_name=issued.agent.name, token=issued.token, rotated=rotated)
    reveal_keep(request, response, dict(shown), name="agent_token", path=reverse("agents"))
    return response


@dataclass(frozen=True)
class AgentRow:
    agent_id: UUID
    name: str
    token_prefix: str
    active: bool
    revoked_at: datetime | None
    last_used_at: datetime | None
    rooms: tuple[str, ...]  # purposes of the rooms not closed it is bound to
    closed_rooms: int  # how many closed rooms it was bound to (named on the rooms page)

    @property
    def bound_words(self) -> str:
        """ "Bound in: Dinner, Lunch; and 3 closed rooms" """
        closed = f"{self.closed_rooms} closed room{'s' if self.closed_rooms != 1 else ''}"
        if self.rooms and self.closed_rooms:
            return f"Bound in: {', '.join(self.rooms)}; and {closed}"
        if self.rooms:
            return f"Bound in: {', '.join(self.rooms)}"
        if self.closed_rooms:
            return f"Bound in {closed}, none open"
        return "Not bound to a room yet."


def _agent_rows(owner: User) -> list[AgentRow]:
    """The owner's agents, with the rooms each is bound in: named while not closed, counted
    once closed (those add up, and each name is opened from its sealed text)."""
    seats = RoomMember.objects.filter(owner=owner, agent__isnull=False)
    bound: dict[UUID, list[str]] = {}
    for seat in seats.exclude(room__state=RoomState.CLOSED).select_related("room"):
        assert seat.agent_id is not None
        bound.setdefault(seat.agent_id, []).append(seat.room.purpose)
    closed = Counter(
        {
            row["agent_id"]: row["n"]
            for row in seats.filter(room__state=RoomState.CLOSED)
            .values("agent_id")
            .annotate(n=Count("id"))
        }
    )
    return [
        AgentRow(
            agent_id=agent.id,
            name=agent.name,
            token_prefix=agent.token_prefix,
            active=agent.revoked_at is None,
            revoked_at=agent.revoked_at,
            last_used_at=agent.token_last_used_at,
            rooms=tuple(bound.get(agent.id, ())),
            closed_rooms=closed[agent.id],
        )
        for agent in selectors.agents_of_owner(owner=owner)
    ]


@login_required
def agents(request: OwnerRequest) -> HttpResponse:
    """The owner's agents; a POST registers one and redirects here to show its token once."""
    form = AgentForm(request.POST or None, prefix="agent")
    status = 200
    if request.method == "POST":
        if form.is_valid():
            try:
                issued = services.agent_register(owner=request.user, name=form.cleaned_data["name"])
            except RoomError as exc:
                form.add_error("name", exc.message)
            except OwnerLimitReached as exc:
                form.add_error(None, exc.message)  # not the name's fault: said for the form
            else:
                return _issued_token_shown_next(request, issued, rotated=False)
        status = 422
    taken = reveal_take(request, name="agent_token")
    issued_token = cast(IssuedToken | None, taken.fields)
    connect = None
    if issued_token is not None:
        connect = shlex.join(
            agent_connect_argv(
                socket_url=agent_socket_url(request, ROOM_PLACEHOLDER),
                token=issued_token["token"],
            )
        )
    rows = _agent_rows(request.user)
    response = render(
        request,
        "frontend/agents.html",
        {
            # Revoked agents only add up: listed apart, folded away.
            "agents": [row for row in rows if row.active],
            "revoked_agents": [row for row in rows if not row.active],
            "agent_form": form,
            "issued_token": issued_token,
            "issued_token_lost": taken.lost,
            "connect_command": connect,
            "room_placeholder": ROOM_PLACEHOLDER,
            "socket_example": agent_socket_url(request, ROOM_PLACEHOLDER),
        },
        status=status,
    )
    reveal_forget(request, response, name="agent_token", path=reverse("agents"))
    if issued_token is not None:
        add_never_cache_headers(response)  # the token is on it: never kept by a cache
    return response


@login_required
@require_POST
def agent_rotate(request: OwnerRequest, agent_id: UUID) -> HttpResponse:
    try:
        issued = services.agent_rotate_token(owner=request.user, agent_id=agent_id)
    except RoomError as exc:
        messages.error(request, exc.message)
        return redirect("agents")
    return _issued_token_shown_next(request, issued, rotated=True)


@login_required
@require_POST
def agent_revoke(request: OwnerRequest, agent_id: UUID) -> HttpResponse:
    try:
        agent = services.agent_revoke(owner=request.user, agent_id=agent_id)
        messages.success(
            request,
            f"{agent.name} is revoked: its token no longer works and its connections are closed.",
        )
    except RoomError as exc:
        messages.error(request, exc.message)
    return redirect("agents")


# --- the invitation -----------------------------------------------------------------------


@dataclass(frozen=True)
class InvitePreview:
    """What the holder of an invitation token may read before accepting. The token is the
    only key: nothing here is found any other way."""

    usable: bool
    problem: str | None  # why it cannot be accepted, in words
    inviter: str | None
    purpose: str | None
    room_id: UUID | None  # set only when the viewer already sits in the room
    # The room's rules both agents are given as the room's own words: read before accepting.
    charter: str = ""


def _invite_preview(token: str, viewer: User | AnonymousUser) -> InvitePreview:
    invite = (
        RoomInvite.objects.select_related("room", "created_by")
        .filter(token_hash=secret_digest(token))
        .first()
    )
    if invite is None:
        return InvitePreview(
            False,
            "This invitation link is not valid. Check that you copied all of it, or ask for a "
            "new one.",
            None,
            None,
            None,
        )
    room: Room = invite.room
    inviter = selectors.owner_name(invite.created_by)
    seated = viewer.is_authenticated and room.members.filter(owner=viewer).exists()
    if seated:
        return InvitePreview(
            False, "You already have a seat in this room.", inviter, room.purpose, room.id
        )
    if invite.used_at is not None:
        return InvitePreview(
            False,
            f"This invitation has already been used. Ask {inviter} for a new one if you "
            "expected a seat.",
            inviter,
            None,
            None,
        )
    if invite.expires_at <= timezone.now():
        expired = date_format(timezone.localtime(invite.expires_at), "D j M, H:i")
        return InvitePreview(
            False,
            f"This invitation expired on {expired}. Ask {inviter} for a new one.",
            inviter,
            None,
            None,
        )
    if room.state == RoomState.CLOSED:
        return InvitePreview(False, "This room is closed.", inviter, room.purpose, None)
    if room.members.count() >= 2:
        return InvitePreview(
            False, "Both seats in this room are taken.", inviter, room.purpose, None
        )
    return InvitePreview(True, None, inviter, room.purpose, None, charter=room.charter)


def invite(request: HttpRequest, token: str) -> HttpResponse:
    """The invitation: readable before signing in (the person invited may have no account
    yet), accepted only signed in."""
    if request.method == "POST":
        if not request.user.is_authenticated:
            return redirect_to_login(request.get_full_path())
        try:
            seat = services.invite_accept(owner=request_owner(request), token=token)
        except RoomError:
            # The invitation page says why, in words, from the invitation's own state.
            return redirect("invite", token=token)
        messages.success(request, "You took the second seat. Next: bind your agent.")
        return redirect("room", room_id=seat.room_id)
    preview = _invite_preview(token, request.user)
    return render(
        request,
        "frontend/invite.html",
        {"preview": preview},
        # Unknown link: 404; a real invitation that cannot be taken any more: 410.
        status=200
        if preview.usable or preview.room_id
        else 404
        if preview.inviter is None
        else 410,
    )
