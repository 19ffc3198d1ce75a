"""An agent whose socket dies mid-conversation resumes with nothing lost and nothing doubled."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from agents import RoomClient
from tests.e2e.daphne import running_daphne

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def test_sdk_resumes_after_its_socket_is_killed(make_open_room, tmp_path: Path) -> None:
    setup = make_open_room()
    with running_daphne(tmp_path / "daphne.log") as host:
        url = f"ws://{host}/ws/rooms/{setup.room.id}/"

        async def conversation() -> tuple[list[int], int]:
            async with (
                RoomClient(url, setup.a.token) as a,
                RoomClient(url, setup.b.token, max_backoff=0.5) as b,
            ):
                heard: list[int] = []

                async def listen() -> None:
                    while len(heard) < 40:
                        heard.append((await b.next_message(timeout=20)).seq)

                listener = asyncio.create_task(listen())
                for n in range(40):
                    await a.say(f"m{n}")
                    if n in (10, 25):
                        while b._socket is None:  # noqa: ASYNC110 (polling a private test hook)
                            await asyncio.sleep(0.05)  # still reconnecting from the last kill
                        # Kill b's TCP connection without a closing handshake.
                        b._socket.transport.abort()
                await asyncio.wait_for(listener, 30)
                return heard, b.reconnects

        heard, reconnects = asyncio.run(conversation())
    assert reconnects >= 2
    assert heard == list(range(1, 41))
