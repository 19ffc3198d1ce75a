"""Hypothesis over every server frame type (issue 13, "Fuzzing in make test": the client
frames and tool schemas have their strategies in tests/rooms/test_protocol_version.py; this
is the other direction). Real frames of each type are recorded from a live room socket, then
mangled: any field replaced by any JSON, dropped, or an unknown field added. The SDK's
decoder (``synapsia_protocol.parse_server_frame``) must return the frame's own type, ``None``
for a type it does not know, or refuse with a ``FrameError``: never another exception, so a
client never acts on a frame it could not read."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rooms import services
from rooms.models import RoomState
from rooms.realtime import announce_slip_key_revoked
from synapsia.asgi import application
from synapsia_protocol import SERVER_FRAME_TYPES, FrameError, parse_server_frame
from tests.socket_frames import frame, join, say

pytestmark = pytest.mark.django_db(transaction=True)

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20)
)
any_json = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=8,
)

PROPOSE = {"start": "2026-12-04T19:00:00+00:00", "duration_minutes": 90}
OFFER = {
    "venue_id": "sora-sushi",
    "start": "2026-12-05T19:00:00+01:00",
    "party_size": 2,
    "price_per_person_minor": 4275,
    "currency": "EUR",
}


async def _record_frames(make_open_room: Any) -> list[dict[str, Any]]:
    """One of each server frame a short room session produces (welcome, sent, message, pong,
    error, context, whisper, action_result, offers_revealed, room_state, notice), as the socket
    sent them."""
    setup = await database_sync_to_async(make_open_room)()
    seen: dict[str, dict[str, Any]] = {}

    async def drain(socket: Any) -> None:
        while not await socket.receive_nothing(timeout=0.3):
            received = await socket.receive_json_from(timeout=5)
            seen.setdefault(received["type"], received)

    a = WebsocketCommunicator(  # its welcome kept: a frame type of its own
        application,
        f"/ws/rooms/{setup.room.id}/",
        headers=[(b"authorization", f"Bearer {setup.a.token}".encode())],
    )
    assert (await a.connect())[0]
    b = await join(setup.room.id, setup.b.token)
    await a.send_json_to(say("Friday at eight?", "s-1"))
    # Both seal (before the act below pauses the room): the reveal reaches both sockets.
    await a.send_json_to(frame("seal_offer", {"offer": OFFER}, "seal-a"))
    await b.send_json_to(frame("seal_offer", {"offer": {**OFFER, "party_size": 3}}, "seal-b"))
    await drain(a)
    await a.send_json_to(frame("ping", {}, "p-1"))
    await a.send_json_to(frame("say", {"text": ""}, "bad-1"))
    await a.send_json_to(frame("context_request", {}, "c-1"))
    await a.send_json_to(frame("act", {"tool": "propose_time", "arguments": PROPOSE}, "act-1"))
    await database_sync_to_async(services.whisper_send)(
        owner=setup.a.owner, room_id=setup.room.id, text="Keep it under 60."
    )
    await drain(a)
    await drain(b)
    if "room_state" not in seen:
        await database_sync_to_async(services.room_transition)(
            owner=setup.a.owner, room_id=setup.room.id, to=RoomState.PAUSED
        )
        await drain(a)
    # A notice, as the slip-key revocation announces one (a holds no slip, so the socket is
    # closed right after: the last frame recorded from it).
    await database_sync_to_async(announce_slip_key_revoked)(
        affected=[(setup.room.id, setup.a.agent.id)]
    )
    notice = await a.receive_json_from(timeout=5)
    seen.setdefault(notice["type"], notice)
    await a.disconnect()
    await b.disconnect()
    return list(seen.values())


def _paths(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [path] if path else []
    if isinstance(value, dict):
        for key, inner in value.items():
            found += _paths(inner, (*path, key))
    elif isinstance(value, list):
        for i, inner in enumerate(value):
            found += _paths(inner, (*path, i))
    return found


def _decode_or_refuse(raw: str) -> None:
    try:
        decoded = parse_server_frame(raw)
    except FrameError as refused:
        assert refused.code in {"malformed", "invalid_body"}, refused.code
        return
    data = json.loads(raw)
    if decoded is None:
        assert data.get("type") not in SERVER_FRAME_TYPES
    else:
        assert decoded.type == data["type"]


async def test_mangled_server_frames_of_every_recorded_type_decode_or_are_refused(
    make_open_room: Any,
) -> None:
    recorded = await _record_frames(make_open_room)
    kinds = {f["type"] for f in recorded}
    assert kinds == SERVER_FRAME_TYPES, SERVER_FRAME_TYPES - kinds
    for original in recorded:  # each as sent decodes to its own type
        decoded = parse_server_frame(json.dumps(original))
        assert decoded is not None and decoded.type == original["type"]

    @settings(max_examples=600, deadline=None, suppress_health_check=list(HealthCheck))
    @given(st.data())
    def mangled(data: st.DataObject) -> None:
        original = data.draw(st.sampled_from(recorded))
        mangled = copy.deepcopy(original)
        for _ in range(data.draw(st.integers(min_value=1, max_value=3))):
            paths = _paths(mangled)
            if not paths:
                break
            path = data.draw(st.sampled_from(paths))
            parent = mangled
            for step in path[:-1]:
                parent = parent[step]
            how = data.draw(st.sampled_from(["replace", "drop", "add"]))
            if how == "replace":
                parent[path[-1]] = data.draw(any_json)
            elif how == "drop" and isinstance(parent, dict):
                del parent[path[-1]]
            elif isinstance(parent, dict):
                parent[data.draw(st.text(min_size=1, max_size=8))] = data.draw(any_json)
        _decode_or_refuse(json.dumps(mangled))

    mangled()
