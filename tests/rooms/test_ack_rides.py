"""An acknowledgement riding a `say` or a `context_request` (docs/protocol.md, "Acknowledgements
ride the next frame"): exactly an `ack` frame sent just before it; one the record refuses
refuses the whole frame, and nothing of it happens."""

from __future__ import annotations

import time
from typing import Any

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator

from ledger.models import LedgerEvent
from rooms import services
from rooms.models import Message, RoomMember
from synapsia.asgi import application
from tests.rooms.test_context import calendar, free_busy_7d, sign
from tests.socket_frames import frame, join, join_as_owner, next_frame_of, say

pytestmark = pytest.mark.django_db(transaction=True)


def say_acking(text: str, frame_id: str, ack: int) -> dict[str, Any]:
    return frame("say", {"text": text, "ack": ack}, frame_id)


def _seat(setup: Any, seat: Any) -> RoomMember:
    return RoomMember.objects.get(room_id=setup.room.id, agent=seat.agent)


async def acked_seq(setup: Any, seat: Any) -> int:
    return (await database_sync_to_async(_seat)(setup, seat)).acked_seq


async def texts(setup: Any) -> list[tuple[int, str]]:
    return await database_sync_to_async(
        lambda: list(
            Message.objects.filter(room_id=setup.room.id).order_by("seq").values_list("seq", "text")
        )
    )()


async def test_a_say_carrying_an_ack_records_both(make_open_room) -> None:
    setup = await database_sync_to_async(make_open_room)()
    a, b = await join(setup.room.id, setup.a.token), await join(setup.room.id, setup.b.token)
    await a.send_json_to(say("Friday 7pm?", "a-1"))
    assert (await a.receive_json_from(timeout=5))["body"]["seq"] == 1
    assert (await b.receive_json_from(timeout=5))["body"]["seq"] == 1
    await b.send_json_to(say_acking("Works for me.", "b-1", 1))
    sent = await b.receive_json_from(timeout=5)
    assert (sent["type"], sent["body"]["ref"], sent["body"]["seq"]) == ("sent", "b-1", 2)
    # The `sent` comes after the hop that recorded both: the ack is on record by then.
    assert await acked_seq(setup, setup.b) == 1
    assert (await a.receive_json_from(timeout=5))["body"]["text"] == "Works for me."
    assert await texts(setup) == [(1, "Friday 7pm?"), (2, "Works for me.")]
    await a.disconnect()
    await b.disconnect()


async def test_a_refused_ack_refuses_the_say_whole(make_open_room) -> None:
    setup = await database_sync_to_async(make_open_room)()
    a, b = await join(setup.room.id, setup.a.token), await join(setup.room.id, setup.b.token)
    await a.send_json_to(say("Friday 7pm?", "a-1"))
    assert (await a.receive_json_from(timeout=5))["type"] == "sent"
    assert (await b.receive_json_from(timeout=5))["body"]["seq"] == 1
    # Sent back to back, so the refused frame heads a run with the one behind it.
    await b.send_json_to(say_acking("Not recorded.", "b-1", 99))
    await b.send_json_to(say("Recorded.", "b-2"))
    refused = await b.receive_json_from(timeout=5)
    assert refused["type"] == "error"
    assert (refused["body"]["code"], refused["body"]["ref"]) == ("invalid_ack", "b-1")
    # The frame after it is a frame of its own, recorded as it would have been.
    sent = await b.receive_json_from(timeout=5)
    assert (sent["type"], sent["body"]["ref"], sent["body"]["seq"]) == ("sent", "b-2", 2)
    assert (await a.receive_json_from(timeout=5))["body"]["text"] == "Recorded."
    assert await a.receive_nothing(timeout=0.2)
    assert await texts(setup) == [(1, "Friday 7pm?"), (2, "Recorded.")]
    assert await acked_seq(setup, setup.b) == 0
    await a.disconnect()
    await b.disconnect()


async def test_an_ack_lower_than_the_seats_changes_nothing(make_open_room) -> None:
    setup = await database_sync_to_async(make_open_room)()
    a, b = await join(setup.room.id, setup.a.token), await join(setup.room.id, setup.b.token)
    for n in (1, 2):
        await a.send_json_to(say(f"m{n}", f"a-{n}"))
        assert (await b.receive_json_from(timeout=5))["body"]["seq"] == n
    await b.send_json_to(say_acking("up to two", "b-1", 2))
    assert (await b.receive_json_from(timeout=5))["type"] == "sent"
    await b.send_json_to(say_acking("back to one?", "b-2", 1))
    sent = await b.receive_json_from(timeout=5)
    assert (sent["type"], sent["body"]["seq"]) == ("sent", 4)
    assert await acked_seq(setup, setup.b) == 2
    await b.send_json_to(frame("context_request", {"ack": 1}, "c-1"))
    assert (await b.receive_json_from(timeout=5))["type"] == "context"
    assert await acked_seq(setup, setup.b) == 2
    await a.disconnect()
    await b.disconnect()


async def test_a_resent_say_carrying_its_ack_is_answered_once_and_keeps_the_ack(
    make_open_room,
) -> None:
    """A reconnecting client resends an unconfirmed `say` with the ack it carried. On
    PostgreSQL the resent id fails the lone say's statement inside the ack's transaction;
    the ack must still be on record and the resend answered as a duplicate."""
    setup = await database_sync_to_async(make_open_room)()
    a, b = await join(setup.room.id, setup.a.token), await join(setup.room.id, setup.b.token)
    for n in (1, 2):
        await a.send_json_to(say(f"m{n}", f"a-{n}"))
        assert (await b.receive_json_from(timeout=5))["body"]["seq"] == n
    await b.send_json_to(say_acking("once", "b-1", 1))
    assert (await b.receive_json_from(timeout=5))["body"]["seq"] == 3
    await b.send_json_to(say_acking("once", "b-1", 2))
    again = await b.receive_json_from(timeout=5)
    assert (again["type"], again["body"]["seq"], again["body"]["duplicate"]) == ("sent", 3, True)
    assert await acked_seq(setup, setup.b) == 2
    assert await texts(setup) == [(1, "m1"), (2, "m2"), (3, "once")]
    # And the socket carries on: the next say with an ack is recorded with it.
    await b.send_json_to(say_acking("next", "b-2", 2))
    assert (await b.receive_json_from(timeout=5))["body"]["seq"] == 4
    await a.disconnect()
    await b.disconnect()


async def test_a_say_refused_by_its_rate_still_records_its_ack(make_open_room, settings) -> None:
    settings.SYNAPSIA = {
        **settings.SYNAPSIA,
        "SOCKET_RATES": {**settings.SYNAPSIA["SOCKET_RATES"], "say": "1/h"},
    }
    setup = await database_sync_to_async(make_open_room)()
    a, b = await join(setup.room.id, setup.a.token), await join(setup.room.id, setup.b.token)
    await a.send_json_to(say("m1", "a-1"))
    assert (await b.receive_json_from(timeout=5))["body"]["seq"] == 1
    await b.send_json_to(say("first", "b-1"))
    assert (await b.receive_json_from(timeout=5))["type"] == "sent"
    await b.send_json_to(say_acking("past the rate", "b-2", 1))
    refused = await b.receive_json_from(timeout=5)
    assert (refused["body"]["code"], refused["body"]["ref"]) == ("say_rate_limited", "b-2")
    assert await acked_seq(setup, setup.b) == 1  # as the ack frame before it would have
    # An ack the record refuses is what such a frame is refused for.
    await b.send_json_to(say_acking("past the rate", "b-3", 99))
    refused = await b.receive_json_from(timeout=5)
    assert (refused["body"]["code"], refused["body"]["ref"]) == ("invalid_ack", "b-3")
    assert await texts(setup) == [(1, "m1"), (2, "first")]
    await a.disconnect()
    await b.disconnect()


def _context_room(make_open_room: Any) -> Any:
    """Alice's slip clears her free/busy for Bob's agent: each turn of Bob's discloses it."""
    setup = make_open_room()
    calendar(setup.a.owner, int(time.time()))
    sign(setup, setup.a, [free_busy_7d()])
    sign(setup, setup.b, [])
    return setup


def _disclosures(setup: Any) -> list[int]:
    return [
        e.data["turn"]
        for e in LedgerEvent.objects.filter(room_id=setup.room.id, kind="disclosure").order_by(
            "seq"
        )
    ]


async def test_a_refused_ack_refuses_the_context_request_whole(make_open_room) -> None:
    setup = await database_sync_to_async(_context_room)(make_open_room)
    a, b = await join(setup.room.id, setup.a.token), await join(setup.room.id, setup.b.token)
    await a.send_json_to(say("Friday?", "a-1"))
    assert (await b.receive_json_from(timeout=5))["body"]["seq"] == 1
    for n in range(1, 4):  # as many as a turn allows: the refused ones must not count
        await b.send_json_to(frame("context_request", {"ack": 99}, f"c-bad-{n}"))
        refused = await b.receive_json_from(timeout=5)
        assert refused["type"] == "error"
        assert (refused["body"]["code"], refused["body"]["ref"]) == ("invalid_ack", f"c-bad-{n}")
    seat = await database_sync_to_async(_seat)(setup, setup.b)
    assert (seat.context_turn, seat.acked_seq) == (0, 0)  # no turn, no ack
    assert await database_sync_to_async(_disclosures)(setup) == []  # nothing disclosed
    # The same request with an ack the room has: the ack first, then the turn.
    await b.send_json_to(frame("context_request", {"ack": 1}, "c-1"))
    context = await next_frame_of(b, "context")
    assert (context["id"], context["body"]["turn"]) == ("c-1", 1)
    assert len(context["body"]["peer_items"]) == 1
    seat = await database_sync_to_async(_seat)(setup, setup.b)
    assert (seat.context_turn, seat.acked_seq) == (1, 1)
    assert await database_sync_to_async(_disclosures)(setup) == [1]
    await a.disconnect()
    await b.disconnect()


async def test_an_owners_frame_carrying_an_ack_is_refused(make_open_room) -> None:
    setup = await database_sync_to_async(make_open_room)()
    await database_sync_to_async(services.messages_say)(
        room_id=setup.room.id, agent_id=setup.b.agent.id, says=[("b-1", "hello")]
    )
    owner = await join_as_owner(setup.room.id, setup.a.owner)
    for kind, body in (
        ("say", {"text": "from the browser", "ack": 1}),
        ("context_request", {"ack": 1}),
        ("ack", {"seq": 1}),
    ):
        await owner.send_json_to(frame(kind, body, f"o-{kind}"))
        refused = await next_frame_of(owner, "error")
        assert (refused["body"]["code"], refused["body"]["ref"]) == ("not_allowed", f"o-{kind}")
    assert await texts(setup) == [(1, "hello")]
    seats = await database_sync_to_async(
        lambda: sorted(RoomMember.objects.filter(room_id=setup.room.id).values_list("acked_seq"))
    )()
    assert seats == [(0,), (0,)]
    await owner.disconnect()


async def test_the_welcome_after_a_reconnect_replays_what_no_riding_ack_covered(
    make_open_room,
) -> None:
    setup = await database_sync_to_async(make_open_room)()
    a, b = await join(setup.room.id, setup.a.token), await join(setup.room.id, setup.b.token)
    for n in (1, 2, 3):
        await a.send_json_to(say(f"m{n}", f"a-{n}"))
        assert (await b.receive_json_from(timeout=5))["body"]["seq"] == n
    await b.send_json_to(frame("context_request", {"ack": 2}, "c-1"))
    assert (await next_frame_of(b, "context"))["id"] == "c-1"
    await b.disconnect()
    again = WebsocketCommunicator(
        application,
        f"/ws/rooms/{setup.room.id}/",
        headers=[(b"authorization", f"Bearer {setup.b.token}".encode())],
    )
    assert (await again.connect())[0]
    welcome = await again.receive_json_from(timeout=5)
    assert welcome["body"]["acked_seq"] == 2
    replay = await again.receive_json_from(timeout=5)
    assert (replay["type"], replay["body"]["seq"]) == ("message", 3)
    assert await again.receive_nothing(timeout=0.3)
    await a.disconnect()
    await again.disconnect()
