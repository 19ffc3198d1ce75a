"""Retention of a room's permission records: the slips signed for it (with their capability
records), the tiers its owners chose and the conflicts worked out between them.

They are the "Permission and ledger events" row of the schedule (boundary spec, "Data": 90
days), on the ledger's own clock: each record is kept the window after its last event (a
slip: signed, then superseded; a tier: chosen; a conflict: worked out), as each ledger event
is kept the window after it happened. ``rooms.retention`` decides which rooms may lose them
(closed ones: in a live room a slip in force is still in use) and records the purge; this
module only says which records are past the window, since ``slips`` sits below ``rooms`` and
must not import it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from uuid import UUID

from django.db.models import Exists, OuterRef, Q

from slips.models import RoomTier, Slip, SlipCapability, SlipConflict


def _slips_expired(cutoff: datetime) -> Q:
    # Superseded after the cutoff: its last event (the supersession) is not past the window.
    return Q(created_at__lt=cutoff) & (Q(superseded_at__isnull=True) | Q(superseded_at__lt=cutoff))


def slip_records_expired_exist(room_id: OuterRef, cutoff: datetime) -> Q:
    """For a query of rooms: the room (``room_id``, an ``OuterRef`` to its id) holds a
    permission record whose last event is older than ``cutoff``."""
    return (
        Q(Exists(Slip.objects.filter(_slips_expired(cutoff), room_id=room_id)))
        | Q(Exists(RoomTier.objects.filter(room_id=room_id, chosen_at__lt=cutoff)))
        | Q(Exists(SlipConflict.objects.filter(room_id=room_id, resolved_at__lt=cutoff)))
    )


@dataclass(frozen=True)
class SlipRecordsDeleted:
    """Rows deleted for one room (counts only)."""

    slips: int = 0
    capabilities: int = 0  # the slips' capability records, deleted with them
    tiers: int = 0
    conflicts: int = 0

    @property
    def total(self) -> int:
        return self.slips + self.capabilities + self.tiers + self.conflicts


def slip_records_delete_expired(*, room_id: UUID, cutoff: datetime) -> SlipRecordsDeleted:
    """Delete one room's slips (their capability records cascade), tiers and conflicts whose
    last event is older than ``cutoff``. The caller holds the transaction and has checked the
    room may lose them (``rooms.retention``). Idempotent: a second call deletes nothing."""
    _, slips = Slip.objects.filter(_slips_expired(cutoff), room_id=room_id).delete()
    _, tiers = RoomTier.objects.filter(room_id=room_id, chosen_at__lt=cutoff).delete()
    _, conflicts = SlipConflict.objects.filter(room_id=room_id, resolved_at__lt=cutoff).delete()
    return SlipRecordsDeleted(
        slips=slips.get(Slip._meta.label, 0),
        capabilities=slips.get(SlipCapability._meta.label, 0),
        tiers=tiers.get(RoomTier._meta.label, 0),
        conflicts=conflicts.get(SlipConflict._meta.label, 0),
    )
