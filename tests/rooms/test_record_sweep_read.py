"""The record sweep's read (``rooms.standing.rooms_swept``): every seat read afresh on every
sweep, whatever the previous sweep's ids it is given."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from rooms import services, standing
from rooms.models import RoomMember

pytestmark = pytest.mark.django_db


def _seats(swept: standing.Swept, room_id: Any) -> dict[int, tuple[Any, str, str, bool]]:
    return {
        s.owner_id: (s.agent_id, s.standing, s.room_state, s.agent_revoked)
        for s in swept.seats[room_id]
    }


def test_each_sweep_reads_the_seats_as_they_are_now(make_open_room: Any) -> None:
    setup = make_open_room()
    room_id = setup.room.id
    alice, bob = setup.a.owner, setup.b.owner
    first = standing.rooms_swept([room_id])
    assert first.latest == {room_id: setup.room.last_seq}
    assert _seats(first, room_id) == {
        alice.id: (setup.a.agent.id, "active", "open", False),
        bob.id: (setup.b.agent.id, "active", "open", False),
    }
    assert set(first.agent_ids.values()) == {setup.a.agent.id, setup.b.agent.id}

    # Between sweeps: Bob's seat holds another agent (written to the record directly: the
    # services bind only in a draft), Alice's agent is revoked.
    replacement = services.agent_register(owner=bob, name="Bob's other agent")
    RoomMember.objects.filter(room_id=room_id, owner=bob).update(agent=replacement.agent)
    services.agent_revoke(owner=alice, agent_id=setup.a.agent.id)
    second = standing.rooms_swept([room_id], first.agent_ids)
    seats = _seats(second, room_id)
    assert seats[bob.id][0] == replacement.agent.id
    assert seats[alice.id][3] is True
    # Only the agents seated now are carried to the next sweep.
    assert set(second.agent_ids.values()) == {setup.a.agent.id, replacement.agent.id}
    reader = standing.Reader(room_id, bob.id, setup.b.agent.id)
    assert standing.seat_verdict(reader, second.seats[room_id]) is not None


def test_ids_the_previous_sweep_did_not_read_are_parsed_from_the_record(
    make_open_room: Any,
) -> None:
    """The carried ids only spare parsing; a seated agent not among them is parsed."""
    setup = make_open_room()
    room_id = setup.room.id
    seated = set(RoomMember.objects.filter(room_id=room_id).values_list("agent_id", flat=True))
    swept = standing.rooms_swept([room_id], {uuid.uuid4().hex: uuid.uuid4()})
    assert {s.agent_id for s in swept.seats[room_id]} == seated


def test_a_room_that_is_gone_has_neither_number_nor_seats(make_open_room: Any) -> None:
    setup = make_open_room()
    missing = uuid.uuid4()
    swept = standing.rooms_swept([setup.room.id, missing])
    assert missing not in swept.latest and missing not in swept.seats
    assert setup.room.id in swept.latest
