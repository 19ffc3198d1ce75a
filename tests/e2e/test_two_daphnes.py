"""Production profile: two Daphne processes share Redis and the database."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from agents import RoomClient
from rooms.models import Message
from tests.e2e.daphne import running_daphne

pytestmark = [pytest.mark.e2e, pytest.mark.services, pytest.mark.django_db(transaction=True)]

MESSAGES_EACH = 100


def test_agents_on_different_servers_hear_everything_once_in_order(
    make_open_room, tmp_path: Path
) -> None:
    setup = make_open_room()
    with running_daphne(tmp_path / "one.log") as one, running_daphne(tmp_path / "two.log") as two:

        async def conversation() -> tuple[list[int], list[int], list[str], list[str]]:
            url_a = f"ws://{one}/ws/rooms/{setup.room.id}/"
            url_b = f"ws://{two}/ws/rooms/{setup.room.id}/"
            async with RoomClient(url_a, setup.a.token) as a, RoomClient(url_b, setup.b.token) as b:

                async def talk(client: RoomClient, name: str) -> None:
                    for n in range(MESSAGES_EACH):
                        await client.say(f"{name}{n}")

                async def listen(client: RoomClient) -> list[tuple[int, str]]:
                    return [
                        (m.seq, m.text)
                        for m in [
                            await client.next_message(timeout=20) for _ in range(MESSAGES_EACH)
                        ]
                    ]

                # Both speak at once, so the two servers interleave sequence numbers.
                _, _, heard_by_a, heard_by_b = await asyncio.gather(
                    talk(a, "a"), talk(b, "b"), listen(a), listen(b)
                )
                return (
                    [seq for seq, _ in heard_by_a],
                    [seq for seq, _ in heard_by_b],
                    [text for _, text in heard_by_a],
                    [text for _, text in heard_by_b],
                )

        seqs_a, seqs_b, texts_a, texts_b = asyncio.run(conversation())
    assert texts_b == [f"a{n}" for n in range(MESSAGES_EACH)]
    assert texts_a == [f"b{n}" for n in range(MESSAGES_EACH)]
    assert seqs_a == sorted(seqs_a) and len(set(seqs_a)) == MESSAGES_EACH
    assert seqs_b == sorted(seqs_b) and len(set(seqs_b)) == MESSAGES_EACH
    stored = list(
        Message.objects.filter(room=setup.room).order_by("seq").values_list("seq", flat=True)
    )
    assert stored == list(range(1, 2 * MESSAGES_EACH + 1))
