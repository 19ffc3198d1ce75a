"""The one way to write the ledger: ``ledger_append``.

Call it **inside the caller's** ``transaction.atomic()`` block, before the effect it records,
so the event and the effect commit together or not at all (invariant 3: a decision that
cannot be recorded is a denial). It raises ``LedgerAppendError`` on any failure; callers treat
that as a deny, and the exception unwinding their atomic block rolls back the effect::

    with transaction.atomic():
        ledger_append(room_id=room.id, event=Disclosure(...))
        ...  # the disclosure itself
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

import rfc8785
from django.conf import settings
from django.db import DatabaseError, transaction
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import Field
from django.utils import timezone
from pydantic import BaseModel

from ledger.chain import (
    GENESIS_HASH,
    MAX_CANONICAL_BYTES,
    REQUIRES_HEAD,
    CanonicalData,
    envelope_bytes,
    envelopes_for,
    occurred_at_text,
)
from ledger.events import LedgerEventRecord
from ledger.metrics import LEDGER_APPEND_SECONDS
from ledger.models import LedgerEvent, LedgerHead

logger = logging.getLogger(__name__)


class LedgerError(Exception):
    """Base of the ledger's errors."""


class LedgerAppendError(LedgerError):
    """The event was not recorded. Deny the operation it guarded (and let the atomic block
    roll back whatever else it did)."""


@dataclass(frozen=True)
class AppendedEvent:
    room_id: UUID
    seq: int
    kind: str
    occurred_at: datetime
    prev_hash: str
    hash: str


def ledger_append(
    *, room_id: UUID, event: LedgerEventRecord, occurred_at: datetime | None = None
) -> AppendedEvent:
    """Append ``event`` to ``room_id``'s chain; must run inside ``transaction.atomic()``.

    Three queries in the usual case: lock the room's head row (``SELECT … FOR UPDATE`` on
    PostgreSQL; SQLite's IMMEDIATE transactions already serialise writers), insert the event,
    move the head. The first event of a room also creates the head row. Raises
    ``LedgerAppendError`` (nothing recorded) when not in an atomic block, when the record is
    not a ledger event, or when the database refuses; it then marks the caller's atomic
    block for rollback, so the guarded effect cannot commit even if the error is caught.

    ``occurred_at`` is for the retention purge only: a purge run "as of" a given moment is
    recorded at that moment, since verification judges the purge by its own time.
    """
    if not transaction.get_connection().in_atomic_block:
        raise LedgerAppendError(
            "ledger_append must run inside the caller's transaction.atomic() block, so the "
            "event and the effect it records commit together."
        )
    if not isinstance(event, BaseModel) or "kind" not in type(event).model_fields:
        raise LedgerAppendError(f"not a ledger event record: {type(event).__name__}")
    kind: str = event.kind
    data = event.model_dump(mode="json", exclude={"kind"})
    started = time.perf_counter()
    try:
        head = ledger_head_locked(room_id)
        seq = head.seq + 1
        occurred_at = occurred_at or timezone.now()
        # Canonicalised once, here: the bytes are stored and hashed, never recomputed.
        data_canonical = rfc8785.dumps(data)
        canonical = envelope_bytes(
            data_canonical=data_canonical,
            room_id=str(room_id),
            seq=seq,
            kind=kind,
            occurred_at=occurred_at_text(occurred_at),
            prev_hash=head.hash,
        )
        if len(canonical) > MAX_CANONICAL_BYTES:
            raise LedgerAppendError(f"{kind} event is {len(canonical)} bytes; metadata only")
        digest = hashlib.sha256(canonical).hexdigest()
        LedgerEvent.objects.create(
            room_id=room_id,
            seq=seq,
            kind=kind,
            occurred_at=occurred_at,
            data=CanonicalData(data, data_canonical.decode()),
            prev_hash=head.hash,
            hash=digest,
            canonical=canonical,
        )
        LedgerHead.objects.filter(room_id=room_id).update(seq=seq, hash=digest)
        _sign_appended(room_id, [AppendedEvent(room_id, seq, kind, occurred_at, head.hash, digest)])
    except (LedgerAppendError, DatabaseError, rfc8785.CanonicalizationError, ValueError) as exc:
        # Fail closed: the caller's atomic block rolls back even if it catches this error,
        # so the effect this event guarded cannot commit without its record.
        transaction.set_rollback(True)
        if isinstance(exc, LedgerAppendError):
            raise
        raise LedgerAppendError(f"ledger append failed: {exc}") from exc
    # Successful appends only: a failed one is a denial, counted by its caller.
    LEDGER_APPEND_SECONDS.labels(path="one").observe(time.perf_counter() - started)
    return AppendedEvent(
        room_id=room_id,
        seq=seq,
        kind=kind,
        occurred_at=occurred_at,
        prev_hash=head.hash,
        hash=digest,
    )


def ledger_head_locked(room_id: UUID) -> LedgerHead:
    """The room's head row, locked until the transaction ends; created on first use.
    Only inside ``transaction.atomic()`` (the ledger's own writers use it)."""
    head = LedgerHead.objects.select_for_update().filter(room_id=room_id).first()
    if head is None:
        # Two first appends may race: ignore_conflicts makes the loser reuse the winner's row,
        # and the lock below then serialises them.
        LedgerHead.objects.bulk_create(
            [LedgerHead(room_id=room_id, seq=0, hash=GENESIS_HASH)], ignore_conflicts=True
        )
        head = LedgerHead.objects.select_for_update().get(room_id=room_id)
    return head


def ledger_append_many(
    *,
    room_id: UUID,
    events: Sequence[LedgerEventRecord],
    head_seen: tuple[int, str] | None = None,
) -> list[AppendedEvent]:
    """Append ``events`` to ``room_id``'s chain in order, as ``ledger_append`` would one by
    one (same bytes, same hashes, same rules), but in three statements whatever their number
    (more only past the backend's parameter limit: SQLite's 999 take 124 events a statement):
    lock the head, insert them all, move the head. The insert and the head's move are written
    SQL, not compiled by the ORM per call. Inside ``transaction.atomic()`` only; any
    failure raises ``LedgerAppendError``, records none of them and marks the caller's block
    for rollback. Context assembly records a turn's disclosures with it.

    ``head_seen``: the head (seq, hash) the caller read earlier in its transaction. Then two
    statements: the head moves only if it is still exactly that (a compare-and-set that also
    locks it), then the insert; if it moved meanwhile, the usual three, from the locked head."""
    if not events:
        return []
    if not transaction.get_connection().in_atomic_block:
        raise LedgerAppendError(
            "ledger_append_many must run inside the caller's transaction.atomic() block, so "
            "the events and the effects they record commit together."
        )
    started = time.perf_counter()
    connection = transaction.get_connection()
    try:
        if head_seen is not None:
            rows, appended = _chained(room_id, events, head_seen)
            if _head_moved_from(connection, room_id, head_seen, appended[-1]):
                _events_insert(connection, rows)
                _sign_appended(room_id, appended)
                LEDGER_APPEND_SECONDS.labels(path="batch").observe(time.perf_counter() - started)
                return appended
        head = ledger_head_locked(room_id)
        rows, appended = _chained(room_id, events, (head.seq, head.hash))
        _events_insert(connection, rows)
        _head_moved_from(connection, room_id, None, appended[-1])
        _sign_appended(room_id, appended)
    except (LedgerAppendError, DatabaseError, rfc8785.CanonicalizationError, ValueError) as exc:
        transaction.set_rollback(True)
        if isinstance(exc, LedgerAppendError):
            raise
        raise LedgerAppendError(f"ledger append failed: {exc}") from exc
    LEDGER_APPEND_SECONDS.labels(path="batch").observe(time.perf_counter() - started)
    return appended


# The batch path's statements are written once, not compiled by the ORM on every turn (issue
# 17: the ORM's bulk_create and queryset update were a third of a context request's CPU).
# Values still go through each field's own ``get_db_prep_save``, so the rows are exactly what
# the ORM would write on either backend (tests/ledger/test_append_raw.py compares columns).
_EVENT_FIELDS = tuple(f for f in LedgerEvent._meta.concrete_fields if not f.primary_key)
_HEAD_ROOM = LedgerHead._meta.get_field("room_id")
_HEAD_SEQ = LedgerHead._meta.get_field("seq")
_HEAD_HASH = LedgerHead._meta.get_field("hash")
_INSERT_SQL: dict[tuple[str, tuple[int, ...]], str] = {}
_HEAD_SQL: dict[tuple[str, bool], str] = {}


def _column(field: Field[Any, Any]) -> str:
    # Concrete fields always have a column; Django types it optional for the others.
    if field.column is None:
        raise LedgerAppendError(f"ledger field {field.name} has no column")
    return field.column


def _head_moved_from(
    connection: BaseDatabaseWrapper,
    room_id: UUID,
    seen: tuple[int, str] | None,
    tip: AppendedEvent,
) -> bool:
    """Move the room's head to ``tip``. With ``seen``, a compare-and-set: only if the head is
    still exactly ``seen`` (the UPDATE also locks it); without, the caller holds the lock."""
    key = (connection.vendor, seen is not None)
    sql = _HEAD_SQL.get(key)
    if sql is None:
        q = connection.ops.quote_name
        sql = (
            # Names from the model's own meta, quoted; every value is a parameter.
            f"UPDATE {q(LedgerHead._meta.db_table)} SET {q(_column(_HEAD_SEQ))} = %s, "  # noqa: S608
            f"{q(_column(_HEAD_HASH))} = %s WHERE {q(_column(_HEAD_ROOM))} = %s"
        )
        if seen is not None:
            sql += f" AND {q(_column(_HEAD_SEQ))} = %s AND {q(_column(_HEAD_HASH))} = %s"
        _HEAD_SQL[key] = sql
    params = [
        _HEAD_SEQ.get_db_prep_save(tip.seq, connection),
        _HEAD_HASH.get_db_prep_save(tip.hash, connection),
        _HEAD_ROOM.get_db_prep_save(room_id, connection),
    ]
    if seen is not None:
        params += [
            _HEAD_SEQ.get_db_prep_save(seen[0], connection),
            _HEAD_HASH.get_db_prep_save(seen[1], connection),
        ]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.rowcount == 1


def _events_insert(connection: BaseDatabaseWrapper, rows: Sequence[dict[str, object]]) -> None:
    """Insert ``rows`` (column values by field name) in one multi-row INSERT, or in as few
    as the backend's parameter limit allows (the ORM's own ``bulk_batch_size``). No signals,
    as ``bulk_create`` sent none."""
    batch = max(1, connection.ops.bulk_batch_size(list(_EVENT_FIELDS), rows))
    with connection.cursor() as cursor:
        for start in range(0, len(rows), batch):
            sql, params = _insert_statement(connection, rows[start : start + batch])
            cursor.execute(sql, params)


_UNSET = object()
_SHARED_BY_VALUE = frozenset({str, int, bytes, UUID})
# Statements by the shape of their parameters (see ``_insert_statement``); a turn's batches
# come in a few shapes, and past this many the oldest are written again when next met.
_INSERT_SHAPES = 256


def _insert_statement(
    connection: BaseDatabaseWrapper, rows: Sequence[dict[str, object]]
) -> tuple[str, dict[str, Any]]:
    """The INSERT of ``rows`` and its parameters, named: each row's values through their
    field's ``get_db_prep_save``, and each distinct prepared value one parameter however many
    places carry it (the batch's room and moment, its kinds, and each row's ``prev_hash``,
    the ``hash`` of the row before). The statement is the same bytes per shape; what the
    database stores is what positional parameters stored (tests/ledger/test_append_raw.py).
    Fewer parameters are fewer values for the driver to adapt: PostgreSQL's client-side
    binding quotes each in Python, and parses a statement of more than 50 afresh on every
    execute, which made the turn's insert a fifth of a context request there; Django's
    SQLite cursor rewrites a positional statement's every ``%s`` with a look-behind regex."""
    params: dict[str, Any] = {}
    named: dict[tuple[type, Any], int] = {}
    shape: list[int] = []
    seen: list[object] = [_UNSET] * len(_EVENT_FIELDS)
    prepared: list[Any] = [None] * len(_EVENT_FIELDS)
    for values in rows:
        for i, field in enumerate(_EVENT_FIELDS):
            value = values[field.attname]
            if value is not seen[i]:
                seen[i] = value
                prepared[i] = field.get_db_prep_save(value, connection)
            p = prepared[i]
            # Shared by value where equal values are written alike (a UUID, a string, bytes,
            # a whole number), else only the very object (the batch's prepared moment).
            key = (type(p), p) if type(p) in _SHARED_BY_VALUE else (object, id(p))
            index = named.get(key)
            if index is None:
                index = named[key] = len(params)
                params[f"p{index}"] = p
            shape.append(index)
    key_shape = (connection.vendor, tuple(shape))
    sql = _INSERT_SQL.get(key_shape)
    if sql is None:
        q = connection.ops.quote_name
        columns = ", ".join(q(_column(f)) for f in _EVENT_FIELDS)
        width = len(_EVENT_FIELDS)
        marks = [f"%(p{n})s" for n in shape]
        values_sql = ", ".join(
            "(" + ", ".join(marks[r : r + width]) + ")" for r in range(0, len(marks), width)
        )
        sql = f"INSERT INTO {q(LedgerEvent._meta.db_table)} ({columns}) VALUES {values_sql}"  # noqa: S608
        if len(_INSERT_SQL) >= _INSERT_SHAPES:
            _INSERT_SQL.pop(next(iter(_INSERT_SQL)))
        _INSERT_SQL[key_shape] = sql
    return sql, params


def _sign_appended(room_id: UUID, appended: Sequence[AppendedEvent]) -> None:
    """Sign, in the append's transaction (the head row is locked), every head the chain
    requires among the events just appended: each event numbered a multiple of
    ``LEDGER_HEAD_EVERY_EVENTS`` (inside a batch too, so no run exceeds N), and the new tip
    after a pause, a close or a purge. Verification fails a chain without them
    (``ledger.chain.head_rules_problem``), so the database cannot rewrite a room alone.
    One Ed25519 signature and one INSERT, every N events."""
    every = int(settings.SYNAPSIA.get("LEDGER_HEAD_EVERY_EVENTS", 64))
    due = [a for a in appended if a.seq % every == 0]
    last = appended[-1]
    if any(a.kind in REQUIRES_HEAD for a in appended) and (not due or due[-1] is not last):
        due.append(last)
    if not due:
        return
    from ledger import signing  # signing imports this module

    try:
        for a in due:
            signing.sign_locked_head(room_id=room_id, seq=a.seq, head_hash=a.hash, fresh=True)
    except signing.LedgerSigningUnavailable:
        # Production without a key: the append stands (the effect it records happened);
        # verification will report the missing head, and the settings check names the key.
        logger.warning("ledger head at %s#%s left unsigned: no signing key", room_id, last.seq)


_MAX_SAFE_INTEGER = 2**53 - 1  # RFC 8785 (I-JSON): larger integers are refused


def _plain(text: str) -> bool:
    return text.isascii() and text.isprintable()  # 0x20-0x7e: no control character


def _data_canonical(data: dict[str, Any]) -> bytes:
    """RFC 8785 of an event's data. A turn's events (disclosures, denials) are flat objects
    of printable ASCII strings and safe integers, and for those RFC 8785 is exactly the
    sorted, compact ``json.dumps``: ASCII keys sort the same by UTF-16 code unit as by code
    point, such strings escape only ``"`` and ``\\``, and integers print as their digits
    (tests/ledger/test_data_canonical.py compares the two). Anything else goes to rfc8785:
    about a tenth of a context request was its pure-Python walk of those flat objects."""
    for key, value in data.items():
        kind = type(value)
        if not (
            _plain(key)
            and (
                (kind is str and _plain(value))
                or (kind is int and -_MAX_SAFE_INTEGER <= value <= _MAX_SAFE_INTEGER)
                or kind is bool
                or value is None
            )
        ):
            return rfc8785.dumps(data)
    return _FLAT_JSON.encode(data).encode()


# One encoder for every flat event (``json.dumps`` with arguments builds one per call).
_FLAT_JSON = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def _chained(
    room_id: UUID, events: Sequence[LedgerEventRecord], head: tuple[int, str]
) -> tuple[list[dict[str, object]], list[AppendedEvent]]:
    """The rows of ``events`` chained after ``head`` (column values by field name), built
    as ``ledger_append`` builds one."""
    rows: list[dict[str, object]] = []
    appended: list[AppendedEvent] = []
    seq, prev_hash = head
    occurred_at = timezone.now()
    # Every event of the batch names the same room and moment: their envelope strings are
    # written once for the batch (``envelopes_for``: the same bytes as ``envelope_bytes``).
    envelope = envelopes_for(room_id=str(room_id), occurred_at=occurred_at_text(occurred_at))
    for event in events:
        if not isinstance(event, BaseModel) or "kind" not in type(event).model_fields:
            raise LedgerAppendError(f"not a ledger event record: {type(event).__name__}")
        kind: str = event.kind
        data = event.model_dump(mode="json", exclude={"kind"})
        seq += 1
        data_canonical = _data_canonical(data)
        canonical = envelope(data_canonical=data_canonical, seq=seq, kind=kind, prev_hash=prev_hash)
        if len(canonical) > MAX_CANONICAL_BYTES:
            raise LedgerAppendError(f"{kind} event is {len(canonical)} bytes; metadata only")
        digest = hashlib.sha256(canonical).hexdigest()
        rows.append(
            {
                "room_id": room_id,
                "seq": seq,
                "kind": kind,
                "occurred_at": occurred_at,
                "data": CanonicalData(data, data_canonical.decode()),
                "prev_hash": prev_hash,
                "hash": digest,
                "canonical": canonical,
            }
        )
        appended.append(AppendedEvent(room_id, seq, kind, occurred_at, prev_hash, digest))
        prev_hash = digest
    return rows, appended
