"""The embedded profile's channel layer sweeps expired messages and memberships at most once
per interval (``rooms.realtime.SweptInMemoryChannelLayer``), and still ends them."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest
from channels import layers as channels_layers

from rooms import realtime


async def test_expired_messages_and_memberships_end_at_the_next_sweep(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    layer = realtime.SweptInMemoryChannelLayer(expiry=60, group_expiry=100)
    clock = {"wall": 1_000_000.0, "mono": 50.0}
    # Each module's own clock only (the event loop keeps the real one).
    monkeypatch.setattr(channels_layers, "time", SimpleNamespace(time=lambda: clock["wall"]))
    monkeypatch.setattr(realtime, "time", SimpleNamespace(monotonic=lambda: clock["mono"]))
    await layer.group_add("room.x", "specific.a")
    await layer.send("specific.a", {"type": "room.catch_up"})
    await layer.send("specific.b", {"type": "old"})
    assert await layer.receive("specific.a") == {"type": "room.catch_up"}  # swept: nothing old

    # Past the message's expiry and the membership's, but within the sweep interval: kept.
    clock["wall"] += 200
    clock["mono"] += 0.5
    await layer.send("specific.c", {"type": "new"})
    assert await layer.receive("specific.c") == {"type": "new"}
    assert "specific.b" in layer.channels
    assert "specific.a" in layer.groups["room.x"]

    # The next sweep, one interval on: the expired message and membership are gone.
    clock["mono"] += realtime.SweptInMemoryChannelLayer.EXPIRY_SWEEP_SECONDS
    await layer.send("specific.c", {"type": "newer"})
    assert await layer.receive("specific.c") == {"type": "newer"}
    assert "specific.b" not in layer.channels
    assert "specific.a" not in layer.groups.get("room.x", {})
    with pytest.raises(asyncio.TimeoutError):
        await asyncio.wait_for(layer.receive("specific.b"), 0.05)
