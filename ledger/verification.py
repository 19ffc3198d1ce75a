"""Check stored chains at hashing speed and report the first bad sequence number per room.

Each event's hash is checked as SHA-256 of the bytes stored at append (``canonical``), and
those bytes against the row's own columns by comparing bytes (``ledger.chain``): nothing is
re-canonicalised unless a row fails that comparison, and then only that row, to say what is
wrong. Rows stream in large batches (``iterator(chunk_size=…)`` over ``values_list``: a
server-side cursor on PostgreSQL, no model instances), every room in one pass for
``ledger_verify_all``. Besides each event it checks the room's head row (a deleted tail shows
up as a head the chain does not reach), the retention checkpoint, and every signed head (its
signature under the key it names, and that the chain still holds that seq and hash).
``recanonicalise=True`` recomputes RFC 8785 from the columns of every row as well (an audit;
the old, slow way).
"""

from __future__ import annotations

import base64
import contextlib
import itertools
from collections.abc import Callable, Generator, Iterable
from dataclasses import replace
from operator import itemgetter
from typing import Any
from uuid import UUID

import rfc8785
from django.db import DatabaseError, connection, transaction
from django.db.models import CharField, F, Func, OuterRef, Subquery, TextField
from django.db.models.functions import Cast
from django.db.models.sql.compiler import SQLCompiler
from nacl.exceptions import BadSignatureError
from nacl.signing import VerifyKey

from ledger.chain import (
    GENESIS_HASH,
    ChainVerdict,
    HeadClaim,
    StoredRow,
    head_signed_bytes,
    occurred_at_text,
    stored_bytes_problem,
    stored_chain_check,
)
from ledger.models import LedgerEvent, LedgerHead, SignedHead
from ledger.signing import ledger_trusted_public_keys

CHUNK_SIZE = 10_000


class _ChainTime(Func):
    """``occurred_at`` in the chain's form, computed by the database (no datetime objects).
    Any stored form other than Django's usual one is passed through as it is: it then fails
    the byte comparison and the row gets the exact test."""

    output_field = CharField()

    def as_sqlite(self, compiler: SQLCompiler, connection: Any, **extra: Any) -> Any:
        # Django stores "YYYY-MM-DD HH:MM:SS[.ffffff]" in UTC.
        return self.as_sql(
            compiler,
            connection,
            template=(
                "(CASE WHEN substr(%(expressions)s, 11, 1) = ' ' THEN CASE length(%(expressions)s)"
                " WHEN 26 THEN substr(%(expressions)s, 1, 10) || 'T' || substr(%(expressions)s, 12)"
                " || 'Z' WHEN 19 THEN substr(%(expressions)s, 1, 10) || 'T' ||"
                " substr(%(expressions)s, 12) || '.000000Z' ELSE %(expressions)s END"
                " ELSE %(expressions)s END)"
            ),
            **extra,
        )

    def as_postgresql(self, compiler: SQLCompiler, conn: Any, **extra: Any) -> Any:
        return self.as_sql(
            compiler,
            conn,
            template=(
                "to_char(%(expressions)s AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"')"
            ),
            **extra,
        )


class _DataAsHashed(Func):
    """SQLite: the data column's text (RFC 8785, compared by bytes in Python). PostgreSQL:
    whether the data column equals, as jsonb, the ``data`` member of the stored bytes."""

    output_field = TextField()

    def as_sql(self, compiler: SQLCompiler, conn: Any, **extra: Any) -> Any:  # type: ignore[override]
        data_sql, data_params = compiler.compile(self.source_expressions[0])
        canonical_sql, canonical_params = compiler.compile(self.source_expressions[1])
        if conn.vendor == "postgresql":
            sql = f"((convert_from({canonical_sql}, 'UTF8')::jsonb -> 'data') = {data_sql})"
            return sql, (*canonical_params, *data_params)
        return f"CAST({data_sql} AS TEXT)", tuple(data_params)


def _event_rows(**filters: Any) -> Any:
    """The streamed form of events: 8-tuples, ``StoredRow`` plus the room id as text."""
    return (
        LedgerEvent.objects.filter(**filters)
        .annotate(
            _at=_ChainTime("occurred_at"),
            _data=_DataAsHashed(F("data"), F("canonical")),
            _room=Cast("room_id", CharField()),
        )
        .values_list("seq", "kind", "_at", "_data", "prev_hash", "hash", "canonical", "_room")
    )


def _bytes(value: Any) -> bytes:
    return value if value.__class__ is bytes else bytes(value)


def _rows(queryset: Any) -> Generator[StoredRow, None, None]:
    for row in queryset.iterator(chunk_size=CHUNK_SIZE):
        if row[6].__class__ is not bytes:  # a driver handing out memoryview
            row = (*row[:6], _bytes(row[6]), row[7])
        yield row


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
        try:
            text: str | None = rfc8785.dumps(data).decode() if isinstance(data, dict) else None
        except (rfc8785.CanonicalizationError, TypeError, ValueError):
            text = None
        yield (seq, kind, occurred_at_text(at), text, prev_hash, digest, _bytes(stored), "")


def _stored_events(room_id: UUID, *, through_seq: int) -> Generator[StoredRow, None, None]:
    return _rows(_event_rows(room_id=room_id, seq__lte=through_seq).order_by("seq"))


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


def signed_head_valid(head: SignedHead) -> bool:
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
    room_id: UUID, signed_heads: Iterable[SignedHead], trusted: frozenset[str]
) -> list[HeadClaim] | ChainVerdict:
    """The room's signed heads as claims, or the verdict of the first one that is not valid."""
    rid = str(room_id)
    claims: list[HeadClaim] = []
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
        claims.append(HeadClaim(signed.seq, signed.hash, f"signed head #{signed.id}"))
    return claims


def _check(
    room_id: UUID,
    head: LedgerHead,
    claims: list[HeadClaim],
    rows: Iterable[StoredRow],
) -> ChainVerdict:
    return stored_chain_check(
        room_id=str(room_id),
        rows=rows,
        checkpoint_seq=head.checkpoint_seq,
        checkpoint_hash=head.checkpoint_hash,
        claims=claims,
        tip=HeadClaim(head.seq, head.hash, "the head row"),
        recheck=_recheck(room_id),
    )


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
                contextlib.closing(_stored_events(room_id, through_seq=head.seq)) as rows,
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
    )
    if isinstance(claims, ChainVerdict):
        return claims
    if head is None:
        if LedgerEvent.objects.filter(room_id=room_id).exists() or claims:
            return ChainVerdict(rid, False, 0, 0, GENESIS_HASH, 1, "the room has no head row")
        return ChainVerdict(rid, True, 0, 0, GENESIS_HASH)
    verdict = _checked_room(room_id, head, claims, recanonicalise=recanonicalise)
    return _stray(verdict, room_id) if verdict.ok else verdict


def ledger_room_ids() -> list[UUID]:
    """Every room the ledger knows: with a head row, events, or signed heads."""
    ids = set(LedgerHead.objects.values_list("room_id", flat=True))
    ids.update(LedgerEvent.objects.values_list("room_id", flat=True).distinct())
    ids.update(SignedHead.objects.values_list("room_id", flat=True).distinct())
    return sorted(ids, key=str)


def ledger_verify_all(
    *,
    on_room: Callable[[int, int, ChainVerdict], None] | None = None,
    recanonicalise: bool = False,
) -> list[ChainVerdict]:
    """Verify every room; returns the failing rooms' verdicts. ``on_room(i, total, verdict)``
    is called after each room (progress).

    One pass: the head rows and signed heads first, then every event in (room, seq) order in
    one streamed query, then one statement for rows beyond the heads as they stand now.
    """
    if recanonicalise:
        return _verify_rooms_one_by_one(ledger_room_ids(), on_room, recanonicalise=True)
    heads = {h.room_id: h for h in LedgerHead.objects.all()}
    signed: dict[UUID, list[SignedHead]] = {}
    for s in SignedHead.objects.order_by("room_id", "seq", "id"):
        signed.setdefault(s.room_id, []).append(s)
    trusted = ledger_trusted_public_keys()
    total = len(heads.keys() | signed.keys())
    done: set[UUID] = set()
    verdicts: list[ChainVerdict] = []

    def finish(room_id: UUID, verdict: ChainVerdict) -> None:
        done.add(room_id)
        verdicts.append(verdict)
        if on_room is not None:
            on_room(len(done), max(total, len(done)), verdict)

    try:
        with (
            _reading(),
            contextlib.closing(_rows(_event_rows().order_by("room_id", "seq"))) as stream,
        ):
            for room_text, rows in itertools.groupby(stream, key=itemgetter(7)):
                room_id = UUID(room_text)
                head = heads.get(room_id)
                if head is None:  # no head when we began: a room created since, or a fault
                    finish(room_id, ledger_verify_room(room_id=room_id))
                    continue
                claims = _claims(room_id, signed.get(room_id, ()), trusted)
                if isinstance(claims, ChainVerdict):
                    finish(room_id, claims)
                    continue
                finish(room_id, _check(room_id, head, claims, rows))
    except DatabaseError:
        # PostgreSQL could not read some row's bytes as JSON: find it room by room.
        rest = [r for r in ledger_room_ids() if r not in done]
        verdicts += _verify_rooms_one_by_one(rest, on_room, recanonicalise=False, start=len(done))
        done.update(rest)
    for room_id in sorted(heads.keys() | signed.keys(), key=str):
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
