"""Pausing a room at a fork: the one safe default when something needs the owners."""

from __future__ import annotations

import logging
from uuid import UUID

from django.db import transaction
from django.utils import timezone

from ledger.events import RoomPaused, rule_id_from
from ledger.services import LedgerAppendError, ledger_append
from ledger.signing import ledger_sign_head
from rooms import realtime
from rooms.models import Room, RoomState

logger = logging.getLogger(__name__)


def pause_at_fork(room: Room, *, by: str, rule: str) -> None:
    """Pause a locked room at a fork, recorded (within the caller's transaction)."""
    if room.state != RoomState.OPEN:
        return
    ledger_append(room_id=room.id, event=RoomPaused(by=by, reason_rule=rule_id_from(rule)))
    room.state = RoomState.PAUSED
    room.state_changed_at = timezone.now()
    room.save(update_fields=["state", "state_changed_at"])
    ledger_sign_head(room_id=room.id)
    realtime.announce_room_state(room.id, room.state)


def room_pause_fail_safe(*, room_id: UUID, rule: str) -> None:
    """Pause after a failure. Pausing is the safe direction, so if even the ledger cannot
    record it, the room is paused anyway and the gap is logged for the operator."""
    try:
        with transaction.atomic():
            room = Room.objects.select_for_update().get(id=room_id)
            pause_at_fork(room, by="gatekeeper", rule=rule)
    except LedgerAppendError:
        logger.critical("room %s paused without a ledger record (%s)", room_id, rule)
        Room.objects.filter(id=room_id, state=RoomState.OPEN).update(
            state=RoomState.PAUSED, state_changed_at=timezone.now()
        )
        realtime.announce_room_state(room_id, RoomState.PAUSED)
