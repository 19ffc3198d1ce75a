"""The database, not the channel layer, is the record: lost layer events never lose messages."""

from __future__ import annotations

import pytest
from channels.db import database_sync_to_async

from tests.socket_frames import join, layer_sift, say

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def lossy_layer(monkeypatch: pytest.MonkeyPatch) -> set[int]:
    """Make the channel layer silently drop the room events carrying the listed sequence
    numbers, as channels_redis does when a channel is full."""
    dropped: set[int] = set()
    layer_sift(
        monkeypatch,
        lambda _, message: (
            not (
                message.get("type") == "room.messages"
                and any(m["seq"] in dropped for m in message["messages"])
            )
        ),
    )
    return dropped


async def test_a_dropped_event_is_filled_in_from_the_record_in_order(
    make_open_room, lossy_layer
) -> None:
    setup = await database_sync_to_async(make_open_room)()
    a, b = await join(setup.room.id, setup.a.token), await join(setup.room.id, setup.b.token)
    lossy_layer.update({1, 2})
    for n in (1, 2, 3):
        await a.send_json_to(say(f"m{n}", f"a-{n}"))
        assert (await a.receive_json_from(timeout=5))["body"]["seq"] == n
    # Event 3 arrives with a gap behind it; b reads 1 and 2 back from the database first.
    heard = [(await b.receive_json_from(timeout=5))["body"] for _ in range(3)]
    assert [(m["seq"], m["text"]) for m in heard] == [(1, "m1"), (2, "m2"), (3, "m3")]
    assert await b.receive_nothing(timeout=0.3)
    await a.disconnect()
    await b.disconnect()


async def test_a_dropped_last_event_arrives_by_the_idle_catch_up(
    make_open_room, lossy_layer, settings
) -> None:
    settings.SYNAPSIA = {**settings.SYNAPSIA, "CATCH_UP_SECONDS": 0.2}
    setup = await database_sync_to_async(make_open_room)()
    a, b = await join(setup.room.id, setup.a.token), await join(setup.room.id, setup.b.token)
    lossy_layer.add(1)
    await a.send_json_to(say("nobody rang the bell", "a-1"))
    await a.receive_json_from(timeout=5)
    heard = await b.receive_json_from(timeout=5)
    assert (heard["type"], heard["body"]["seq"]) == ("message", 1)
    assert await b.receive_nothing(timeout=0.5)  # not delivered again by later catch-ups
    await a.disconnect()
    await b.disconnect()
