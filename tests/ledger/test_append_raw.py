"""Issue 17: ``ledger_append_many`` writes its rows and moves the head with written SQL, not
the ORM's ``bulk_create`` and queryset ``update`` compiled per turn. These tests hold it to
what the ORM wrote: the same columns with the same storage types on either backend, the
same compare-and-set on the head (a moved or forged head is never overwritten), the same
failure behaviour (nothing recorded, the caller's block rolled back) and the same metrics.
"""

from __future__ import annotations

import dataclasses
import uuid
from datetime import timedelta
from typing import Any
from uuid import UUID

import pytest
from django.db import connection, transaction
from django.db.models.signals import post_save, pre_save
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from ledger import services, signing
from ledger.chain import GENESIS_HASH, occurred_at_text
from ledger.events import (
    Denial,
    Disclosure,
    Join,
    LedgerEventRecord,
    OffersRevealed,
    RoomPaused,
)
from ledger.models import LedgerEvent, LedgerHead, SignedHead
from ledger.services import LedgerAppendError, ledger_append, ledger_append_many
from ledger.verification import ledger_verify_room
from synapsia.metrics import REGISTRY

pytestmark = pytest.mark.django_db

_COLUMNS = ("room_id", "seq", "kind", "occurred_at", "data", "prev_hash", "hash", "canonical")
_HEAD_COLUMNS = ("room_id", "seq", "hash", "signed_at", "public_key", "signature")


def _awkward_events() -> list[LedgerEventRecord]:
    """Values whose encoding differs between drivers and encoders: a list, a boolean, a null,
    the largest count, punctuation in identifiers, several kinds."""
    return [
        Join(participant_id="agent-1:a.b_c", participant_kind="agent"),
        Disclosure(
            owner_id="owner-1", item_id="budget-1", recipient_agent_id="agent-2", turn=2**31 - 1
        ),
        Denial(rule="slip.not_cleared", subject_id="agent-2", resource_id=None),
        OffersRevealed(agent_ids=["agent-1", "agent-2"], complete=False),
    ]


def _stored(
    room_id: UUID, model: type[LedgerEvent | SignedHead] = LedgerEvent
) -> list[tuple[Any, ...]]:
    """The room's events (or signed heads) exactly as the database holds them: every column
    but the id, read with plain SQL (no ORM conversion), with each value's storage type on
    SQLite."""
    q = connection.ops.quote_name
    room = model._meta.get_field("room_id").get_db_prep_value(room_id, connection)
    columns = _COLUMNS if model is LedgerEvent else _HEAD_COLUMNS
    if connection.vendor == "sqlite":
        picked = ", ".join(f"{q(c)}, typeof({q(c)})" for c in columns)
    else:
        # jsonb as its text form and its value both: PostgreSQL keeps the value, not the text.
        picked = ", ".join(f"{q(c)}::text, {q(c)}" if c == "data" else q(c) for c in columns)
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT {picked} FROM {q(model._meta.db_table)} "  # noqa: S608
            f"WHERE {q('room_id')} = %s ORDER BY {q('seq')}",
            [room],
        )
        return [
            tuple(bytes(v) if isinstance(v, memoryview) else v for v in row)
            for row in cursor.fetchall()
        ]


class _Undo(Exception):
    pass


def test_the_rows_are_exactly_what_the_orm_wrote() -> None:
    """The same chained rows written by the new insert and by the ORM's ``bulk_create`` (in
    turn, the first rolled back) are equal in every column and storage type."""
    room_id = uuid.uuid4()
    batch, _appended = services._chained(room_id, _awkward_events(), (0, GENESIS_HASH))
    rows = batch.as_fields()
    assert set(rows[0]) == {
        f.attname for f in LedgerEvent._meta.concrete_fields if not f.primary_key
    }  # every column the model has is written
    with transaction.atomic():
        try:
            with transaction.atomic():
                services._events_insert(connection, batch)
                written = _stored(room_id)
                raise _Undo
        except _Undo:
            pass
        assert _stored(room_id) == []
        LedgerEvent.objects.bulk_create([LedgerEvent(**row) for row in rows])
        by_orm = _stored(room_id)
    assert len(written) == 4
    assert written == by_orm
    # And read back through the model, the rows are the chain's values.
    for event, row in zip(
        LedgerEvent.objects.filter(room_id=room_id).order_by("seq"), rows, strict=True
    ):
        assert event.data == dict(row["data"])  # type: ignore[call-overload]
        assert bytes(event.canonical) == row["canonical"]
        assert event.occurred_at == row["occurred_at"]


def test_a_batch_on_the_head_it_saw_is_two_written_statements_one_on_postgresql(
    settings: Any,
) -> None:
    """The turn's path: the compare-and-set on the head, then one INSERT, whatever the count
    (on PostgreSQL the INSERT's own ``WITH``);
    observed once in the append histogram, and like ``bulk_create`` it sends no model signals
    (so the single-append insert histogram is not fed by batches)."""
    settings.SYNAPSIA = {**settings.SYNAPSIA, "LEDGER_HEAD_EVERY_EVENTS": 10_000}
    room_id = uuid.uuid4()
    with transaction.atomic():
        first = ledger_append(room_id=room_id, event=_awkward_events()[0])
    saves: list[object] = []

    def saw(**kwargs: object) -> None:
        saves.append(kwargs)

    pre_save.connect(saw, sender=LedgerEvent, dispatch_uid="h11-pre")
    post_save.connect(saw, sender=LedgerEvent, dispatch_uid="h11-post")
    batches = (
        REGISTRY.get_sample_value("synapsia_ledger_append_seconds_count", {"path": "batch"}) or 0.0
    )
    inserts = REGISTRY.get_sample_value("synapsia_ledger_event_insert_seconds_count") or 0.0
    try:
        with transaction.atomic(), CaptureQueriesContext(connection) as captured:
            appended = ledger_append_many(
                room_id=room_id, events=_awkward_events() * 5, head_seen=(first.seq, first.hash)
            )
    finally:
        pre_save.disconnect(dispatch_uid="h11-pre", sender=LedgerEvent)
        post_save.disconnect(dispatch_uid="h11-post", sender=LedgerEvent)
    sql = [q["sql"] for q in captured.captured_queries]
    body = [s for s in sql if s.startswith(("UPDATE", "INSERT", "SELECT", "WITH"))]
    if connection.vendor == "postgresql":
        # One statement: the insert carries the head's compare-and-set.
        assert len(body) == 1, sql
        assert body[0].startswith('WITH moved AS (UPDATE "ledger_ledgerhead"'), sql
        assert 'AND "seq" = ' in body[0] and 'INSERT INTO "ledger_ledgerevent"' in body[0], sql
    else:
        assert len(body) == 2, sql
        assert body[0].startswith('UPDATE "ledger_ledgerhead"') and "AND" in body[0], sql
        assert body[1].startswith('INSERT INTO "ledger_ledgerevent"'), sql
    assert [a.seq for a in appended] == list(range(2, 22))
    assert LedgerHead.objects.values_list("seq", "hash").get(room_id=room_id) == (
        21,
        appended[-1].hash,
    )
    assert saves == []
    assert (
        REGISTRY.get_sample_value("synapsia_ledger_append_seconds_count", {"path": "batch"})
        == batches + 1
    )
    assert (REGISTRY.get_sample_value("synapsia_ledger_event_insert_seconds_count") or 0.0) == (
        inserts
    )
    assert ledger_verify_room(room_id=room_id).ok


@pytest.mark.parametrize("forged", ["seq", "hash"])
def test_a_head_seen_that_is_not_the_head_never_overwrites_it(forged: str) -> None:
    """A caller's stale or wrong head (the seq right but another hash, or the hash right but
    another seq) misses the compare-and-set: the batch is chained after the real head."""
    room_id = uuid.uuid4()
    with transaction.atomic():
        a = ledger_append(room_id=room_id, event=_awkward_events()[0])
        b = ledger_append(room_id=room_id, event=_awkward_events()[1])
    seen = (b.seq, a.hash) if forged == "hash" else (a.seq, b.hash)
    with transaction.atomic():
        appended = ledger_append_many(room_id=room_id, events=_awkward_events(), head_seen=seen)
    assert [x.seq for x in appended] == [3, 4, 5, 6]
    assert appended[0].prev_hash == b.hash
    assert LedgerHead.objects.get(room_id=room_id).seq == 6
    assert ledger_verify_room(room_id=room_id).ok


def test_a_refused_insert_records_nothing_and_rolls_the_caller_back() -> None:
    """A head row that claims less than the chain holds (tampered): the compare-and-set
    passes, the INSERT hits the (room, seq) constraint. Nothing is recorded, the head is not
    moved, and the caller's effect in the same block is rolled back even though it caught
    the error."""
    room_id = uuid.uuid4()
    with transaction.atomic():
        ledger_append(room_id=room_id, event=_awkward_events()[0])
    LedgerHead.objects.filter(room_id=room_id).update(seq=0, hash=GENESIS_HASH)
    with transaction.atomic():
        LedgerHead.objects.create(room_id=uuid.uuid4())  # the guarded "effect"
        effect = LedgerHead.objects.count()
        with pytest.raises(LedgerAppendError):
            ledger_append_many(
                room_id=room_id, events=_awkward_events(), head_seen=(0, GENESIS_HASH)
            )
    assert LedgerHead.objects.count() == effect - 1
    assert LedgerEvent.objects.filter(room_id=room_id).count() == 1
    assert LedgerHead.objects.values_list("seq", "hash").get(room_id=room_id) == (0, GENESIS_HASH)


def test_a_batch_past_the_parameter_limit_is_split_and_still_one_chain(settings: Any) -> None:
    """More events than one statement may carry on SQLite (999 parameters, 124 rows of 8):
    several INSERTs, one chain, heads signed at every multiple of N inside the batch."""
    settings.SYNAPSIA = {**settings.SYNAPSIA, "LEDGER_HEAD_EVERY_EVENTS": 64}
    room_id = uuid.uuid4()
    events = [Join(participant_id=f"agent-{i}", participant_kind="agent") for i in range(300)]
    with transaction.atomic(), CaptureQueriesContext(connection) as captured:
        appended = ledger_append_many(room_id=room_id, events=events)
    inserts = [
        q["sql"]
        for q in captured.captured_queries
        if q["sql"].startswith('INSERT INTO "ledger_ledgerevent"')
    ]
    limit = connection.features.max_query_params
    expected = 1 if not limit else -(-300 // (limit // 8))
    assert len(inserts) == expected
    assert [a.seq for a in appended] == list(range(1, 301))
    assert LedgerEvent.objects.filter(room_id=room_id).count() == 300
    report = ledger_verify_room(room_id=room_id)
    assert report.ok, report


def test_a_head_signed_in_the_append_is_the_row_the_orm_stored(
    settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The heads a batch signs (at a multiple of N and after a pause) are stored by a written
    INSERT: the same columns and storage types as ``SignedHead.save`` stores for the same
    signature, and the chain verifies with them."""
    settings.SYNAPSIA = {**settings.SYNAPSIA, "LEDGER_HEAD_EVERY_EVENTS": 3}
    built: list[SignedHead] = []
    real_build = signing.signed_head_build

    def build(**kwargs: Any) -> SignedHead:
        built.append(real_build(**kwargs))
        return built[-1]

    monkeypatch.setattr(signing, "signed_head_build", build)
    room_id = uuid.uuid4()
    events = [*_awkward_events(), RoomPaused(by="owner-1", reason_rule="owner_paused")]
    with transaction.atomic():
        ledger_append_many(room_id=room_id, events=events)
        written = _stored(room_id, SignedHead)
        try:
            with transaction.atomic():
                SignedHead.objects.filter(room_id=room_id).delete()
                for head in built:
                    SignedHead(**{c: getattr(head, c) for c in _HEAD_COLUMNS}).save()
                by_orm = _stored(room_id, SignedHead)
                raise _Undo
        except _Undo:
            pass
    assert [h.seq for h in built] == [3, 5]
    assert len(written) == 2
    assert written == by_orm
    assert ledger_verify_room(room_id=room_id).ok


def test_a_turns_insert_stays_within_the_drivers_kept_parses() -> None:
    """A turn's 11 events are written with at most 50 parameters: psycopg keeps its parse of
    a statement's placeholders only up to that many (``MAX_CACHED_STATEMENT_PARAMS``), and
    parsed the 55 of a parameter per row's seq again on every execute (~150 us a turn). Each
    row's number is the batch's first plus its place; the rows are the chain's."""
    from psycopg import _queries  # the driver's own limit, so a new psycopg is noticed

    room_id = uuid.uuid4()
    with transaction.atomic():
        first = ledger_append(room_id=room_id, event=_awkward_events()[0])
    sent: list[Any] = []

    def statement(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        if "INSERT INTO" in sql:
            sent.append(params)
        return execute(sql, params, many, context)

    events = [*(_awkward_events()[1:2] * 10), _awkward_events()[2]]
    with transaction.atomic(), connection.execute_wrapper(statement):
        appended = ledger_append_many(
            room_id=room_id, events=events, head_seen=(first.seq, first.hash)
        )
    assert [a.seq for a in appended] == list(range(2, 13))
    assert len(sent) == 1
    assert len(sent[0]) <= _queries.MAX_CACHED_STATEMENT_PARAMS
    stored = LedgerEvent.objects.filter(room_id=room_id).order_by("seq")
    assert list(stored.values_list("seq", flat=True)) == list(range(1, 13))
    assert ledger_verify_room(room_id=room_id).ok


def test_a_batch_not_numbered_one_by_one_is_refused_and_writes_nothing() -> None:
    """The insert numbers each row as the first plus its place: a batch numbered otherwise
    (never made by ``_chained``) is refused before anything is written."""
    room_id = uuid.uuid4()
    batch, _appended = services._chained(room_id, _awkward_events(), (0, GENESIS_HASH))
    gapped = dataclasses.replace(batch, seqs=[1, 2, 4, 5])
    with pytest.raises(LedgerAppendError), transaction.atomic():
        services._events_insert(connection, gapped)
    assert _stored(room_id) == []


def _statements_of(append: Any) -> list[str]:
    """The statements ``append()`` sends, as written (before their values are bound)."""
    sent: list[str] = []

    def statement(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        if sql.startswith(("UPDATE", "INSERT", "SELECT", "WITH")):
            sent.append(sql)
        return execute(sql, params, many, context)

    with transaction.atomic(), connection.execute_wrapper(statement):
        append()
    return sent


def test_a_single_append_is_a_batch_of_one(settings: Any) -> None:
    """``ledger_append`` writes through the batch's own statements (the head locked, one
    INSERT, the head moved: no ORM save, no model signals), the same text as
    ``ledger_append_many`` of the same event; it is timed once as ``one``, its INSERT once in
    the single-append histogram, and a batch feeds neither."""
    settings.SYNAPSIA = {**settings.SYNAPSIA, "LEDGER_HEAD_EVERY_EVENTS": 10_000}
    alone, batched = uuid.uuid4(), uuid.uuid4()
    first, second = _awkward_events()[:2]
    with transaction.atomic():
        ledger_append(room_id=alone, event=first)
        ledger_append_many(room_id=batched, events=[first])
    saves: list[object] = []
    appended: list[Any] = []

    def saw(**kwargs: object) -> None:
        saves.append(kwargs)

    def sample(name: str, labels: dict[str, str] | None = None) -> float:
        return REGISTRY.get_sample_value(name, labels or {}) or 0.0

    ones = sample("synapsia_ledger_append_seconds_count", {"path": "one"})
    inserts = sample("synapsia_ledger_event_insert_seconds_count")
    pre_save.connect(saw, sender=LedgerEvent, dispatch_uid="one-pre")
    post_save.connect(saw, sender=LedgerEvent, dispatch_uid="one-post")
    try:
        single = _statements_of(lambda: appended.append(ledger_append(room_id=alone, event=second)))
        assert sample("synapsia_ledger_event_insert_seconds_count") == inserts + 1
        batch = _statements_of(
            lambda: appended.extend(ledger_append_many(room_id=batched, events=[second]))
        )
    finally:
        pre_save.disconnect(dispatch_uid="one-pre", sender=LedgerEvent)
        post_save.disconnect(dispatch_uid="one-post", sender=LedgerEvent)
    assert len(single) == 3, single
    assert single[0].startswith("SELECT") and '"ledger_ledgerhead"' in single[0], single
    assert single[1].startswith('INSERT INTO "ledger_ledgerevent"'), single
    assert single[2].startswith('UPDATE "ledger_ledgerhead"'), single
    assert single == batch
    assert saves == []
    assert sample("synapsia_ledger_append_seconds_count", {"path": "one"}) == ones + 1
    assert sample("synapsia_ledger_event_insert_seconds_count") == inserts + 1
    assert [(a.seq, a.kind) for a in appended] == [(2, second.kind)] * 2
    assert ledger_verify_room(room_id=alone).ok and ledger_verify_room(room_id=batched).ok


def test_a_single_append_as_of_a_moment_is_recorded_at_it() -> None:
    """The retention purge's "as of": the event, its stored bytes and its row carry the moment
    given, not the moment of the append, and the chain verifies."""
    room_id = uuid.uuid4()
    moment = timezone.now().replace(microsecond=678901) - timedelta(minutes=5)
    with transaction.atomic():
        appended = ledger_append(room_id=room_id, event=_awkward_events()[0], occurred_at=moment)
    stored = LedgerEvent.objects.get(room_id=room_id, seq=appended.seq)
    assert appended.occurred_at == stored.occurred_at == moment
    assert f'"occurred_at":"{occurred_at_text(moment)}"'.encode() in bytes(stored.canonical)
    assert occurred_at_text(moment).endswith(".678901Z")
    assert ledger_verify_room(room_id=room_id).ok
