"""A turn's disclosures go into the ledger by one statement whose text and number of values do
not depend on how many there are (PostgreSQL: the rows as arrays, ``ledger.services._insert_sql``;
the uses they spend as one array, ``slips.verification.capability_uses_spending``). psycopg
keeps its parse of a statement's placeholders only for one of at most 50 values: past that
(eleven disclosures and the five uses they spent came to 54) it parsed the statement again on
every turn. Whatever the batch, the chain is the one ``ledger_append`` builds event by event."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any
from uuid import UUID

import pytest
from django.db import connection, transaction

from ledger.chain import GENESIS_HASH
from ledger.events import Join, LedgerEventRecord
from ledger.models import LedgerEvent, LedgerHead
from ledger.services import Alongside, ledger_append, ledger_append_many
from ledger.verification import ledger_verify_room
from tests.statement_parses import uncached_parses

pytestmark = pytest.mark.django_db

_SIZES = (1, 11, 60, 200)  # 200: two batches on SQLite (its 999 values take 124 events)


def _events(n: int, tag: str = "") -> list[LedgerEventRecord]:
    return [Join(participant_id=f"agent-{tag}{i}", participant_kind="agent") for i in range(n)]


def _counters(n: int) -> Alongside:
    """A caller's statement changing ``n`` rows (head rows of rooms no event names), its
    values passed as one array on PostgreSQL, as the turn's uses are."""
    ids = [uuid.uuid4() for _ in range(n)]
    LedgerHead.objects.bulk_create(LedgerHead(room_id=i, seq=0, hash=GENESIS_HASH) for i in ids)
    q = connection.ops.quote_name
    table, room, seq = q(LedgerHead._meta.db_table), q("room_id"), q("seq")
    return Alongside(
        sql=f"UPDATE {table} SET {seq} = {seq} + 1 WHERE {room} = ANY(%(heads)s) "  # noqa: S608
        "RETURNING 1",
        params={"heads": ids},
        rows=n,
    )


def _seen(room_id: UUID) -> tuple[int, str]:
    head = LedgerHead.objects.get(room_id=room_id)
    return head.seq, head.hash


def _kept_in(statements: list[tuple[str, int]]) -> Any:
    """An execute wrapper keeping each statement's text and its number of values."""

    def kept(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        if params is not None:  # not the savepoints the test's own transaction makes
            statements.append((sql, len(params)))
        return execute(sql, params, many, context)

    return kept


@pytest.fixture
def parses() -> Iterator[list[bytes]]:
    with uncached_parses() as seen:
        yield seen


@pytest.mark.parametrize("with_uses", [True, False])
def test_one_statement_text_whatever_the_number_of_events(
    parses: list[bytes], with_uses: bool
) -> None:
    texts = set()
    for size in _SIZES:
        room_id = uuid.uuid4()
        with transaction.atomic():
            ledger_append(room_id=room_id, event=_events(1, "first")[0])
        alongside = _counters(size) if with_uses else None
        head_seen = _seen(room_id)
        statements: list[tuple[str, int]] = []
        with connection.execute_wrapper(_kept_in(statements)), transaction.atomic():
            ledger_append_many(
                room_id=room_id, events=_events(size), head_seen=head_seen, alongside=alongside
            )
        # The insert, the head's move and the uses (besides, past each 64th event, a signed
        # head of its own: ``ledger.services._sign_appended``).
        inserts = [s for s in statements if LedgerEvent._meta.db_table in s[0]]
        assert len(inserts) == 1 and LedgerHead._meta.db_table in inserts[0][0], statements
        assert len(statements) == 1 + size // 64
        texts.add(inserts[0])
        assert LedgerHead.objects.get(room_id=room_id).seq == size + 1
    assert len(texts) == 1  # the same text and number of values for 1 event and for 200
    assert parses == []  # and psycopg parsed it once for all of them


@pytest.mark.parametrize("size", _SIZES)
def test_a_batch_is_the_chain_its_events_make_one_by_one(size: int) -> None:
    """The same rows, column by column, as ``ledger_append`` writes them one at a time (the
    moment aside, which a batch shares), whether the head was seen or locked."""
    batched, single = uuid.uuid4(), uuid.uuid4()
    events = _events(size)
    with transaction.atomic():
        ledger_append(room_id=batched, event=_events(1, "first")[0])
    with transaction.atomic():
        ledger_append_many(room_id=batched, events=events[: size // 2], head_seen=_seen(batched))
    with transaction.atomic():
        ledger_append_many(room_id=batched, events=events[size // 2 :])  # the head locked
    with transaction.atomic():
        for event in [*_events(1, "first"), *events]:
            ledger_append(room_id=single, event=event)

    def rows(room_id: UUID) -> list[tuple[Any, ...]]:
        return list(
            LedgerEvent.objects.filter(room_id=room_id)
            .order_by("seq")
            .values_list("seq", "kind", "data")
        )

    assert rows(batched) == rows(single)
    chain = list(LedgerEvent.objects.filter(room_id=batched).order_by("seq"))
    assert [e.seq for e in chain] == list(range(1, size + 2))
    assert [e.prev_hash for e in chain[1:]] == [e.hash for e in chain[:-1]]
    assert ledger_verify_room(room_id=batched).ok
