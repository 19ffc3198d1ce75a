"""Handshake refusals: each ends with its documented close code and no room data first."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.test import Client

from rooms import services
from rooms.models import RoomState
from rooms.protocol import CloseCode
from synapsia.asgi import application

pytestmark = pytest.mark.django_db(transaction=True)


async def refused_with(path: str, headers: list[tuple[bytes, bytes]]) -> int:
    """Connect and return the close code; fail if any frame arrives before the close."""
    communicator = WebsocketCommunicator(application, path, headers=headers)
    connected, _ = await communicator.connect()
    assert connected  # accepted only to deliver the close code
    output = await communicator.receive_output(timeout=5)
    assert output["type"] == "websocket.close", f"room data sent before refusal: {output}"
    # As Daphne does after a close: the consumer ends on the disconnect (without it ``wait``
    # sat out its one-second timeout and cancelled the consumer, every refusal).
    await communicator.send_input({"type": "websocket.disconnect", "code": output["code"]})
    await communicator.wait()
    return int(output["code"])


def bearer(token: str) -> list[tuple[bytes, bytes]]:
    return [(b"authorization", f"Bearer {token}".encode())]


async def test_no_credentials(make_open_room) -> None:
    setup = await database_sync_to_async(make_open_room)()
    assert await refused_with(f"/ws/rooms/{setup.room.id}/", []) == CloseCode.UNAUTHENTICATED


@pytest.mark.parametrize(
    "authorization", [b"Bearer syn_agent_forged", b"Basic abc", b"Bearer ", b"Token x"]
)
async def test_wrong_or_malformed_token(make_open_room, authorization: bytes) -> None:
    setup = await database_sync_to_async(make_open_room)()
    code = await refused_with(f"/ws/rooms/{setup.room.id}/", [(b"authorization", authorization)])
    assert code == CloseCode.UNAUTHENTICATED


async def test_revoked_token(make_open_room) -> None:
    setup = await database_sync_to_async(make_open_room)()
    await database_sync_to_async(services.agent_revoke)(
        owner=setup.a.owner, agent_id=setup.a.agent.id
    )
    code = await refused_with(f"/ws/rooms/{setup.room.id}/", bearer(setup.a.token))
    assert code == CloseCode.UNAUTHENTICATED


async def test_rotated_token_stops_working(make_open_room) -> None:
    setup = await database_sync_to_async(make_open_room)()
    await database_sync_to_async(services.agent_rotate_token)(
        owner=setup.a.owner, agent_id=setup.a.agent.id
    )
    code = await refused_with(f"/ws/rooms/{setup.room.id}/", bearer(setup.a.token))
    assert code == CloseCode.UNAUTHENTICATED


async def test_agent_of_another_room(make_open_room) -> None:
    first = await database_sync_to_async(make_open_room)()
    other = await database_sync_to_async(make_open_room)(prefix="other-")
    code = await refused_with(f"/ws/rooms/{first.room.id}/", bearer(other.a.token))
    assert code == CloseCode.FORBIDDEN


@pytest.mark.parametrize("room_id", ["not-a-uuid", "00000000-0000-0000-0000-000000000000"])
async def test_unknown_room_looks_like_a_foreign_room(make_open_room, room_id: str) -> None:
    setup = await database_sync_to_async(make_open_room)()
    assert await refused_with(f"/ws/rooms/{room_id}/", bearer(setup.a.token)) == CloseCode.FORBIDDEN


async def test_closed_room(make_open_room) -> None:
    setup = await database_sync_to_async(make_open_room)()
    await database_sync_to_async(services.room_transition)(
        owner=setup.a.owner, room_id=setup.room.id, to=RoomState.CLOSED
    )
    code = await refused_with(f"/ws/rooms/{setup.room.id}/", bearer(setup.a.token))
    assert code == CloseCode.ROOM_NOT_JOINABLE


def _session_cookie(owner: object) -> bytes:
    client = Client()
    client.force_login(owner)
    return f"sessionid={client.cookies['sessionid'].value}".encode()


async def test_bad_origin_is_refused_even_with_a_valid_session(make_open_room) -> None:
    setup = await database_sync_to_async(make_open_room)()
    cookie = await database_sync_to_async(_session_cookie)(setup.a.owner)
    headers = [(b"cookie", cookie), (b"origin", b"https://evil.example")]
    assert (
        await refused_with(f"/ws/rooms/{setup.room.id}/", headers) == CloseCode.ORIGIN_NOT_ALLOWED
    )


async def test_bad_origin_is_refused_for_agents_too(make_open_room) -> None:
    setup = await database_sync_to_async(make_open_room)()
    headers = [*bearer(setup.a.token), (b"origin", b"http://evil.example")]
    assert (
        await refused_with(f"/ws/rooms/{setup.room.id}/", headers) == CloseCode.ORIGIN_NOT_ALLOWED
    )


async def test_owner_browser_watches_with_session_and_allowed_origin(
    make_open_room, make_owner
) -> None:
    setup = await database_sync_to_async(make_open_room)()
    cookie = await database_sync_to_async(_session_cookie)(setup.b.owner)
    headers = [(b"cookie", cookie), (b"origin", b"http://localhost:8000")]
    watcher = WebsocketCommunicator(application, f"/ws/rooms/{setup.room.id}/", headers=headers)
    assert (await watcher.connect())[0]
    welcome = await watcher.receive_json_from(timeout=5)
    assert welcome["body"]["participant"] == "owner"
    await watcher.send_json_to({"v": 1, "type": "say", "id": "o1", "body": {"text": "hi"}})
    assert (await watcher.receive_json_from(timeout=5))["body"]["code"] == "not_allowed"
    await watcher.disconnect()

    stranger: Callable[[str], object] = make_owner
    mallory = await database_sync_to_async(stranger)("mallory")
    cookie = await database_sync_to_async(_session_cookie)(mallory)
    headers = [(b"cookie", cookie), (b"origin", b"http://localhost:8000")]
    assert await refused_with(f"/ws/rooms/{setup.room.id}/", headers) == CloseCode.FORBIDDEN
