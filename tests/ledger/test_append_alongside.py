"""A caller's own statement run with an append (``ledger_append_many(alongside=...)``, what a
turn spends its uses with): run exactly once whichever way the append goes, by the append's
own statement where that is one statement (PostgreSQL, a head seen), else on its
own; and when it does not change the rows it must, nothing of the append is kept."""

from __future__ import annotations

import uuid
from typing import Any
from uuid import UUID

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from ledger.chain import GENESIS_HASH
from ledger.events import Join, LedgerEventRecord
from ledger.models import LedgerEvent, LedgerHead
from ledger.services import (
    Alongside,
    AlongsideShort,
    LedgerAppendError,
    ledger_append,
    ledger_append_many,
)
from ledger.verification import ledger_verify_room

pytestmark = pytest.mark.django_db


def _events(n: int = 3) -> list[LedgerEventRecord]:
    return [Join(participant_id=f"agent-{i}", participant_kind="agent") for i in range(n)]


def _counters(n: int) -> list[UUID]:
    """``n`` rows the caller's statement changes (head rows of rooms no event names)."""
    ids = [uuid.uuid4() for _ in range(n)]
    LedgerHead.objects.bulk_create(LedgerHead(room_id=i, seq=0, hash=GENESIS_HASH) for i in ids)
    return ids


def _bump(ids: list[UUID], rows: int | None = None, *, returning: bool = True) -> Alongside:
    """Each counter up by one, only from 0: a counter already bumped is not changed. With
    ``returning``, a row returned for each counter changed."""
    q = connection.ops.quote_name
    table, room, seq = q(LedgerHead._meta.db_table), q("room_id"), q("seq")
    marks = ", ".join(f"%(c{i})s" for i in range(len(ids)))
    pk = LedgerHead._meta.get_field("room_id")
    return Alongside(
        sql=f"UPDATE {table} SET {seq} = {seq} + 1 WHERE {room} IN ({marks}) AND {seq} = 0"  # noqa: S608
        + (" RETURNING 1" if returning else ""),
        params={f"c{i}": pk.get_db_prep_value(v, connection) for i, v in enumerate(ids)},
        rows=len(ids) if rows is None else rows,
    )


def _counts(ids: list[UUID]) -> list[int]:
    seqs = dict(LedgerHead.objects.filter(room_id__in=ids).values_list("room_id", "seq"))
    return [seqs[i] for i in ids]


def _room(events: int = 1) -> tuple[UUID, tuple[int, str]]:
    room_id = uuid.uuid4()
    with transaction.atomic():
        for event in _events(events):
            last = ledger_append(room_id=room_id, event=event)
    return room_id, (last.seq, last.hash)


@pytest.mark.parametrize("seen", ["current", "stale", "none"])
def test_the_statement_alongside_runs_once_however_the_append_goes(seen: str) -> None:
    room_id, head = _room(2)
    head_seen = {"current": head, "stale": (1, GENESIS_HASH), "none": None}[seen]
    ids = _counters(2)
    with CaptureQueriesContext(connection) as captured, transaction.atomic():
        appended = ledger_append_many(
            room_id=room_id, events=_events(), head_seen=head_seen, alongside=_bump(ids)
        )
    assert [a.seq for a in appended] == [3, 4, 5]
    assert _counts(ids) == [1, 1]  # once each: a rerun would have found them at 1, and failed
    assert ledger_verify_room(room_id=room_id).ok
    statements = [q["sql"] for q in captured.captured_queries]
    bumps = [s for s in statements if "+ 1" in s and "RETURNING 1" in s]
    assert len(bumps) == 1, statements
    if connection.vendor == "postgresql" and seen == "current":
        # One statement for both: the append's compare-and-set, its rows, the caller's.
        [statement] = [
            s for s in statements if not s.startswith(("BEGIN", "COMMIT", "SAVEPOINT", "RELEASE"))
        ]
        assert statement.startswith("WITH alongside AS") and "INSERT INTO" in statement


@pytest.mark.parametrize("seen", ["current", "stale", "none"])
def test_a_statement_alongside_that_falls_short_keeps_nothing(seen: str) -> None:
    room_id, head = _room(2)
    head_seen = {"current": head, "stale": (1, GENESIS_HASH), "none": None}[seen]
    ids = _counters(2)
    LedgerHead.objects.filter(room_id=ids[1]).update(seq=7)  # no longer 0: not changed
    with transaction.atomic():
        LedgerHead.objects.create(room_id=uuid.uuid4())  # the caller's own effect
        others = LedgerHead.objects.count()
        with pytest.raises(AlongsideShort):
            ledger_append_many(
                room_id=room_id, events=_events(), head_seen=head_seen, alongside=_bump(ids)
            )
    assert LedgerHead.objects.count() == others - 1  # the caller's block rolled back
    assert _counts(ids) == [0, 7]  # the one it did change, undone
    assert LedgerEvent.objects.filter(room_id=room_id).count() == 2
    assert LedgerHead.objects.values_list("seq", "hash").get(room_id=room_id) == head


@pytest.mark.parametrize("seen", ["current", "stale", "none"])
@pytest.mark.parametrize("short", [False, True])
def test_a_statement_alongside_that_returns_no_rows(seen: str, short: bool) -> None:
    """Run on its own (always on SQLite, where a row returned would be a step of its own;
    on PostgreSQL with no head seen), it is counted by the rows it changed. Run inside the
    append's statement (PostgreSQL, a head seen), which counts the rows it returns, it is
    refused, and nothing is kept."""
    room_id, head = _room(2)
    head_seen = {"current": head, "stale": (1, GENESIS_HASH), "none": None}[seen]
    ids = _counters(2)
    if short:
        LedgerHead.objects.filter(room_id=ids[1]).update(seq=7)  # no longer 0: not changed
    bump = _bump(ids, returning=False)
    refused = (
        pytest.raises(LedgerAppendError, match="RETURNING")
        if connection.vendor == "postgresql" and head_seen is not None
        else pytest.raises(AlongsideShort, match="1 of 2")
        if short
        else None
    )
    with transaction.atomic():
        if refused is None:
            appended = ledger_append_many(
                room_id=room_id, events=_events(), head_seen=head_seen, alongside=bump
            )
            assert [a.seq for a in appended] == [3, 4, 5]
        else:
            with refused:
                ledger_append_many(
                    room_id=room_id, events=_events(), head_seen=head_seen, alongside=bump
                )
    assert _counts(ids) == ([1, 1] if refused is None else [0, 7] if short else [0, 0])
    assert LedgerEvent.objects.filter(room_id=room_id).count() == (5 if refused is None else 2)


def test_without_events_the_statement_alongside_still_runs() -> None:
    room_id, head = _room()
    ids = _counters(1)
    with transaction.atomic():
        assert (
            ledger_append_many(room_id=room_id, events=[], head_seen=head, alongside=_bump(ids))
            == []
        )
    assert _counts(ids) == [1]
    with transaction.atomic(), pytest.raises(AlongsideShort):
        ledger_append_many(room_id=room_id, events=[], alongside=_bump(ids))  # 1 now: short


def test_a_statement_alongside_may_not_use_the_inserts_names() -> None:
    room_id, head = _room()
    ids = _counters(1)
    bump = _bump(ids)
    clash = Alongside(
        sql=bump.sql.replace("%(c0)s", "%(p0)s"), params={"p0": bump.params["c0"]}, rows=1
    )
    with transaction.atomic(), pytest.raises(LedgerAppendError, match="p<number>"):
        ledger_append_many(room_id=room_id, events=_events(), head_seen=head, alongside=clash)
    assert _counts(ids) == [0]
    assert LedgerEvent.objects.filter(room_id=room_id).count() == 1


def test_the_bump_is_what_it_says(db: Any) -> None:
    """The helper's own control: alone, it changes each counter once, then none."""
    ids = _counters(2)
    bump = _bump(ids)
    for expected in (2, 0):
        with connection.cursor() as cursor:
            cursor.execute(bump.sql, bump.params)
            assert len(cursor.fetchall()) == expected
    assert _counts(ids) == [1, 1]
