"""The room socket, through Channels' WebsocketCommunicator and the real ASGI stack."""

from __future__ import annotations

import json
from typing import Any

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.db.models import F

from rooms import realtime, services
from rooms.models import Agent, Message, RoomState
from rooms.protocol import CloseCode
from synapsia.asgi import application
from tests.socket_frames import agent_socket_count, layer_sift

pytestmark = pytest.mark.django_db(transaction=True)


def frame(kind: str, body: dict[str, Any], frame_id: str = "f1") -> dict[str, Any]:
    return {"v": 1, "type": kind, "id": frame_id, "body": body}


def bearer(token: str) -> list[tuple[bytes, bytes]]:
    return [(b"authorization", f"Bearer {token}".encode())]


async def join(room_id: object, token: str) -> tuple[WebsocketCommunicator, dict[str, Any]]:
    communicator = WebsocketCommunicator(
        application, f"/ws/rooms/{room_id}/", headers=bearer(token)
    )
    connected, _ = await communicator.connect()
    assert connected
    welcome = await communicator.receive_json_from(timeout=5)
    assert welcome["type"] == "welcome"
    return communicator, welcome


@pytest.fixture
def backfills(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The channels of the sockets that read a gap back from the record (the real read)."""
    from rooms.consumers import RoomConsumer

    read: list[str] = []
    real_backfill = RoomConsumer._backfill

    async def counted(consumer: RoomConsumer) -> None:
        read.append(consumer.channel_name)
        await real_backfill(consumer)

    monkeypatch.setattr(RoomConsumer, "_backfill", counted)
    return read


async def test_two_agents_talk_and_the_record_keeps_it(make_open_room) -> None:
    setup = await database_sync_to_async(make_open_room)()
    a, welcome = await join(setup.room.id, setup.a.token)
    b, _ = await join(setup.room.id, setup.b.token)
    assert welcome["body"]["room"]["purpose"] == "Dinner for two"
    assert welcome["body"]["agent_id"] == str(setup.a.agent.id)

    await a.send_json_to(frame("say", {"text": "Friday 7pm?"}, "a-1"))
    sent = await a.receive_json_from(timeout=5)
    assert sent["type"] == "sent"
    assert sent["body"] == {"ref": "a-1", "seq": 1, "duplicate": False}
    heard = await b.receive_json_from(timeout=5)
    assert heard["type"] == "message"
    assert heard["body"]["text"] == "Friday 7pm?"
    assert heard["body"]["seq"] == 1
    assert heard["body"]["sender_agent_id"] == str(setup.a.agent.id)
    assert await a.receive_nothing(timeout=0.2)  # a sender is not echoed its own message

    await b.send_json_to(frame("say", {"text": "Works for me."}, "b-1"))
    assert (await b.receive_json_from(timeout=5))["body"]["seq"] == 2
    assert (await a.receive_json_from(timeout=5))["body"]["text"] == "Works for me."
    texts = await database_sync_to_async(
        lambda: list(Message.objects.order_by("seq").values_list("seq", "text"))
    )()
    assert texts == [(1, "Friday 7pm?"), (2, "Works for me.")]
    await a.disconnect()
    await b.disconnect()


async def test_a_sender_moves_past_its_own_message_without_its_event_or_a_read(
    make_open_room, monkeypatch: pytest.MonkeyPatch, backfills: list[str]
) -> None:
    """The sender's own message moves its position when it is announced: the in-memory
    layer then leaves the sender out of the event (the Redis layer delivers it, and it is
    found handled), and the peer's reply after it is delivered in order, with no read of the
    record (a position left behind would read the gap back)."""
    from channels.layers import get_channel_layer

    layer = get_channel_layer()
    events: list[tuple[str, str]] = []
    if isinstance(layer, realtime.SweptInMemoryChannelLayer):
        real_put = layer._put

        def put(channel: str, message: dict[str, Any]) -> None:
            events.append((channel, message["type"]))
            real_put(channel, message)

        monkeypatch.setattr(layer, "_put", put)
    setup = await database_sync_to_async(make_open_room)()
    a, _ = await join(setup.room.id, setup.a.token)
    b, _ = await join(setup.room.id, setup.b.token)
    for n in range(3):
        await a.send_json_to(frame("say", {"text": f"Friday {n}pm?"}, f"a-{n}"))
        assert (await a.receive_json_from(timeout=5))["body"]["seq"] == 2 * n + 1
        assert (await b.receive_json_from(timeout=5))["body"]["seq"] == 2 * n + 1
        await b.send_json_to(frame("say", {"text": f"Not {n}pm."}, f"b-{n}"))
        assert (await b.receive_json_from(timeout=5))["body"]["seq"] == 2 * n + 2
        heard = await a.receive_json_from(timeout=5)
        assert (heard["type"], heard["body"]["seq"]) == ("message", 2 * n + 2)
    assert await a.receive_nothing(timeout=0.2)
    assert backfills == []
    if isinstance(layer, realtime.SweptInMemoryChannelLayer):
        told = [channel for channel, kind in events if kind == "room.messages"]
        assert len(told) == 6 and len(set(told)) == 2  # each message to its peer alone
    await a.disconnect()
    await b.disconnect()


async def test_two_agents_speaking_at_once_hear_each_other_without_a_read(
    make_open_room, backfills: list[str]
) -> None:
    """Both agents speak at once, so their messages are recorded in one desk hop: the one
    recorded second is announced while the first one's event is still queued for its
    sender. That socket's position must not jump past the gap (which it would then read
    back from the record, a hop for a message already on its way): its own event comes back
    behind the peer's and moves it in order. Each hears the other once, in order, and
    nothing is read back."""
    setup = await database_sync_to_async(make_open_room)()
    a, _ = await join(setup.room.id, setup.a.token)
    b, _ = await join(setup.room.id, setup.b.token)
    heard: dict[str, list[int]] = {"a": [], "b": []}
    given: dict[str, list[int]] = {"a": [], "b": []}
    for n in range(6):
        # Both frames are queued before either socket runs: one hop records both.
        await a.send_json_to(frame("say", {"text": f"Friday {n}pm?"}, f"a-{n}"))
        await b.send_json_to(frame("say", {"text": f"Saturday {n}pm?"}, f"b-{n}"))
        for name, socket in (("a", a), ("b", b)):
            for _ in range(2):
                got = await socket.receive_json_from(timeout=5)
                mine = given if got["type"] == "sent" else heard
                mine[name].append(got["body"]["seq"])
    assert await a.receive_nothing(timeout=0.2) and await b.receive_nothing(timeout=0.2)
    assert heard["a"] == given["b"] and heard["b"] == given["a"]  # once each, in order
    assert sorted(given["a"] + given["b"]) == list(range(1, 13))
    assert backfills == []
    await a.disconnect()
    await b.disconnect()


async def test_resending_the_same_frame_id_stores_and_relays_once(make_open_room) -> None:
    setup = await database_sync_to_async(make_open_room)()
    a, _ = await join(setup.room.id, setup.a.token)
    b, _ = await join(setup.room.id, setup.b.token)
    for _ in range(2):
        await a.send_json_to(frame("say", {"text": "hello"}, "same-id"))
    first, second = await a.receive_json_from(timeout=5), await a.receive_json_from(timeout=5)
    assert (first["body"]["duplicate"], second["body"]["duplicate"]) == (False, True)
    assert first["body"]["seq"] == second["body"]["seq"] == 1
    assert (await b.receive_json_from(timeout=5))["body"]["seq"] == 1
    assert await b.receive_nothing(timeout=0.3)
    assert await database_sync_to_async(Message.objects.count)() == 1
    await a.disconnect()
    await b.disconnect()


@pytest.mark.parametrize(
    ("raw", "code", "ref"),
    [
        ("not json", "malformed", None),
        ("[1, 2]", "malformed", None),
        (json.dumps({"v": 1, "type": "say", "id": "x1"}), "malformed", "x1"),
        (json.dumps(frame("say", {"text": "hi"}) | {"v": 2}), "unsupported_version", "f1"),
        (json.dumps(frame("shout", {"text": "hi"})), "unknown_type", "f1"),
        (json.dumps(frame("say", {"text": ""})), "invalid_body", "f1"),
        (json.dumps(frame("say", {"text": "hi", "extra": 1})), "invalid_body", "f1"),
        (json.dumps(frame("say", {"text": "x" * 8001})), "invalid_body", "f1"),
        (json.dumps(frame("say", {"text": "nul \u0000 inside"})), "invalid_body", "f1"),
        (json.dumps(frame("say", {"text": "x" * 70_000})), "oversized", None),
        (json.dumps(frame("ack", {"seq": 99})), "invalid_ack", "f1"),
    ],
)
async def test_invalid_frames_get_error_frames_and_nothing_is_stored(
    make_open_room, raw, code, ref
) -> None:
    setup = await database_sync_to_async(make_open_room)()
    a, _ = await join(setup.room.id, setup.a.token)
    b, _ = await join(setup.room.id, setup.b.token)
    await a.send_to(text_data=raw)
    error = await a.receive_json_from(timeout=5)
    assert error["type"] == "error"
    assert error["body"]["code"] == code
    assert error["body"]["ref"] == ref
    # The connection stays open and usable after a recoverable error.
    await a.send_json_to(frame("ping", {}, "p1"))
    assert (await a.receive_json_from(timeout=5))["type"] == "pong"
    assert await b.receive_nothing(timeout=0.2)
    assert await database_sync_to_async(Message.objects.count)() == 0
    await a.disconnect()
    await b.disconnect()


async def test_binary_frames_are_refused(make_open_room) -> None:
    setup = await database_sync_to_async(make_open_room)()
    a, _ = await join(setup.room.id, setup.a.token)
    await a.send_to(bytes_data=b"\x00\x01")
    assert (await a.receive_json_from(timeout=5))["body"]["code"] == "malformed"
    await a.disconnect()


async def test_paused_room_refuses_speech_out_of_state(make_open_room) -> None:
    setup = await database_sync_to_async(make_open_room)()
    a, _ = await join(setup.room.id, setup.a.token)
    await database_sync_to_async(services.room_transition)(
        owner=setup.a.owner, room_id=setup.room.id, to=RoomState.PAUSED
    )
    state = await a.receive_json_from(timeout=5)
    assert state == {"v": 1, "type": "room_state", "id": state["id"], "body": {"state": "paused"}}
    await a.send_json_to(frame("say", {"text": "still there?"}, "s1"))
    error = await a.receive_json_from(timeout=5)
    assert error["body"] == {
        "code": "room_not_open",
        "message": "The room is not open.",
        "ref": "s1",
    }
    assert await database_sync_to_async(Message.objects.count)() == 0
    await a.disconnect()


async def test_reconnect_delivers_everything_after_the_last_ack_exactly_once(
    make_open_room,
) -> None:
    setup = await database_sync_to_async(make_open_room)()
    a, _ = await join(setup.room.id, setup.a.token)
    b, _ = await join(setup.room.id, setup.b.token)
    for n in range(1, 6):
        await a.send_json_to(frame("say", {"text": f"m{n}"}, f"a-{n}"))
        await a.receive_json_from(timeout=5)
    received = [(await b.receive_json_from(timeout=5))["body"]["seq"] for _ in range(5)]
    assert received == [1, 2, 3, 4, 5]
    await b.send_json_to(frame("ack", {"seq": 2}, "ack-2"))
    await b.send_json_to(frame("ping", {}, "p"))
    assert (await b.receive_json_from(timeout=5))["type"] == "pong"  # the ack was processed
    await b.disconnect()

    for n in range(6, 8):  # said while b is away
        await a.send_json_to(frame("say", {"text": f"m{n}"}, f"a-{n}"))
        await a.receive_json_from(timeout=5)
    b2, welcome = await join(setup.room.id, setup.b.token)
    assert welcome["body"]["acked_seq"] == 2
    replayed = [(await b2.receive_json_from(timeout=5))["body"]["seq"] for _ in range(5)]
    assert replayed == [3, 4, 5, 6, 7]
    await a.send_json_to(frame("say", {"text": "m8"}, "a-8"))
    await a.receive_json_from(timeout=5)
    assert (await b2.receive_json_from(timeout=5))["body"]["seq"] == 8
    assert await b2.receive_nothing(timeout=0.3)
    await a.disconnect()
    await b2.disconnect()


async def test_a_second_connection_replaces_the_first(make_open_room) -> None:
    setup = await database_sync_to_async(make_open_room)()
    first, _ = await join(setup.room.id, setup.a.token)
    second, _ = await join(setup.room.id, setup.a.token)
    closed = await first.receive_output(timeout=5)
    assert closed == {"type": "websocket.close", "code": CloseCode.REPLACED}
    await second.send_json_to(frame("ping", {}, "p"))
    assert (await second.receive_json_from(timeout=5))["type"] == "pong"
    await second.disconnect()


def _second_room(setup: Any) -> Any:
    """Another open room between the same two owners, with the same two agents seated."""
    alice, bob = setup.a.owner, setup.b.owner
    room = services.room_create(owner=alice, purpose="Lunch for two", charter="Find a lunch.")
    invite = services.invite_create(owner=alice, room_id=room.id)
    services.invite_accept(owner=bob, token=invite.token)
    services.room_bind_agent(owner=alice, room_id=room.id, agent_id=setup.a.agent.id)
    services.room_bind_agent(owner=bob, room_id=room.id, agent_id=setup.b.agent.id)
    return services.room_transition(owner=alice, room_id=room.id, to=RoomState.OPEN)


@pytest.fixture
def told(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str, str | None]]:
    """What the sockets are told through the real channel layer: (group, type, agent)."""
    heard: list[tuple[str, str, str | None]] = []

    def passes(group: str, message: dict[str, Any]) -> bool:
        heard.append((group, message["type"], message.get(realtime.FOR_AGENT)))
        return True

    layer_sift(monkeypatch, passes)
    return heard


async def test_a_join_tells_the_room_only_while_an_earlier_socket_has_not_left(
    make_open_room, told: list[tuple[str, str, str | None]]
) -> None:
    """The agent's joins and leaves are counted by the statements that record them, and a
    join tells the room to close the agent's earlier socket only while some earlier join has
    not left. The peer's socket is in the room throughout, so the in-memory layer's own
    check (no other socket in the group) does not decide it either."""
    setup = await database_sync_to_async(make_open_room)()
    agent = setup.a.agent.id

    def replacements() -> int:
        return sum(1 for _, kind, _ in told if kind == "agent.replaced")

    peer, _ = await join(setup.room.id, setup.b.token)
    first, _ = await join(setup.room.id, setup.a.token)
    assert replacements() == 0
    second, _ = await join(setup.room.id, setup.a.token)
    assert await first.receive_output(timeout=5) == {
        "type": "websocket.close",
        "code": CloseCode.REPLACED,
    }
    assert replacements() == 1
    await first.disconnect()
    await second.disconnect()
    assert await database_sync_to_async(agent_socket_count)(agent) == (2, 2)

    third, _ = await join(setup.room.id, setup.a.token)  # both earlier sockets left
    assert replacements() == 1
    await third.disconnect()
    # A socket that ended without its leave (its process died) keeps the count up: the room
    # is told, although nothing is there to close.
    await database_sync_to_async(Agent.objects.filter(id=agent).update)(
        socket_joins=F("socket_joins") + 1
    )
    fourth, _ = await join(setup.room.id, setup.a.token)
    assert replacements() == 2
    for live in (fourth, peer):
        await live.send_json_to(frame("ping", {}, "p"))
        assert (await live.receive_json_from(timeout=5))["type"] == "pong"
        await live.disconnect()


async def test_a_refused_join_is_not_counted(make_open_room) -> None:
    setup = await database_sync_to_async(make_open_room)()
    elsewhere = await database_sync_to_async(make_open_room)(prefix="other-")
    socket = WebsocketCommunicator(
        application, f"/ws/rooms/{elsewhere.room.id}/", headers=bearer(setup.a.token)
    )
    await socket.connect()
    assert await socket.receive_output(timeout=5) == {
        "type": "websocket.close",
        "code": CloseCode.FORBIDDEN,
    }
    await socket.disconnect()
    assert await database_sync_to_async(agent_socket_count)(setup.a.agent.id) == (0, 0)
    stamped = await database_sync_to_async(
        Agent.objects.values_list("token_last_used_at", flat=True).get
    )(id=setup.a.agent.id)
    assert stamped is not None  # the token's use is still recorded


async def test_an_agent_is_replaced_per_room_and_revoked_in_every_room(
    make_open_room, told: list[tuple[str, str, str | None]]
) -> None:
    """An agent seated in two rooms holds a socket in each: connecting again to one room
    closes only its earlier socket there (the later one, which heard the earlier one's own
    announcement too, stays), and revoking the agent tells both rooms' sockets (the record
    sweep would close them too, later: the bell is what is checked here)."""
    setup = await database_sync_to_async(make_open_room)()
    lunch = await database_sync_to_async(_second_room)(setup)
    dinner_peer, _ = await join(setup.room.id, setup.b.token)
    dinner, _ = await join(setup.room.id, setup.a.token)
    lunch_a, _ = await join(lunch.id, setup.a.token)
    assert await dinner.receive_nothing(timeout=0.3)  # a socket in another room replaces none
    dinner_again, _ = await join(setup.room.id, setup.a.token)
    closed = await dinner.receive_output(timeout=5)
    assert closed == {"type": "websocket.close", "code": CloseCode.REPLACED}
    for live in (dinner_again, lunch_a, dinner_peer):
        await live.send_json_to(frame("ping", {}, "p"))
        assert (await live.receive_json_from(timeout=5))["type"] == "pong"
    await database_sync_to_async(services.agent_revoke)(
        owner=setup.a.owner, agent_id=setup.a.agent.id
    )
    for revoked in (dinner_again, lunch_a):
        closed = await revoked.receive_output(timeout=5)
        assert closed == {"type": "websocket.close", "code": CloseCode.UNAUTHENTICATED}
    agent = setup.a.agent.id.hex
    assert {(g, a) for g, kind, a in told if kind == "agent.revoked"} == {
        (realtime.room_group(setup.room.id), agent),
        (realtime.room_group(lunch.id), agent),
    }
    await dinner_peer.send_json_to(frame("ping", {}, "p"))  # the other agent's is not its
    assert (await dinner_peer.receive_json_from(timeout=5))["type"] == "pong"
    await dinner_peer.disconnect()


async def test_revoking_an_agent_closes_its_open_socket(make_open_room) -> None:
    setup = await database_sync_to_async(make_open_room)()
    a, _ = await join(setup.room.id, setup.a.token)
    await database_sync_to_async(services.agent_revoke)(
        owner=setup.a.owner, agent_id=setup.a.agent.id
    )
    closed = await a.receive_output(timeout=5)
    assert closed == {"type": "websocket.close", "code": CloseCode.UNAUTHENTICATED}
