"""Issue 17: a batch's rows are built by ``_chained_plain`` (each event's data read off the
model and written by a template, the envelope as one string) when every value is plain, else
by ``_chained_exact`` (the previous implementation: ``model_dump``, ``_data_canonical`` and
``envelopes_for``). Both must give the same rows, byte for byte: the stored bytes, the hashes,
the data column's text and values, and the chain; whatever the plain path cannot write
exactly (escapes, non-ASCII, big numbers, booleans, lists, a refused event) goes the exact way.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

import pytest
import rfc8785
from django.db import connection, transaction

from ledger import services
from ledger.chain import GENESIS_HASH, CanonicalData
from ledger.events import (
    Denial,
    Disclosure,
    GrantExpired,
    Join,
    KeyEnrolled,
    LedgerEventRecord,
    OffersRevealed,
    RoomPaused,
)
from ledger.models import LedgerEvent
from ledger.services import LedgerAppendError, ledger_append_many
from ledger.verification import ledger_verify_room

_MOMENT = datetime(2026, 12, 4, 22, 30, 1, 234567, tzinfo=UTC)
_ROOM = uuid.UUID("0f0e0d0c-0b0a-4908-8706-050403020100")


def _turn() -> list[LedgerEventRecord]:
    """A context request's events: disclosures, then refusals, one with no resource."""
    agent = str(uuid.uuid4())
    events: list[LedgerEventRecord] = [
        Disclosure(owner_id="42", item_id=str(uuid.uuid4()), recipient_agent_id=agent, turn=t)
        for t in (0, 7, 2**31 - 1)
    ]
    events += [
        Denial(rule="slip.not_cleared", subject_id=agent, resource_id="budget"),
        Denial(rule="room.closed", subject_id=agent, resource_id=None),
        GrantExpired(grant_id="g-1", action_id=None),
        RoomPaused(by="owner:42", reason_rule="flare"),
        Join(participant_id="agent-1:a.b_c", participant_kind="agent"),
    ]
    return events


def _rows(built: tuple[services._EventRows, list[services.AppendedEvent]]) -> list[Any]:
    rows, appended = built
    return [
        rows.room_id,
        rows.occurred_at,
        rows.prev_hash,
        rows.seqs,
        rows.kinds,
        rows.texts,
        [(dict(d), d.text) for d in rows.data],
        rows.hashes,
        rows.canonical,
        appended,
    ]


@pytest.mark.parametrize(
    "head", [(0, GENESIS_HASH), (41, "ab" * 32), (2**53 - 20, "0" * 64)], ids=str
)
def test_a_turns_batch_takes_the_plain_path_and_matches_the_exact_one(head) -> None:
    events = _turn()
    plain = services._chained_plain(_ROOM, events, head, _MOMENT)
    assert plain is not None
    assert _rows(plain) == _rows(services._chained_exact(_ROOM, events, head, _MOMENT))
    # And each envelope is RFC 8785 of the whole, its data the model's JSON dump.
    rows, _ = plain
    prev = head[1]
    for event, seq, stored, digest in zip(
        events, rows.seqs, rows.canonical, rows.hashes, strict=True
    ):
        envelope = {
            "room_id": str(_ROOM),
            "seq": seq,
            "kind": event.kind,  # type: ignore[union-attr]
            "occurred_at": "2026-12-04T22:30:01.234567Z",
            "data": event.model_dump(mode="json", exclude={"kind"}),
            "prev_hash": prev,
        }
        assert stored == rfc8785.dumps(envelope)
        prev = digest


def _constructed(**values: Any) -> Disclosure:
    """A record whose values no validation saw (``model_construct``): the chain must still
    write them exactly as the previous implementation did, or refuse them as it did."""
    base: dict[str, Any] = {
        "owner_id": "42", "item_id": "budget", "recipient_agent_id": "a-2", "turn": 1,
    }  # fmt: skip
    return Disclosure.model_construct(**(base | values))


@pytest.mark.parametrize(
    "odd",
    [
        _constructed(item_id='say "hi"'),
        _constructed(item_id="back\\slash"),
        _constructed(item_id="tab\there"),
        _constructed(item_id="caf\u00e9"),
        _constructed(item_id="\U0001f600"),
        _constructed(item_id="%s %d %%"),
        _constructed(item_id=""),
        _constructed(turn=2**53),
        _constructed(turn=-(2**53)),
        _constructed(turn=-1),
        _constructed(turn=True),
        _constructed(turn=None),
        _constructed(turn="7"),
        _constructed(turn=1.5),
        _constructed(item_id=["a", "b"]),
        KeyEnrolled(owner_id="42", key_id="k-1", after_key_loss=True),
        OffersRevealed(agent_ids=["agent-1", "agent-2"], complete=False),
    ],
    ids=repr,
)
@pytest.mark.filterwarnings("ignore:Pydantic serializer warnings:UserWarning")
def test_a_batch_with_anything_not_plain_is_built_the_exact_way(odd: Any) -> None:
    events = [*_turn()[:2], odd, *_turn()[2:]]
    head = (5, GENESIS_HASH)
    try:
        exact = _rows(services._chained_exact(_ROOM, events, head, _MOMENT))
    except Exception as refused:  # whatever the exact path raises
        with pytest.raises(type(refused)):
            services._chained(_ROOM, events, head)
        return
    # The plain path may build a batch only if it is the same, byte for byte.
    plain = services._chained_plain(_ROOM, events, head, _MOMENT)
    if plain is not None:
        assert _rows(plain) == exact


def test_a_refused_or_oversized_event_is_refused_as_before() -> None:
    head = (0, GENESIS_HASH)
    long = _constructed(item_id="x" * 5000)
    assert services._chained_plain(_ROOM, [*_turn(), long], head, _MOMENT) is None
    with pytest.raises(LedgerAppendError, match="disclosure event is 5"):
        services._chained(_ROOM, [*_turn(), long], head)
    not_a_record: Any = {"kind": "join", "participant_id": "x"}
    with pytest.raises(LedgerAppendError, match="not a ledger event record: dict"):
        services._chained(_ROOM, [*_turn(), not_a_record], head)
    with pytest.raises(rfc8785.IntegerDomainError):
        services._chained(_ROOM, _turn(), (2**53 - 2, GENESIS_HASH))


@pytest.mark.django_db
def test_a_mixed_batch_is_stored_as_the_exact_path_would_and_verifies() -> None:
    """The plain path's rows written by the batch insert are the exact path's rows, column
    by column as the ORM reads them and byte for byte in the stored envelope; the chain
    verifies from its stored bytes."""
    room_id = uuid.uuid4()
    events = _turn() * 3
    with transaction.atomic():
        appended = ledger_append_many(room_id=room_id, events=events)
    stored = list(LedgerEvent.objects.filter(room_id=room_id).order_by("seq"))
    moment = stored[0].occurred_at
    rows, expected = services._chained_exact(room_id, events, (0, GENESIS_HASH), moment)
    assert appended == expected
    assert [bytes(e.canonical) for e in stored] == rows.canonical
    assert [e.hash for e in stored] == rows.hashes
    assert [e.data for e in stored] == [dict(d) for d in rows.data]
    if connection.vendor == "sqlite":  # the column's text is the envelope's data member
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT data FROM ledger_ledgerevent WHERE room_id = %s ORDER BY seq",
                [room_id.hex],
            )
            assert [text for (text,) in cursor.fetchall()] == rows.texts
    assert ledger_verify_room(room_id=room_id).ok


def test_the_data_column_values_are_made_only_when_asked_for() -> None:
    rows, _ = services._chained(_ROOM, _turn(), (0, GENESIS_HASH))
    assert "data" not in rows.__dict__
    assert all(type(d) is CanonicalData for d in rows.data)
    assert [d.text for d in rows.data] == rows.texts
