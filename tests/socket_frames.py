"""Talking to a room socket in tests, in process (channels' ``WebsocketCommunicator``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from channels.testing import WebsocketCommunicator
from django.test import Client

from rooms.models import Agent
from synapsia.asgi import application


def frame(kind: str, body: dict[str, Any], frame_id: str) -> dict[str, Any]:
    """A client frame in the protocol's envelope."""
    return {"v": 1, "type": kind, "id": frame_id, "body": body}


def say(text: str, frame_id: str) -> dict[str, Any]:
    return frame("say", {"text": text}, frame_id)


def layer_sift(
    monkeypatch: pytest.MonkeyPatch, passes: Callable[[str, dict[str, Any]], bool]
) -> None:
    """The channel layer's ``group_send`` with every event shown to ``passes`` first (group,
    event): one it answers False for is dropped, as a full channel or a lost connection drops
    it; the rest go through the real layer."""
    layer = get_channel_layer()
    real_group_send = layer.group_send

    async def group_send(group: str, message: dict[str, Any]) -> None:
        if passes(group, message):
            await real_group_send(group, message)

    monkeypatch.setattr(layer, "group_send", group_send)


def layer_dropping(monkeypatch: pytest.MonkeyPatch, kinds: set[str]) -> list[str]:
    """The channel layer drops every event of ``kinds``; what it dropped is listed, by kind."""
    dropped: list[str] = []

    def passes(group: str, message: dict[str, Any]) -> bool:
        if message.get("type") in kinds:
            dropped.append(message["type"])
            return False
        return True

    layer_sift(monkeypatch, passes)
    return dropped


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


async def join_as_owner(room_id: object, owner: Any) -> WebsocketCommunicator:
    """``owner``'s browser on the room's page: a socket signed in by its session, past its
    welcome (as an owner)."""

    def session_cookie() -> bytes:
        client = Client()
        client.force_login(owner)
        return f"sessionid={client.cookies['sessionid'].value}".encode()

    cookie = await database_sync_to_async(session_cookie)()
    site = [(b"host", b"127.0.0.1:8000"), (b"origin", b"http://127.0.0.1:8000")]
    socket = WebsocketCommunicator(
        application, f"/ws/rooms/{room_id}/", headers=[*site, (b"cookie", cookie)]
    )
    assert (await socket.connect())[0]
    welcome = await socket.receive_json_from(timeout=5)
    assert (welcome["type"], welcome["body"]["participant"]) == ("welcome", "owner")
    return socket


async def next_frame_of(communicator: Any, frame_type: str, timeout: float = 5) -> dict[str, Any]:
    """The next frame of ``frame_type``, skipping the room's own frames that may come first
    (a state change, a catch-up). Times out like ``receive_json_from``."""
    while True:
        received: dict[str, Any] = await communicator.receive_json_from(timeout=timeout)
        if received["type"] == frame_type:
            return received


async def closed_with_nothing_before(socket: Any, timeout: float = 5) -> int:
    """The socket's next output is its close (no message, `sent` or context first): its code."""
    output = await socket.receive_output(timeout=timeout)
    assert output["type"] == "websocket.close", f"given before the close: {output}"
    return int(output["code"])


async def heard(socket: Any, text: str) -> None:
    """The socket's next frame is the other agent's message saying ``text``."""
    got = await socket.receive_json_from(timeout=5)
    assert (got["type"], got["body"]["text"]) == ("message", text), got
