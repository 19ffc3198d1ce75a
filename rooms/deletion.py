"""Deleting a room for both sides, deleting an account, and re-applying deletions after a
restore (boundary spec, "Data": deletion means deletion).

``room_content_delete`` is the one function that deletes a room's content; every path (an
owner's deletion, an account's, ``reapply_deletions``) goes through it, and the retention
purge goes through its transcript part, ``transcript_delete``. Deletion is synchronous: the
rows are deleted in the requesting transaction, so nothing of the content is readable, by any
page, API or socket, once it commits, and it is gone from primary storage at that moment (not
within 24 hours: at once). Crypto-shredding: room content is sealed under the room's data key
(``rooms.sealing``), and ``room_content_delete`` destroys that key in the same transaction
(after the journal line), which makes copies in older database backups unreadable too.

What stays: the room's ledger (non-content events, for its own window; it still verifies, and
both owners still read it: ``gatekeeper.ledger_access``), and a ``RoomDeletion`` record (room
id, when, by whom, whose seats: no content), also appended to a journal
file outside the database (``SYNAPSIA["DELETION_JOURNAL_PATH"]``), so restoring a database
backup taken before the deletion cannot bring the deletion record back with the content:
``deletions_reapply`` (``python manage.py reapply_deletions``) deletes again everything the
journal names.

Other apps holding room content (shared artifacts, exit notes) register a deleter::

    room_content_deleter_register("exit_notes", "notes", exit_notes_delete_for_room)
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass, fields
from datetime import datetime
from pathlib import Path
from typing import Literal
from uuid import UUID

from django.conf import settings
from django.contrib.auth.models import User
from django.db import connection, transaction
from django.utils import timezone

from gatekeeper.models import SandboxEffect, WebhookDelivery
from gatekeeper.records import ActionRecord, Grant
from ledger.events import ContentDeletionReason, RoomContentDeleted
from ledger.services import ledger_append
from ledger.signing import ledger_sign_head
from rooms import realtime
from rooms.errors import NotFound
from rooms.models import (
    AccountDeletion,
    DeletionReason,
    Flare,
    Message,
    Room,
    RoomDeletion,
    RoomDeletionNotice,
    RoomInvite,
    RoomMember,
    RoomOutcome,
    RoomState,
    SealedOffer,
    Whisper,
)
from rooms.sealing import room_key_destroy
from rooms.selectors import owner_name
from slips.datakeys import data_keys_destroy
from slips.models import RoomTier, Slip, SlipConflict


@dataclass(frozen=True)
class ContentCounts:
    """How many rows of each kind of room content were deleted (never what they said)."""

    messages: int = 0
    whispers: int = 0
    # Fork snapshots: the actions agents asked for (their arguments), the grants asked of the
    # owners about them, and the sandbox's record of executed calls; sealed offers too.
    snapshots: int = 0
    artifacts: int = 0
    notes: int = 0
    # Outcome details, flares, invites, slips, tiers and conflicts, the room row and seats.
    other: int = 0

    @property
    def total(self) -> int:
        return sum(getattr(self, f.name) for f in fields(self))

    def __add__(self, more: ContentCounts) -> ContentCounts:
        return ContentCounts(
            **{f.name: getattr(self, f.name) + getattr(more, f.name) for f in fields(self)}
        )

    def ledger_event(
        self, *, by: str, reason: ContentDeletionReason, window_days: int | None = None
    ) -> RoomContentDeleted:
        return RoomContentDeleted(
            by=by,
            messages_deleted=self.messages,
            artifacts_deleted=self.artifacts,
            whispers_deleted=self.whispers,
            snapshots_deleted=self.snapshots,
            notes_deleted=self.notes,
            reason=reason,
            window_days=window_days,
        )


# Another app's room content: room id in, rows deleted out. The field says which count.
RoomContentDeleter = Callable[[UUID], int]
_DELETERS: dict[str, tuple[Literal["artifacts", "notes", "other"], RoomContentDeleter]] = {}


def room_content_deleter_register(
    key: str, counted_as: Literal["artifacts", "notes", "other"], deleter: RoomContentDeleter
) -> None:
    """Have ``room_content_delete`` (and so every deletion and reapply) delete this content
    too. ``deleter`` runs inside the deleting transaction and must not commit."""
    _DELETERS[key] = (counted_as, deleter)


def _deleted(queryset_delete: tuple[int, dict[str, int]]) -> int:
    return queryset_delete[0]


def transcript_delete(room_id: UUID) -> ContentCounts:
    """Delete a room's transcript: messages, whispers, sealed offers, fork snapshots and the
    webhook deliveries of its tool calls. The
    caller holds the transaction (and, for a live room, its row lock)."""
    snapshots = (
        _deleted(Grant.objects.filter(room_id=room_id).delete())
        + _deleted(ActionRecord.objects.filter(room_id=room_id).delete())
        + _deleted(SandboxEffect.objects.filter(room_id=room_id).delete())
        + _deleted(SealedOffer.objects.filter(room_id=room_id).delete())
        # What the owner's webhook was sent: the tool call's arguments, sealed like them.
        + _deleted(WebhookDelivery.objects.filter(room_id=room_id).delete())
    )
    return ContentCounts(
        messages=_deleted(Message.objects.filter(room_id=room_id).delete()),
        whispers=_deleted(Whisper.objects.filter(room_id=room_id).delete()),
        snapshots=snapshots,
    )


def room_content_delete(room_id: UUID) -> ContentCounts:
    """THE function that deletes everything of a room but its ledger: the transcript, the
    outcome details, flares, invites, both owners' slips, tiers and conflicts for it, every
    registered app's content (artifacts, exit notes), then the room and its seats. Idempotent:
    a room already deleted deletes nothing. Must run inside ``transaction.atomic()``.

    Last, it destroys the room's data key (crypto-shredding): whatever of the room an older
    database backup holds can never be opened again. The key store does not roll back with
    the database, so callers journal the deletion first (``room_delete``); if the commit
    then fails, ``reapply_deletions`` finishes what the owner asked for."""
    counts = transcript_delete(room_id)
    other = (
        _deleted(RoomOutcome.objects.filter(room_id=room_id).delete())
        + _deleted(Flare.objects.filter(room_id=room_id).delete())
        + _deleted(RoomInvite.objects.filter(room_id=room_id).delete())
        + _deleted(SlipConflict.objects.filter(room_id=room_id).delete())
        + _deleted(RoomTier.objects.filter(room_id=room_id).delete())
        + _deleted(Slip.objects.filter(room_id=room_id).delete())
    )
    registered = {"artifacts": 0, "notes": 0, "other": 0}
    for counted_as, deleter in _DELETERS.values():
        registered[counted_as] += deleter(room_id)
    # Seats, the practice room's row and anything else with a foreign key cascade with it.
    other += _deleted(Room.objects.filter(id=room_id).delete())
    room_key_destroy(room_id)
    return counts + ContentCounts(
        artifacts=registered["artifacts"],
        notes=registered["notes"],
        other=other + registered["other"],
    )


# --- the journal: deletion records outside the database -----------------------------------


def _journal_path() -> Path:
    return Path(settings.SYNAPSIA["DELETION_JOURNAL_PATH"])


def _journal_append(entry: dict[str, object]) -> None:
    """Append one line and fsync before the deleting transaction commits: if the commit then
    fails, a reapply deletes what the owner asked to delete anyway; the other order could lose
    the record of a deletion that happened."""
    path = _journal_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    line = json.dumps(entry, sort_keys=True) + "\n"
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, line.encode())
        os.fsync(fd)
    finally:
        os.close(fd)


def _journal_entries() -> list[dict[str, object]]:
    path = _journal_path()
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _sqlite_wal_truncate() -> None:
    """SQLite (embedded default, ``secure_delete`` on): move the WAL's frames into the file
    and truncate the WAL, whose older frames still hold the deleted rows' bytes. A reader
    still open can make it partial; the next checkpoint finishes it."""
    if connection.vendor == "sqlite":
        with connection.cursor() as cursor:
            cursor.execute("PRAGMA wal_checkpoint(TRUNCATE)")


# --- deleting a room, an account -----------------------------------------------------------


@dataclass(frozen=True)
class RoomDeleted:
    room_id: UUID
    purpose: str  # for the deleting owner's confirmation message only (not kept)
    counts: ContentCounts
    told: tuple[int, ...]  # user ids of the other owners told


def room_delete(
    *, owner: User, room_id: UUID, reason: DeletionReason = DeletionReason.OWNER_REQUEST
) -> RoomDeleted:
    """Delete a room for both sides at once, on behalf of one of its owners.

    In one transaction: every content row goes (``room_content_delete``), a ``RoomDeletion``
    record and a journal line are written, the ledger records ``room_content_deleted`` (who,
    counts) and signs its head, and each other owner gets a notice. After commit, sockets in
    the room are told it closed and are disconnected; the seats are gone, so no agent can
    rejoin. Raises ``NotFound`` (changing nothing) unless ``owner`` has a seat in the room.
    """
    with transaction.atomic():
        room = Room.objects.select_for_update().filter(id=room_id, members__owner=owner).first()
        if room is None:
            raise NotFound("No such room.")
        purpose = room.purpose
        seated = [
            m.owner for m in RoomMember.objects.filter(room_id=room_id).select_related("owner")
        ]
        others = [o for o in seated if o.pk != owner.pk]
        # Whose ledger it stays (both owners read and verify it after the deletion).
        owners = [{"user_id": o.pk, "date_joined": o.date_joined.isoformat()} for o in seated]
        now = timezone.now()
        # The journal line first: the content delete destroys the room key, which no rollback
        # brings back, so the deletion is on record before (reapply finishes a failed commit).
        _journal_append(
            {
                "kind": "room",
                "room_id": str(room_id),
                "deleted_at": now.isoformat(),
                "deleted_by_id": owner.pk,
                "reason": str(reason),
                "owners": owners,
            }
        )
        counts = room_content_delete(room_id)
        RoomDeletion.objects.create(
            room_id=room_id, deleted_at=now, deleted_by_id=owner.pk, reason=reason, owners=owners
        )
        ledger_append(
            room_id=room_id,
            event=counts.ledger_event(
                by=str(owner.pk),
                reason="account_deleted"
                if reason == DeletionReason.ACCOUNT_DELETED
                else "owner_request",
            ),
        )
        # Both owners' browsers compare later histories against a signed head (as on close).
        ledger_sign_head(room_id=room_id)
        for other in others:
            RoomDeletionNotice.objects.create(
                recipient=other,
                room_id=room_id,
                room_purpose=purpose,
                deleted_by_name=owner_name(owner),
                account_deleted=reason == DeletionReason.ACCOUNT_DELETED,
                created_at=now,
            )
        # After commit: every socket in the room hears "closed" and is closed by its consumer.
        realtime.announce_room_state(room_id, RoomState.CLOSED)
        transaction.on_commit(_sqlite_wal_truncate)
    return RoomDeleted(
        room_id=room_id, purpose=purpose, counts=counts, told=tuple(o.pk for o in others)
    )


@dataclass(frozen=True)
class AccountDeleted:
    user_id: int
    rooms: tuple[RoomDeleted, ...]


def _owner_leftovers_delete(owner: User) -> None:
    """What protects the user row from deletion outside their rooms: slips and grants that
    name their device keys (rooms already deleted took theirs)."""
    Grant.objects.filter(owner=owner).delete()
    Slip.objects.filter(owner=owner).delete()
    for room_id in Room.objects.filter(created_by=owner).values_list("id", flat=True):
        room_content_delete(room_id)


def account_delete(*, owner: User) -> AccountDeleted:
    """Delete an owner's account: each of their rooms for both sides (each other owner is
    told, each room's ledger records it), then the account and everything it owns (agents,
    keys, vault, webhooks, preferences). The caller checked the password."""
    with transaction.atomic():
        room_ids = list(RoomMember.objects.filter(owner=owner).values_list("room_id", flat=True))
        deleted = tuple(
            room_delete(owner=owner, room_id=room_id, reason=DeletionReason.ACCOUNT_DELETED)
            for room_id in room_ids
        )
        _owner_leftovers_delete(owner)
        now = timezone.now()
        user_id = int(owner.pk)
        AccountDeletion.objects.create(user_id=user_id, deleted_at=now)
        _journal_append(
            {
                "kind": "account",
                "user_id": user_id,
                # With the id, it names this account only: an id alone could be another
                # database's user (a test database, a fresh install reading an old journal).
                "date_joined": owner.date_joined.isoformat(),
                "deleted_at": now.isoformat(),
            }
        )
        owner.delete()
    return AccountDeleted(user_id=user_id, rooms=deleted)


# --- after a restore -----------------------------------------------------------------------


@dataclass(frozen=True)
class Reapplied:
    rooms_checked: int
    rooms_with_content: int  # rooms a restore had brought back, deleted again
    rows_deleted: int
    accounts_deleted: int


def _journalled_owners(entry: dict[str, object]) -> list[object]:
    owners = entry.get("owners")  # not in journal lines written before owners were kept
    return list(owners) if isinstance(owners, list) else []


def deletions_reapply() -> Reapplied:
    """Re-apply every recorded deletion (journal and table), e.g. after restoring a database
    backup: restore missing deletion records, delete again any room content and any account
    the restore brought back, and record each re-applied room deletion in its ledger."""
    rooms: dict[UUID, dict[str, object]] = {}
    accounts: dict[int, dict[str, object]] = {}
    for entry in _journal_entries():
        if entry.get("kind") == "room":
            rooms[UUID(str(entry["room_id"]))] = entry
        elif entry.get("kind") == "account":
            accounts[int(str(entry["user_id"]))] = entry
    for record in RoomDeletion.objects.all():
        rooms.setdefault(
            record.room_id,
            {
                "deleted_at": record.deleted_at.isoformat(),
                "deleted_by_id": record.deleted_by_id,
                "reason": record.reason,
                "owners": record.owners,
            },
        )
    for account in AccountDeletion.objects.all():
        accounts.setdefault(account.user_id, {"deleted_at": account.deleted_at.isoformat()})

    with_content = rows = 0
    for room_id, entry in rooms.items():
        with transaction.atomic():
            RoomDeletion.objects.get_or_create(
                room_id=room_id,
                defaults={
                    "deleted_at": datetime.fromisoformat(str(entry["deleted_at"])),
                    "deleted_by_id": int(str(entry["deleted_by_id"])),
                    "reason": str(entry["reason"]),
                    "owners": _journalled_owners(entry),
                },
            )
            counts = room_content_delete(room_id)
            if counts.total:
                with_content += 1
                rows += counts.total
                ledger_append(
                    room_id=room_id,
                    event=counts.ledger_event(by=str(entry["deleted_by_id"]), reason="reapplied"),
                )
                realtime.announce_room_state(room_id, RoomState.CLOSED)
                transaction.on_commit(_sqlite_wal_truncate)
    accounts_deleted = 0
    for user_id, entry in accounts.items():
        if entry.get("date_joined") is not None:
            # A restored key store brings the account's data key back: destroy it again.
            data_keys_destroy(kind="owner", subject=str(user_id), since=str(entry["date_joined"]))
        with transaction.atomic():
            user = User.objects.filter(pk=user_id).first()
            if user is None:
                continue
            joined = entry.get("date_joined")
            if joined is not None and datetime.fromisoformat(str(joined)) != user.date_joined:
                # The same id, another account (a restore rewinds the id sequence, so a later
                # signup can get it): not the one deleted. No record is made for it either.
                continue
            AccountDeletion.objects.get_or_create(
                user_id=user_id,
                defaults={"deleted_at": datetime.fromisoformat(str(entry["deleted_at"]))},
            )
            # Its rooms are in the journal too (deleted above); any it gained otherwise go now.
            for room_id in RoomMember.objects.filter(owner=user).values_list("room_id", flat=True):
                rows += room_content_delete(room_id).total
            _owner_leftovers_delete(user)
            user.delete()
            accounts_deleted += 1
    return Reapplied(
        rooms_checked=len(rooms),
        rooms_with_content=with_content,
        rows_deleted=rows,
        accounts_deleted=accounts_deleted,
    )
