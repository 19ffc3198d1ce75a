"""Signal Flares: an agent in a loop, a contradiction or distress stops and asks its owner.

An agent raises one with a ``flare`` frame; the server raises one for it after repeated
denials. The room pauses (nothing proceeds on a guess) and the agent's owner chooses: reset
and resume, mute or block the agent, or step in and speak in person. Every flare and every
choice is in the ledger.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from uuid import UUID

from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone

from gatekeeper.reasons import flare_reason_words
from gatekeeper.records import ActionRecord, ActionStatus
from gatekeeper.standing import agent_shut_out, flare_holding_resume
from gatekeeper.tools.registry import tool_get
from ledger.events import FlareRaised, ForkResolved, RoomResumed
from ledger.models import LedgerEvent
from ledger.services import ledger_append
from rooms import realtime
from rooms.errors import InvalidState, NotFound
from rooms.models import Flare, FlareChoice, FlareReason, Room, RoomMember, RoomState, SeatStanding
from rooms.pausing import pause_at_fork
from rooms.selectors import flares_unanswered, owner_name, room_seat
from rooms.services import SpeakRefused, message_say

# The server raises a flare for an agent denied this many times within the window: it is
# probably looping on something its slip does not allow.
REPEATED_DENIALS = 3
DENIAL_WINDOW = timedelta(minutes=10)

# An agent saying the same thing this many times in a row is looping.
LOOP_REPEATS = 3


class RepetitionWatch:
    """Per agent socket: notices an agent repeating itself word for word.

    Kept in the socket's memory, not the database, so the say path pays nothing for it; a
    reconnect starts counting again, which only delays the flare.
    """

    def __init__(self) -> None:
        self._last: str | None = None
        self._times = 0

    def looping(self, text: str) -> bool:
        """Record ``text``; True exactly when it completes ``LOOP_REPEATS`` in a row."""
        normalised = " ".join(text.split()).casefold()
        self._times = self._times + 1 if normalised == self._last else 1
        self._last = normalised
        return self._times == LOOP_REPEATS

    def copy(self) -> RepetitionWatch:
        """A watch that has seen what this one has (to look ahead without moving this one)."""
        watch = RepetitionWatch()
        watch._last, watch._times = self._last, self._times
        return watch


_STANDING_AFTER: dict[FlareChoice, SeatStanding] = {
    FlareChoice.RESET_RESUME: SeatStanding.ACTIVE,
    FlareChoice.MUTE: SeatStanding.MUTED,
    FlareChoice.BLOCK: SeatStanding.BLOCKED,
    FlareChoice.STEP_IN: SeatStanding.STEPPED_IN,
}


# Who raised a flare and how it was answered, in words, for both owners' pages (the codes stay
# in the ledger and the API's ``reason``/``choice``; why it was raised is
# ``gatekeeper.reasons.flare_reason_words``, shared with the ledger's digest).
_RAISED_BY_WORDS: dict[str, str] = {
    "agent": "The agent raised it itself.",
    "server": "The room raised it on the agent's behalf.",
}
_CHOICE_WORDS: dict[str, str] = {
    FlareChoice.RESET_RESUME: "Answered: reset and resumed.",
    FlareChoice.MUTE: "Answered: the agent is muted (it may listen, not speak or act).",
    FlareChoice.BLOCK: "Answered: the agent is blocked and out of the room.",
    FlareChoice.STEP_IN: "Answered: its owner stepped in and speaks in person.",
}

# Why the owner's own words, said in person, were not recorded (``SpeakRefused.reason``), and
# what to do. Written here rather than taken from ``gatekeeper.reasons``: that catalogue words
# rule ids for an agent's acts in the ledger ("ledger_unavailable" there means the room
# paused, which a refused message does not do), and has no words for the seat's own codes.
_SPEAK_REFUSED_WORDS: dict[str, str] = {
    "room_not_open": "The room is paused: wait until it is resumed, then say it again.",
    "withdrawn": "You are no longer stepped in for your agent: reload the page to see where the"
    " room stands.",
    "not_member": "Your agent no longer has a seat in this room, so nothing can be said through"
    " it: reload the page to see where the room stands.",
    "revoked": "Your agent's access has been revoked, so nothing more can be said through its"
    " seat in this room.",
    "ledger_unavailable": "The room could not record your words just now: try again in a moment.",
}
_SPEAK_REFUSED_UNKNOWN = "The room could not record your words: reload the page, then try again."
_SPEAK_REFUSED_CLOSED = "The room is closed, so nothing more can be said in it."


@dataclass(frozen=True)
class FlareView:
    id: UUID
    agent_id: UUID
    reason: str
    raised_by: str
    raised_at: str
    resolved: bool
    choice: str
    # In words, for the owner reading it: "Your agent (Dinner bot)" / "Bob's agent (Planner)".
    agent_label: str = ""
    reason_sentence: str = ""  # "Bob's agent (Planner) raised a Signal Flare: it seems ..."
    raised_by_words: str = ""
    choice_words: str = ""  # empty while unanswered
    owner_name: str = ""  # who answers it


def _view(flare: Flare, viewer: User | None = None) -> FlareView:
    assert flare.seat.agent_id is not None
    seat = flare.seat
    owner = seat.owner
    name = owner_name(owner)
    agent = seat.agent.name if seat.agent is not None else "an agent"
    label = (
        f"Your agent ({agent})"
        if viewer is not None and owner.pk == viewer.pk
        else f"{name}'s agent ({agent})"
    )
    reason = flare_reason_words(flare.reason)
    return FlareView(
        id=flare.id,
        agent_id=flare.seat.agent_id,
        reason=flare.reason,
        raised_by=flare.raised_by,
        raised_at=flare.raised_at.isoformat(),
        resolved=flare.resolved_at is not None,
        choice=flare.choice,
        agent_label=label,
        reason_sentence=f"{label} raised a Signal Flare: {reason}.",
        raised_by_words=_RAISED_BY_WORDS.get(flare.raised_by, ""),
        choice_words=_CHOICE_WORDS.get(flare.choice, "") if flare.resolved_at else "",
        owner_name=name,
    )


class FlareRefused(Exception):
    """A flare asked for by (or on behalf of) an agent that may not raise one: revoked, or
    its socket's token rotated away since it was admitted. Nothing was recorded and the room
    did not pause; the socket is closed as a revoked agent's (4401)."""

    def __init__(self, reason: str = "revoked") -> None:
        super().__init__("This agent's access has been revoked.")
        self.reason = reason


def flare_raise(
    *,
    room_id: UUID,
    agent_id: UUID,
    reason: FlareReason,
    raised_by: str,
    token: str | None = None,
) -> FlareView:
    """Raise a flare for ``agent_id``: recorded, and the room pauses for its owner.

    While a flare is unresolved a second one for the same agent is the same flare.

    A flare pauses the room, so it is decided like the agent's other requests: raised by the
    agent itself (``raised_by="agent"``) or for a socket's frames (``token``: the digest of the
    token the socket was admitted with), it is refused (``FlareRefused``) when the agent is
    revoked or that token was rotated away since, judged on the agent row read with the seat
    (``agent_shut_out``; no statement more). The server's own flares (``token`` None) are
    not.
    """
    with transaction.atomic():
        room = Room.objects.select_for_update().get(id=room_id)
        seat = RoomMember.objects.select_related("agent").get(room=room, agent_id=agent_id)
        agent = seat.agent
        if (raised_by == "agent" or token is not None) and (
            agent is None
            or agent_shut_out(
                revoked=agent.revoked_at is not None, stored_token=agent.token_hash, token=token
            )
        ):
            raise FlareRefused()
        open_flare = Flare.objects.filter(seat=seat, resolved_at__isnull=True).first()
        if open_flare is not None:
            return _view(open_flare)
        flare = Flare.objects.create(room=room, seat=seat, reason=reason, raised_by=raised_by)
        ledger_append(
            room_id=room.id, event=FlareRaised(agent_id=str(agent_id), reason=reason.value)
        )
        pause_at_fork(room, by=raised_by, rule=f"flare.{reason.value}")
        return _view(flare)


def flare_if_looping(
    *, room_id: UUID, agent_id: UUID, token: str | None = None
) -> FlareView | None:
    """After a denial: raise a flare on the agent's behalf if it keeps being denied (not for
    a socket, ``token``, whose agent was revoked or whose token was rotated away: its denial
    already paused the room at a fork, and it raises no flare)."""
    since = timezone.now() - DENIAL_WINDOW
    denials = LedgerEvent.objects.filter(
        room_id=room_id, kind="denial", occurred_at__gte=since, data__subject_id=str(agent_id)
    ).count()
    if denials < REPEATED_DENIALS:
        return None
    return _flare_on_behalf(room_id, agent_id, FlareReason.REPEATED_DENIALS, token)


def _flare_on_behalf(
    room_id: UUID, agent_id: UUID, reason: FlareReason, token: str | None
) -> FlareView | None:
    """The server's flare for an agent (``flare_raise(raised_by="server")``); None when the
    agent is revoked or ``token`` is no longer its own: its denial already paused the room."""
    try:
        return flare_raise(
            room_id=room_id, agent_id=agent_id, reason=reason, raised_by="server", token=token
        )
    except FlareRefused:
        return None


def flares_of_room(*, owner: User, room_id: UUID) -> list[FlareView]:
    """The room's flares, for one of its owners (both owners see that a flare happened)."""
    room_seat(owner=owner, room_id=room_id)  # NotFound unless the owner has a seat
    flares = (
        Flare.objects.filter(room_id=room_id)
        .select_related("seat__owner", "seat__agent")
        .order_by("raised_at")
    )
    return [_view(f, owner) for f in flares]


def flare_resolve(*, owner: User, room_id: UUID, flare_id: UUID, choice: FlareChoice) -> FlareView:
    """The agent's owner answers a flare. Reset, mute and step-in resume the room; block
    keeps the agent out and the room paused for the owners to decide what next."""
    with transaction.atomic():
        room = Room.objects.select_for_update().filter(id=room_id, members__owner=owner).first()
        if room is None:
            raise NotFound("No such room.")
        flare = (
            Flare.objects.select_for_update()
            .select_related("seat")
            .filter(id=flare_id, room=room, seat__owner=owner)
            .first()
        )
        if flare is None:
            raise NotFound("No such flare (only the agent's own owner can answer it).")
        if flare.resolved_at is not None:
            answered = _CHOICE_WORDS.get(flare.choice, "").removeprefix("Answered: ")
            raise InvalidState(f"This flare was already answered: {answered}")
        by = str(owner.pk)
        ledger_append(
            room_id=room.id,
            event=ForkResolved(fork_id=str(flare.id), by=by, resolution=choice.value),
        )
        flare.resolved_at = timezone.now()
        flare.choice = choice
        flare.save(update_fields=["resolved_at", "choice"])
        seat = flare.seat
        seat.standing = _STANDING_AFTER[choice]
        seat.save(update_fields=["standing"])
        # Answering resumes the room, unless the other owner's agent has a flare of its own
        # still waiting for them: then it stays paused for them to answer (as Resume would).
        if (
            choice != FlareChoice.BLOCK
            and room.state == RoomState.PAUSED
            and flare_holding_resume(owner.pk, flares_unanswered(room_id=room.id)) is None
        ):
            ledger_append(room_id=room.id, event=RoomResumed(by=by))
            room.state = RoomState.OPEN
            room.state_changed_at = timezone.now()
            room.save(update_fields=["state", "state_changed_at"])
            realtime.announce_room_state(room.id, room.state)
        if choice == FlareChoice.BLOCK and seat.agent_id is not None:
            realtime.announce_agent_blocked(room_id=room.id, agent_id=seat.agent_id)
        return _view(flare, owner)


def _speak_refused_words(reason: str, room_id: UUID) -> str:
    """Why the owner's words were not recorded, in a sentence with what to do."""
    # "room_not_open" covers paused and closed; only a paused room is worth waiting for.
    if (
        reason == "room_not_open"
        and Room.objects.filter(id=room_id, state=RoomState.CLOSED).exists()
    ):
        return _SPEAK_REFUSED_CLOSED
    return _SPEAK_REFUSED_WORDS.get(reason, _SPEAK_REFUSED_UNKNOWN)


def owner_say_in_person(*, owner: User, room_id: UUID, client_id: str, text: str) -> int:
    """The owner, having stepped in at a flare, speaks in the room as themselves (through
    their seat, marked as written by the owner). Returns the message's sequence number."""
    seat = room_seat(owner=owner, room_id=room_id)
    if seat.agent_id is None:
        raise InvalidState("Bind your agent to this room first.")
    if seat.standing != SeatStanding.STEPPED_IN:
        raise InvalidState("Step in at a Signal Flare before speaking in person.")
    try:
        said = message_say(
            room_id=room_id,
            agent_id=seat.agent_id,
            client_id=f"owner-{client_id}",
            text=text,
            author="owner",
        )
    except SpeakRefused as refused:
        raise InvalidState(_speak_refused_words(refused.reason, room_id)) from None
    realtime.announce_recorded(room_id)
    return said.seq


def flare_if_contradicting(
    *,
    room_id: UUID,
    agent_id: UUID,
    tool: str,
    arguments_sha256: str | None,
    idempotency_key: str,
    token: str | None = None,
) -> bool:
    """Before an action: an agent that already had this world-changing tool executed here and
    now asks for it with other arguments (a second booking, a different spend) contradicts its
    own commitment. The server raises a flare for it; True when it did (the action must not run).
    A tool that acts only inside the room (publishing a second document) commits nobody to
    anything outside it, so doing it again differently is no contradiction. ``token`` (a
    socket's): a revoked agent's or a rotated token's request raises no flare (False: the
    action's own decision then denies it as a revoked agent's).
    """
    spec = tool_get(tool)
    if (
        spec is None
        or arguments_sha256 is None
        or spec.read_only
        or spec.effective_manifest.idempotent
        or not spec.effective_manifest.open_world
    ):
        return False
    mine = ActionRecord.objects.filter(room_id=room_id, agent_id=agent_id)
    if mine.filter(idempotency_key=idempotency_key).exists():
        return False  # a resend of a known request: replay or key reuse, decided elsewhere
    earlier = mine.filter(tool=tool, status=ActionStatus.EXECUTED).exclude(
        arguments_hash=arguments_sha256
    )
    if not earlier.exists():
        return False
    return _flare_on_behalf(room_id, agent_id, FlareReason.CONTRADICTION, token) is not None
