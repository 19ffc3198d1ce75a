"""The room socket's dispatch (``rooms.consumers._dispatch_each``, channels'
``await_many_dispatch`` without a task per message): one message handled at a time, each
source's in order, nothing handled after the message that ended it, the sources' waits
cancelled, and a failure raised to the caller."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from channels.exceptions import StopConsumer

from rooms.consumers import _dispatch_each


def _source(queue: asyncio.Queue[Any], waits: list[asyncio.Task[Any]]) -> Any:
    async def take() -> Any:
        waits.append(asyncio.current_task())  # type: ignore[arg-type]
        return await queue.get()

    return take


async def test_messages_are_handled_one_at_a_time_each_source_in_order() -> None:
    client, layer = asyncio.Queue[Any](), asyncio.Queue[Any]()
    handled: list[Any] = []
    busy = 0

    async def dispatch(message: Any) -> None:
        nonlocal busy
        busy += 1
        assert busy == 1, "two messages handled at once"
        await asyncio.sleep(0.001 if message[0] == "c" else 0)
        handled.append(message)
        busy -= 1
        if message == ("c", "stop"):
            raise StopConsumer()

    for n in range(20):
        client.put_nowait(("c", n))
        layer.put_nowait(("l", n))
    running = asyncio.create_task(_dispatch_each([client.get, layer.get], dispatch))
    await asyncio.sleep(0.2)
    for n in range(20, 25):
        layer.put_nowait(("l", n))
    client.put_nowait(("c", "stop"))
    with pytest.raises(StopConsumer):
        await asyncio.wait_for(running, 5)
    assert [m for m in handled if m[0] == "c"] == [("c", n) for n in range(20)] + [("c", "stop")]
    from_layer = [m for m in handled if m[0] == "l"]
    assert from_layer == [("l", n) for n in range(len(from_layer))]  # in order, none twice
    assert len(from_layer) >= 20  # all that came before the stop was taken
    assert handled[-1] == ("c", "stop")


async def test_nothing_is_handled_after_the_message_that_ended_it() -> None:
    client, layer = asyncio.Queue[Any](), asyncio.Queue[Any]()
    waits: list[asyncio.Task[Any]] = []
    handled: list[Any] = []
    release = asyncio.Event()

    async def dispatch(message: Any) -> None:
        handled.append(message)
        if message == "disconnect":
            await release.wait()  # the layer's event arrives while this is handled
            raise StopConsumer()

    running = asyncio.create_task(
        _dispatch_each([_source(client, waits), _source(layer, waits)], dispatch)
    )
    client.put_nowait("disconnect")
    await asyncio.sleep(0.01)
    layer.put_nowait("late event")
    await asyncio.sleep(0.01)
    release.set()
    with pytest.raises(StopConsumer):
        await asyncio.wait_for(running, 5)
    assert handled == ["disconnect"]
    await asyncio.sleep(0)
    assert all(wait.done() for wait in waits)  # no source is still waited on


async def test_a_failure_is_raised_and_a_cancel_ends_every_wait() -> None:
    client, layer = asyncio.Queue[Any](), asyncio.Queue[Any]()
    waits: list[asyncio.Task[Any]] = []

    async def dispatch(message: Any) -> None:
        if message == "bad":
            raise ValueError("No handler for message type bad")

    running = asyncio.create_task(
        _dispatch_each([_source(client, waits), _source(layer, waits)], dispatch)
    )
    layer.put_nowait("fine")
    layer.put_nowait("bad")
    with pytest.raises(ValueError, match="No handler"):
        await asyncio.wait_for(running, 5)
    assert all(wait.done() for wait in waits)

    waits.clear()
    running = asyncio.create_task(
        _dispatch_each([_source(client, waits), _source(layer, waits)], dispatch)
    )
    await asyncio.sleep(0.01)
    running.cancel()
    with pytest.raises(asyncio.CancelledError):
        await running
    assert len(waits) == 2 and all(wait.done() for wait in waits)
