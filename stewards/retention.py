"""The operator side's rows of the retention schedule (rooms.retention): exit notes and abuse
evidence. Registered from ``StewardsConfig.ready``, so ``purge_expired`` (the command and the
beat task ``rooms.purge_expired``) runs them with the rest."""

from __future__ import annotations

from datetime import datetime
from uuid import UUID

from rooms.retention import Purged, retention_row, rooms_purge_expired
from stewards.exit_notes import exit_notes_purge_expired
from stewards.models import ExitNote
from stewards.reports import abuse_evidence_purge_expired


def exit_notes_purge(now: datetime) -> Purged:
    """Delete notes past the window, one transaction per room, each recorded in that room's
    ledger as ``room_content_deleted`` with the count (never the notes)."""
    row = retention_row("exit_notes")
    cutoff = row.cutoff(now)
    return rooms_purge_expired(
        row,
        room_ids=list(
            ExitNote.objects.filter(left_at__lt=cutoff).values_list("room_id", flat=True).distinct()
        ),
        delete=lambda room_id: exit_notes_purge_expired(now=now, room_id=room_id),
        counted_as="notes",
        what="exit notes",
    )


def abuse_evidence_purge(now: datetime) -> Purged:
    """Reports resolved more than the window ago, with their evidence. A report may outlive
    its room, so no room's ledger records this purge; the command prints the count."""
    row = retention_row("abuse_evidence")
    deleted = abuse_evidence_purge_expired(now=now)
    return Purged(
        key=row.key,
        rows=deleted,
        rooms=0,
        summary=(
            f"abuse evidence: deleted {deleted} report(s) resolved more than {row.period} ago"
        ),
    )


def exit_notes_delete(room_id: UUID) -> int:
    """A deleted room's exit notes (rooms.deletion calls it inside its transaction)."""
    _, by_model = ExitNote.objects.filter(room_id=room_id).delete()
    return by_model.get(ExitNote._meta.label, 0)
