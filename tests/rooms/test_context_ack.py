"""The ack riding a `context_request`, recorded by the statement that starts the turn
(``context.context_for_agent_acked``): exactly what the `ack` frame sent just before it would
record (tests/rooms/test_ack_rides.py drives it over a socket), at no statement of its own,
and kept when the turn that follows fails."""

from __future__ import annotations

import time
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from ledger.models import LedgerEvent
from ledger.services import LedgerAppendError
from rooms import context, services
from rooms.models import RoomMember
from tests.rooms.test_context import calendar, free_busy_7d, sign

pytestmark = pytest.mark.django_db(transaction=True)


def _room(make_open_room: Any) -> Any:
    """Alice's slip clears her free/busy for Bob's agent; Alice's agent has said two things."""
    setup = make_open_room()
    calendar(setup.a.owner, int(time.time()))
    sign(setup, setup.a, [free_busy_7d()])
    sign(setup, setup.b, [])
    for n in (1, 2):
        services.message_say(
            room_id=setup.room.id, agent_id=setup.a.agent.id, client_id=f"a-{n}", text=f"{n}?"
        )
    return setup


def _seat(setup: Any) -> tuple[int, int]:
    seat = RoomMember.objects.get(room_id=setup.room.id, agent=setup.b.agent)
    return seat.context_turn, seat.acked_seq


def _turn(setup: Any, ack: int | None) -> Any:
    return context.context_for_agent_acked(
        room_id=setup.room.id,
        agent_id=setup.b.agent.id,
        owner_id=setup.b.owner.pk,
        asked=[],
        ack=ack,
    )


def test_the_ack_costs_no_statement_of_its_own(make_open_room: Any) -> None:
    setup = _room(make_open_room)
    _turn(setup, None)  # the first turn of a process prepares what later ones reuse
    with CaptureQueriesContext(connection) as alone:
        assert _turn(setup, None) is not None
    with CaptureQueriesContext(connection) as acked:
        assembled = _turn(setup, 1)
    assert assembled is not None and assembled.turn == 3 and len(assembled.peer_items) == 1
    assert len(acked) == len(alone), [q["sql"] for q in acked.captured_queries]
    assert _seat(setup) == (3, 1)


def test_an_ack_never_moves_back_and_one_beyond_the_record_starts_no_turn(
    make_open_room: Any,
) -> None:
    setup = _room(make_open_room)
    assert _turn(setup, 2) is not None
    assert _seat(setup) == (1, 2)
    assert _turn(setup, 1) is not None  # lower than the seat's: the turn, the ack unmoved
    assert _seat(setup) == (2, 2)
    disclosed = LedgerEvent.objects.filter(room_id=setup.room.id, kind="disclosure").count()
    assert _turn(setup, 3) is None  # beyond the record: refused whole
    assert _seat(setup) == (2, 2)
    assert LedgerEvent.objects.filter(room_id=setup.room.id, kind="disclosure").count() == disclosed


def test_a_turn_that_fails_keeps_its_ack(make_open_room: Any, monkeypatch: Any) -> None:
    setup = _room(make_open_room)

    def unavailable(**_: Any) -> None:
        raise LedgerAppendError("the ledger is down")

    monkeypatch.setattr(context, "ledger_append_many", unavailable)
    assembled = _turn(setup, 2)
    assert assembled is not None
    assert assembled.peer_items == []  # nothing disclosed: the turn rolled back
    assert any("paused" in notice for notice in assembled.notices)
    assert _seat(setup) == (1, 2)  # the turn started again on its own, with the ack
