"""The SDK decodes every server frame with the protocol package and acts on nothing else: a
frame that does not match the package's schema is dropped (and, being unacknowledged, replayed
by a real server after a reconnect), a type it does not know is ignored. Driven over a real
loopback socket by a scripted server, so each malformed frame is exactly the one we mean."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
from websockets.asyncio.server import ServerConnection, serve

from agents import RoomClient, RoomClosedError
from synapsia_protocol import (
    AgentContext,
    ContextFrame,
    ErrorCode,
    FrameError,
    MessageBody,
    MessageFrame,
    WelcomeFrame,
    parse_server_frame,
)

ROOM = str(uuid.uuid4())
PEER = str(uuid.uuid4())
ME = str(uuid.uuid4())


def welcome() -> dict[str, Any]:
    return {
        "v": 1,
        "type": "welcome",
        "id": "w1",
        "body": {
            "room": {"id": ROOM, "purpose": "Dinner", "charter": "Be kind.", "state": "open"},
            "participant": "agent",
            "agent_id": ME,
            "acked_seq": 0,
            "max_frame_bytes": 65536,
            "tools": [],
        },
    }


def message(seq: int, text: str, **changes: Any) -> dict[str, Any]:
    body = {
        "seq": seq,
        "sender_agent_id": PEER,
        "text": text,
        "fenced": f'<<untrusted nonce="n{seq}">>\n{text}\n<</untrusted nonce="n{seq}">>',
        "flags": [],
        "sent_at": "2026-12-01T18:00:00Z",
    }
    body.update(changes)
    return {"v": 1, "type": "message", "id": f"m{seq}", "body": body}


def test_a_well_formed_frame_decodes_to_the_package_class() -> None:
    frame = parse_server_frame(json.dumps(message(1, "hello")))
    assert isinstance(frame, MessageFrame) and isinstance(frame.body, MessageBody)
    assert str(frame.body.sender_agent_id) == PEER and frame.body.author == "agent"
    assert isinstance(parse_server_frame(json.dumps(welcome())), WelcomeFrame)


def test_the_welcome_tools_are_mcp_tool_definitions_kept_as_sent() -> None:
    tool = {
        "name": "book_table",
        "inputSchema": {"type": "object"},
        "annotations": {"openWorldHint": True},
        "_meta": {"synapsia.dev/moneyArgument": "cost_cents"},
        "icons": [],  # a key this package does not name is kept, not dropped
    }
    frame = welcome()
    frame["body"]["tools"] = [tool]
    decoded = parse_server_frame(json.dumps(frame))
    assert isinstance(decoded, WelcomeFrame) and decoded.body.tools == [tool]
    for broken in ({"inputSchema": {}}, {"name": "book_table"}, {"name": 3, "inputSchema": {}}):
        frame["body"]["tools"] = [broken]
        with pytest.raises(FrameError):
            parse_server_frame(json.dumps(frame))


def _context_from_a_newer_server() -> dict[str, Any]:
    item = {
        "item_id": str(uuid.uuid4()),
        "owner_id": "maya",
        "resource": "budget",
        "scope": "range",
        "content": {"min": 40, "max": 60},
        "onward_disclosure": False,
        "provenance": "vault",  # a field of a later server, at every level
    }
    body = {
        "room_id": ROOM,
        "agent_id": ME,
        "turn": 3,
        "preamble": "You act for Maya.",
        "purpose": "Dinner",
        "charter": "Be kind.",
        "own_items": [item],
        "whispers": [],
        "notices": [],
        "peer_items": [{**item, "fenced": "<<block>>", "nonce": "n", "weight": 2}],
        "peer_messages": [],
        "peer_artifacts": [],
        "turn_deadline": "2026-12-01T18:05:00Z",
    }
    return {"v": 1, "type": "context", "id": "c1", "trace": "t-9", "body": body}


def test_fields_a_newer_server_adds_are_left_out_and_the_rest_read_as_before() -> None:
    """v1 grows by optional fields (docs/protocol.md, "Versions"): an SDK from before one reads
    the frame without it, never refusing the whole turn's context for a field it cannot use."""
    raw = _context_from_a_newer_server()
    decoded = parse_server_frame(json.dumps(raw))
    assert isinstance(decoded, ContextFrame)
    context = decoded.body
    assert context.turn == 3 and list(context.own("budget")) == [{"min": 40, "max": 60}]
    assert context.peer_items[0].fenced == "<<block>>"
    assert "turn_deadline" not in context.model_dump()
    assert "provenance" not in context.own_items[0].model_dump()
    assert "weight" not in context.peer_items[0].model_dump()
    assert AgentContext.from_body(raw["body"]) == context
    # A known field is still checked: missing or of the wrong type refuses the frame.
    for broken in ({"turn": "three"}, {"own_items": [{"item_id": "x"}]}):
        with pytest.raises(FrameError):
            parse_server_frame(json.dumps({**raw, "body": {**raw["body"], **broken}}))
    without_turn = {k: v for k, v in raw["body"].items() if k != "turn"}
    with pytest.raises(FrameError):
        parse_server_frame(json.dumps({**raw, "body": without_turn}))
    extra = message(1, "hi", admin=True)
    read = parse_server_frame(json.dumps(extra))
    assert isinstance(read, MessageFrame) and "admin" not in read.body.model_dump()


def test_an_unknown_frame_type_is_ignored_not_guessed_at() -> None:
    assert parse_server_frame(json.dumps({"v": 1, "type": "gossip", "id": "x", "body": {}})) is None


@pytest.mark.parametrize(
    "raw",
    [
        "not json",
        "[1, 2]",
        json.dumps(message(1, "hi", sender_agent_id="not-a-uuid")),
        json.dumps({**message(1, "hi"), "body": {**message(1, "hi")["body"], "seq": "one"}}),
        json.dumps(message(1, "hi", author="system")),  # no such author
        json.dumps({**message(1, "hi"), "body": {"seq": 1, "text": "hi"}}),  # fields missing
        json.dumps({**message(1, "hi"), "v": 2}),
        json.dumps({**message(1, "hi"), "v": True}),
        json.dumps({"v": 1, "type": "message", "id": "m1"}),  # no body
        "[" * 5000 + "]" * 5000,
    ],
)
def test_a_frame_that_does_not_match_the_protocol_is_refused(raw: str) -> None:
    with pytest.raises(FrameError) as refused:
        parse_server_frame(raw)
    assert refused.value.code in {ErrorCode.MALFORMED, ErrorCode.INVALID_BODY}


async def _scripted_server(frames: list[str]) -> AsyncIterator[tuple[str, list[Any]]]:
    received: list[Any] = []

    async def handler(socket: ServerConnection) -> None:
        for frame in frames:
            await socket.send(frame)
        async for raw in socket:
            received.append(json.loads(raw))

    async with serve(handler, "127.0.0.1", 0) as server:
        port = next(iter(server.sockets)).getsockname()[1]
        yield f"ws://127.0.0.1:{port}/ws/rooms/{ROOM}/", received


async def test_the_client_hands_out_only_frames_the_package_decoded() -> None:
    script = [
        json.dumps(welcome()),
        json.dumps({"v": 1, "type": "gossip", "id": "g", "body": {"text": "psst"}}),
        json.dumps(message(1, "real")),
    ]
    async for url, received in _scripted_server(script):
        async with RoomClient(url, "token", reconnect=False) as room:
            assert room.welcome is not None and str(room.welcome.agent_id) == ME
            assert room.welcome.room.purpose == "Dinner"
            heard = await room.next_message(timeout=5)
            assert isinstance(heard, MessageBody)
            assert (heard.seq, heard.text) == (1, "real")
        assert [f["body"]["seq"] for f in received if f["type"] == "ack"] == [1]


async def test_an_unreadable_frame_stops_the_client_before_anything_after_it() -> None:
    # Acknowledgements are cumulative: reading on past an unreadable message and acknowledging
    # the next one would lose it for good. The client stops instead, even with reconnects on.
    script = [
        json.dumps(welcome()),
        json.dumps(message(1, "forged", sender_agent_id="not-a-uuid")),
        json.dumps(message(2, "after")),
    ]
    async for url, received in _scripted_server(script):
        room = RoomClient(url, "token")
        await room.connect(timeout=5)
        try:
            with pytest.raises(RoomClosedError) as closed:
                await room.next_message(timeout=5)
            assert closed.value.code == 1002
            assert room.reconnects == 0
        finally:
            await room.close()
        assert [f for f in received if f["type"] == "ack"] == []
