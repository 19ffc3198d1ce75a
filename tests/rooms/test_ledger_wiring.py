"""Rooms record their decisions in the ledger: joins, leaves, pauses, resumes, closes."""

from __future__ import annotations

import json

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator

from ledger.models import LedgerEvent, SignedHead
from ledger.services import LedgerAppendError
from ledger.verification import ledger_verify_room, signed_head_valid
from rooms import handshake, services
from rooms.models import Room, RoomState
from rooms.protocol import CloseCode
from synapsia.asgi import application

CANARY = "CANARY-7f3a-do-not-leak"


def kinds(room: Room) -> list[str]:
    return list(
        LedgerEvent.objects.filter(room_id=room.id).order_by("seq").values_list("kind", flat=True)
    )


@pytest.mark.django_db
def test_room_lifecycle_is_in_the_ledger_with_signed_heads(make_open_room) -> None:
    setup = make_open_room()
    for to in (RoomState.PAUSED, RoomState.OPEN, RoomState.CLOSED):
        services.room_transition(owner=setup.a.owner, room_id=setup.room.id, to=to)
    assert kinds(setup.room) == ["join", "join", "room_paused", "room_resumed", "room_closed"]
    assert ledger_verify_room(room_id=setup.room.id).ok
    heads = list(SignedHead.objects.filter(room_id=setup.room.id).order_by("seq"))
    assert [h.seq for h in heads] == [3, 5]
    assert all(signed_head_valid(h) for h in heads)


def _join(room_id: object, token: str) -> WebsocketCommunicator:
    return WebsocketCommunicator(
        application,
        f"/ws/rooms/{room_id}/",
        headers=[(b"authorization", f"Bearer {token}".encode())],
    )


@pytest.mark.django_db(transaction=True)
async def test_agent_join_and_leave_are_recorded(make_open_room) -> None:
    setup = await database_sync_to_async(make_open_room)()
    socket = _join(setup.room.id, setup.a.token)
    assert (await socket.connect())[0]
    await socket.receive_json_from(timeout=5)
    await socket.disconnect()
    events = await database_sync_to_async(
        lambda: list(
            LedgerEvent.objects.filter(room_id=setup.room.id).order_by("seq").values("kind", "data")
        )
    )()
    assert [e["kind"] for e in events][-2:] == ["join", "leave"]
    assert events[-1]["data"] == {
        "participant_id": str(setup.a.agent.id),
        "participant_kind": "agent",
    }


@pytest.mark.django_db(transaction=True)
async def test_a_join_that_cannot_be_recorded_does_not_happen(make_open_room, monkeypatch) -> None:
    setup = await database_sync_to_async(make_open_room)()

    def ledger_down(**_: object) -> None:
        raise LedgerAppendError("ledger append failed: injected")

    monkeypatch.setattr(handshake, "ledger_append_many", ledger_down)
    socket = _join(setup.room.id, setup.a.token)
    assert (await socket.connect())[0]
    closed = await socket.receive_output(timeout=5)
    assert closed == {"type": "websocket.close", "code": CloseCode.TRY_AGAIN}


@pytest.mark.django_db
def test_a_pause_that_cannot_be_recorded_does_not_happen(make_open_room, monkeypatch) -> None:
    setup = make_open_room()
    monkeypatch.setattr(
        services, "ledger_append", lambda **_: (_ for _ in ()).throw(LedgerAppendError("down"))
    )
    with pytest.raises(LedgerAppendError):
        services.room_transition(owner=setup.a.owner, room_id=setup.room.id, to=RoomState.CLOSED)
    setup.room.refresh_from_db()
    assert setup.room.state == RoomState.OPEN


@pytest.mark.django_db(transaction=True)
async def test_no_content_reaches_the_ledger(make_owner) -> None:
    """Plant a canary in every content path rooms has (purpose, charter, agent name, message)."""

    def setup_room() -> tuple[Room, str, str]:
        alice, bob = make_owner("alice"), make_owner("bob")
        a = services.agent_register(owner=alice, name=f"agent {CANARY}")
        b = services.agent_register(owner=bob, name="b")
        room = services.room_create(
            owner=alice, purpose=f"Dinner {CANARY}", charter=f"Rules {CANARY}"
        )
        invite = services.invite_create(owner=alice, room_id=room.id)
        services.invite_accept(owner=bob, token=invite.token)
        services.room_bind_agent(owner=alice, room_id=room.id, agent_id=a.agent.id)
        services.room_bind_agent(owner=bob, room_id=room.id, agent_id=b.agent.id)
        services.room_transition(owner=alice, room_id=room.id, to=RoomState.OPEN)
        return room, a.token, b.token

    room, token_a, token_b = await database_sync_to_async(setup_room)()
    a, b = _join(room.id, token_a), _join(room.id, token_b)
    for socket in (a, b):
        assert (await socket.connect())[0]
        await socket.receive_json_from(timeout=5)
    await a.send_json_to({"v": 1, "type": "say", "id": "c1", "body": {"text": f"secret {CANARY}"}})
    await a.receive_json_from(timeout=5)
    await b.receive_json_from(timeout=5)
    await a.disconnect()
    await b.disconnect()
    await database_sync_to_async(services.room_transition)(
        owner=room.created_by, room_id=room.id, to=RoomState.CLOSED
    )

    rows = await database_sync_to_async(
        lambda: list(LedgerEvent.objects.filter(room_id=room.id).values())
    )()
    assert len(rows) >= 6
    assert CANARY not in json.dumps(rows, default=str)
