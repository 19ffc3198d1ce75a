"""The embedded profile's channel layer (``rooms.realtime.SweptInMemoryChannelLayer``) sends,
receives and fans out as channels' in-memory layer does: each member of a group gets the
event once and its own copy, a full channel misses it without failing the others, names
are still checked, and a channel's queue goes when it is drained."""

from __future__ import annotations

import asyncio

import pytest
from channels.exceptions import ChannelFull

from rooms import realtime


async def test_a_group_event_reaches_each_member_once_each_its_own_copy() -> None:
    layer = realtime.SweptInMemoryChannelLayer(capacity=5)
    for name in ("specific.a", "specific.b", "specific.c"):
        await layer.group_add("room.x", name)
    await layer.group_add("room.y", "specific.d")
    event = {"type": "room.messages", "sender": "ab", "messages": [{"seq": 1, "frame": "f"}]}
    await layer.group_send("room.x", event)
    event["messages"][0]["seq"] = 99  # the sender's dict changed after the send: not seen
    got = [await layer.receive(name) for name in ("specific.a", "specific.b", "specific.c")]
    assert all(
        g == {"type": "room.messages", "sender": "ab", "messages": [{"seq": 1, "frame": "f"}]}
        for g in got
    )
    got[0]["messages"][0]["frame"] = "changed by one receiver"
    assert got[1]["messages"][0]["frame"] == "f"
    assert got[0]["messages"] is not got[1]["messages"]
    # Nothing else was queued: not a second copy, not the other room's member.
    assert layer.channels == {}
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(layer.receive("specific.d"), 0.05)


async def test_a_full_member_misses_the_event_and_the_others_still_get_it() -> None:
    layer = realtime.SweptInMemoryChannelLayer(capacity=2)
    await layer.group_add("room.x", "specific.full")
    await layer.group_add("room.x", "specific.free")
    for n in range(2):
        await layer.send("specific.full", {"type": "old", "n": n})
    with pytest.raises(ChannelFull):
        await layer.send("specific.full", {"type": "old", "n": 2})
    await layer.group_send("room.x", {"type": "new"})
    assert await layer.receive("specific.free") == {"type": "new"}
    assert [await layer.receive("specific.full") for _ in range(2)] == [
        {"type": "old", "n": 0},
        {"type": "old", "n": 1},
    ]
    assert "specific.full" not in layer.channels  # drained: its queue is gone


async def test_names_and_events_are_still_checked() -> None:
    layer = realtime.SweptInMemoryChannelLayer()
    with pytest.raises(TypeError):
        await layer.send("not a valid name!", {"type": "x"})
    with pytest.raises(TypeError):
        await layer.group_send("not a valid group!", {"type": "x"})
    with pytest.raises(AssertionError):
        await layer.send("specific.a", ["not", "a", "dict"])  # type: ignore[arg-type]
    await layer.group_add("room.x", "specific.a")
    with pytest.raises(AssertionError):
        await layer.group_send("room.x", {"type": "x", "__asgi_channel__": "y"})


async def test_a_waiting_receiver_gets_a_later_event_and_a_cancelled_one_leaves_nothing() -> None:
    layer = realtime.SweptInMemoryChannelLayer()
    await layer.group_add("room.x", "specific.a")
    waiting = asyncio.create_task(layer.receive("specific.a"))
    await asyncio.sleep(0)
    await layer.group_send("room.x", {"type": "bell", "values": (1, 2), "raw": b"b"})
    assert await waiting == {"type": "bell", "values": (1, 2), "raw": b"b"}
    cancelled = asyncio.create_task(layer.receive("specific.b"))
    await asyncio.sleep(0)
    cancelled.cancel()
    with pytest.raises(asyncio.CancelledError):
        await cancelled
    assert layer.channels == {}


async def test_the_member_an_event_names_to_skip_is_left_out_and_only_it() -> None:
    """``realtime.SKIP_CHANNEL``: the sender that already did what the event would make it
    do is not sent it; every other member still is, and an event naming no member, or one
    not in the group, reaches them all."""
    layer = realtime.SweptInMemoryChannelLayer()
    for name in ("specific.sender", "specific.peer", "specific.owner"):
        await layer.group_add("room.x", name)
    await layer.group_send("room.x", {"type": "bell", realtime.SKIP_CHANNEL: "specific.sender"})
    for name in ("specific.peer", "specific.owner"):
        assert (await layer.receive(name))["type"] == "bell"
    assert "specific.sender" not in layer.channels
    await layer.group_send("room.x", {"type": "bell", realtime.SKIP_CHANNEL: "specific.other"})
    await layer.group_send("room.x", {"type": "bell"})
    for name in ("specific.sender", "specific.peer", "specific.owner"):
        assert [(await layer.receive(name))["type"] for _ in range(2)] == ["bell", "bell"]
