"""Reads for agents, rooms and the transcript, always scoped to who is asking."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, tzinfo
from typing import TYPE_CHECKING, Any
from uuid import UUID
from zoneinfo import ZoneInfo

from django.contrib.auth.models import User
from django.db.models import QuerySet
from django.utils import timezone

from dining import Catalogue, CatalogueInvalid, TermsInvalid, catalogue_get, terms_parse
from gatekeeper.reasons import rule_sentence, tool_words
from ledger.receipts import NO_PLAN_REASON_WORDS
from rooms import handshake
from rooms.bearer import secret_digest
from rooms.errors import NotFound
from rooms.models import Agent, Flare, Message, Room, RoomMember, Whisper
from rooms.sealing import one_hop
from slips.models import VaultItem
from slips.money import minor_in_words

if TYPE_CHECKING:
    from rooms.handshake import Participant

BACKLOG_LIMIT = 500
# A transcript message as read: room_id too, since loading checks each sealed text was sealed
# for this room (rooms.sealing).
_MESSAGE_FIELDS = ("room_id", "seq", "sender_id", "text", "flags", "author", "created_at")


def agents_of_owner(*, owner: User) -> QuerySet[Agent]:
    return Agent.objects.filter(owner=owner)


def agent_by_token(*, token: str) -> Agent | None:
    """The active agent holding ``token``, recording the use; None if unknown or revoked."""
    agent = Agent.objects.filter(token_hash=secret_digest(token), revoked_at__isnull=True).first()
    if agent is not None:
        now = timezone.now()
        Agent.objects.filter(id=agent.id).update(token_last_used_at=now)
        agent.token_last_used_at = now
    return agent


def rooms_of_owner(*, owner: User) -> QuerySet[Room]:
    return Room.objects.filter(members__owner=owner).distinct()


def room_seat(*, owner: User, room_id: UUID) -> RoomMember:
    """``owner``'s seat in the room; ``NotFound`` if there is none (or no such room)."""
    try:
        return RoomMember.objects.select_related("room", "agent").get(room_id=room_id, owner=owner)
    except RoomMember.DoesNotExist:
        raise NotFound("No such room.") from None


def room_seats(*, room: Room) -> list[RoomMember]:
    return list(room.members.select_related("owner", "agent").order_by("joined_at"))


def messages_after(
    *, room_id: UUID, after_seq: int, exclude_sender: UUID | None = None, limit: int = BACKLOG_LIMIT
) -> list[Message]:
    """Transcript messages with ``seq > after_seq`` in order, optionally without one sender's."""
    messages = Message.objects.filter(room_id=room_id, seq__gt=after_seq).order_by("seq")
    if exclude_sender is not None:
        messages = messages.exclude(sender_id=exclude_sender)
    with one_hop():  # the room key's destroyed mark read once for the rows, not per row
        return list(messages.only(*_MESSAGE_FIELDS)[:limit])


def messages_before(*, room_id: UUID, before_seq: int | None, limit: int) -> list[Message]:
    """The newest ``limit`` transcript messages with ``seq < before_seq`` (of all, if None),
    in order."""
    messages = Message.objects.filter(room_id=room_id)
    if before_seq is not None:
        messages = messages.filter(seq__lt=before_seq)
    with one_hop():
        newest = list(messages.order_by("-seq").only(*_MESSAGE_FIELDS)[:limit])
    return newest[::-1]


def tools_listed(*, participant: Participant) -> list[dict[str, Any]]:
    """MCP definitions of the tools an agent may request, for a seat known outside a socket's
    handshake (the MCP bridge, tests): the handshake's own listing (tool policy ∩ its owner's
    slip for it, checked now ∩ its own hints), so there is one. Owners' sockets get none."""
    if participant.agent_id is None:
        return []
    agent = Agent.objects.get(id=participant.agent_id)
    room = Room.objects.get(id=participant.room_id)
    admission = handshake.Admission(
        participant,
        handshake.RoomFacts(
            room.id, room.purpose, room.charter, room.state, room.terms, room.last_seq
        ),
        advisor_only=agent.advisor_only,
        declared_tools=agent.declared_tools,
        slip_live=True,  # read and checked by the listing itself
    )
    return [spec.descriptor() for spec in handshake.tools_listed(admission)]


# --- the room in words (the owner's room page and the grants they decide) ----------------


def whispers_of_owner(*, owner: User, room_id: UUID) -> list[Whisper]:
    """The whispers ``owner`` sent in this room, oldest first: only their own, ever."""
    seat = room_seat(owner=owner, room_id=room_id)
    with one_hop():
        return list(
            Whisper.objects.filter(room_id=seat.room_id, owner=owner).order_by("created_at")
        )


def flares_unanswered(*, room_id: UUID) -> list[Flare]:
    """The room's Signal Flares still waiting for their owner's answer, oldest first (with
    each one's seat and owner): what ``gatekeeper.standing.flare_holding_resume`` judges."""
    return list(
        Flare.objects.filter(room_id=room_id, resolved_at__isnull=True)
        .select_related("seat__owner", "seat__agent")
        .order_by("raised_at")
    )


def vault_item_kinds(*, item_ids: list[str]) -> dict[str, str]:
    """item id -> its kind ("budget"), for naming what fed a turn; content is never read."""
    valid = []
    for item_id in item_ids:
        try:
            valid.append(UUID(item_id))
        except ValueError:
            continue  # not a vault item id: nothing to name
    found = VaultItem.objects.filter(id__in=valid).values_list("id", "kind")
    return {str(item_id): kind for item_id, kind in found}


def grant_reason_sentence(rule: str) -> str:
    """Why an action waits for its owner, in the sentence of the one rule catalogue
    (``gatekeeper.reasons``, shared with the receipt), spoken to that owner."""
    return rule_sentence(rule)


@dataclass(frozen=True)
class DinnerSetting:
    """Where a room's dinner happens: its time zone and venue catalogue (None without terms,
    or when the catalogue is gone; words then say what was stated, without names)."""

    zone: ZoneInfo
    zone_words: str  # "Berlin time"
    catalogue: Catalogue | None


def room_dinner_setting(*, room: Room) -> DinnerSetting:
    zone_id = str((room.terms or {}).get("time_zone") or "UTC")
    catalogue = None
    if room.terms is not None:
        try:
            terms = terms_parse(room.terms)
            zone_id = terms.time_zone
            catalogue = catalogue_get(terms.catalogue)
        except (TermsInvalid, CatalogueInvalid, LookupError):
            catalogue = None
    try:
        zone = ZoneInfo(zone_id)
    except (ValueError, LookupError):
        zone, zone_id = ZoneInfo("UTC"), "UTC"
    return DinnerSetting(zone, zone_words(zone_id), catalogue)


def zone_words(zone_id: str) -> str:
    """ "Europe/Berlin" -> "Berlin time": the city people know, from the zone's id."""
    return f"{zone_id.rsplit('/', 1)[-1].replace('_', ' ')} time"


def your_time_words(moment: datetime, zone: tzinfo) -> str | None:
    """ "Fri 4 Dec, 20:00 your time" when the reader's own time zone (the one activated for
    their request) is not ``zone`` at ``moment``; None when the two read the same."""
    mine = moment.astimezone(timezone.get_current_timezone())
    if mine.utcoffset() == moment.astimezone(zone).utcoffset():
        return None
    return f"{mine:%a} {mine.day} {mine:%b}, {mine:%H:%M} your time"


def owner_name(user: User) -> str:
    """What the other owner and the pages call an owner: their full name, else their username
    (the one rule for it: pages, receipts, refusals and packages all name owners with it)."""
    return user.get_full_name() or user.get_username()


def money_words(amount_minor: int, currency: str) -> str:
    """Whole units as people write them: "38 EUR", "26.50 EUR", "4200 JPY"."""
    return f"{minor_in_words(amount_minor, currency)} {currency}"


def moment_words(moment: datetime, setting: DinnerSetting) -> str:
    """ "Fri 4 Dec, 20:00 (Berlin time)", plus the owner's own time when it differs."""
    local = moment.astimezone(setting.zone)
    words = f"{local:%a} {local.day} {local:%b}, {local:%H:%M} ({setting.zone_words})"
    yours = your_time_words(moment, setting.zone)
    return words if yours is None else f"{words} · {yours}"


def venue_words(venue_id: str, setting: DinnerSetting) -> str:
    venue = setting.catalogue.venue(venue_id) if setting.catalogue else None
    return venue.name if venue is not None else f"“{venue_id}” (not in this room's catalogue)"


def _capitalised(text: str) -> str:
    return text[:1].upper() + text[1:]


_RECIPIENT_WORDS: Mapping[str, str] = {"self": "Its own owner", "peer": "The other owner"}


def _moment(value: object) -> datetime | None:
    try:
        return datetime.fromisoformat(str(value))
    except ValueError:
        return None


def action_in_words(
    *, room: Room, tool: str, arguments: Mapping[str, Any]
) -> list[tuple[str, str]]:
    """What an agent asked to do, as (label, words) lines for the owner deciding at a fork:
    the tool's title, the venue's name, the time in the room's zone, the party, the price in
    whole units. Never raw JSON; an argument with no words of its own is shown as its value."""
    setting = room_dinner_setting(room=room)
    lines: list[tuple[str, str]] = [("Action", _capitalised(tool_words(tool)))]
    currency = str(arguments.get("currency", ""))
    party = arguments.get("party_size")
    for key, value in arguments.items():
        if key == "currency":
            continue
        if key == "venue_id":
            lines.append(("Venue", venue_words(str(value), setting)))
        elif key in ("start", "event_start") and (moment := _moment(value)) is not None:
            lines.append(("Time", moment_words(moment, setting)))
        elif key == "party_size":
            lines.append(("Party size", f"{value} {'person' if value == 1 else 'people'}"))
        elif key in ("cost_cents", "amount_cents") and isinstance(value, int):
            words = money_words(value, currency)
            if key == "cost_cents" and isinstance(party, int) and party > 1:
                words += f" in all ({money_words(value // party, currency)} per person)"
            lines.append(("Price" if key == "cost_cents" else "Amount", words))
        elif key == "duration_minutes":
            lines.append(("Length", f"{value} minutes"))
        elif key == "recipient":
            lines.append(("To", _RECIPIENT_WORDS.get(str(value), str(value))))
        elif key == "reason" and tool == "declare_no_plan":
            lines.append(("Reason", NO_PLAN_REASON_WORDS.get(str(value), str(value))))
        elif isinstance(value, list):
            lines.append((key.replace("_", " ").capitalize(), ", ".join(map(str, value)) or "none"))
        else:
            lines.append((key.replace("_", " ").capitalize(), str(value)))
    return lines
