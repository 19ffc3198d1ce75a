"""Issue 17: the batch append prepares its column values without Django's field machinery
per value (``ledger.services._ColumnValues``). Each shortcut must give exactly what the
field's own ``get_db_prep_save`` gives, value and type (psycopg's ``Int8`` for a count on
PostgreSQL, the data column's text on SQLite, the driver's ``Binary`` for the stored bytes),
and anything of another type must go through the field itself. Run on both backends."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from django.db import connection

from ledger import services
from ledger.chain import GENESIS_HASH, CanonicalData
from ledger.events import Denial, Disclosure, Join, OffersRevealed

pytestmark = pytest.mark.django_db


class _Text(str):
    pass


class _Count(int):
    pass


def _same(ours: Any, django: Any) -> bool:
    """The same value of the same type, as the driver will receive it."""
    if type(ours) is not type(django):
        return False
    if hasattr(django, "dumps"):  # psycopg's Jsonb: the object and the text it is sent as
        return bool(ours.obj is django.obj and ours.dumps(ours.obj) == django.dumps(django.obj))
    if hasattr(django, "obj"):  # psycopg's Binary
        return bool(ours.obj == django.obj)
    return bool(ours == django)


def _batch() -> services._EventRows:
    events = [
        Join(participant_id="agent-1:a.b_c", participant_kind="agent"),
        Disclosure(owner_id="o-1", item_id="budget", recipient_agent_id="a-2", turn=2**31 - 1),
        Denial(rule="slip.not_cleared", subject_id="agent-2", resource_id=None),
        OffersRevealed(agent_ids=["agent-1", "agent-2"], complete=False),
        Join(participant_id="b" * 64, participant_kind="owner"),
    ]
    batch, _appended = services._chained(uuid.uuid4(), events, (41, GENESIS_HASH))
    return batch


def test_each_prepared_value_is_the_fields_own() -> None:
    batch = _batch()
    prep = services._ColumnValues(connection)
    cases: list[tuple[Any, list[Any], list[Any]]] = [
        (services._EVENT_SEQ, [prep.count(services._EVENT_SEQ, s) for s in batch.seqs], batch.seqs),
        (services._EVENT_DATA, prep.data(batch.data), batch.data),
        (services._EVENT_CANONICAL, prep.binaries(batch.canonical), batch.canonical),
        (
            services._EVENT_HASH,
            [prep.text(services._EVENT_HASH, h) for h in batch.hashes],
            batch.hashes,
        ),
        (
            services._EVENT_KIND,
            [prep.text(services._EVENT_KIND, k) for k in batch.kinds],
            batch.kinds,
        ),
        (
            services._HEAD_SEQ,
            [prep.count(services._HEAD_SEQ, s) for s in (0, 1, 2**53 - 1)],
            [0, 1, 2**53 - 1],
        ),
    ]
    for field, ours, given in cases:
        for mine, value in zip(ours, given, strict=True):
            django = field.get_db_prep_save(value, connection)
            assert _same(mine, django), (field.name, value, mine, django)


def test_values_of_another_type_go_through_the_field() -> None:
    """A str or int subclass, plain data or a bytearray: not the chain's own types, so the
    field prepares them, whatever it makes of them."""
    prep = services._ColumnValues(connection)
    kind, seq = services._EVENT_KIND, services._EVENT_SEQ
    assert _same(prep.text(kind, _Text("join")), kind.get_db_prep_save(_Text("join"), connection))
    assert _same(prep.count(seq, _Count(7)), seq.get_db_prep_save(_Count(7), connection))
    plain = {"participant_id": "a", "participant_kind": "agent"}
    data = services._EVENT_DATA
    assert _same(
        prep.data([CanonicalData(plain, '{"x":1}'), plain])[1],  # type: ignore[list-item]
        data.get_db_prep_save(plain, connection),
    )
    canonical = services._EVENT_CANONICAL
    mine = prep.binaries([b"x", bytearray(b"y")])[1]  # type: ignore[list-item]
    assert _same(mine, canonical.get_db_prep_save(bytearray(b"y"), connection))
