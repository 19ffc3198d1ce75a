"""Check stored chains at hashing speed and report the first bad sequence number per room.

Each event's hash is checked as SHA-256 of the bytes stored at append (``canonical``), and
those bytes against the row's own columns by comparing bytes (``ledger.chain``): nothing is
re-canonicalised unless a row fails that comparison, and then only that row, to say what is
wrong. Rows come in pages of ``CHUNK_SIZE``, one prepared statement per page of a room (no
model instances, no room column; on PostgreSQL in the binary protocol, fetched ahead in a
thread), every room in one pass for ``ledger_verify_all``, whose signature checks run in a
helper thread alongside. Besides each event it checks the room's head row (a deleted tail shows
up as a head the chain does not reach), the retention checkpoint, and every signed head (its
signature under the key it names, and that the chain still holds that seq and hash).
``recanonicalise=True`` recomputes RFC 8785 from the columns of every row as well (an audit;
the old, slow way).
"""

from __future__ import annotations

import base64
import contextlib
import itertools
import queue
import threading
from collections.abc import Callable, Generator, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import replace
from datetime import UTC
from operator import itemgetter
from typing import Any, NamedTuple
from uuid import UUID

import rfc8785
from django.db import DatabaseError, connection, transaction
from django.db.models import CharField, F, Func, IntegerField, OuterRef, Subquery
from django.db.models.sql.compiler import SQLCompiler
from django.utils import timezone
from nacl.exceptions import BadSignatureError
from nacl.signing import VerifyKey

from ledger.chain import (
    GENESIS_HASH,
    ChainMark,
    ChainVerdict,
    HeadClaim,
    SignedClaim,
    StoredRow,
    head_rules_problem,
    head_signed_bytes,
    occurred_at_text,
    stored_bytes_problem,
    stored_chain_check,
    unsigned_tail_seq,
)
from ledger.models import HeadWitness, LedgerEvent, LedgerHead, SignedHead
from ledger.signing import ledger_head_policy, ledger_trusted_public_keys
from ledger.witnesses import witness_valid

CHUNK_SIZE = 10_000
_PREFETCH_VENDORS = {"postgresql"}
_PAGES_AHEAD = 8


class _StoredTime(Func):
    """``occurred_at`` as text, ``YYYY-MM-DD HH:MM:SS.ffffff`` in UTC, without datetime
    objects: SQLite's column as Django stores it, PostgreSQL's rendered so. The chain's form
    is that with ``T`` for the space and a ``Z`` (``ledger.chain.stored_chain_check``); any
    other stored form differs from the stored bytes, and that row gets the exact test."""

    output_field = CharField()

    def as_sqlite(self, compiler: SQLCompiler, connection: Any, **extra: Any) -> Any:
        # As an expression, so sqlite3 does not turn the declared datetime into an object.
        return self.as_sql(compiler, connection, template="CAST(%(expressions)s AS TEXT)", **extra)

    def as_postgresql(self, compiler: SQLCompiler, connection: Any, **extra: Any) -> Any:
        template = "to_char(%(expressions)s AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS.US')"
        return self.as_sql(compiler, connection, template=template, **extra)


class _DataLength(Func):
    """What the database finds about the data column against the stored bytes (see
    ``ledger.chain.StoredRow``): the length of the data member right after ``{"data":``, or
    -1. SQLite: the column's RFC 8785 text must be those bytes. PostgreSQL (jsonb keeps the
    value, not the text): those bytes, parsed, must equal the column as jsonb."""

    output_field = IntegerField()

    def as_sql(self, compiler: SQLCompiler, connection: Any, **extra: Any) -> Any:  # type: ignore[override]
        data_sql, data_params = compiler.compile(self.source_expressions[0])
        stored_sql, stored_params = compiler.compile(self.source_expressions[1])
        kind_sql, kind_params = compiler.compile(self.source_expressions[2])
        seq_sql, seq_params = compiler.compile(self.source_expressions[3])
        if connection.vendor == "postgresql":
            # Only the data member is parsed: its length follows from the other columns (the
            # suffix is 198 bytes plus kind and seq); a wrong length fails the comparison or
            # the cast, and a failed cast sends the room to the exact test.
            length = (
                f"(octet_length({stored_sql}) - 198 - octet_length({kind_sql})"
                f" - length({seq_sql}::text))"
            )
            sql = (
                f"(CASE WHEN convert_from(substring({stored_sql} from 9 for {length}), 'UTF8')"
                f"::jsonb = {data_sql} THEN {length} ELSE -1 END)"
            )
            length_params = (*stored_params, *kind_params, *seq_params)
            return sql, (*stored_params, *length_params, *data_params, *length_params)
        text = f"CAST({data_sql} AS BLOB)"
        sql = (
            f"(CASE WHEN substr({stored_sql}, 9, length({text})) = {text}"
            f" THEN length({text}) ELSE -1 END)"
        )
        return sql, (*stored_params, *data_params, *data_params, *data_params)


def _event_rows(**filters: Any) -> Any:
    """The streamed form of one room's events: ``StoredRow`` tuples (values_list: no model
    instances, no room column: every statement reads one room)."""
    return (
        LedgerEvent.objects.filter(**filters)
        .annotate(
            _at=_StoredTime("occurred_at"),
            _data=_DataLength(F("data"), F("canonical"), F("kind"), F("seq")),
        )
        .values_list("seq", "kind", "_at", "_data", "prev_hash", "hash", "canonical")
    )


_PROBE_ROOM, _PROBE_AFTER, _PROBE_THROUGH = UUID(int=0x5EED), 2**62 + 3, 2**62 + 1
RoomPlan = tuple[UUID, int]  # a room and the last seq to read (its head row's, when read)


def _room_statement() -> tuple[str, list[Any], tuple[int, int, int]]:
    """One page of one room's rows (``_event_rows``, keyset-paged by seq, ``CHUNK_SIZE`` a
    page): the SQL Django builds, its parameters, and where in them the room, the seq after
    which the page starts and the last seq to read go. Built once per pass, then only
    executed: no ORM per room, no room column per row."""
    query = _event_rows(room_id=_PROBE_ROOM, seq__gt=_PROBE_AFTER, seq__lte=_PROBE_THROUGH)
    query = query.order_by("seq")[:CHUNK_SIZE]
    sql, probe = query.query.get_compiler(using=query.db).as_sql()
    probe = list(probe)
    places = tuple(
        [i for i, p in enumerate(probe) if p in wanted]
        for wanted in ((_PROBE_ROOM, _PROBE_ROOM.hex), (_PROBE_AFTER,), (_PROBE_THROUGH,))
    )
    if any(len(found) != 1 for found in places):  # pragma: no cover - Django changed its SQL
        raise DatabaseError("cannot prepare the per-room ledger statement")
    return sql, probe, (places[0][0], places[1][0], places[2][0])


def _room_pages(plan: Iterable[RoomPlan]) -> Iterator[tuple[UUID, list[StoredRow]]]:
    """For each planned room in turn, its rows in pages: ``(room_id, page)``, at least one
    page per room (empty for a room without events). Must be called in the thread that owns
    the connection; the iterator it returns may then be driven from another one (``_ahead``).

    PostgreSQL: a plain cursor in the binary protocol (the stored bytes travel as they are,
    not as hex text the server writes and the driver parses), the statement prepared once by
    the driver. SQLite: Django's cursor."""
    sql, probe, (at_room, at_after, at_through) = _room_statement()
    wrap = connection.wrap_database_errors
    if connection.vendor == "postgresql":
        import psycopg

        connection.ensure_connection()
        cursor: Any = psycopg.Cursor(connection.connection)
        # No prepared statements where a pooler in transaction mode is in between.
        prepare = not connection.settings_dict.get("DISABLE_SERVER_SIDE_CURSORS")
        hex_room = False  # psycopg sends a UUID as one

        def page(params: list[Any]) -> list[Any]:
            with wrap:
                cursor.execute(sql, params, prepare=prepare, binary=True)
                return cursor.fetchall()
    else:
        cursor = connection.cursor()
        hex_room = True  # Django's SQLite column: 32 hex digits

        def page(params: list[Any]) -> list[Any]:
            cursor.execute(sql, params)
            return cursor.fetchall()

    def pages() -> Iterator[tuple[UUID, list[StoredRow]]]:
        try:
            for room_id, through_seq in plan:
                params = list(probe)
                room = room_id if isinstance(room_id, UUID) else UUID(str(room_id))
                params[at_room] = room.hex if hex_room else room
                params[at_after], params[at_through] = -1, through_seq
                while True:
                    rows = page(params)
                    yield room_id, rows
                    if len(rows) < CHUNK_SIZE:
                        break
                    params[at_after] = rows[-1][0]
        finally:
            cursor.close()

    return pages()


@contextlib.contextmanager
def _ahead(items: Iterator[Any]) -> Iterator[Iterator[Any]]:
    """``items``, produced a few ahead in a helper thread on PostgreSQL (the driver waits on
    the socket without the GIL, so the server's work overlaps the checking here); as they
    are elsewhere. Only the helper touches ``items`` until the context is left."""
    if connection.vendor not in _PREFETCH_VENDORS:
        try:
            yield items
        finally:
            close = getattr(items, "close", None)
            if close is not None:
                close()
        return
    prefetch = _Prefetch(items)
    try:
        yield iter(prefetch.next_item, _Prefetch.END)
    finally:
        prefetch.stop()


class _Prefetch:
    """Take items ahead in a thread. Only this thread touches the iterator until
    ``stop`` returns (which then closes it)."""

    END: Any = object()

    def __init__(self, items: Iterator[Any]) -> None:
        self._items = items
        # A few pages ahead: per-room statements are short, so one round trip each would
        # otherwise leave the reader waiting on the server between rooms.
        self._queue: queue.Queue[Any] = queue.Queue(maxsize=_PAGES_AHEAD)
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="ledger-verify-fetch", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            for item in self._items:
                if not self._put(item):
                    return
            self._put(self.END)
        except BaseException as exc:  # handed to the reader, raised there
            self._put(_Raised(exc))

    def _put(self, item: Any) -> bool:
        while not self._stopping.is_set():
            try:
                self._queue.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def next_item(self) -> Any:
        item = self._queue.get()
        if isinstance(item, _Raised):
            raise item.exc
        return item

    def stop(self) -> None:
        self._stopping.set()
        self._thread.join()
        close = getattr(self._items, "close", None)
        if close is not None:
            close()


class _Raised:
    def __init__(self, exc: BaseException) -> None:
        self.exc = exc


def _reading() -> Any:
    """PostgreSQL: a transaction (or savepoint) around a streamed read, so the server-side
    cursor streams (no WITH HOLD copy) and a row it cannot parse aborts only this read.
    SQLite: none (a write-locking IMMEDIATE transaction would stall every room meanwhile)."""
    return transaction.atomic() if connection.vendor == "postgresql" else contextlib.nullcontext()


def _exact_rows(**filters: Any) -> Generator[StoredRow, None, None]:
    """Rows with ``data`` re-canonicalised from the column as the application reads it."""
    rows = (
        LedgerEvent.objects.filter(**filters)
        .order_by("room_id", "seq")
        .values_list("seq", "kind", "occurred_at", "data", "prev_hash", "hash", "canonical")
    )
    for seq, kind, at, data, prev_hash, digest, stored in rows.iterator(chunk_size=CHUNK_SIZE):
        stored = bytes(stored)
        try:
            text = rfc8785.dumps(data) if isinstance(data, dict) else b"\x00"
        except (rfc8785.CanonicalizationError, TypeError, ValueError):
            text = b"\x00"
        found = len(text) if stored[8 : 8 + len(text)] == text else -1
        stored_at = at.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S.%f")
        yield (seq, kind, stored_at, found, prev_hash, digest, stored)


@contextlib.contextmanager
def _stored_events(room_id: UUID, *, through_seq: int) -> Iterator[Iterator[StoredRow]]:
    """The room's rows up to ``through_seq``, in order."""
    with _ahead(_room_pages([(room_id, through_seq)])) as pages:
        yield itertools.chain.from_iterable(rows for _, rows in pages)


def _recheck(room_id: UUID) -> Callable[[int, bytes], str | None]:
    """The exact test for one row that failed the byte comparison."""

    def recheck(seq: int, stored: bytes) -> str | None:
        row = (
            LedgerEvent.objects.filter(room_id=room_id, seq=seq)
            .values_list("kind", "occurred_at", "data", "prev_hash")
            .first()
        )
        if row is None:
            return f"event {seq} changed while it was being verified"
        kind, at, data, prev_hash = row
        return stored_bytes_problem(
            room_id=str(room_id), stored=stored, seq=seq, kind=kind,
            occurred_at=occurred_at_text(at), data=data, prev_hash=prev_hash,
        )  # fmt: skip

    return recheck


class SignedHeadRow(NamedTuple):
    """A ``SignedHead`` as read for verification (its fields, without a model instance)."""

    id: int
    room_id: UUID
    seq: int
    hash: str
    signed_at: str
    public_key: str
    signature: str


def signed_head_valid(head: SignedHead | SignedHeadRow) -> bool:
    """Whether ``head.signature`` is a valid Ed25519 signature by ``head.public_key``."""
    try:
        VerifyKey(base64.b64decode(head.public_key, validate=True)).verify(
            head_signed_bytes(
                room_id=head.room_id, seq=head.seq, head_hash=head.hash, signed_at=head.signed_at
            ),
            base64.b64decode(head.signature, validate=True),
        )
    except (BadSignatureError, ValueError, TypeError):
        return False
    return True


def _claims(
    room_id: UUID,
    signed_heads: Iterable[SignedHead | SignedHeadRow],
    trusted: frozenset[str],
    witnesses: Iterable[HeadWitness] = (),
) -> list[HeadClaim] | ChainVerdict:
    """The room's signed heads and witnessed heads as claims, or the verdict of the first one
    that is not valid. A witness (an owner's device-key countersignature) must be a valid
    signature over its own fields and name a signed head that is still there, exactly: a
    writer holding the server key may re-sign a rewritten history, but cannot make the
    owner's key sign it, nor drop the head the owner confirmed (signed heads are never
    purged). Witness claims carry no ``signed_at``: they are not the server's heads."""
    rid = str(room_id)
    claims: list[HeadClaim] = []
    signed_heads = list(signed_heads)
    present = {(s.seq, s.hash, s.signed_at) for s in signed_heads}
    for witness in witnesses:
        if not witness_valid(witness):
            return ChainVerdict(
                rid, False, 0, 0, GENESIS_HASH, witness.seq,
                f"witness #{witness.id} (an owner's confirmation of event {witness.seq}) has "
                "an invalid signature: its stored record was changed",
            )  # fmt: skip
        if (witness.seq, witness.hash, witness.signed_at) not in present:
            return ChainVerdict(
                rid, False, 0, 0, GENESIS_HASH, witness.seq,
                f"witness #{witness.id}: an owner confirmed a signed head at event "
                f"{witness.seq} that is no longer among the room's signed heads",
            )  # fmt: skip
        claims.append(HeadClaim(witness.seq, witness.hash, f"witness #{witness.id}"))
    for signed in signed_heads:
        if trusted and signed.public_key not in trusted:
            return ChainVerdict(
                rid, False, 0, 0, GENESIS_HASH, signed.seq,
                f"signed head #{signed.id} is signed by a key this server does not trust",
            )  # fmt: skip
        if not signed_head_valid(signed):
            return ChainVerdict(
                rid, False, 0, 0, GENESIS_HASH, signed.seq,
                f"signed head #{signed.id} has an invalid signature",
            )  # fmt: skip
        claims.append(
            HeadClaim(signed.seq, signed.hash, f"signed head #{signed.id}", signed.signed_at)
        )
    return claims


def _check(
    room_id: UUID,
    head: LedgerHead,
    claims: list[HeadClaim],
    rows: Iterable[StoredRow],
) -> ChainVerdict:
    marks: list[ChainMark] = []
    signed = [SignedClaim(c.seq, c.hash, c.signed_at, c.source) for c in claims if c.signed_at]
    tail_seq = unsigned_tail_seq(
        signed_seqs=[c.seq for c in signed], checkpoint_seq=head.checkpoint_seq
    )
    tail_at: list[str] = []
    verdict = stored_chain_check(
        room_id=str(room_id),
        rows=rows,
        checkpoint_seq=head.checkpoint_seq,
        checkpoint_hash=head.checkpoint_hash,
        claims=claims,
        tip=HeadClaim(head.seq, head.hash, "the head row"),
        recheck=_recheck(room_id),
        marks=marks,
        watch_seq=tail_seq,
        watched=tail_at,
    )
    if not verdict.ok:
        return verdict
    # A consistent chain is not enough: the heads it requires must be there, every purge
    # must agree with the policy and with the heads signed before it, and no unsigned tail
    # may be older than the server lets one get.
    broken = head_rules_problem(
        marks=marks,
        signed=signed,
        checkpoint_seq=head.checkpoint_seq,
        last_seq=verdict.last_seq,
        policy=ledger_head_policy(),
        tail=(tail_seq, tail_at[0]) if tail_at else None,
        now=timezone.now(),
    )
    if broken is None:
        return verdict
    return replace(verdict, ok=False, first_bad_seq=broken[0], problem=broken[1])


def _checked_room(
    room_id: UUID, head: LedgerHead, claims: list[HeadClaim], *, recanonicalise: bool
) -> ChainVerdict:
    """One room by its stored bytes; re-canonicalised when asked, or when the database cannot
    read a row's bytes as JSON at all (PostgreSQL refuses the whole query then)."""
    if not recanonicalise:
        try:
            # Closed inside the transaction: a check that stops early leaves no open cursor.
            with (
                _reading(),
                _stored_events(room_id, through_seq=head.seq) as rows,
            ):
                return _check(room_id, head, claims, rows)
        except DatabaseError:
            pass
    with contextlib.closing(_exact_rows(room_id=room_id, seq__lte=head.seq)) as exact:
        return _check(room_id, head, claims, exact)


def _stray(verdict: ChainVerdict, room_id: UUID) -> ChainVerdict:
    """The chain was read up to the head row as it stood when verification began; events a
    live room appended since then are not a fault. A row beyond the head as it stands *now*
    is: one statement compares them, so an append cannot slip in between the two reads."""
    stray = (
        LedgerEvent.objects.filter(
            room_id=room_id,
            seq__gt=Subquery(LedgerHead.objects.filter(room_id=room_id).values("seq")[:1]),
        )
        .order_by("seq")
        .values_list("seq", flat=True)
        .first()
    )
    if stray is None:
        return verdict
    return replace(
        verdict, ok=False, first_bad_seq=stray, problem=f"event {stray} lies beyond the head row"
    )


def ledger_verify_room(*, room_id: UUID, recanonicalise: bool = False) -> ChainVerdict:
    """Verify one room's chain against its head row, checkpoint and signed heads."""
    head = LedgerHead.objects.filter(room_id=room_id).first()
    rid = str(room_id)
    claims = _claims(
        room_id,
        SignedHead.objects.filter(room_id=room_id).order_by("seq", "id"),
        ledger_trusted_public_keys(),
        HeadWitness.objects.filter(room_id=room_id).order_by("seq", "id"),
    )
    if isinstance(claims, ChainVerdict):
        return claims
    if head is None:
        if LedgerEvent.objects.filter(room_id=room_id).exists() or claims:
            return ChainVerdict(rid, False, 0, 0, GENESIS_HASH, 1, "the room has no head row")
        return ChainVerdict(rid, True, 0, 0, GENESIS_HASH)
    verdict = _checked_room(room_id, head, claims, recanonicalise=recanonicalise)
    return _stray(verdict, room_id) if verdict.ok else verdict


def _event_room_ids() -> set[UUID]:
    """Every room with events. PostgreSQL: one index probe per room (a recursive skip over
    the (room, seq) index), not a DISTINCT over every event, which costs the server more
    than a tenth of reading them all; SQLite's DISTINCT walks that index cheaply itself."""
    if connection.vendor != "postgresql":
        return set(LedgerEvent.objects.values_list("room_id", flat=True).distinct())
    table = connection.ops.quote_name(LedgerEvent._meta.db_table)
    room = connection.ops.quote_name(str(LedgerEvent._meta.get_field("room_id").column))
    # Only the model's own table and column names go into the text.
    sql = (
        f"WITH RECURSIVE rooms(room) AS (SELECT (SELECT {room} FROM {table} ORDER BY {room} "  # noqa: S608
        f"LIMIT 1) UNION ALL SELECT (SELECT e.{room} FROM {table} e WHERE e.{room} > rooms.room "
        f"ORDER BY e.{room} LIMIT 1) FROM rooms WHERE rooms.room IS NOT NULL) "
        "SELECT room FROM rooms WHERE room IS NOT NULL"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql)
        return {value if isinstance(value, UUID) else UUID(str(value)) for (value,) in cursor}


def ledger_room_ids() -> list[UUID]:
    """Every room the ledger knows: with a head row, events, or signed heads."""
    ids = set(LedgerHead.objects.values_list("room_id", flat=True))
    ids.update(_event_room_ids())
    ids.update(SignedHead.objects.values_list("room_id", flat=True).distinct())
    ids.update(HeadWitness.objects.values_list("room_id", flat=True).distinct())
    return sorted(ids, key=str)


def ledger_verify_all(
    *,
    on_room: Callable[[int, int, ChainVerdict], None] | None = None,
    recanonicalise: bool = False,
) -> list[ChainVerdict]:
    """Verify every room; returns the failing rooms' verdicts. ``on_room(i, total, verdict)``
    is called after each room (progress).

    One pass: the head rows and signed heads first, then every event in (room, seq) order
    (``_rooms_rows``), then one statement for rows beyond the heads as they stand now.
    """
    if recanonicalise:
        return _verify_rooms_one_by_one(ledger_room_ids(), on_room, recanonicalise=True)
    heads = {h.room_id: h for h in LedgerHead.objects.all()}
    # One signed head per N events: read as tuples, not model instances (it adds up).
    signed: dict[UUID, list[SignedHeadRow]] = {}
    for row in SignedHead.objects.order_by("room_id", "seq", "id").values_list(
        *SignedHeadRow._fields
    ):
        head_row = SignedHeadRow(*row)
        signed.setdefault(head_row.room_id, []).append(head_row)
    witnessed: dict[UUID, list[HeadWitness]] = {}
    for w in HeadWitness.objects.order_by("room_id", "seq", "id"):
        witnessed.setdefault(w.room_id, []).append(w)
    trusted = ledger_trusted_public_keys()
    total = len(heads.keys() | signed.keys() | witnessed.keys())
    done: set[UUID] = set()
    verdicts: list[ChainVerdict] = []

    def finish(room_id: UUID, verdict: ChainVerdict) -> None:
        done.add(room_id)
        verdicts.append(verdict)
        if on_room is not None:
            on_room(len(done), max(total, len(done)), verdict)

    # PostgreSQL: each room's signatures are checked in a helper thread, in the order the
    # rooms are read and before their rows are: libsodium runs without the GIL, so where a
    # second core is free they cost no wall time (the CPU time is the same). Not on SQLite:
    # its driver lets go of the GIL for every row, and handing it back and forth with a
    # second thread costs more CPU than the overlap saves.
    signatures: ThreadPoolExecutor | None = None
    pending: dict[UUID, Future[list[HeadClaim] | ChainVerdict]] = {}
    if connection.vendor in _PREFETCH_VENDORS:
        signatures = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ledger-verify-sign")
        for room_id in sorted(heads, key=str):
            pending[room_id] = signatures.submit(
                _claims, room_id, signed.get(room_id, ()), trusted, witnessed.get(room_id, ())
            )

    def claims_of(room_id: UUID) -> list[HeadClaim] | ChainVerdict:
        if room_id in pending:
            return pending[room_id].result()
        return _claims(room_id, signed.get(room_id, ()), trusted, witnessed.get(room_id, ()))

    try:
        with _reading(), _rooms_rows(heads) as rooms:
            for room_id, rows in rooms:
                head = heads.get(room_id)
                if head is None:  # no head when we began: a room created since, or a fault
                    finish(room_id, ledger_verify_room(room_id=room_id))
                    continue
                claims = claims_of(room_id)
                if isinstance(claims, ChainVerdict):
                    finish(room_id, claims)
                    continue
                finish(room_id, _check(room_id, head, claims, rows))
    except DatabaseError:
        # PostgreSQL could not read some row's bytes as JSON: find it room by room.
        rest = [r for r in ledger_room_ids() if r not in done]
        verdicts += _verify_rooms_one_by_one(rest, on_room, recanonicalise=False, start=len(done))
        done.update(rest)
    finally:
        if signatures is not None:
            signatures.shutdown(cancel_futures=True)
    for room_id in sorted(heads.keys() | signed.keys() | witnessed.keys(), key=str):
        if room_id not in done:  # no events at all (a fresh head, or a deleted chain)
            finish(room_id, ledger_verify_room(room_id=room_id))
    failures = [v for v in verdicts if not v.ok]
    strays = _strays({UUID(v.room_id) for v in verdicts if v.ok})
    for index, verdict in enumerate(verdicts):
        stray = strays.get(UUID(verdict.room_id))
        if stray is not None:
            verdicts[index] = replace(
                verdict, ok=False, first_bad_seq=stray,
                problem=f"event {stray} lies beyond the head row",
            )  # fmt: skip
            failures.append(verdicts[index])
    return sorted(failures, key=lambda v: v.room_id)


@contextlib.contextmanager
def _rooms_rows(
    heads: dict[UUID, LedgerHead],
) -> Iterator[Iterator[tuple[UUID, Iterable[StoredRow]]]]:
    """Every room that has a head row or events, in order, with its rows up to its head row
    in order: one prepared statement per page of a room (``_room_pages``), which spares
    every row a room column and the grouping. Rooms with events but no head row
    (``_event_room_ids``) come with no rows: the caller verifies them on their own."""
    rooms = set(heads) | _event_room_ids()
    order = sorted(rooms, key=str)
    plan = [(room_id, heads[room_id].seq) for room_id in order if room_id in heads]
    with _ahead(_room_pages(plan)) as pages:
        grouped = itertools.groupby(pages, key=itemgetter(0))

        def room_rows() -> Iterator[tuple[UUID, Iterable[StoredRow]]]:
            for room_id in order:
                if room_id not in heads:
                    yield room_id, ()
                    continue
                paged_room, room_pages = next(grouped)
                if paged_room != room_id:  # pragma: no cover - the plan's own order
                    raise DatabaseError("ledger pages out of order")
                yield room_id, itertools.chain.from_iterable(rows for _, rows in room_pages)

        yield room_rows()


def _strays(room_ids: set[UUID]) -> dict[UUID, int]:
    """For each of these rooms, its first event beyond its head row as it stands now (one
    statement: one index probe per head row)."""
    beyond = (
        LedgerEvent.objects.filter(room_id=OuterRef("room_id"), seq__gt=OuterRef("seq"))
        .order_by("seq")
        .values("seq")[:1]
    )
    rows = (
        LedgerHead.objects.annotate(stray=Subquery(beyond))
        .filter(stray__isnull=False)
        .values_list("room_id", "stray")
    )
    return {room_id: seq for room_id, seq in rows if room_id in room_ids}


def _verify_rooms_one_by_one(
    room_ids: list[UUID],
    on_room: Callable[[int, int, ChainVerdict], None] | None,
    *,
    recanonicalise: bool,
    start: int = 0,
) -> list[ChainVerdict]:
    failures: list[ChainVerdict] = []
    total = start + len(room_ids)
    for index, room_id in enumerate(room_ids, start=start + 1):
        verdict = ledger_verify_room(room_id=room_id, recanonicalise=recanonicalise)
        if not verdict.ok:
            failures.append(verdict)
        if on_room is not None:
            on_room(index, total, verdict)
    return failures
