"""A socket's own messages, coming back on the room's bell, only move its position: with
nothing waiting before them they are handled where the bell is taken (no courier, no
standing check, nothing sent to it), in order, and a gap still sends the courier to the
record."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from rooms import realtime, services
from rooms.consumers import RoomConsumer, say_desk
from tests.socket_frames import join, next_frame_of, say

pytestmark = pytest.mark.django_db(transaction=True)


def _socket_of(room_id: Any, agent_id: Any) -> RoomConsumer:
    listeners = realtime.record_sweep()._rooms[room_id]
    (consumer,) = [c for c in listeners if c.participant.agent_id == agent_id]  # type: ignore[attr-defined]
    return consumer  # type: ignore[return-value]


async def _settled(consumer: RoomConsumer, position: int) -> None:
    for _ in range(200):
        if consumer.position == position and (
            consumer._courier is None or consumer._courier.done()
        ):
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"position {consumer.position}, expected {position}")


async def test_own_messages_move_the_position_without_a_courier_or_a_check(
    make_open_room: Any,
) -> None:
    setup = await sync_to_async(make_open_room)()
    alice = await join(setup.room.id, setup.a.token)
    try:
        mine = _socket_of(setup.room.id, setup.a.agent.id)
        desk = say_desk()
        for n in range(1, 4):
            await alice.send_json_to(say(f"note {n}", f"a-{n}"))
            sent = await next_frame_of(alice, "sent")
            assert (sent["body"]["ref"], sent["body"]["seq"]) == (f"a-{n}", n)
        await _settled(mine, 3)
        assert mine._courier is None  # never needed one
        assert desk.standing_statements == 0  # nothing was given, so nothing was checked
        assert await alice.receive_nothing(timeout=0.2)  # not its own messages back
    finally:
        await alice.disconnect()


async def test_the_peers_messages_still_come_in_order_after_own_ones(make_open_room: Any) -> None:
    setup = await sync_to_async(make_open_room)()
    alice, bob = await join(setup.room.id, setup.a.token), await join(setup.room.id, setup.b.token)
    try:
        for n in range(1, 3):
            await alice.send_json_to(say(f"from alice {n}", f"a-{n}"))
            assert (await next_frame_of(alice, "sent"))["body"]["seq"] == n
        await bob.send_json_to(say("from bob", "b-1"))
        got = await next_frame_of(alice, "message")
        assert (got["body"]["seq"], got["body"]["sender_agent_id"]) == (3, str(setup.b.agent.id))
        assert [(await next_frame_of(bob, "message"))["body"]["seq"] for _ in range(2)] == [1, 2]
        await _settled(_socket_of(setup.room.id, setup.a.agent.id), 3)
        assert say_desk().standing_statements >= 1  # bob's and alice's deliveries were checked
    finally:
        await alice.disconnect()
        await bob.disconnect()


async def test_an_own_message_past_a_gap_sends_the_courier_to_the_record(
    make_open_room: Any,
) -> None:
    setup = await sync_to_async(make_open_room)()
    alice = await join(setup.room.id, setup.a.token)
    try:
        mine = _socket_of(setup.room.id, setup.a.agent.id)
        # Recorded without this socket's bell (as by another process whose bell was lost).
        for n in range(1, 4):
            await sync_to_async(services.message_say)(
                room_id=setup.room.id, agent_id=setup.a.agent.id, client_id=f"x-{n}", text=f"{n}"
            )
        await sync_to_async(services.message_say)(
            room_id=setup.room.id, agent_id=setup.b.agent.id, client_id="b-1", text="bob's"
        )
        own = setup.a.agent.id.hex
        mine._queue([(3, own, "unused", "unused")])  # seq 3 while at 0: a gap before it
        assert mine._behind or mine._courier is not None
        got = await next_frame_of(alice, "message")  # the courier read the record back
        assert (got["body"]["seq"], got["body"]["text"]) == (4, "bob's")
        await _settled(mine, 4)
        assert await alice.receive_nothing(timeout=0.2)  # none of its own, none twice
    finally:
        await alice.disconnect()
