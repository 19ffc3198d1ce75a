"""Talking to a room socket in tests, in process (channels' ``WebsocketCommunicator``)."""

from __future__ import annotations

from typing import Any

from channels.testing import WebsocketCommunicator

from rooms.models import Agent
from synapsia.asgi import application


def frame(kind: str, body: dict[str, Any], frame_id: str) -> dict[str, Any]:
    """A client frame in the protocol's envelope."""
    return {"v": 1, "type": kind, "id": frame_id, "body": body}


def say(text: str, frame_id: str) -> dict[str, Any]:
    return frame("say", {"text": text}, frame_id)


def agent_socket_count(agent_id: Any) -> tuple[int, int]:
    """The agent's room sockets' joins and leaves, as counted (``Agent.socket_joins``)."""
    return Agent.objects.values_list("socket_joins", "socket_leaves").get(id=agent_id)


async def join(room_id: object, token: str) -> WebsocketCommunicator:
    """An agent's socket in the room, past its welcome."""
    socket = WebsocketCommunicator(
        application,
        f"/ws/rooms/{room_id}/",
        headers=[(b"authorization", f"Bearer {token}".encode())],
    )
    assert (await socket.connect())[0]
    assert (await socket.receive_json_from(timeout=5))["type"] == "welcome"
    return socket


async def next_frame_of(communicator: Any, frame_type: str, timeout: float = 5) -> dict[str, Any]:
    """The next frame of ``frame_type``, skipping the room's own frames that may come first
    (a state change, a catch-up). Times out like ``receive_json_from``."""
    while True:
        received: dict[str, Any] = await communicator.receive_json_from(timeout=timeout)
        if received["type"] == frame_type:
            return received
