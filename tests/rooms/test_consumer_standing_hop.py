"""The standing check before a live delivery goes through the say desk: checks waiting when a
hop starts are answered by one statement in it (shared with the says and acks of that hop),
read after each was asked, and a check whose read fails delivers nothing."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from rooms import services, standing
from rooms.bearer import secret_digest
from rooms.consumers import SayDesk
from rooms.models import RoomMember
from rooms.protocol import CloseCode
from tests.socket_frames import join, say

pytestmark = pytest.mark.django_db(transaction=True)


def _agent_b(setup: Any) -> standing.Reader:
    return standing.Reader(setup.room.id, setup.b.owner.pk, setup.b.agent.id)


async def test_checks_waiting_behind_a_hop_share_the_next_and_read_after_the_question(
    make_open_room: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    one, two = (
        await sync_to_async(make_open_room)(prefix="one-"),
        await sync_to_async(make_open_room)(prefix="two-"),
    )
    hops: list[tuple[int, int]] = []  # (readers, runs) per hop
    recording = threading.Event()
    real_runs = services.messages_say_runs
    real_standing = standing.readers_standing
    read: list[int] = []

    def slow_runs(*, runs: list[Any], tokens: Any = None) -> list[list[Any]]:
        hops.append((len(read), len(runs)))
        recording.set()
        time.sleep(0.3)
        return real_runs(runs=runs, tokens=tokens)

    def counted(readers: Any) -> Any:
        readers = list(readers)
        read.append(len(readers))
        return real_standing(readers)

    monkeypatch.setattr(services, "messages_say_runs", slow_runs)
    monkeypatch.setattr(standing, "readers_standing", counted)
    desk = SayDesk()
    first = asyncio.create_task(desk.record((one.room.id, one.a.agent.id, [("a-1", "hello")])))
    await asyncio.get_running_loop().run_in_executor(None, recording.wait, 5)
    # Asked while the say's hop runs; the agent of room two is blocked after it was asked and
    # before the next hop starts: the answer is read then, so it is refused.
    checks = [
        asyncio.create_task(desk.standing(_agent_b(one))),
        asyncio.create_task(desk.standing(_agent_b(two))),
        asyncio.create_task(desk.standing(_agent_b(one))),
    ]
    second = asyncio.create_task(desk.record((two.room.id, two.a.agent.id, [("a-1", "hi")])))
    await asyncio.sleep(0)
    await sync_to_async(
        lambda: RoomMember.objects.filter(room=two.room, agent=two.b.agent).update(
            standing="blocked"
        )
    )()
    assert [m.seq for m in await first] == [1]
    assert [await task for task in checks] == [None, CloseCode.FORBIDDEN, None]
    assert [m.seq for m in await second] == [1]
    # The say's hop had no check; the next answered all three checks in one statement and
    # recorded the say handed in meanwhile: one hop, not two.
    assert hops == [(0, 1), (1, 1)]
    assert read == [3]  # one reading for the three checks
    assert desk.standing_statements == 1


async def test_a_check_whose_read_fails_is_refused_and_the_says_still_recorded(
    make_open_room: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    setup = await sync_to_async(make_open_room)()

    def unanswered(readers: Any) -> Any:
        raise RuntimeError("no answer")

    monkeypatch.setattr(standing, "readers_standing", unanswered)
    desk = SayDesk()
    check = asyncio.create_task(desk.standing(_agent_b(setup)))
    said = asyncio.create_task(desk.record((setup.room.id, setup.a.agent.id, [("a-1", "x")])))
    with pytest.raises(RuntimeError):
        await check
    assert [m.seq for m in await said] == [1]


async def test_a_live_delivery_is_checked_through_the_say_desk(
    make_open_room: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    setup = await sync_to_async(make_open_room)()
    a, b = await join(setup.room.id, setup.a.token), await join(setup.room.id, setup.b.token)

    asked: list[standing.Reader] = []
    real = SayDesk.standing

    async def counted(self: SayDesk, reader: standing.Reader) -> Any:
        asked.append(reader)
        return await real(self, reader)

    monkeypatch.setattr(SayDesk, "standing", counted)
    await a.send_json_to(say("hello", "a-1"))
    heard = await b.receive_json_from(timeout=10)
    assert heard["type"] == "message" and heard["body"]["seq"] == 1
    # The socket's reader, which also carries the digest of the token it was admitted with.
    assert _agent_b(setup) in [reader._replace(token=None) for reader in asked]
    assert {reader.token for reader in asked} == {secret_digest(setup.b.token)}
    # Out of standing after that: the next delivery is refused and the socket closed.
    await sync_to_async(
        lambda: RoomMember.objects.filter(room=setup.room, agent=setup.b.agent).update(
            standing="blocked"
        )
    )()
    await a.send_json_to(say("again", "a-2"))
    closed = await b.receive_output(timeout=10)
    while closed["type"] != "websocket.close":
        assert '"message"' not in closed.get("text", "")
        closed = await b.receive_output(timeout=10)
    assert closed["code"] == CloseCode.FORBIDDEN
    await a.disconnect()
    await b.disconnect()
