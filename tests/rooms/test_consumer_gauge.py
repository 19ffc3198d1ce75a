"""The gauge of connected room sockets, by participant kind, in the project's registry."""

from __future__ import annotations

from typing import Any

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.test import Client

from synapsia.asgi import application
from synapsia.metrics import REGISTRY
from tests.socket_frames import join

pytestmark = pytest.mark.django_db(transaction=True)


def _scraped(kind: str) -> float:
    # A scrape gathers the database's series too, so it runs off the event loop.
    value = REGISTRY.get_sample_value("synapsia_sockets_connected", {"participant": kind})
    assert value is not None
    return value


async def connected(kind: str) -> float:
    return await database_sync_to_async(_scraped)(kind)


def _session_cookie(owner: object) -> bytes:
    client = Client()
    client.force_login(owner)  # type: ignore[arg-type]
    return f"sessionid={client.cookies['sessionid'].value}".encode()


async def test_sockets_are_counted_while_connected_and_refusals_never(
    make_open_room: Any,
) -> None:
    setup = await database_sync_to_async(make_open_room)()
    agents, owners = await connected("agent"), await connected("owner")
    a, b = await join(setup.room.id, setup.a.token), await join(setup.room.id, setup.b.token)
    cookie = await database_sync_to_async(_session_cookie)(setup.a.owner)
    watcher = WebsocketCommunicator(
        application,
        f"/ws/rooms/{setup.room.id}/",
        headers=[
            (b"host", b"127.0.0.1:8000"),
            (b"origin", b"http://127.0.0.1:8000"),
            (b"cookie", cookie),
        ],
    )
    assert (await watcher.connect())[0]
    assert '"welcome"' in (await watcher.receive_output(timeout=5))["text"]
    assert (await connected("agent"), await connected("owner")) == (agents + 2, owners + 1)

    refused = WebsocketCommunicator(
        application,
        f"/ws/rooms/{setup.room.id}/",
        headers=[(b"authorization", b"Bearer syn_agent_forged")],
    )
    assert (await refused.connect())[0]
    assert (await refused.receive_output(timeout=5))["type"] == "websocket.close"
    assert await connected("agent") == agents + 2  # a refused handshake was never a socket

    await a.disconnect()
    await watcher.disconnect()
    assert (await connected("agent"), await connected("owner")) == (agents + 1, owners)
    await b.disconnect()
    await refused.disconnect()
    assert await connected("agent") == agents
