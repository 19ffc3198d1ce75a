"""Sealed simultaneous offers: each agent seals one typed plan; both are revealed at once.

First offers anchor a negotiation, so neither agent may see the other's before both are in.
An offer is room content (``SealedOffer``) that nothing reads before the reveal: the only
reads of its content are in this module, and they take revealed rows only. The ledger records
that and when each agent sealed (``offer_sealed``, with a salted commitment) and the reveal
(``offers_revealed``: whose, complete or not), never a venue, time or price.

The reveal happens when every seated agent has sealed, or once ``SEALED_OFFER_SECONDS`` have
passed since the first seal, whichever comes first. Callers (the room socket) ring the room's
bell after the commit, as the say path does; the bell carries no content.

The deadline is not a Celery task: in the embedded profile tasks run eagerly, so one scheduled
at the first seal would run at once (and block the sealing socket for the whole wait); and a
reveal matters only to connected agents. So each agent socket in the room sleeps once until the
deadline it was told of (no polling loop), and every agent connect checks again:
``offers_reveal_if_due`` is idempotent under the room's row lock.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

import rfc8785
from django.conf import settings
from django.db import transaction
from django.db.models import Exists, Q
from django.utils import timezone

from ledger.events import OfferSealed, OffersRevealed
from ledger.services import LedgerAppendError, ledger_append
from rooms.models import Agent, Room, RoomMember, RoomState, SealedOffer, SeatStanding
from rooms.protocol import OfferPlan


class SealRefused(Exception):
    """Why an offer could not be sealed (mapped to an error frame or close code)."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        # "revoked" | "not_member" | "withdrawn" | "room_not_open" | "already_sealed" |
        # "already_revealed" | "ledger_unavailable"
        self.reason = reason
        self.message = message


@dataclass(frozen=True)
class Reveal:
    """The room's revealed offers: ``(agent id, plan in JSON form, salt)`` in sealing order."""

    offers: tuple[tuple[UUID, dict[str, Any], str], ...]
    complete: bool


@dataclass(frozen=True)
class SealState:
    """Where a room's sealed offers stand: revealed (``reveal``), waiting until ``deadline``,
    or neither (nobody sealed). ``duplicate``: the seal was a resent frame id. The caller rings
    the room's bell after the commit: ``revealed_now`` (this call revealed them) or
    ``first_seal`` (this was the room's first seal; the others learn the deadline)."""

    reveal: Reveal | None = None
    deadline: datetime | None = None
    duplicate: bool = False
    revealed_now: bool = False
    first_seal: bool = False


def offer_commitment(*, offer: dict[str, Any], salt: str) -> str:
    """SHA-256 hex of the RFC 8785 form of ``{"offer": offer, "salt": salt}`` (what the ledger's
    ``offer_sealed`` holds; recompute it from an ``offers_revealed`` entry to check it)."""
    return hashlib.sha256(rfc8785.dumps({"offer": offer, "salt": salt})).hexdigest()


def _deadline(first_sealed_at: datetime) -> datetime:
    return first_sealed_at + timedelta(seconds=settings.SYNAPSIA["SEALED_OFFER_SECONDS"])


def _agent_shut_out(agent_id: UUID, token: str | None) -> Exists:
    """Whether the agent is revoked or, for a socket (``token``: the digest of the token it was
    admitted with), that token is no longer the agent's: as the say path asks it
    (``services.message_say``), as a condition of the statement that locks the room."""
    dead = Q(revoked_at__isnull=False) if token is None else ~Q(token_hash=token, revoked_at=None)
    return Exists(Agent.objects.filter(dead, id=agent_id))


def _refuse_unless_seat_may_act(room: Room, agent_id: UUID) -> None:
    """The say path's checks after revocation (``offer_seal`` refuses a revoked agent, or a
    rotated token's socket, first, from the room's lock), re-read now, in its order: the
    agent holds a seat in the room, the seat is active (not muted, blocked or stepped in), the
    room is open."""
    seat = RoomMember.objects.filter(room_id=room.id, agent_id=agent_id).only("standing").first()
    if seat is None:
        raise SealRefused("not_member", "This agent has no seat in this room.")
    if seat.standing != SeatStanding.ACTIVE:
        raise SealRefused("withdrawn", "Your owner has muted you or stepped in.")
    if room.state != RoomState.OPEN:
        raise SealRefused("room_not_open", "The room is not open.")


def offer_seal(
    *,
    room_id: UUID,
    agent_id: UUID,
    client_id: str,
    offer: OfferPlan,
    token: str | None = None,
) -> SealState:
    """Seal ``agent_id``'s offer in the room, and reveal the room's offers if that completes them.

    One offer per agent per room, only while the room is open and the agent's seat may act
    (re-checked now). Resending the same ``client_id`` seals nothing again and reports where
    the room stands. Raises ``SealRefused``; changes nothing then.

    ``token``: an agent's socket's token digest, as it was admitted with; rotated away since
    (or the agent revoked), the seal, and a resend of one, is refused as a revoked agent's
    (``revoked``), judged by the statement that locks the room (no statement more). None: the
    server itself asks (revocation alone decides).
    """
    now = timezone.now()
    try:
        with transaction.atomic():
            # The room's row lock orders seals and reveals in the room; the same statement
            # reads whether the agent is shut out (revoked, or its socket's token rotated).
            room = (
                Room.objects.select_for_update()
                .only("id", "state")
                .annotate(shut_out=_agent_shut_out(agent_id, token))
                .get(id=room_id)
            )
            if room.shut_out:
                # Before a resend's answer too: a revoked agent or a rotated token's socket
                # is not told where the room stands (a reveal is the other side's offer).
                raise SealRefused("revoked", "This agent is revoked.")
            offers = list(SealedOffer.objects.filter(room_id=room_id).order_by("id"))
            own = next((o for o in offers if o.agent_id == agent_id), None)
            if own is not None and own.client_id == client_id:
                # A resend (after a reconnect, say): learns where things stand, even if paused.
                state = _reveal_if_due(room, offers, now)
                return SealState(
                    state.reveal, state.deadline, duplicate=True, revealed_now=state.revealed_now
                )
            _refuse_unless_seat_may_act(room, agent_id)
            if own is not None:
                raise SealRefused(
                    "already_sealed",
                    "You have already sealed your offer in this room; it cannot be changed.",
                )
            if any(o.revealed_at is not None for o in offers):
                raise SealRefused(
                    "already_revealed", "The offers in this room were already revealed."
                )
            plan = offer.model_dump(mode="json")
            salt = secrets.token_hex(32)
            commitment = offer_commitment(offer=plan, salt=salt)
            sealed = SealedOffer.objects.create(
                room_id=room_id,
                agent_id=agent_id,
                client_id=client_id,
                offer=plan,
                salt=salt,
                commitment=commitment,
            )
            ledger_append(
                room_id=room_id,
                event=OfferSealed(agent_id=str(agent_id), commitment=commitment),
            )
            state = _reveal_if_due(room, [*offers, sealed], now)
            return SealState(
                state.reveal,
                state.deadline,
                revealed_now=state.revealed_now,
                first_seal=not offers,
            )
    except LedgerAppendError:
        raise SealRefused("ledger_unavailable", "The seal could not be recorded.") from None


def offers_reveal_if_due(*, room_id: UUID) -> SealState:
    """Reveal the room's sealed offers if every seated agent has sealed or the deadline has
    passed; either way, where the room stands. Idempotent: a revealed room stays revealed.

    Every agent connect calls this, so it locks the room only when a reveal is due."""
    offers = list(SealedOffer.objects.filter(room_id=room_id).order_by("id"))
    now = timezone.now()
    if not offers:
        return SealState()
    if all(o.revealed_at is None for o in offers) and now < _deadline(offers[0].sealed_at):
        room = Room.objects.only("id").get(id=room_id)
        if not _complete(room, offers):
            return SealState(deadline=_deadline(offers[0].sealed_at))
    with transaction.atomic():
        room = Room.objects.select_for_update().only("id").get(id=room_id)
        offers = list(SealedOffer.objects.filter(room_id=room_id).order_by("id"))
        return _reveal_if_due(room, offers, now)


def _reveal_if_due(room: Room, offers: list[SealedOffer], now: datetime) -> SealState:
    """Under the room's row lock: reveal ``offers`` (all of the room's) if due."""
    if not offers:
        return SealState()
    if all(o.revealed_at is not None for o in offers):
        return SealState(reveal=_reveal_of(offers, complete=_complete(room, offers)))
    deadline = _deadline(offers[0].sealed_at)
    complete = _complete(room, offers)
    if not complete and now < deadline:
        return SealState(deadline=deadline)
    SealedOffer.objects.filter(id__in=[o.id for o in offers]).update(revealed_at=now)
    ledger_append(
        room_id=room.id,
        event=OffersRevealed(agent_ids=[str(o.agent_id) for o in offers], complete=complete),
    )
    return SealState(reveal=_reveal_of(offers, complete=complete), revealed_now=True)


def _complete(room: Room, offers: list[SealedOffer]) -> bool:
    seated = set(
        RoomMember.objects.filter(room_id=room.id, agent__isnull=False).values_list(
            "agent_id", flat=True
        )
    )
    return seated <= {o.agent_id for o in offers}


def _reveal_of(offers: list[SealedOffer], *, complete: bool) -> Reveal:
    return Reveal(
        offers=tuple((o.agent_id, dict(o.offer), o.salt) for o in offers), complete=complete
    )


# --- selectors ----------------------------------------------------------------------------


def offers_revealed(*, room_id: UUID) -> Reveal | None:
    """The room's revealed offers, or None before the reveal. Reads revealed rows only: before
    the reveal no path reads a sealed offer's content."""
    offers = list(
        SealedOffer.objects.filter(room_id=room_id, revealed_at__isnull=False).order_by("id")
    )
    if not offers:
        return None
    room = Room.objects.only("id").get(id=room_id)
    return _reveal_of(offers, complete=_complete(room, offers))
