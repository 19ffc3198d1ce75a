"""Shared artifacts' row of the retention schedule (``rooms.retention``: 90 days by default,
``SYNAPSIA_ARTIFACT_RETENTION_DAYS``) and their part of a room's deletion (``rooms.deletion``).
Both are registered from ``ArtifactsConfig.ready``."""

from __future__ import annotations

from datetime import datetime
from uuid import UUID

from django.db import transaction

from artifacts.models import Artifact
from rooms.retention import Purged, retention_row, rooms_purge_expired
from slips.datakeys import data_keys_destroy


def artifacts_purge_expired(now: datetime) -> Purged:
    """Delete every artifact published more than the window before ``now``: one transaction
    per room, each recorded in that room's ledger as ``room_content_deleted`` with the count
    (never a title or body). Idempotent: a second run finds nothing."""
    row = retention_row("artifacts")
    cutoff = row.cutoff(now)
    return rooms_purge_expired(
        row,
        room_ids=list(
            Artifact.objects.filter(created_at__lt=cutoff)
            .values_list("room_id", flat=True)
            .distinct()
        ),
        delete=lambda room_id: Artifact.objects.filter(
            room_id=room_id, created_at__lt=cutoff
        ).delete()[0],
        counted_as="artifacts",
        what="shared artifacts",
    )


def artifacts_delete_for_room(room_id: UUID) -> int:
    """A deleted room's artifacts (``rooms.deletion.room_content_delete`` calls it inside its
    transaction). Once that transaction commits, the room's data key is destroyed too, so a
    copy of an artifact in an older backup can never be opened (``rooms.deletion`` destroys
    the room's key as well; destroying is idempotent, and never happens for a deletion that
    rolled back)."""
    deleted, _ = Artifact.objects.filter(room_id=room_id).delete()
    transaction.on_commit(
        lambda: data_keys_destroy(kind="room", subject=str(room_id), since=""), robust=True
    )
    return deleted
