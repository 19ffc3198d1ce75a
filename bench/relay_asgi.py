"""The baseline: a bare Channels relay on the same stack as Synapsia.

Same settings module (so the same channel layer: in-memory in the embedded profile,
``RedisPubSubChannelLayer`` in production), same Daphne, no database, no validation. Each of a
room's two sockets joins its own side's group; every text frame it receives is
``group_send``-ed to the other side's group and forwarded from there to that socket.

Why two groups rather than one room group with the sender filtering out its own echo: with
one group every sender's channel also queues its own messages, and under load that queue hits
the in-memory layer's capacity (100) and the layer silently drops the *peer's* messages (see
docs/benchmarks.md). A baseline that loses messages would stall its senders' windows and
understate what the stack can relay.

For the turn cell, a ``context_request`` frame is answered by the relay itself on the same
socket (the floor of a request/response over a WebSocket on this stack).
"""

from __future__ import annotations

import os
from typing import Any

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "synapsia.settings")
django.setup()

from channels.generic.websocket import AsyncWebsocketConsumer  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from django.urls import path  # noqa: E402

from synapsia.cpu import server_cpu_pin  # noqa: E402
from synapsia.heap import start_up_heap_freeze  # noqa: E402

server_cpu_pin()  # the relay on one CPU when Synapsia's servers are (``--server-cpu``)

# How the load generator's turn starts (its JSON is written by ``json.dumps``): the relay answers
# a context request itself, as a ``context`` frame carrying the request back.
CONTEXT_REQUEST = '{"v": 1, "type": "context_request"'
CONTEXT = '{"v": 1, "type": "context"'


class RelayConsumer(AsyncWebsocketConsumer):
    """Relay each text frame to the room's other socket, through the channel layer."""

    group: str = ""
    peer_group: str = ""

    async def connect(self) -> None:
        kwargs = self.scope["url_route"]["kwargs"]
        room, side = kwargs["room"], kwargs["side"]
        if side not in ("a", "b"):
            await self.close()
            return
        self.group = f"relay.{room}.{side}"
        self.peer_group = f"relay.{room}.{'b' if side == 'a' else 'a'}"
        await self.channel_layer.group_add(self.group, self.channel_name)
        await self.accept()

    async def disconnect(self, code: int) -> None:
        if self.group:
            await self.channel_layer.group_discard(self.group, self.channel_name)

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        if text_data is not None and text_data.startswith(CONTEXT_REQUEST):
            # The turn's request/response: answered on the same socket, no layer, no database.
            await self.send(CONTEXT + text_data[len(CONTEXT_REQUEST) :])
            return
        if text_data is not None:
            await self.channel_layer.group_send(
                self.peer_group, {"type": "relay.message", "text": text_data}
            )

    async def relay_message(self, event: dict[str, Any]) -> None:
        await self.send(event["text"])


async def healthz(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """``GET /healthz`` (any path, really): the process is serving."""
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [(b"content-type", b"application/json")],
        }
    )
    await send({"type": "http.response.body", "body": b'{"status": "ok"}'})


application = ProtocolTypeRouter(
    {
        "http": healthz,
        "websocket": URLRouter([path("ws/relay/<str:room>/<str:side>/", RelayConsumer.as_asgi())]),
    }
)
# As Synapsia's server does (synapsia.asgi): the same stack, so the same process set-up. Left
# out, the relay's own full collections (Django is loaded here too) set its p99 (99-113 ms
# against 42-43 ms frozen, the say cell at one in flight), and the ratios flattered Synapsia.
start_up_heap_freeze()
