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
import logging
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal
from uuid import UUID

import rfc8785
from django.conf import settings
from django.db import DatabaseError, transaction
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.backends.base.operations import BaseDatabaseOperations
from django.db.models import Field
from django.utils import timezone
from pydantic import BaseModel

from ledger.chain import (
    GENESIS_HASH,
    MAX_CANONICAL_BYTES,
    REQUIRES_HEAD,
    CanonicalData,
    CanonicalJSONEncoder,
    envelopes_for,
    occurred_at_text,
)
from ledger.events import LedgerEventRecord
from ledger.metrics import LEDGER_APPEND_SECONDS, LEDGER_INSERT_SECONDS
from ledger.models import LedgerEvent, LedgerHead, SignedHead
from synapsia.db.statements import statement_cursor

logger = logging.getLogger(__name__)


class LedgerError(Exception):
    """Base of the ledger's errors."""


class LedgerAppendError(LedgerError):
    """The event was not recorded. Deny the operation it guarded (and let the atomic block
    roll back whatever else it did)."""


class AlongsideShort(LedgerError):
    """The caller's statement run with an append (``Alongside``) did not change the rows it
    had to: nothing of the append is kept (the caller's block is marked for rollback)."""


@dataclass(frozen=True)
class Alongside:
    """A caller's own data-modifying statement that belongs to an append's transaction (a
    turn spends the uses its disclosures record): ``sql`` an ``UPDATE`` (or ``INSERT``), its
    values named (``%(name)s``; the insert's own are ``p`` and a number), ``params`` them, and
    ``rows`` how many rows it must change. ``ledger_append_many`` runs it in the append's own
    statement where the append is one (PostgreSQL with a head seen: a data-modifying
    ``WITH``, where it must say ``... RETURNING`` a row per row it changed, and those are
    counted), else as a statement of its own beside it (the rows it returns counted or, if
    it returns none, the rows it changed). The ledger knows nothing of what it does."""

    sql: str
    params: dict[str, object]
    rows: int


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

    Three statements in the usual case: lock the room's head row (``SELECT … FOR UPDATE`` on
    PostgreSQL; SQLite's IMMEDIATE transactions already serialise writers), insert the event,
    move the head. The first event of a room also creates the head row. Raises
    ``LedgerAppendError`` (nothing recorded) when not in an atomic block, when the record is
    not a ledger event, or when the database refuses; it then marks the caller's atomic
    block for rollback, so the guarded effect cannot commit even if the error is caught.
    A batch of one (``ledger_append_many``): the same bytes, statements and rules.

    ``occurred_at`` is for the retention purge only: a purge run "as of" a given moment is
    recorded at that moment, since verification judges the purge by its own time.
    """
    [appended] = _append(room_id=room_id, events=[event], occurred_at=occurred_at, path="one")
    return appended


def ledger_head_locked(room_id: UUID) -> LedgerHead:
    """The room's head row, locked until the transaction ends; created on first use.
    Only inside ``transaction.atomic()`` (the ledger's own writers use it).

    Read by a written statement (``SELECT … FOR UPDATE`` where the database has it; SQLite's
    IMMEDIATE transaction already holds the one write lock): every socket's leave and every
    single append lock the head, and the ORM compiled that query anew each time."""
    connection = transaction.get_connection()
    head = _head_read(connection, room_id)
    if head is None:
        # Two first appends may race: ignore_conflicts makes the loser reuse the winner's row,
        # and the lock below then serialises them.
        LedgerHead.objects.bulk_create(
            [LedgerHead(room_id=room_id, seq=0, hash=GENESIS_HASH)], ignore_conflicts=True
        )
        head = _head_read(connection, room_id)
        if head is None:
            raise DatabaseError("the room's ledger head was not created")
    return head


def _head_read(connection: BaseDatabaseWrapper, room_id: UUID) -> LedgerHead | None:
    """The room's head row, locked where the database locks rows (``ledger_head_locked``)."""
    sql = _HEAD_READ_SQL.get(connection.vendor)
    if sql is None:
        q = connection.ops.quote_name
        sql = _HEAD_READ_SQL[connection.vendor] = (
            # Names from the model's own meta, quoted; the room is a parameter.
            f"SELECT {q(_column(_HEAD_SEQ))}, {q(_column(_HEAD_HASH))} "  # noqa: S608
            f"FROM {q(LedgerHead._meta.db_table)} WHERE {q(_column(_HEAD_ROOM))} = %s"
            + (" FOR UPDATE" if connection.features.has_select_for_update else "")
        )
    with statement_cursor() as cursor:
        cursor.execute(sql, [_HEAD_ROOM.get_db_prep_value(room_id, connection)])
        row = cursor.fetchone()
    if row is None:
        return None
    return LedgerHead(room_id=room_id, seq=int(row[0]), hash=str(row[1]))


def ledger_append_many(
    *,
    room_id: UUID,
    events: Sequence[LedgerEventRecord],
    head_seen: tuple[int, str] | None = None,
    alongside: Alongside | None = None,
) -> list[AppendedEvent]:
    """Append ``events`` to ``room_id``'s chain in order, each with the bytes and hash it would
    get appended alone (``ledger_append`` is a batch of one), in three statements whatever their
    number (more only past the backend's parameter limit: SQLite's 999 take 124 a statement):
    lock the head, insert them all, move the head. The insert and the head's move are written
    SQL, not compiled by the ORM per call. Inside ``transaction.atomic()`` only; any
    failure raises ``LedgerAppendError``, records none of them and marks the caller's block
    for rollback. Context assembly records a turn's disclosures with it.

    ``head_seen``: the head (seq, hash) the caller read earlier in its transaction. Then two
    statements: the head moves only if it is still exactly that (a compare-and-set that also
    locks it), then the insert; on PostgreSQL one, the insert carrying the compare-and-set
    (rows go in only if it matched). If the head moved meanwhile, the usual three, from the
    locked head.

    ``alongside``: the caller's own statement of the same transaction (``Alongside``), run by
    the insert's statement where there is one such (so a turn's uses are spent by the
    statement that records them), else on its own; ``AlongsideShort`` if it did not change
    the rows it had to (then nothing is kept: the caller's block is marked for rollback).
    Run once, whichever way the append goes, events or none."""
    return _append(
        room_id=room_id, events=events, head_seen=head_seen, alongside=alongside, path="batch"
    )


def _append(
    *,
    room_id: UUID,
    events: Sequence[LedgerEventRecord],
    path: Literal["one", "batch"],
    head_seen: tuple[int, str] | None = None,
    alongside: Alongside | None = None,
    occurred_at: datetime | None = None,
) -> list[AppendedEvent]:
    """``ledger_append_many`` (``ledger_append``: a batch of one, ``occurred_at`` its own
    moment), its latency observed under ``path``."""
    if not transaction.get_connection().in_atomic_block:
        raise LedgerAppendError(
            "ledger appends must run inside the caller's transaction.atomic() block, so "
            "the events and the effects they record commit together."
        )
    if alongside is not None and any(_INSERT_NAME.fullmatch(n) for n in alongside.params):
        raise LedgerAppendError("a statement alongside an append may not name a value p<number>")
    if not events:
        if alongside is not None:
            _alongside_run(alongside)
        return []
    started = time.perf_counter()
    connection = transaction.get_connection()
    try:
        pending = alongside
        if head_seen is not None:
            rows, appended = _chained(room_id, events, head_seen, occurred_at)
            written, pending = _events_insert(
                connection, rows, head_seen=head_seen, alongside=alongside
            )
            if written:
                if pending is not None:
                    _alongside_run(pending)
                _sign_appended(room_id, appended)
                LEDGER_APPEND_SECONDS.labels(path=path).observe(time.perf_counter() - started)
                return appended
        head = ledger_head_locked(room_id)
        rows, appended = _chained(room_id, events, (head.seq, head.hash), occurred_at)
        inserting = time.perf_counter()
        _events_insert(connection, rows)
        if path == "one":
            LEDGER_INSERT_SECONDS.observe(time.perf_counter() - inserting)
        _head_moved_from(connection, room_id, None, (appended[-1].seq, appended[-1].hash))
        if pending is not None:
            _alongside_run(pending)
        _sign_appended(room_id, appended)
    except (LedgerAppendError, DatabaseError, rfc8785.CanonicalizationError, ValueError) as exc:
        transaction.set_rollback(True)
        if isinstance(exc, LedgerAppendError):
            raise
        raise LedgerAppendError(f"ledger append failed: {exc}") from exc
    LEDGER_APPEND_SECONDS.labels(path=path).observe(time.perf_counter() - started)
    return appended


# The batch path's statements are written once, not compiled by the ORM on every turn (issue
# 17: the ORM's bulk_create and queryset update were a third of a context request's CPU).
# Each value is what its field's ``get_db_prep_save`` gives (``_ColumnValues``), so the rows
# are exactly what the ORM would write on either backend (tests/ledger/test_append_raw.py
# compares columns, tests/ledger/test_column_values.py the prepared values).
_EVENT_FIELDS = tuple(f for f in LedgerEvent._meta.concrete_fields if not f.primary_key)
_EVENT_FIELD = {f.attname: f for f in _EVENT_FIELDS}
if set(_EVENT_FIELD) != {
    "room_id", "seq", "kind", "occurred_at", "data", "prev_hash", "hash", "canonical",
}:  # fmt: skip
    # The written INSERT names every column; a new one would silently be left to the database.
    raise ImportError("LedgerEvent's columns changed: teach ledger.services._insert_sql them")
_EVENT_ROOM = _EVENT_FIELD["room_id"]
_EVENT_SEQ = _EVENT_FIELD["seq"]
_EVENT_KIND = _EVENT_FIELD["kind"]
_EVENT_AT = _EVENT_FIELD["occurred_at"]
_EVENT_DATA = _EVENT_FIELD["data"]
_EVENT_PREV = _EVENT_FIELD["prev_hash"]
_EVENT_HASH = _EVENT_FIELD["hash"]
_EVENT_CANONICAL = _EVENT_FIELD["canonical"]
_HEAD_FIELD = {f.attname: f for f in LedgerHead._meta.concrete_fields}
_HEAD_ROOM = _HEAD_FIELD["room_id"]
_HEAD_SEQ = _HEAD_FIELD["seq"]
_HEAD_HASH = _HEAD_FIELD["hash"]
_INSERT_SQL: dict[tuple[str, tuple[int, ...] | None, bool, str | None], str] = {}
_HEAD_SQL: dict[tuple[str, bool], str] = {}
_HEAD_READ_SQL: dict[str, str] = {}


def _column(field: Field[Any, Any]) -> str:
    # Concrete fields always have a column; Django types it optional for the others.
    if field.column is None:
        raise LedgerAppendError(f"ledger field {field.name} has no column")
    return field.column


class _ColumnValues:
    """What ``get_db_prep_save`` gives for the values the batch path writes, without Django's
    field machinery per value (64 calls a turn were a twelfth of a context request). Each
    shortcut is that method's own result for the exact type the chain builds, and anything
    else goes through the field: a ``str`` is a text column's value as it is (``CharField``
    returns it unchanged), a count is the backend's ``adapt_integerfield_value`` of it
    (psycopg's ``Int8`` on PostgreSQL, the int itself on SQLite), bytes are the driver's
    ``Binary`` of them, and the data column is the backend's ``adapt_json_value`` (the base
    one is ``json.dumps`` with the column's encoder, which is ``CanonicalData.text``)."""

    __slots__ = ("_adapt_int", "_adapt_json", "_binary", "_connection", "_json_is_text")

    def __init__(self, connection: BaseDatabaseWrapper) -> None:
        ops = connection.ops
        self._connection = connection
        self._adapt_int = ops.adapt_integerfield_value
        self._adapt_json = ops.adapt_json_value
        # Every backend's DB-API module (the stubs leave it out): BinaryField's own wrapping.
        self._binary = connection.Database.Binary  # type: ignore[attr-defined]
        self._json_is_text = (
            type(ops).adapt_json_value is BaseDatabaseOperations.adapt_json_value
            and getattr(_EVENT_DATA, "encoder", None) is CanonicalJSONEncoder
        )

    def text(self, field: Field[Any, Any], value: object) -> object:
        if type(value) is str:
            return value
        return field.get_db_prep_save(value, self._connection)

    def count(self, field: Field[Any, Any], value: int) -> object:
        if type(value) is int:
            return self._adapt_int(value, field.get_internal_type())
        return field.get_db_prep_save(value, self._connection)

    def data(self, values: Sequence[CanonicalData]) -> list[object]:
        if all(type(v) is CanonicalData for v in values):
            if self._json_is_text:
                return [v.text for v in values]
            adapt, encoder = self._adapt_json, getattr(_EVENT_DATA, "encoder", None)
            return [adapt(v, encoder) for v in values]
        return [_EVENT_DATA.get_db_prep_save(v, self._connection) for v in values]

    def binaries(self, values: Sequence[bytes]) -> list[object]:
        if all(type(v) is bytes for v in values):
            return list(map(self._binary, values))
        return [_EVENT_CANONICAL.get_db_prep_save(v, self._connection) for v in values]


def _head_moved_from(
    connection: BaseDatabaseWrapper,
    room_id: UUID,
    seen: tuple[int, str] | None,
    tip: tuple[int, str],
) -> bool:
    """Move the room's head to ``tip``. With ``seen``, a compare-and-set: only if the head is
    still exactly ``seen`` (the UPDATE also locks it); without, the caller holds the lock."""
    key = (connection.vendor, seen is not None)
    sql = _HEAD_SQL.get(key)
    if sql is None:
        sql = _HEAD_SQL[key] = _head_update_sql(connection, ["%s"] * 5, compare=seen is not None)
    params = _head_params(connection, room_id, seen, tip)
    with statement_cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.rowcount == 1


def _head_update_sql(connection: BaseDatabaseWrapper, marks: list[str], *, compare: bool) -> str:
    """``UPDATE`` of the head row to (``marks[0]``, ``marks[1]``) where the room is
    ``marks[2]``, and with ``compare`` only if it is still (``marks[3]``, ``marks[4]``)."""
    q = connection.ops.quote_name
    seq, digest = q(_column(_HEAD_SEQ)), q(_column(_HEAD_HASH))
    sql = (
        # Names from the model's own meta, quoted; every value is a parameter.
        f"UPDATE {q(LedgerHead._meta.db_table)} SET {seq} = {marks[0]}, {digest} = "  # noqa: S608
        f"{marks[1]} WHERE {q(_column(_HEAD_ROOM))} = {marks[2]}"
    )
    if compare:
        sql += f" AND {seq} = {marks[3]} AND {digest} = {marks[4]}"
    return sql


def _head_params(
    connection: BaseDatabaseWrapper,
    room_id: UUID,
    seen: tuple[int, str] | None,
    tip: tuple[int, str],
) -> list[Any]:
    """The values of ``_head_update_sql``'s marks, each as its field prepares it."""
    prep = _ColumnValues(connection)
    params: list[Any] = [
        prep.count(_HEAD_SEQ, tip[0]),
        prep.text(_HEAD_HASH, tip[1]),
        _HEAD_ROOM.get_db_prep_save(room_id, connection),
    ]
    if seen is not None:
        params += [prep.count(_HEAD_SEQ, seen[0]), prep.text(_HEAD_HASH, seen[1])]
    return params


@dataclass(frozen=True)
class _EventRows:
    """A batch's rows, column by column. Every row names the batch's room and moment, and
    each row's ``prev_hash`` is the ``hash`` of the row before it (``prev_hash`` here is the
    first row's): the insert passes each of those once."""

    room_id: UUID
    occurred_at: datetime
    prev_hash: str
    seqs: list[int]
    kinds: list[str]
    data: list[CanonicalData]
    hashes: list[str]
    canonical: list[bytes]

    def as_fields(self) -> list[dict[str, object]]:
        """The rows as column values by field name, as ``LedgerEvent(**row)`` takes them."""
        return [
            {
                "room_id": self.room_id,
                "seq": seq,
                "kind": kind,
                "occurred_at": self.occurred_at,
                "data": data,
                "prev_hash": prev_hash,
                "hash": digest,
                "canonical": canonical,
            }
            for seq, kind, data, prev_hash, digest, canonical in zip(
                self.seqs,
                self.kinds,
                self.data,
                [self.prev_hash, *self.hashes[:-1]],
                self.hashes,
                self.canonical,
                strict=True,
            )
        ]


def _alongside_run(alongside: Alongside) -> None:
    """The caller's statement on its own (``Alongside``), in the append's transaction: the
    rows it returns, or for a statement that returns none, the rows it changed."""
    with statement_cursor() as cursor:
        cursor.execute(alongside.sql, alongside.params)
        changed = cursor.rowcount if cursor.description is None else len(cursor.fetchall())
    _alongside_checked(alongside, changed)


def _alongside_checked(alongside: Alongside, changed: int) -> None:
    if changed != alongside.rows:
        transaction.set_rollback(True)
        raise AlongsideShort(f"{changed} of {alongside.rows} rows changed alongside the append")


def _events_insert(
    connection: BaseDatabaseWrapper,
    rows: _EventRows,
    *,
    head_seen: tuple[int, str] | None = None,
    alongside: Alongside | None = None,
) -> tuple[bool, Alongside | None]:
    """Insert ``rows`` in one INSERT (PostgreSQL: the rows as arrays, ``_insert_sql``), or on
    SQLite in as few multi-row ones as its parameter limit allows (the ORM's own
    ``bulk_batch_size``). No signals, as ``bulk_create`` sent none.

    With ``head_seen``, the head moves from it to the last row first, by compare-and-set
    (``_head_moved_from``); if it is no longer ``head_seen``, nothing is written and the
    answer is False. On PostgreSQL the compare-and-set is the insert's own: a data-modifying
    ``WITH`` runs the head's UPDATE (which waits for a concurrent writer and then finds the
    head moved, as alone), and the rows go in only if it matched. One round trip fewer, the
    same check.

    Whether the rows were written, and ``alongside`` if it is still to run: the fused
    statement runs it too (``_insert_sql``), and checks what it changed whether or not the
    head had moved."""
    count = len(rows.seqs)
    arrays = connection.vendor == "postgresql"  # the rows as arrays: one statement, any number
    if arrays:
        batch = count
    else:
        batch = max(1, connection.ops.bulk_batch_size(list(_EVENT_FIELDS), rows.seqs))
    tip = (rows.seqs[-1], rows.hashes[-1])
    fused = head_seen is not None and arrays
    if (
        head_seen is not None
        and not fused
        and not _head_moved_from(connection, rows.room_id, head_seen, tip)
    ):
        return False, alongside
    prep = _ColumnValues(connection)
    shared = [
        _EVENT_ROOM.get_db_prep_save(rows.room_id, connection),
        _EVENT_AT.get_db_prep_save(rows.occurred_at, connection),
    ]
    if rows.seqs != list(range(rows.seqs[0], rows.seqs[0] + count)):
        # A chain's batch is numbered one by one (``_chained``): the statement writes each
        # row's number as the batch's first plus the row's place in it.
        raise LedgerAppendError("ledger events of one batch must be numbered consecutively")
    data = prep.data(rows.data)
    hashes = [prep.text(_EVENT_HASH, h) for h in rows.hashes]
    canonical = prep.binaries(rows.canonical)
    with statement_cursor() as cursor:
        for start in range(0, count, batch):
            stop = min(count, start + batch)
            prev_hash = rows.prev_hash if start == 0 else rows.hashes[start - 1]
            values = [
                *shared,
                prep.text(_EVENT_PREV, prev_hash),
                prep.count(_EVENT_SEQ, rows.seqs[start]),
            ]
            if arrays:
                # Each column's values as one array: the same text and four values whatever
                # the batch (``_insert_sql``).
                shape: tuple[int, ...] | None = None
                kinds = [prep.text(_EVENT_KIND, k) for k in rows.kinds[start:stop]]
                values += (kinds, data[start:stop], hashes[start:stop], canonical[start:stop])
            else:
                distinct: dict[str, int] = {}
                shape = tuple(distinct.setdefault(k, len(distinct)) for k in rows.kinds[start:stop])
                values += (prep.text(_EVENT_KIND, k) for k in distinct)
                for i in range(start, stop):
                    values += (data[i], hashes[i], canonical[i])
            if fused:
                values += _head_params(connection, rows.room_id, head_seen, tip)
            params = dict(zip(_names(len(values)), values, strict=True))
            if fused and alongside is not None:
                params.update(alongside.params)
                cursor.execute(
                    _insert_sql(connection, shape, fused=True, alongside=alongside.sql), params
                )
                changed, inserted = cursor.fetchone()
                _alongside_checked(alongside, int(changed))
                alongside = None  # run, whatever the head did
            else:
                cursor.execute(_insert_sql(connection, shape, fused=fused), params)
                inserted = cursor.rowcount
            if fused and inserted != count:
                if inserted == 0:  # the head had moved: nothing was written
                    return False, alongside
                raise LedgerAppendError(f"{inserted} of {count} ledger events inserted")
    return True, alongside


_PARAM_NAMES: list[str] = []
_INSERT_NAME = re.compile(r"p[0-9]+")  # the insert's own value names (``_names``)


def _names(count: int) -> list[str]:
    """``p0`` … ``p{count-1}``: the insert's parameter names, written once for all batches."""
    while len(_PARAM_NAMES) < count:
        _PARAM_NAMES.append(f"p{len(_PARAM_NAMES)}")
    return _PARAM_NAMES[:count]


# Statements by the shape of their batch (see ``_insert_sql``; PostgreSQL's have one shape); a
# turn's SQLite batches come in a few, and past this many the oldest are written again.
_INSERT_SHAPES = 256


def _insert_sql(
    connection: BaseDatabaseWrapper,
    shape: tuple[int, ...] | None,
    *,
    fused: bool = False,
    alongside: str | None = None,
) -> str:
    """The INSERT of a batch, with named parameters, each value passed once however many
    places carry it: ``p0`` the room, ``p1`` the moment, ``p2`` the first row's ``prev_hash``,
    ``p3`` the first row's seq (a row's is that plus its place: a batch is numbered one by
    one); a row's ``prev_hash`` is the hash of the row before.

    On PostgreSQL (``shape`` None) the rows are four arrays, one per column that differs
    from row to row: ``p4`` the kinds, ``p5`` the data, ``p6`` the hashes, ``p7`` the
    canonical bytes, unnested in order. So the text and the number of values are the same for
    every batch: psycopg parses a statement's placeholders once and keeps the parse only for
    one of at most 50 values (with a value per row and column, a turn of eleven disclosures
    and the uses it spends came to 54, parsed again on every turn: ~200 us of CPU). The
    arrays go in the binary format (``%b``): in text, psycopg escapes each element with a
    regular expression (~100 us a turn).

    On SQLite, a row of values each, the batch's distinct kinds after ``p3`` and each row's
    data, hash and canonical bytes after them; ``shape`` names each row's kind by its index
    among those kinds. The same text for the same shape.

    ``fused`` (PostgreSQL): the head's compare-and-set comes first, its five values after the
    rows', and the rows go in only if it matched. ``alongside`` (fused only): a caller's
    data-modifying statement (``Alongside.sql``) runs in the same ``WITH``, and the statement
    answers one row: how many rows it changed, and how many events went in."""
    key = (connection.vendor, shape, fused, alongside)
    sql = _INSERT_SQL.get(key)
    if sql is not None:
        return sql
    q = connection.ops.quote_name
    columns = ", ".join(q(_column(f)) for f in _EVENT_FIELDS)
    into = f"INSERT INTO {q(LedgerEvent._meta.db_table)} ({columns})"
    if shape is not None:  # SQLite, which has no fused form
        first = 4 + len(set(shape))  # the first row's data
        rows = []
        for r, kind in enumerate(shape):
            n = first + 3 * r
            values = {
                "room_id": "%(p0)s",
                "seq": "%(p3)s" if r == 0 else f"%(p3)s + {r}",
                "kind": f"%(p{4 + kind})s",
                "occurred_at": "%(p1)s",
                "data": f"%(p{n})s",
                "prev_hash": "%(p2)s" if r == 0 else f"%(p{n - 2})s",
                "hash": f"%(p{n + 1})s",
                "canonical": f"%(p{n + 2})s",
            }
            rows.append("(" + ", ".join(values[f.attname] for f in _EVENT_FIELDS) + ")")
        sql = f"{into} VALUES {', '.join(rows)}"
    else:
        marks = {
            "room_id": "%(p0)s",
            "seq": "%(p3)s + batch.n - 1",
            "kind": "batch.kind",
            "occurred_at": "%(p1)s",
            "data": "batch.data",
            # Arrays count from one, and the element before the first is NULL.
            "prev_hash": "COALESCE((%(p6)b::text[])[batch.n - 1], %(p2)s)",
            "hash": "batch.hash",
            "canonical": "batch.canonical",
        }
        # Our own names and placeholders only; every value is a parameter.
        batch = (
            "SELECT "  # noqa: S608
            + ", ".join(marks[f.attname] for f in _EVENT_FIELDS)
            + " FROM unnest(%(p4)b::text[], %(p5)b::jsonb[], %(p6)b::text[], %(p7)b::bytea[]) "
            "WITH ORDINALITY AS batch(kind, data, hash, canonical, n)"
        )
        sql = f"{into} {batch}"
        if fused:
            moved = _head_update_sql(connection, [f"%(p{8 + i})s" for i in range(5)], compare=True)
            batch += " WHERE EXISTS (SELECT FROM moved)"
            sql = f"WITH moved AS ({moved} RETURNING 1) {into} {batch}"
            if alongside is not None:
                # Every part of a data-modifying WITH runs, whatever the others do: the
                # caller's statement is counted even when the head had moved and no event
                # went in.
                sql = (
                    f"WITH alongside AS ({alongside}), moved AS ({moved} RETURNING 1), "  # noqa: S608
                    f"inserted AS ({into} {batch} RETURNING 1) "
                    "SELECT (SELECT COUNT(*) FROM alongside), (SELECT COUNT(*) FROM inserted)"
                )
    if len(_INSERT_SQL) >= _INSERT_SHAPES:
        _INSERT_SQL.pop(next(iter(_INSERT_SQL)))
    _INSERT_SQL[key] = sql
    return sql


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
            # As ``signing.sign_locked_head(fresh=True)``: a tip just written cannot have been
            # signed yet. Stored by a written INSERT, not the ORM's save compiled each time.
            _signed_head_insert(
                signing.signed_head_build(
                    room_id=room_id,
                    seq=a.seq,
                    head_hash=a.hash,
                    signed_at=occurred_at_text(timezone.now()),
                )
            )
    except signing.LedgerSigningUnavailable:
        # Production without a key: the append stands (the effect it records happened);
        # verification will report the missing head, and the settings check names the key.
        logger.warning("ledger head at %s#%s left unsigned: no signing key", room_id, last.seq)


_SIGNED_HEAD_FIELDS = tuple(f for f in SignedHead._meta.concrete_fields if not f.primary_key)
_SIGNED_HEAD_SQL: dict[str, str] = {}


def _signed_head_insert(signed: SignedHead) -> None:
    """Store ``signed`` as ``signed.save(force_insert=True)`` would (each value through its
    field's ``get_db_prep_save``; tests/ledger/test_append_raw.py compares the rows), in a
    statement written once: the ORM's save was three quarters of signing a head (profiled). No
    signals, as no one listens for signed heads; the row's id is the database's, unread."""
    connection = transaction.get_connection()
    sql = _SIGNED_HEAD_SQL.get(connection.vendor)
    if sql is None:
        q = connection.ops.quote_name
        columns = ", ".join(q(_column(f)) for f in _SIGNED_HEAD_FIELDS)
        marks = ", ".join(["%s"] * len(_SIGNED_HEAD_FIELDS))
        sql = f"INSERT INTO {q(SignedHead._meta.db_table)} ({columns}) VALUES ({marks})"  # noqa: S608
        _SIGNED_HEAD_SQL[connection.vendor] = sql
    params = [
        f.get_db_prep_save(getattr(signed, f.attname), connection) for f in _SIGNED_HEAD_FIELDS
    ]
    with statement_cursor() as cursor:
        cursor.execute(sql, params)


_MAX_SAFE_INTEGER = 2**53 - 1  # RFC 8785 (I-JSON): larger integers are refused
_JSON_LITERALS = {True: "true", False: "false"}


def _data_canonical(data: dict[str, Any]) -> str:
    """RFC 8785 of an event's data, as text. A turn's events (disclosures, denials) are flat
    objects of plain strings (printable ASCII without ``"`` and ``\\``) and safe integers,
    and for those RFC 8785 is ``{"key":value,...}`` with the keys in code-point order: ASCII
    keys sort the same by UTF-16 code unit, such strings are written as they are, integers
    as their digits, ``true``, ``false`` and ``null`` as such (tests/ledger/
    test_data_canonical.py compares the two). Anything else goes to rfc8785: its pure-Python
    walk was a tenth of a context request, and a ``json.JSONEncoder`` builds its C encoder
    again on every call (two thirds of this function's time)."""
    try:
        keys = sorted(data)
    except TypeError:  # keys of several types: not JSON's; rfc8785 says why
        return rfc8785.dumps(data).decode()
    members: list[str] = []
    strings: list[str] = []
    for key in keys:
        value = data[key]
        kind = type(value)
        if type(key) is not str:
            return rfc8785.dumps(data).decode()
        if kind is str:
            members.append(f'"{key}":"{value}"')
            strings.append(value)
        elif kind is int and -_MAX_SAFE_INTEGER <= value <= _MAX_SAFE_INTEGER:
            members.append(f'"{key}":{value}')
        elif kind is bool:
            members.append(f'"{key}":{_JSON_LITERALS[value]}')
        elif value is None:
            members.append(f'"{key}":null')
        else:
            return rfc8785.dumps(data).decode()
    # Every key and string value at once: plain, or the escaping is rfc8785's to do.
    written = "".join(keys) + "".join(strings)
    if not (written.isascii() and written.isprintable()) or '"' in written or "\\" in written:
        return rfc8785.dumps(data).decode()
    return "{" + ",".join(members) + "}"


# Classes already seen to be ledger event records (a pydantic model with a ``kind``): the
# check is a property of the class, asked once per class instead of once per event.
_RECORD_TYPES: set[type] = set()
_NOT_DATA = {"kind"}  # never changed: pydantic only reads it


def _chained(
    room_id: UUID,
    events: Sequence[LedgerEventRecord],
    head: tuple[int, str],
    occurred_at: datetime | None = None,
) -> tuple[_EventRows, list[AppendedEvent]]:
    """The rows of ``events`` chained after ``head``, recorded at ``occurred_at`` (now)."""
    appended: list[AppendedEvent] = []
    seqs: list[int] = []
    kinds: list[str] = []
    data_column: list[CanonicalData] = []
    hashes: list[str] = []
    stored: list[bytes] = []
    seq, prev_hash = head
    first_prev_hash = prev_hash
    occurred_at = occurred_at or timezone.now()
    # Every event of the batch names the same room and moment: their envelope strings are
    # written once for the batch (``envelopes_for``: the same bytes as ``envelope_bytes``).
    envelope = envelopes_for(room_id=str(room_id), occurred_at=occurred_at_text(occurred_at))
    sha256 = hashlib.sha256
    for event in events:
        record_type = type(event)
        if record_type not in _RECORD_TYPES:
            if not isinstance(event, BaseModel) or "kind" not in record_type.model_fields:
                raise LedgerAppendError(f"not a ledger event record: {record_type.__name__}")
            _RECORD_TYPES.add(record_type)
        kind: str = event.kind
        data = event.model_dump(mode="json", exclude=_NOT_DATA)
        seq += 1
        text = _data_canonical(data)
        canonical = envelope(data_canonical=text.encode(), seq=seq, kind=kind, prev_hash=prev_hash)
        if len(canonical) > MAX_CANONICAL_BYTES:
            raise LedgerAppendError(f"{kind} event is {len(canonical)} bytes; metadata only")
        digest = sha256(canonical).hexdigest()
        seqs.append(seq)
        kinds.append(kind)
        data_column.append(CanonicalData(data, text))
        hashes.append(digest)
        stored.append(canonical)
        appended.append(AppendedEvent(room_id, seq, kind, occurred_at, prev_hash, digest))
        prev_hash = digest
    rows = _EventRows(
        room_id, occurred_at, first_prev_hash, seqs, kinds, data_column, hashes, stored
    )
    return rows, appended
