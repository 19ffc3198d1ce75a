"""The SDK's acknowledgements against a real Daphne: the ack of what was handed out rides the
next `say` or `context_request`; alone as an `ack` frame after ``ACK_RIDE_SECONDS`` when nothing
goes out, and on close; while busy, an `ack` frame every ``ACK_BATCH`` messages as before; and a
resume after a dropped connection replays exactly what no ack covered."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from agents import RoomClient
from agents.client import ACK_BATCH, ACK_RIDE_SECONDS
from rooms.models import RoomMember
from tests.e2e.daphne import running_daphne

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


class Recorded(RoomClient):
    """A client that keeps every frame it sends (its own frames, nothing mocked)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.frames: list[dict[str, Any]] = []
        self.welcomed_at: list[int] = []  # each welcome's acked_seq

    async def _on_welcome(self, socket: Any, body: Any) -> None:
        self.welcomed_at.append(body.acked_seq)
        await super()._on_welcome(socket, body)

    async def _send_quietly(self, frame: dict[str, Any]) -> None:
        self.frames.append(json.loads(json.dumps(frame)))
        await super()._send_quietly(frame)

    def kinds(self) -> list[tuple[str, int | None]]:
        """(type, the ack it carries) of each frame sent: ``seq`` for an ``ack`` frame."""
        return [
            (f["type"], f["body"].get("seq") if f["type"] == "ack" else f["body"].get("ack"))
            for f in self.frames
        ]


def _acked(room_id: Any, agent: Any) -> int:
    return RoomMember.objects.get(room_id=room_id, agent=agent).acked_seq


async def acked_seq(setup: Any, seat: Any) -> int:
    return await asyncio.to_thread(_acked, setup.room.id, seat.agent)


async def until(check: Callable[[], Awaitable[bool]], timeout: float = 10.0) -> None:
    """Wait until ``check()`` holds (polled; no figure of time is asserted)."""
    deadline = asyncio.get_running_loop().time() + timeout
    while not await check():
        assert asyncio.get_running_loop().time() < deadline, "never happened"
        await asyncio.sleep(0.05)


def run_in_room(setup: Any, tmp_path: Path, body: Callable[..., Awaitable[None]]) -> None:
    with running_daphne(tmp_path / "daphne.log") as host:
        url = f"ws://{host}/ws/rooms/{setup.room.id}/"

        async def main() -> None:
            async with (
                RoomClient(url, setup.a.token) as a,
                Recorded(url, setup.b.token, max_backoff=0.5) as b,
            ):
                await body(a, b)

        asyncio.run(main())


def test_the_ack_rides_the_next_say_and_context_request(make_open_room, tmp_path: Path) -> None:
    setup = make_open_room()

    async def body(a: RoomClient, b: Recorded) -> None:
        await a.say("Friday?")
        assert (await b.next_message(timeout=10)).seq == 1
        assert await b.say("Works for me.") == 2
        # `sent` comes once both are recorded: the ack rode the say.
        assert await acked_seq(setup, setup.b) == 1
        await a.say("7pm then.")
        assert (await b.next_message(timeout=10)).seq == 3
        assert (await b.context()).turn == 1
        assert await acked_seq(setup, setup.b) == 3
        await asyncio.sleep(ACK_RIDE_SECONDS * 2)  # the held ack's wait has run out meanwhile
        assert b.kinds() == [("say", 1), ("context_request", 3)]  # and sent nothing more

    run_in_room(setup, tmp_path, body)


def test_a_plain_ack_follows_when_nothing_is_sent(make_open_room, tmp_path: Path) -> None:
    setup = make_open_room()

    async def body(a: RoomClient, b: Recorded) -> None:
        await a.say("Friday?")
        assert (await b.next_message(timeout=10)).seq == 1
        assert b.kinds() == []  # held for a frame to ride
        await until(lambda: _true(b.kinds() == [("ack", 1)]))
        await until(lambda: _equals(acked_seq(setup, setup.b), 1))
        # Nothing handed out since: the next say carries no ack.
        await b.say("Works for me.")
        assert b.kinds() == [("ack", 1), ("say", None)]

    run_in_room(setup, tmp_path, body)


def test_close_acknowledges_what_was_handed_out(make_open_room, tmp_path: Path) -> None:
    setup = make_open_room()
    with running_daphne(tmp_path / "daphne.log") as host:
        url = f"ws://{host}/ws/rooms/{setup.room.id}/"

        async def main() -> list[tuple[str, int | None]]:
            async with RoomClient(url, setup.a.token) as a:
                b = Recorded(url, setup.b.token)
                await b.connect()
                await a.say("Friday?")
                assert (await b.next_message(timeout=10)).seq == 1
                await b.close()
                await until(lambda: _equals(acked_seq(setup, setup.b), 1))
                return b.kinds()

        assert asyncio.run(main()) == [("ack", 1)]


def test_while_busy_an_ack_goes_every_batch_and_the_rest_rides(
    make_open_room, tmp_path: Path
) -> None:
    setup = make_open_room()
    count = ACK_BATCH + 8

    async def body(a: RoomClient, b: Recorded) -> None:
        for n in range(count):
            await a.say(f"m{n}")
        await until(lambda: _true(b._inbox.qsize() == count))  # all waiting: b is busy
        for seq in range(1, count + 1):
            assert (await b.next_message(timeout=10)).seq == seq
        await b.say("Read them all.")
        assert b.kinds() == [("ack", ACK_BATCH), ("say", count)]
        assert await acked_seq(setup, setup.b) == count

    run_in_room(setup, tmp_path, body)


def test_a_resume_replays_exactly_what_no_riding_ack_covered(
    make_open_room, tmp_path: Path
) -> None:
    setup = make_open_room()

    async def body(a: RoomClient, b: Recorded) -> None:
        for n in (1, 2):
            await a.say(f"m{n}")
            assert (await b.next_message(timeout=10)).seq == n
        await b.say("Got both.")  # carries the ack of 2
        await a.say("m3")
        await until(lambda: _true(b.last_seq == 4))  # 3 is b's own; 4 arrived, not handed out
        assert b._socket is not None
        b._socket.transport.abort()  # no closing handshake
        await until(lambda: _true(len(b.welcomed_at) == 2))
        assert b.welcomed_at == [0, 2]
        # The replay (4, already seen) is dropped; m3 is handed out once.
        message = await b.next_message(timeout=10)
        assert (message.seq, message.text) == (4, "m3")
        await a.say("m4")
        assert (await b.next_message(timeout=10)).seq == 5
        assert b.kinds()[:1] == [("say", 2)]

    run_in_room(setup, tmp_path, body)


async def _true(value: bool) -> bool:
    return value


async def _equals(reading: Awaitable[int], expected: int) -> bool:
    return await reading == expected
