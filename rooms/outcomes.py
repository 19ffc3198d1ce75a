"""How a room ends: the agreed plan, or no agreement with each side's coarse reason.

The outcome is derived by the server from executed typed actions only, never from what anyone
wrote: an executed ``book_table`` in a room with dinner terms is the agreed plan (venue, start,
party, price per person from the room's catalogue, and who books: the booking agent's owner);
an executed ``declare_no_plan`` is that side's "no agreement" with its reason. Both sides may
declare; an agreement after a "no plan" replaces it; a declaration after an agreement changes
nothing (the table is booked). Each change is one ``RoomOutcome`` row and one
``outcome_recorded`` ledger event (codes only), in the action's own transaction.

The plan is room content, sealed at rest under the room's data key (``RoomOutcome.plan``,
``rooms.sealing``): a backup taken before the room's deletion cannot show it. The retention
purge clears it with the transcript (``rooms.retention``); the kind and reason codes stay.

Owners are the audience (``room_outcome_for_owner``): agents already know what they did.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from uuid import UUID
from zoneinfo import ZoneInfo

from django.conf import settings
from django.contrib.auth.models import User

from dining import CatalogueInvalid, TermsInvalid, catalogue_get, terms_parse
from gatekeeper.records import ActionRecord, ActionStatus
from ledger.events import OutcomeRecorded
from ledger.receipts import NO_PLAN_REASON_WORDS
from ledger.services import ledger_append
from rooms import realtime, selectors
from rooms.models import OutcomeKind, Room, RoomMember, RoomOutcome
from rooms.selectors import money_words, owner_name, your_time_words, zone_words

__all__ = ["OutcomeWords", "outcome_record", "room_outcome_for_owner", "room_outcomes_for_owner"]

BOOK_TABLE = "book_table"
DECLARE_NO_PLAN = "declare_no_plan"


@dataclass(frozen=True)
class OutcomeWords:
    """A room's outcome as one owner reads it: a headline and a few plain lines."""

    kind: str  # an OutcomeKind value
    headline: str
    lines: tuple[str, ...]


def _latest(room_id: UUID) -> RoomOutcome | None:
    return RoomOutcome.objects.filter(room_id=room_id).order_by("-id").first()


def _aware(moment: datetime) -> datetime:
    """A start without an offset is UTC (as the timestamp column of before stored it)."""
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def _plan(room: Room, record: ActionRecord) -> dict[str, Any] | None:
    """The agreed plan's fields (``rooms.models.PLAN_FIELDS``; the start in ISO 8601 with its
    offset) from the validated booking arguments and the room's catalogue; None for a room
    without dinner terms (no plan to speak of). Stored sealed under the room's key."""
    if room.terms is None:
        return None
    arguments = record.arguments
    party = int(arguments["party_size"])
    try:
        terms = terms_parse(room.terms)
        venue = catalogue_get(terms.catalogue).venue(str(arguments["venue_id"]))
        zone = terms.time_zone
    except (TermsInvalid, CatalogueInvalid, LookupError):
        venue, zone = None, str(room.terms.get("time_zone") or "UTC")
    # The server checked the booking against the catalogue moments ago; if the file has gone
    # since, the booked amount (the party's total) still says the price per person.
    price = (
        venue.price_per_person.amount_minor
        if venue is not None
        else int(arguments["cost_cents"]) // max(party, 1)
    )
    return {
        "venue_id": str(arguments["venue_id"]),
        "venue_name": venue.name if venue is not None else str(arguments["venue_id"]),
        "starts_at": _aware(datetime.fromisoformat(str(arguments["start"]))).isoformat(),
        "time_zone": zone,
        "party_size": party,
        "price_per_person_minor": price,
        "currency": venue.price_per_person.currency if venue else str(arguments["currency"]),
    }


def outcome_record(*, room: Room, action_id: UUID) -> RoomOutcome | None:
    """Record what an executed action means for the room's outcome, if anything.

    Call inside the action's transaction, with the room row locked. Returns the new outcome
    row, or None when the action changes nothing (not executed, another tool, already
    recorded, a room without terms, a declaration after an agreement or repeating one).
    Raises ``LedgerAppendError`` if the event cannot be recorded (the caller denies).
    """
    record = ActionRecord.objects.filter(id=action_id, room_id=room.id).first()
    if record is None or record.status != ActionStatus.EXECUTED:
        return None
    if record.tool not in (BOOK_TABLE, DECLARE_NO_PLAN) or room.terms is None:
        return None
    if RoomOutcome.objects.filter(action_id=record.id).exists():
        return None  # a replay of an action already recorded
    current = _latest(room.id)
    if record.tool == BOOK_TABLE:
        plan = _plan(room, record)
        if plan is None:
            return None
        outcome = RoomOutcome.objects.create(
            room=room,
            action_id=record.id,
            kind=OutcomeKind.AGREED,
            owner_id=record.owner_id,
            plan=plan,
        )
        event = OutcomeRecorded(
            outcome="agreed", action_id=str(record.id), owner_id=str(record.owner_id)
        )
    else:
        if current is not None and current.kind == OutcomeKind.AGREED:
            return None
        reason = str(record.arguments["reason"])
        standing = dict(current.reasons) if current is not None else {}
        if standing.get(str(record.owner_id)) == reason:
            return None  # the same side saying the same again: nothing changed
        standing[str(record.owner_id)] = reason
        outcome = RoomOutcome.objects.create(
            room=room,
            action_id=record.id,
            kind=OutcomeKind.NO_AGREEMENT,
            owner_id=record.owner_id,
            reasons=standing,
        )
        event = OutcomeRecorded(
            outcome="no_agreement",
            action_id=str(record.id),
            owner_id=str(record.owner_id),
            reason=reason,  # type: ignore[arg-type]  # the tool's schema allows only codes
        )
    ledger_append(room_id=room.id, event=event)
    realtime.announce_outcome(room.id)  # an owner's open page shows it without a reload
    return outcome


def _purged_plan_words(outcome: RoomOutcome, viewer: User) -> OutcomeWords:
    """An agreed plan whose details the retention purge removed (``rooms.retention``: room
    content, kept as long as the transcript): that it was agreed, and who booked, stay."""
    days = settings.SYNAPSIA["TRANSCRIPT_RETENTION_DAYS"]
    yours = outcome.owner_id == viewer.pk
    books = "You booked" if yours else f"{owner_name(outcome.owner)}'s agent booked"
    return OutcomeWords(
        kind=OutcomeKind.AGREED,
        headline="Agreed plan",
        lines=(f"its venue, time and price were purged {days} days after the room closed", books),
    )


def _agreed_words(outcome: RoomOutcome, viewer: User) -> OutcomeWords:
    if outcome.plan is None:
        return _purged_plan_words(outcome, viewer)
    assert outcome.starts_at is not None and outcome.price_per_person_minor is not None
    zone_id = outcome.time_zone or "UTC"
    zone = ZoneInfo(zone_id)
    local = outcome.starts_at.astimezone(zone)
    when = f"{local:%A} {local.day} {local:%B %Y} at {local:%H:%M}, {zone_words(zone_id)}"
    own_time = your_time_words(outcome.starts_at, zone)  # the owner elsewhere reads theirs too
    if own_time is not None:
        when += f" ({own_time})"
    party = outcome.party_size or 1
    price = f"{money_words(outcome.price_per_person_minor, outcome.currency)} per person"
    if party > 1:
        total = money_words(outcome.price_per_person_minor * party, outcome.currency)
        price += f", table for {party} ({total} in all)"
    yours = outcome.owner_id == viewer.pk
    books = "You book" if yours else f"{owner_name(outcome.owner)}'s agent books"
    return OutcomeWords(
        kind=OutcomeKind.AGREED,
        headline="Agreed plan",
        lines=(outcome.venue_name, when, price, books),
    )


def _no_agreement_words(
    outcome: RoomOutcome, viewer: User, seats: list[RoomMember]
) -> OutcomeWords:
    lines = []
    for seat in seats:  # in seat order, so both owners read the sides in the same order
        reason = outcome.reasons.get(str(seat.owner_id))
        if reason is None:
            continue
        who = "Your agent" if seat.owner_id == viewer.pk else f"{owner_name(seat.owner)}'s agent"
        lines.append(f"{who}: {NO_PLAN_REASON_WORDS.get(reason, 'No reason given')}")
    return OutcomeWords(kind=OutcomeKind.NO_AGREEMENT, headline="No agreement", lines=tuple(lines))


def room_outcome_for_owner(*, owner: User, room_id: UUID) -> OutcomeWords | None:
    """The room's outcome in words for one of its owners (in the room's time zone, amounts in
    whole units, who books by name); None while there is none. Raises ``NotFound`` for anyone
    without a seat in the room."""
    seat = selectors.room_seat(owner=owner, room_id=room_id)
    return room_outcomes_for_owner(owner=owner, room_ids=[seat.room_id]).get(seat.room_id)


def room_outcomes_for_owner(*, owner: User, room_ids: Sequence[UUID]) -> dict[UUID, OutcomeWords]:
    """``room_outcome_for_owner`` for many rooms at once (the rooms page), in two statements
    whatever their number: each room's outcomes (the latest is its outcome; a room has a few
    at most), and the seats of those ending without agreement (each side's reason is said in
    seat order). Rooms without an outcome are left out. Only for rooms ``owner`` has a seat
    in: the caller read them through their seats."""
    latest: dict[UUID, RoomOutcome] = {}
    for outcome in (
        RoomOutcome.objects.select_related("owner")
        .filter(room_id__in=room_ids)
        .order_by("room_id", "-id")
    ):
        latest.setdefault(outcome.room_id, outcome)
    undecided = [room for room, o in latest.items() if o.kind != OutcomeKind.AGREED]
    seats: dict[UUID, list[RoomMember]] = defaultdict(list)
    if undecided:
        for seat in (
            RoomMember.objects.select_related("owner")
            .filter(room_id__in=undecided)
            .order_by("joined_at")
        ):
            seats[seat.room_id].append(seat)
    return {
        room: _agreed_words(outcome, owner)
        if outcome.kind == OutcomeKind.AGREED
        else _no_agreement_words(outcome, owner, seats[room])
        for room, outcome in latest.items()
    }
