"""The connected-socket gauge: counts sockets admitted to a room while they last, by kind only.

A socket refused at the handshake never counts; one that leaves stops counting; the scrape
shows the count with the participant kind as its only label, never a room or an agent.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.test import Client

from rooms.realtime import SOCKETS_CONNECTED
from synapsia.asgi import application
from tests.socket_frames import join

pytestmark = pytest.mark.django_db(transaction=True)

TOKEN = "metrics-socket-test-token-" + "y" * 40


def connected(kind: str = "agent") -> float:
    """The gauge's value now, read from it alone (the registry's database collector would
    query from this async test; the scrape test below reads it through /metrics)."""
    [metric] = SOCKETS_CONNECTED.collect()
    [value] = [s.value for s in metric.samples if s.labels == {"participant": kind}]
    return value


async def settled(expected: float, kind: str = "agent") -> float:
    """The gauge once the consumer's disconnect has run (bounded: 5 s)."""
    for _ in range(100):
        if connected(kind) == expected:
            break
        await asyncio.sleep(0.05)
    return connected(kind)


async def test_agents_count_while_connected_and_a_refused_socket_never(
    make_open_room: Any,
) -> None:
    setup = await database_sync_to_async(make_open_room)()
    before = connected()
    a = await join(setup.room.id, setup.a.token)
    b = await join(setup.room.id, setup.b.token)
    assert connected() == before + 2

    forged = WebsocketCommunicator(
        application,
        f"/ws/rooms/{setup.room.id}/",
        headers=[(b"authorization", b"Bearer syn_agent_forged")],
    )
    await forged.connect()
    assert (await forged.receive_output(timeout=5))["type"] == "websocket.close"
    await forged.wait()
    assert connected() == before + 2

    await a.disconnect()
    assert await settled(before + 1) == before + 1
    await b.disconnect()
    assert await settled(before) == before


async def test_the_scrape_shows_the_count_by_kind_and_nothing_of_the_room(
    make_open_room: Any, settings: Any
) -> None:
    settings.SYNAPSIA_METRICS_TOKEN = TOKEN
    setup = await database_sync_to_async(make_open_room)()
    before = connected()
    socket = await join(setup.room.id, setup.a.token)
    try:

        def scrape() -> str:
            response = Client().get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
            assert response.status_code == 200
            return str(response.content.decode())

        body = await sync_to_async(scrape)()
    finally:
        await socket.disconnect()
    lines = [line for line in body.splitlines() if line.startswith("synapsia_sockets_connected")]
    assert f'synapsia_sockets_connected{{participant="agent"}} {before + 1}' in lines
    assert all(line.startswith('synapsia_sockets_connected{participant="') for line in lines)
    for identifier in (str(setup.room.id), str(setup.a.agent.id), setup.a.token):
        assert identifier not in body
