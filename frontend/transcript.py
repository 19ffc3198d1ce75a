"""The room's transcript in words, for the owner watching it.

Each message becomes one typed entry: a ``ProposalCard`` when its first line is a move of the
reference negotiator's grammar that names a plan (propose, counter, accept, booked), a
``StopCard`` for the moves that end a line of talk (no plan, not booked), and a ``TextEntry``
for anything else. The grammar is recognised by the negotiator's own strict parser
(``agents.negotiator.parse_move``), so the page and the agents never disagree on what a line
means. Venue names and prices come from the room's catalogue; times are shown in the room's
time zone (and the owner's, when it differs).

Everything here is peer-authored text made into words; templates autoescape it and room.js
only ever sets ``textContent``. Nothing returned holds an id, a rule code or a protocol line.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Literal
from uuid import UUID

from django.contrib.auth.models import User

from agents.negotiator import (
    Acceptance,
    Booked,
    Counter,
    NoPlan,
    NotBooked,
    Offer,
    PeerMove,
    Proposal,
    parse_move,
)
from gatekeeper.reasons import rule_sentence
from ledger.receipts import NO_PLAN_REASON_WORDS
from rooms import selectors
from rooms.models import Message, RoomMember
from rooms.selectors import DinnerSetting, moment_words, money_words, owner_name, venue_words

__all__ = [
    "Entry",
    "ProposalCard",
    "Speaker",
    "StopCard",
    "TextEntry",
    "flag_sentence",
    "owner_name",
    "transcript_after",
    "transcript_page",
]

# --- flags: suspicion rule ids in the one catalogue's words (gatekeeper.reasons) ---------


def flag_sentence(code: str) -> str:
    """A suspicion flag as sentences an owner understands."""
    return f"The room flagged this as a suspected injection. {rule_sentence(code)}"


# --- the grammar's reasons in words ---------------------------------------------------------

_COUNTER_WORDS: Mapping[str, str] = {
    "time": "the time does not work for them",
    "venue": "that venue cannot seat the party for the whole dinner",
    "budget": "it costs more than they want to spend",
    "allergy": "that kitchen cannot cater safely for them",
    "cuisine": "they would rather not have that cuisine",
    "distance": "it is too far for them",
    "preference": "it would work, but they think this one suits both better",
}
_NOT_BOOKED_WORDS: Mapping[str, str] = {
    "denied": "The owner did not approve the booking",
    "failed": "The booking did not go through",
    "timeout": "The owner did not answer about the booking in time",
}


# --- entries --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Speaker:
    """Who said it: "Your agent (Dinner bot)", "Bob's agent (Planner)", "Bob, in person"."""

    label: str
    yours: bool
    in_person: bool


@dataclass(frozen=True)
class TextEntry:
    seq: int
    speaker: Speaker
    sent_at: datetime
    flags: tuple[str, ...]  # sentences (flag_sentence)
    text: str
    kind: Literal["text"] = "text"


@dataclass(frozen=True)
class ProposalCard:
    """A plan named in the room: proposed, countered, accepted or booked."""

    seq: int
    speaker: Speaker
    sent_at: datetime
    flags: tuple[str, ...]
    move: Literal["propose", "counter", "accept", "booked"]
    title: str  # "Proposal (round 1)"
    venue: str  # the catalogue's name, or the stated venue marked as not in the catalogue
    when: str  # "Fri 4 Dec, 20:00 (Berlin time)" (and the owner's time when it differs)
    party: str | None  # "Table for 2"
    price: str | None  # "38 EUR per person" (the catalogue's price; a different stated one noted)
    reason: str | None  # a counter's reason: "Not the last plan: the time does not work for them"
    note: str  # the rest of the message, as the agent wrote it
    kind: Literal["proposal"] = "proposal"


@dataclass(frozen=True)
class StopCard:
    """A move that ends a line of talk: no plan is possible, or the booking did not happen."""

    seq: int
    speaker: Speaker
    sent_at: datetime
    flags: tuple[str, ...]
    move: Literal["no_plan", "not_booked"]
    title: str
    reason: str
    note: str
    kind: Literal["stop"] = "stop"


Entry = TextEntry | ProposalCard | StopCard


def _speakers(viewer: User, seats: list[RoomMember]) -> dict[UUID, tuple[str, bool]]:
    """agent id -> (owner's name or "You", whether it is the viewer's) for the room's seats."""
    found: dict[UUID, tuple[str, bool]] = {}
    for seat in seats:
        if seat.agent_id is not None:
            yours = seat.owner_id == viewer.pk
            found[seat.agent_id] = ("You" if yours else owner_name(seat.owner), yours)
    return found


def _speaker(
    message: Message, seats: Mapping[UUID, tuple[str, bool]], names: Mapping[UUID, str]
) -> Speaker:
    who, yours = seats.get(message.sender_id, ("A former member", False))
    agent = names.get(message.sender_id, "an agent")
    if message.author == "owner":
        return Speaker(label=f"{who}, in person", yours=yours, in_person=True)
    label = f"Your agent ({agent})" if yours else f"{who}'s agent ({agent})"
    return Speaker(label=label, yours=yours, in_person=False)


def _price(offer: Offer, setting: DinnerSetting) -> str:
    """The catalogue's price per person (the one a booking must pay); a different stated
    price is noted, since the peer's line only names a plan."""
    stated = money_words(offer.price, offer.currency)
    venue = setting.catalogue.venue(offer.venue) if setting.catalogue else None
    if venue is None:
        return f"{stated} per person"
    listed = venue.price_per_person
    words = f"{money_words(listed.amount_minor, listed.currency)} per person"
    if (listed.amount_minor, listed.currency) != (offer.price, offer.currency):
        words += f" (the agent stated {stated})"
    return words


def _card(
    move: PeerMove, common: dict[str, object], setting: DinnerSetting
) -> ProposalCard | StopCard:
    if isinstance(move, Proposal | Counter):
        offer = move.offer
        countering = isinstance(move, Counter)
        return ProposalCard(
            **common,  # type: ignore[arg-type]
            move="counter" if countering else "propose",
            title=f"{'Counter-proposal' if countering else 'Proposal'} (round {move.round})",
            venue=venue_words(offer.venue, setting),
            when=moment_words(offer.start, setting),
            party=f"Table for {offer.party}",
            price=_price(offer, setting),
            reason=(
                f"Not the last plan: {_COUNTER_WORDS.get(move.reason, 'no reason given')}"
                if isinstance(move, Counter)
                else None
            ),
        )
    if isinstance(move, Acceptance | Booked):
        booked = isinstance(move, Booked)
        return ProposalCard(
            **common,  # type: ignore[arg-type]
            move="booked" if booked else "accept",
            title="Booked" if booked else f"Accepted (round {move.round})",
            venue=venue_words(move.venue, setting),
            when=moment_words(move.start, setting),
            party=None,
            price=None,
            reason=None,
        )
    if isinstance(move, NoPlan):
        return StopCard(
            **common,  # type: ignore[arg-type]
            move="no_plan",
            title="No plan possible",
            reason=NO_PLAN_REASON_WORDS.get(move.reason, "No reason given"),
        )
    assert isinstance(move, NotBooked)
    return StopCard(
        **common,  # type: ignore[arg-type]
        move="not_booked",
        title="Not booked",
        reason=_NOT_BOOKED_WORDS.get(move.reason, "No reason given"),
    )


def entry_of(
    message: Message,
    *,
    setting: DinnerSetting,
    seats: Mapping[UUID, tuple[str, bool]],
    names: Mapping[UUID, str],
) -> Entry:
    common: dict[str, object] = {
        "seq": message.seq,
        "speaker": _speaker(message, seats, names),
        "sent_at": message.created_at,
        "flags": tuple(flag_sentence(str(code)) for code in message.flags or ()),
    }
    # An owner speaking in person is a person, not the grammar: always text.
    move = parse_move(message.text) if message.author != "owner" else None
    if move is None:
        return TextEntry(**common, text=message.text)  # type: ignore[arg-type]
    note = message.text.split("\n", 1)[1].strip() if "\n" in message.text else ""
    return _card(move, {**common, "note": note}, setting)


# The room page shows the newest messages of a long room, and the older ones this many at a
# time (a negotiation's end is what its owners look for first); the page's live reads take
# the new ones as they come, this many at most a read.
PAGE_MESSAGES = 200
READ_MESSAGES = selectors.BACKLOG_LIMIT


@dataclass(frozen=True)
class TranscriptPart:
    """Some of the room's messages in words, and where the rest are."""

    entries: list[Entry]
    # The number to read before for the messages just older than these (None: there are none).
    earlier: int | None = None
    # Whether messages newer than these were left for the next read (a live read's limit).
    more: bool = False


def _in_words(
    owner: User, room_id: UUID, read: Callable[[RoomMember], list[Message]]
) -> list[Entry]:
    """``read``'s messages in words, for one of the room's owners (``NotFound`` for anyone
    without a seat)."""
    seat = selectors.room_seat(owner=owner, room_id=room_id)
    seats = selectors.room_seats(room=seat.room)
    names = {s.agent_id: s.agent.name for s in seats if s.agent is not None and s.agent_id}
    messages = read(seat)
    setting = selectors.room_dinner_setting(room=seat.room)
    speakers = _speakers(owner, seats)
    return [entry_of(m, setting=setting, seats=speakers, names=names) for m in messages]


def transcript_after(*, owner: User, room_id: UUID, after: int) -> TranscriptPart:
    """The messages after number ``after``, oldest first, ``READ_MESSAGES`` at most (the page's
    live read: ``more`` when some were left for the next)."""
    entries = _in_words(
        owner,
        room_id,
        lambda seat: selectors.messages_after(
            room_id=seat.room_id, after_seq=after, limit=READ_MESSAGES + 1
        ),
    )
    return TranscriptPart(entries[:READ_MESSAGES], more=len(entries) > READ_MESSAGES)


def transcript_page(*, owner: User, room_id: UUID, before: int | None = None) -> TranscriptPart:
    """The newest ``PAGE_MESSAGES`` messages before number ``before`` (the newest of all when
    None), oldest first, and where the older ones start."""
    entries = _in_words(
        owner,
        room_id,
        lambda seat: selectors.messages_before(
            room_id=seat.room_id, before_seq=before, limit=PAGE_MESSAGES + 1
        ),
    )
    if len(entries) <= PAGE_MESSAGES:
        return TranscriptPart(entries)
    shown = entries[1:]
    return TranscriptPart(shown, earlier=shown[0].seq)
