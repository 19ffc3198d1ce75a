"""The record sweep: idle sockets cost no query, and a lost bell is still recovered, once.

Sockets hear of new messages from the channel layer's event (the bell); one sweep per process
reads the latest seq of every room with a socket here in one statement and wakes only the
sockets a lost bell left behind (``rooms.realtime.RecordSweep``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from channels.db import database_sync_to_async
from django.db import connection
from django.db.backends.utils import CursorWrapper

from rooms import realtime
from tests.rooms.conftest import SWEEP_SECONDS
from tests.socket_frames import join, layer_sift, say

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def statements(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Every SQL statement any thread runs (database hops run in worker threads, where a
    connection-level ``CaptureQueriesContext`` would not see them)."""
    seen: list[str] = []
    real_execute = CursorWrapper.execute

    def execute(self: CursorWrapper, sql: str, params: Any = None) -> Any:
        seen.append(sql)
        return real_execute(self, sql, params)

    monkeypatch.setattr(CursorWrapper, "execute", execute)
    yield seen


@pytest.fixture
def lost_bells(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The channel layer drops every room.messages event (the bell never rings); the seqs of
    the dropped events are listed."""
    dropped: list[int] = []

    def passes(group: str, message: dict[str, Any]) -> bool:
        if message.get("type") == "room.messages":
            dropped.extend(m["seq"] for m in message["messages"])
            return False
        return True

    layer_sift(monkeypatch, passes)
    return dropped


async def _rooms_with_sockets(make_open_room: Any, count: int) -> list[Any]:
    sockets = []
    for n in range(count):
        setup = await database_sync_to_async(make_open_room)(prefix=f"r{n}-")
        sockets += [
            await join(setup.room.id, setup.a.token),
            await join(setup.room.id, setup.b.token),
        ]
    return sockets


@pytest.mark.parametrize("rooms", [1, 4])
async def test_idle_sockets_issue_no_query_but_the_sweep_one_per_pass(
    make_open_room: Any, fast_sweep: None, statements: list[str], rooms: int
) -> None:
    """Nothing per socket: with nothing committed since the last reading, a sweep reads the
    record's mark alone (``rooms.standing.record_mark``)."""
    sockets = await _rooms_with_sockets(make_open_room, rooms)
    sweep = realtime.record_sweep()
    await asyncio.sleep(3 * SWEEP_SECONDS)  # past the connects' own hops
    statements.clear()
    before = sweep.sweeps
    await asyncio.sleep(10 * SWEEP_SECONDS)
    passes = sweep.sweeps - before
    assert passes >= 3
    # (A sweep in flight at either end of the window counts its statement and its pass on
    # different sides of it: one either way.)
    assert abs(len(statements) - passes) <= 1, (passes, statements)
    mark = "PRAGMA data_version" if connection.vendor == "sqlite" else "pg_current_snapshot"
    assert all(mark in sql for sql in statements), statements
    for socket in sockets:
        assert await socket.receive_nothing(timeout=0.01)
        await socket.disconnect()


async def test_a_lost_bell_is_recovered_by_the_sweep_once(
    make_open_room: Any, fast_sweep: None, lost_bells: list[int]
) -> None:
    setup = await database_sync_to_async(make_open_room)()
    a, b = await join(setup.room.id, setup.a.token), await join(setup.room.id, setup.b.token)
    for n in (1, 2):
        await a.send_json_to(say(f"nobody rang for {n}", f"a-{n}"))
        assert (await a.receive_json_from(timeout=5))["body"]["seq"] == n
    assert lost_bells == [1, 2]
    heard = [await b.receive_json_from(timeout=5) for _ in range(2)]
    assert [(m["type"], m["body"]["seq"]) for m in heard] == [("message", 1), ("message", 2)]
    # Later sweeps find b caught up: nothing is delivered twice, and a hears nothing of its own.
    assert await b.receive_nothing(timeout=8 * SWEEP_SECONDS)
    assert await a.receive_nothing(timeout=0.01)
    await a.disconnect()
    await b.disconnect()


async def test_caught_up_sockets_are_never_woken_and_gone_ones_not_swept_for(
    make_open_room: Any, fast_sweep: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    setup = await database_sync_to_async(make_open_room)()
    a, b = await join(setup.room.id, setup.a.token), await join(setup.room.id, setup.b.token)
    await a.send_json_to(say("heard by the bell", "a-1"))
    assert (await b.receive_json_from(timeout=5))["body"]["seq"] == 1
    woken: list[object] = []
    sweep = realtime.record_sweep()
    for listener in sweep._rooms[setup.room.id]:
        monkeypatch.setattr(listener, "wake", lambda listener=listener: woken.append(listener))
    await asyncio.sleep(5 * SWEEP_SECONDS)
    assert woken == []
    await a.disconnect()
    await b.disconnect()
    assert setup.room.id not in sweep._rooms
