"""A socket's context request checks its agent's standing from the turn's own facts
(``context.context_for_agent_acked``): the verdict is the one ``rooms.standing`` reads for
every other delivery, it costs no statement of its own, and a reader out of standing has no
turn: no use spent, nothing disclosed or recorded, its ack not moved. Over a socket,
tests/rooms/test_consumer_standing.py closes such a socket with the verdict's code."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from ledger.models import LedgerEvent
from rooms import context, services, standing
from rooms.models import Room, RoomMember, RoomState
from rooms.protocol import CloseCode
from slips.models import SlipCapability
from tests.rooms.test_context_ack import _room

pytestmark = pytest.mark.django_db(transaction=True)


def _reader(setup: Any, owner_id: int | None = None) -> standing.Reader:
    owner = setup.b.owner.pk if owner_id is None else owner_id
    return standing.Reader(setup.room.id, owner, setup.b.agent.id)


def _asked(setup: Any, reader: standing.Reader, ack: int | None = None) -> Any:
    """The context request's outcome: its context, or the close code it was refused with."""
    try:
        return context.context_for_agent_acked(
            room_id=setup.room.id,
            agent_id=setup.b.agent.id,
            owner_id=reader.owner_id,
            asked=[],
            ack=ack,
        )
    except context.OutOfStanding as out:
        return out.code


def _record(setup: Any) -> tuple[Any, ...]:
    """What a turn changes: the seat's turn and ack, the room's ledger, the slips' uses."""
    seat = RoomMember.objects.filter(room_id=setup.room.id, agent=setup.b.agent).first()
    uses = sorted(
        SlipCapability.objects.filter(slip__room_id=setup.room.id).values_list("id", "uses_left")
    )
    return (
        None if seat is None else (seat.context_turn, seat.acked_seq),
        LedgerEvent.objects.filter(room_id=setup.room.id).count(),
        uses,
    )


def test_the_standing_costs_no_statement_of_its_own(make_open_room: Any) -> None:
    setup = _room(make_open_room)
    context.context_for_agent(room_id=setup.room.id, agent_id=setup.b.agent.id)  # warm
    with CaptureQueriesContext(connection) as unchecked:
        context.context_for_agent(room_id=setup.room.id, agent_id=setup.b.agent.id)
    with CaptureQueriesContext(connection) as checked:
        assembled = _asked(setup, _reader(setup))
    assert not isinstance(assembled, CloseCode) and len(assembled.peer_items) == 1
    assert len(checked) == len(unchecked), [q["sql"] for q in checked.captured_queries]


def _blocked(setup: Any) -> None:
    RoomMember.objects.filter(room=setup.room, agent=setup.b.agent).update(standing="blocked")


def _revoked(setup: Any) -> None:
    services.agent_revoke(owner=setup.b.owner, agent_id=setup.b.agent.id)


def _state(state: str) -> Callable[[Any], None]:
    return lambda setup: Room.objects.filter(id=setup.room.id).update(state=state)


def _seat_taken(setup: Any) -> None:
    # The seat now holds another agent of its owner's (rebound): this one has no seat.
    other = services.agent_register(owner=setup.b.owner, name="another").agent
    RoomMember.objects.filter(room=setup.room, agent=setup.b.agent).update(agent=other)


def _seats_gone(setup: Any) -> None:
    RoomMember.objects.filter(room=setup.room).delete()  # as a deletion leaves them


OUT = [
    ("blocked", _blocked, CloseCode.FORBIDDEN),
    ("revoked", _revoked, CloseCode.UNAUTHENTICATED),
    ("closed", _state(RoomState.CLOSED), CloseCode.ROOM_NOT_JOINABLE),
    ("draft", _state(RoomState.DRAFT), CloseCode.ROOM_NOT_JOINABLE),
    ("seat holds another agent", _seat_taken, CloseCode.FORBIDDEN),
    ("seats gone", _seats_gone, CloseCode.FORBIDDEN),
]


@pytest.mark.parametrize(
    ("change", "code"), [(c, code) for _, c, code in OUT], ids=[n for n, *_ in OUT]
)
def test_out_of_standing_has_no_turn_and_the_verdict_is_the_standing_rules(
    make_open_room: Any, change: Callable[[Any], None], code: CloseCode
) -> None:
    setup = _room(make_open_room)
    change(setup)
    before = _record(setup)
    assert _asked(setup, _reader(setup), ack=1) == code
    assert standing.reader_standing(_reader(setup)) == code  # the same rule, the same rows
    assert _record(setup) == before  # no turn, no ack, no use, no ledger event


def test_another_owner_asking_for_the_agent_is_refused(
    make_open_room: Any, make_owner: Any
) -> None:
    setup = _room(make_open_room)
    before = _record(setup)
    for owner_id in (setup.a.owner.pk, make_owner("mallory").pk):
        reader = _reader(setup, owner_id)
        assert _asked(setup, reader) == CloseCode.FORBIDDEN
        assert standing.reader_standing(reader) == CloseCode.FORBIDDEN
    assert _record(setup) == before


@pytest.mark.parametrize("seat_standing", ["active", "muted", "stepped_in"])
def test_an_agent_in_standing_has_its_turn(make_open_room: Any, seat_standing: str) -> None:
    setup = _room(make_open_room)
    RoomMember.objects.filter(room=setup.room, agent=setup.b.agent).update(standing=seat_standing)
    assert standing.reader_standing(_reader(setup)) is None
    assembled = _asked(setup, _reader(setup), ack=1)
    assert not isinstance(assembled, CloseCode) and assembled.turn == 1
    assert _record(setup)[0] == (1, 1)
    # Only an active agent is given the vault's items; the others are told they are withdrawn.
    assert len(assembled.peer_items) == (1 if seat_standing == "active" else 0)


def test_a_paused_room_still_gives_its_agents_a_context(make_open_room: Any) -> None:
    setup = _room(make_open_room)
    _state(RoomState.PAUSED)(setup)
    assert standing.reader_standing(_reader(setup)) is None
    assembled = _asked(setup, _reader(setup))
    assert not isinstance(assembled, CloseCode)
    assert assembled.peer_items == [] and len(assembled.peer_messages) == 2
