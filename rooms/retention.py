"""The retention schedule: one row per data class, how long it is kept, and what purges it.

This is the single home of the schedule (boundary spec, "Data"): every room page and the
owner's settings page show it from here, and ``purge_expired`` (the command and the Celery
beat task ``rooms.purge_expired``) runs every registered purge from here. Each row's days come
from one ``SYNAPSIA`` setting (env ``SYNAPSIA_<...>_RETENTION_DAYS``), so what is shown is what
is applied.

Other apps own their data classes and register the purge for their row, from their
``AppConfig.ready``::

    from rooms.retention import retention_purge_register
    retention_purge_register("exit_notes", exit_notes_purge_expired)

A purge takes ``now`` (tests pass a controllable clock), deletes what is past its window and
returns a ``Purged`` with counts. Every purge that deletes room content records it in that
room's ledger as a ``room_content_deleted`` event with counts and ``reason="retention"``,
never content (the ledger's own purge records ``retention_purge``).

A closed room that is never deleted keeps only its stub: the room row (state, times, terms,
a purpose that says it was purged), its seats, its outcome's kind and reason codes, and its
ledger for the ledger's own window. Everything else goes on the schedule: its transcript,
purpose, charter and outcome plan 30 days after it closed (``transcript_purge_expired``), its
slips, tiers, conflicts, flares and invitations 90 days after each last changed
(``permission_records_purge_expired``, with the ledger's events).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from uuid import UUID

from django.conf import settings
from django.db import transaction
from django.db.models import Exists, OuterRef, Q, QuerySet
from django.utils import timezone

from gatekeeper.models import SandboxEffect, WebhookDelivery
from gatekeeper.records import ActionRecord, Grant
from ledger.retention import ledger_purge_expired
from ledger.services import ledger_append
from rooms.deletion import ContentCounts, transcript_delete
from rooms.models import (
    Flare,
    Message,
    Room,
    RoomDeletionNotice,
    RoomInvite,
    RoomOutcome,
    RoomState,
    SealedOffer,
    Whisper,
)
from slips.retention import slip_records_delete_expired, slip_records_expired_exist

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Purged:
    """What one row's purge deleted: counts only, and the line the command prints."""

    key: str
    rows: int
    rooms: int
    summary: str


# A row's purge: ``now`` in, counts out. It must be idempotent (a second run finds nothing).
PurgeFunction = Callable[[datetime], Purged]


@dataclass(frozen=True)
class RetentionRow:
    key: str  # "transcript"
    label: str  # what the owner reads: "Room transcript (messages, whispers, fork snapshots)"
    setting: str  # the SYNAPSIA key holding the days
    default_days: int  # the spec's default (the setting's default), shown as "the default"
    starts: str  # when the clock starts, in words: "after the room closes"
    note: str  # one sentence more, shown on the settings page
    # None: nothing of this class is stored by this server yet (or, telemetry, it is kept by
    # the log system outside the database); the row is still shown.
    purge: PurgeFunction | None = None
    # Shown on every room page (every spec data class is; a notice about a deleted room not).
    in_rooms: bool = True

    @property
    def days(self) -> int:
        return int(settings.SYNAPSIA[self.setting])

    def cutoff(self, now: datetime) -> datetime:
        return now - timedelta(days=self.days)

    @property
    def period(self) -> str:
        """ "90 days", "1 day" """
        return f"{self.days} day{'' if self.days == 1 else 's'}"

    def words(self) -> str:
        """ "Shared artifacts kept 90 days" """
        return f"{self.label} kept {self.period} {self.starts}".rstrip()


# --- the rooms app's own purges -------------------------------------------------------------

# Rooms read per query: a purge reads the ids of one batch, purges each room in its own
# transaction, then reads the next batch, until nothing past its window is left. Rooms a
# purge has finished with drop out of its query (marked, or their rows gone), so a run's work
# follows what expired since the last run, not every room there ever was.
PURGE_BATCH = 500


def _room_batches(expired: QuerySet[Room]) -> Iterator[list[UUID]]:
    """The ids of ``expired`` in batches of ``PURGE_BATCH``, in id order. Each batch starts
    after the last id of the one before, so a room the purge had to leave (its lock check
    failed) is not read again in the same run and every run ends."""
    after: UUID | None = None
    while True:
        page = expired if after is None else expired.filter(id__gt=after)
        ids = list(page.order_by("id").values_list("id", flat=True)[:PURGE_BATCH])
        if ids:
            yield ids
        if len(ids) < PURGE_BATCH:
            return
        after = ids[-1]


def _transcript_left(room_id_ref: OuterRef) -> Q:
    """Rooms that still hold any transcript row (messages, whispers, sealed offers, fork
    snapshots: action records with their arguments, grants, sandbox effects, webhook
    deliveries)."""
    return (
        Q(Exists(Message.objects.filter(room_id=room_id_ref)))
        | Q(Exists(Whisper.objects.filter(room_id=room_id_ref)))
        | Q(Exists(SealedOffer.objects.filter(room_id=room_id_ref)))
        | Q(Exists(ActionRecord.objects.filter(room_id=room_id_ref)))
        | Q(Exists(Grant.objects.filter(room_id=room_id_ref)))
        | Q(Exists(SandboxEffect.objects.filter(room_id=room_id_ref)))
        | Q(Exists(WebhookDelivery.objects.filter(room_id=room_id_ref)))
    )


def purged_purpose(days: int) -> str:
    """What a closed room is called once its own words are purged: its pages, its ledger
    page, the dashboard and the API show this in place of the purpose the owners wrote."""
    return f"A closed room (purged after {days} days)"


@dataclass(frozen=True)
class _RoomPurged:
    rows: int  # transcript rows deleted
    words: bool  # the room's purpose, charter and outcome plan purged (once per room)


def transcript_purge_expired(now: datetime) -> Purged:
    """Purge the content of every room closed more than the window ago, one transaction per
    room: the transcript (recorded in the room's ledger with counts), and the rest of the
    room's content, once: its purpose (replaced by ``purged_purpose``), its charter and its
    outcome's plan (venue, time, price; the outcome's kind and reason codes stay, as in the
    ledger). Open, paused and draft rooms never purge: their clock has not started. The room
    itself, its seats, its outcome's kind and its ledger stay."""
    row = retention_row("transcript")
    cutoff = row.cutoff(now)
    expired = Room.objects.filter(state=RoomState.CLOSED, state_changed_at__lt=cutoff).filter(
        Q(content_purged_at__isnull=True) | _transcript_left(OuterRef("id"))
    )
    rows = purged_rooms = worded = 0
    for batch in _room_batches(expired):
        for room_id in batch:
            done = _room_transcript_purge(room_id=room_id, cutoff=cutoff, days=row.days, now=now)
            rows += done.rows
            purged_rooms += bool(done.rows or done.words)
            worded += done.words
    return Purged(
        key=row.key,
        rows=rows,
        rooms=purged_rooms,
        summary=(
            f"transcript: deleted {rows} record(s) from {purged_rooms} room(s) closed more "
            f"than {row.period} ago; purged the purpose, charter and outcome plan of "
            f"{worded} room(s)"
        ),
    )


def _room_transcript_purge(
    *, room_id: UUID, cutoff: datetime, days: int, now: datetime
) -> _RoomPurged:
    with transaction.atomic():
        # Re-read under the lock: a room re-checked here cannot have been reopened meanwhile
        # (closing is final, but the check costs nothing and keeps the rule local).
        room = Room.objects.select_for_update().filter(id=room_id).first()
        if room is None or room.state != RoomState.CLOSED or room.state_changed_at >= cutoff:
            return _RoomPurged(rows=0, words=False)
        counts = transcript_delete(room_id)
        words = room.content_purged_at is None
        if words:
            _room_words_purge(room, days=days, now=now)
        if counts.total:
            ledger_append(
                room_id=room_id,
                event=counts.ledger_event(by="retention", reason="retention", window_days=days),
            )
        return _RoomPurged(rows=counts.total, words=words)


def _room_words_purge(room: Room, *, days: int, now: datetime) -> None:
    """The room's own words and its outcome's plan: room content, on the transcript's clock.
    The purpose is replaced (every page names a room by it), never opened; the replacement is
    sealed like any purpose. The caller holds the room's row lock."""
    room.purpose = purged_purpose(days)
    room.charter = ""
    room.content_purged_at = now
    room.save(update_fields=["purpose", "charter", "content_purged_at"])
    # A null plan is what a cleared one is: no plaintext value is written (nor could be).
    RoomOutcome.objects.filter(room_id=room.id, plan__isnull=False).update(plan=None)


def _flares_expired(cutoff: datetime) -> Q:
    return Q(raised_at__lt=cutoff) & (Q(resolved_at__isnull=True) | Q(resolved_at__lt=cutoff))


def _invites_expired(cutoff: datetime) -> Q:
    return Q(created_at__lt=cutoff) & (Q(used_at__isnull=True) | Q(used_at__lt=cutoff))


def _room_records_expired(room_id_ref: OuterRef, cutoff: datetime) -> Q:
    """Rooms holding a permission record whose last event is older than ``cutoff``."""
    return (
        slip_records_expired_exist(room_id_ref, cutoff)
        | Q(Exists(Flare.objects.filter(_flares_expired(cutoff), room_id=room_id_ref)))
        | Q(Exists(RoomInvite.objects.filter(_invites_expired(cutoff), room_id=room_id_ref)))
    )


@dataclass(frozen=True)
class RecordsPurged:
    rows: int
    rooms: int


def permission_records_purge_expired(now: datetime) -> RecordsPurged:
    """The permission records of closed rooms, on the ledger's clock ("Permission and ledger
    events", each kept the window after it happened): slips with their capability records,
    tiers and conflicts (``slips.retention``), Signal Flares (reason codes and choices: what
    the ledger's ``flare_raised`` holds too) and invitations, each once its last event is older
    than the window. One transaction per room. Only closed rooms: in a live room a slip in
    force, a tier or an open flare still governs what its agents may do.

    No content is involved, so no ``room_content_deleted`` event is written (it counts content
    only; its words would say nothing was deleted); the ledger's own purge records
    ``retention_purge`` on the same clock, and the command prints the counts."""
    days = retention_row("ledger").days
    cutoff = now - timedelta(days=days)
    expired = Room.objects.filter(state=RoomState.CLOSED).filter(
        _room_records_expired(OuterRef("id"), cutoff)
    )
    rows = purged_rooms = 0
    for batch in _room_batches(expired):
        for room_id in batch:
            deleted = _room_records_purge(room_id=room_id, cutoff=cutoff)
            rows += deleted
            purged_rooms += bool(deleted)
    return RecordsPurged(rows=rows, rooms=purged_rooms)


def _room_records_purge(*, room_id: UUID, cutoff: datetime) -> int:
    with transaction.atomic():
        room = Room.objects.select_for_update().filter(id=room_id).first()
        if room is None or room.state != RoomState.CLOSED:
            return 0
        slips = slip_records_delete_expired(room_id=room_id, cutoff=cutoff)
        flares, _ = Flare.objects.filter(_flares_expired(cutoff), room_id=room_id).delete()
        invites, _ = RoomInvite.objects.filter(_invites_expired(cutoff), room_id=room_id).delete()
        return slips.total + flares + invites


def deletion_notices_purge_expired(now: datetime) -> Purged:
    """Notices that a partner deleted a room, past their window. A notice belongs to a room
    that no longer exists, so no room's ledger records this purge; the command prints it."""
    row = retention_row("deletion_notices")
    deleted, _ = RoomDeletionNotice.objects.filter(created_at__lt=row.cutoff(now)).delete()
    return Purged(
        key=row.key,
        rows=deleted,
        rooms=0,
        summary=f"deletion notices: deleted {deleted} older than {row.period}",
    )


def ledger_rows_purge_expired(now: datetime) -> Purged:
    """The "Permission and ledger events" row: the ledger's events (a checkpoint keeps the
    chain verifying) and the permission records of closed rooms, on the same clock."""
    report = ledger_purge_expired(now=now)
    records = permission_records_purge_expired(now)
    days = settings.SYNAPSIA["LEDGER_RETENTION_DAYS"]
    return Purged(
        key="ledger",
        rows=report.events_purged + records.rows,
        rooms=len(report.rooms) + records.rooms,
        summary=(
            f"ledger: purged {report.events_purged} event(s) older than {days} days from "
            f"{len(report.rooms)} room(s); permission records (slips, tiers, conflicts, "
            f"flares, invitations): deleted {records.rows} older than {days} days from "
            f"{records.rooms} closed room(s)"
        ),
    )


# --- the schedule ---------------------------------------------------------------------------

# Display order is the spec's table order. Rows without a purge are other apps' to register.
_SCHEDULE: dict[str, RetentionRow] = {
    row.key: row
    for row in (
        RetentionRow(
            key="transcript",
            label="Room transcript (messages, whispers, fork snapshots)",
            setting="TRANSCRIPT_RETENTION_DAYS",
            default_days=30,
            starts="after the room closes",
            note=(
                "The room's purpose, charter and the details of its plan go with it. Either "
                "owner can delete the whole room for both sides at any time."
            ),
            purge=transcript_purge_expired,
        ),
        RetentionRow(
            key="artifacts",
            label="Shared artifacts",
            setting="ARTIFACT_RETENTION_DAYS",
            default_days=90,
            starts="",
            note="Itineraries, drafts and code the agents publish in the room.",
        ),
        RetentionRow(
            key="ledger",
            label="Permission and ledger events",
            setting="LEDGER_RETENTION_DAYS",
            default_days=90,
            starts="each",
            note=(
                "The accountability record outlives the conversation on purpose; it holds "
                "no content and still verifies after a purge. A closed room's slips, tiers, "
                "conflicts, flares and invitations are kept on the same clock."
            ),
            purge=ledger_rows_purge_expired,
        ),
        RetentionRow(
            key="exit_notes",
            label="Exit notes",
            setting="EXIT_NOTE_RETENTION_DAYS",
            default_days=30,
            starts="",
            note="The operator sees them only in aggregate; each agent's owner sees its note.",
        ),
        RetentionRow(
            key="telemetry",
            label="Telemetry (logs)",
            setting="TELEMETRY_RETENTION_DAYS",
            default_days=30,
            starts="",
            note="Operational only: private room content is never written to logs.",
        ),
        RetentionRow(
            key="abuse_evidence",
            label="Abuse evidence",
            setting="ABUSE_EVIDENCE_RETENTION_DAYS",
            default_days=180,
            starts="after the report is resolved",
            note="Held only where a room was reported, for the safety of other rooms.",
        ),
        RetentionRow(
            key="deletion_notices",
            label="Notice that the other owner deleted a room",
            setting="DELETION_NOTICE_RETENTION_DAYS",
            default_days=30,
            starts="",
            note="Keeps the room's name only, until you dismiss it.",
            purge=deletion_notices_purge_expired,
            in_rooms=False,
        ),
    )
}


class UnknownRetentionRow(KeyError):
    """A key that is not in the schedule (register the row first)."""


def rooms_purge_expired(
    row: RetentionRow,
    *,
    room_ids: list[UUID],
    delete: Callable[[UUID], int],
    counted_as: str,
    what: str,
) -> Purged:
    """A registered app's purge, room by room: ``delete(room_id)`` removes that room's expired
    rows in its own transaction, recorded in the room's ledger as ``room_content_deleted``
    with the count (``ContentCounts(<counted_as>=n)``, never content)."""
    rows = 0
    for room_id in room_ids:
        with transaction.atomic():
            deleted = delete(room_id)
            if deleted:
                ledger_append(
                    room_id=room_id,
                    event=ContentCounts(**{counted_as: deleted}).ledger_event(
                        by="retention", reason="retention", window_days=row.days
                    ),
                )
                rows += deleted
    return Purged(
        key=row.key,
        rows=rows,
        rooms=len(room_ids),
        summary=f"{what}: deleted {rows} older than {row.period} from {len(room_ids)} room(s)",
    )


def retention_schedule() -> tuple[RetentionRow, ...]:
    return tuple(_SCHEDULE.values())


def retention_row(key: str) -> RetentionRow:
    try:
        return _SCHEDULE[key]
    except KeyError:
        raise UnknownRetentionRow(key) from None


def retention_register(row: RetentionRow) -> None:
    """Add a data class to the schedule (or replace the row with the same key)."""
    _SCHEDULE[row.key] = row


def retention_purge_register(key: str, purge: PurgeFunction) -> None:
    """Attach the purge of an existing row (exit notes, artifacts, abuse evidence)."""
    _SCHEDULE[key] = replace(retention_row(key), purge=purge)


class RetentionPurgeFailed(Exception):
    """One or more rows' purges raised; the others ran (each row is its own transactions)."""

    def __init__(self, keys: list[str], done: list[Purged]) -> None:
        super().__init__(f"retention purge failed for: {', '.join(keys)}")
        self.keys = keys
        self.done = done


def retention_purge_all(*, now: datetime | None = None) -> list[Purged]:
    """Run every registered purge once, in schedule order. A row that fails is logged and the
    rest still run; then ``RetentionPurgeFailed`` names the failed rows."""
    moment = now or timezone.now()
    done: list[Purged] = []
    failed: list[str] = []
    for row in retention_schedule():
        if row.purge is None:
            continue
        try:
            done.append(row.purge(moment))
        except Exception:
            logger.exception("retention purge of %s failed", row.key)
            failed.append(row.key)
    if failed:
        raise RetentionPurgeFailed(failed, done)
    return done
