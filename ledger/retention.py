"""Retention: ledger events are kept ``SYNAPSIA["LEDGER_RETENTION_DAYS"]`` days, then purged.

A purge deletes a prefix of a room's chain and leaves a checkpoint (the last purged sequence
number and its hash) on the room's head row, so the events that remain still verify from it.
The purge is itself recorded, as a ``retention_purge`` event naming that checkpoint.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from uuid import UUID

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from ledger.events import RetentionPurge
from ledger.models import LedgerEvent, LedgerHead
from ledger.services import ledger_append


@dataclass(frozen=True)
class RoomPurge:
    room_id: UUID
    through_seq: int
    events_purged: int


@dataclass(frozen=True)
class PurgeReport:
    cutoff: datetime
    rooms: list[RoomPurge]

    @property
    def events_purged(self) -> int:
        return sum(r.events_purged for r in self.rooms)


def ledger_purge_expired(*, now: datetime | None = None) -> PurgeReport:
    """Purge every room's events older than the retention window (one transaction per room).

    Deletes the shortest prefix of each chain that contains all expired events (clocks of
    several servers can disagree slightly, so this may take a few seconds-younger events with
    it, never leave an expired one), moves the checkpoint, and appends ``retention_purge``.
    """
    window_days: int = settings.SYNAPSIA["LEDGER_RETENTION_DAYS"]
    as_of = now or timezone.now()
    cutoff = as_of - timedelta(days=window_days)
    room_ids = list(
        LedgerEvent.objects.filter(occurred_at__lt=cutoff)
        .values_list("room_id", flat=True)
        .distinct()
    )
    purged = [
        p
        for room_id in room_ids
        if (p := _room_purge(room_id=room_id, as_of=as_of, window_days=window_days))
    ]
    return PurgeReport(cutoff=cutoff, rooms=purged)


def _room_purge(*, room_id: UUID, as_of: datetime, window_days: int) -> RoomPurge | None:
    cutoff = as_of - timedelta(days=window_days)
    with transaction.atomic():
        # Lock the head first: no append can interleave with moving the checkpoint.
        head = LedgerHead.objects.select_for_update().filter(room_id=room_id).first()
        if head is None:
            return None
        last = (
            LedgerEvent.objects.filter(room_id=room_id, occurred_at__lt=cutoff)
            .order_by("-seq")
            .values_list("seq", "hash")
            .first()
        )
        if last is None:
            return None
        through_seq, through_hash = last
        deleted, _ = LedgerEvent.objects.filter(room_id=room_id, seq__lte=through_seq).delete()
        LedgerHead.objects.filter(room_id=room_id).update(
            checkpoint_seq=through_seq, checkpoint_hash=through_hash
        )
        ledger_append(
            room_id=room_id,
            event=RetentionPurge(
                through_seq=through_seq,
                through_hash=through_hash,
                events_purged=deleted,
                window_days=window_days,
            ),
            # Verifiers judge a purge by its own time (purge time minus the window must lie
            # after every head it covers), so it is recorded as of the moment it purged for.
            occurred_at=as_of,
        )
        return RoomPurge(room_id=room_id, through_seq=through_seq, events_purged=deleted)
