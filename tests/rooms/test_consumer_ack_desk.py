"""Acknowledgements go through the consumers' say desk: acks handed in while a hop runs are
recorded together in the next one (one hop, one transaction), each still answered by its own
statement, and a refused ack is refused as before."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from rooms import services
from rooms.consumers import SayDesk
from rooms.models import RoomMember

pytestmark = pytest.mark.django_db(transaction=True)


async def test_acks_waiting_behind_a_hop_share_the_next_and_each_is_answered(
    make_open_room: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    one, two = (
        await sync_to_async(make_open_room)(prefix="one-"),
        await sync_to_async(make_open_room)(prefix="two-"),
    )
    for setup in (one, two):
        await sync_to_async(services.messages_say)(
            room_id=setup.room.id, agent_id=setup.a.agent.id, says=[("a-1", "hello")]
        )
    hops: list[tuple[int, int]] = []
    recording = threading.Event()
    real_runs = services.messages_say_runs
    real_ack = services.messages_ack
    acks_seen: list[int] = []

    def slow_runs(*, runs: list[Any], tokens: Any = None) -> list[list[Any]]:
        hops.append((len(acks_seen), len(runs)))
        recording.set()
        time.sleep(0.3)
        return real_runs(runs=runs, tokens=tokens)

    def counted_ack(**kwargs: Any) -> bool:
        acks_seen.append(kwargs["seq"])
        return real_ack(**kwargs)

    monkeypatch.setattr(services, "messages_say_runs", slow_runs)
    monkeypatch.setattr(services, "messages_ack", counted_ack)
    desk = SayDesk()
    first = asyncio.create_task(desk.record((one.room.id, one.a.agent.id, [("a-2", "again")])))
    await asyncio.get_running_loop().run_in_executor(None, recording.wait, 5)
    waiting = [
        asyncio.create_task(desk.ack((one.room.id, one.b.agent.id, 1))),
        asyncio.create_task(desk.ack((two.room.id, two.b.agent.id, 1))),
        # Beyond the room's record: refused, the others still recorded.
        asyncio.create_task(desk.ack((two.room.id, two.b.agent.id, 99))),
    ]
    assert [m.seq for m in await first] == [2]
    assert [await task for task in waiting] == [True, True, False]
    # All three acks in the one hop after the say's (which had none); no run in it.
    assert hops == [(0, 1)]
    assert sorted(acks_seen) == [1, 1, 99]

    def acked(setup: Any) -> int:
        return RoomMember.objects.get(room=setup.room, agent=setup.b.agent).acked_seq

    assert await sync_to_async(acked)(one) == 1
    assert await sync_to_async(acked)(two) == 1


async def test_one_recording_at_a_time_and_what_waits_shares_the_next(
    make_open_room: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On every database (both passes run this): runs handed in while a recording is under
    way wait for it and are recorded together in one hop, never in a second hop beside it
    (PostgreSQL's desk once ran four at once, each hop ~2 frames; see ``SayDesk``)."""
    rooms = [await sync_to_async(make_open_room)(prefix=f"r{i}-") for i in range(3)]
    hops: list[int] = []
    under_way = 0
    most_at_once = 0
    recording = threading.Event()
    real_runs = services.messages_say_runs

    def slow_runs(*, runs: list[Any], tokens: Any = None) -> list[list[Any]]:
        nonlocal under_way, most_at_once
        under_way += 1
        most_at_once = max(most_at_once, under_way)
        hops.append(len(runs))
        recording.set()
        time.sleep(0.3)
        try:
            return real_runs(runs=runs, tokens=tokens)
        finally:
            under_way -= 1

    monkeypatch.setattr(services, "messages_say_runs", slow_runs)
    desk = SayDesk()
    first = asyncio.create_task(
        desk.record((rooms[0].room.id, rooms[0].a.agent.id, [("a-1", "hello")]))
    )
    await asyncio.get_running_loop().run_in_executor(None, recording.wait, 5)
    behind = [
        asyncio.create_task(desk.record((setup.room.id, setup.a.agent.id, [("a-1", "hi")])))
        for setup in rooms[1:]
    ]
    recorded = [await first, *[await task for task in behind]]
    assert [[m.seq for m in said or []] for said in recorded] == [[1], [1], [1]]
    assert hops == [1, 2]
    assert most_at_once == 1
