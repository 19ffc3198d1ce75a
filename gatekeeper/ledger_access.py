"""Who may read and verify a room's ledger, including a deleted room's. The rule, in one place.

A room's ledger is its owners': whoever holds one of its two seats reads, downloads, checks
and witnesses it (``rooms.ledger_api``), in any state of the room. When the room is deleted
for both sides its seats go with its content, but its ledger stays (non-content events only,
issue 14), and so does the deletion record naming whose seats they were
(``RoomDeletion.owners``: each account by id and the moment it joined). Both former owners
keep reading it; nobody else ever does: a stranger, staff, a superuser, and a later account
that got a former owner's id (after a restore, say) get the same "no such room" as for a room
that never existed, so a refusal says nothing of whether the room was there.

For how long: as long as the deletion record stands, which is for good (it outlives the
content on purpose, and ``rooms.deletion.deletions_reapply`` brings it back after a restore).
There is no separate window for access: what there is to read shrinks as each event's own
retention window ends (the purge leaves a checkpoint, so the rest still verifies).

The rule is pure: the caller reads the seat and the deletion record for this request and
passes them in; nothing is cached, each request reads again.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from datetime import datetime

from django.contrib.auth.models import User

from slips.models import DeviceKey, KeyCustody


class LedgerAccess(enum.Enum):
    """Why a reader may read a room's ledger, or that they may not."""

    SEATED = "seated"  # holds a seat in the room now
    FORMER_OWNER = "former_owner"  # held a seat in the room before it was deleted
    REFUSED = "refused"  # anyone else: answered as for a room that never existed


def is_same_account(seat: object, reader: User) -> bool:
    """Whether ``seat`` (one entry of a deletion record's ``owners``) names ``reader``'s
    account: the same id *and* the same moment it joined, so an id handed to a later account
    names nobody. An entry that cannot be read names nobody (fail closed)."""
    if reader.pk is None or not isinstance(seat, dict) or seat.get("user_id") != reader.pk:
        return False
    try:
        return datetime.fromisoformat(str(seat.get("date_joined"))) == reader.date_joined
    except ValueError:
        return False


def ledger_access(
    *, reader: User, holds_seat: bool, deleted_owners: Iterable[object] | None
) -> LedgerAccess:
    """May ``reader`` read (and verify, download, witness) the room's ledger?

    ``holds_seat``: the reader holds a seat in the room as read now. ``deleted_owners``: the
    room's deletion record's ``owners`` if the room was deleted, else None. Staff and
    superusers are not asked about: being either opens no one else's ledger."""
    if holds_seat:
        return LedgerAccess.SEATED
    if deleted_owners is not None and any(is_same_account(s, reader) for s in deleted_owners):
        return LedgerAccess.FORMER_OWNER
    return LedgerAccess.REFUSED


def witness_key_usable(*, key: DeviceKey | None, reader: User) -> bool:
    """May ``key`` countersign a signed head of a ledger ``reader`` may read (a witness)?

    Only a key of the reader's own that is registered, not revoked, not rotated away and held
    by their device: the point of a witness is a signature the server's database cannot make,
    so a practice key the server holds never witnesses. ``key`` None (no such key) is no."""
    return (
        key is not None
        and reader.pk is not None
        and key.owner_id == reader.pk
        and key.revoked_at is None
        and key.retired_at is None
        and key.custody == KeyCustody.DEVICE
    )
