"""What a process keeps of a room's texts (the peer message memo, rooms/context.py) goes when
the process stops serving the room: its last socket there closed, as deleting the room closes
them all. A deleted room's words do not stay in a server's memory until the memo happens to
evict them."""

from __future__ import annotations

import hashlib
import uuid
from typing import Any

import pytest
from channels.db import database_sync_to_async

from rooms import context as room_context
from rooms.deletion import room_delete
from tests.socket_frames import frame, join, next_frame_of, say

pytestmark = pytest.mark.django_db(transaction=True)


def _key(text: str) -> bytes:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()


@pytest.fixture
def empty_memo() -> Any:
    room_context._peer_message_memo.clear()
    room_context._peer_message_memo_rooms.clear()
    yield
    room_context._peer_message_memo.clear()
    room_context._peer_message_memo_rooms.clear()


def test_forgetting_a_room_drops_its_texts_and_keeps_the_others(empty_memo: None) -> None:
    kept_room, gone_room = uuid.uuid4(), uuid.uuid4()
    room_context._peer_messages_fenced(["Shall we say 19:00?", "Both rooms say this."], kept_room)
    room_context._peer_messages_fenced(["My budget is tight.", "Both rooms say this."], gone_room)
    said = "Tuesday is out for me."
    assert room_context.peer_message_memo_prime(
        said, room_context.fence(said, source="peer"), gone_room
    )
    room_context.peer_message_memo_forget(gone_room)
    # The shared text goes too (it is the gone room's words); the other room cleans it again.
    assert set(room_context._peer_message_memo) == {_key("Shall we say 19:00?")}
    assert list(room_context._peer_message_memo_rooms) == [kept_room]
    room_context.peer_message_memo_forget(gone_room)  # twice is nothing


def test_a_long_lived_rooms_note_stays_within_the_memo(
    empty_memo: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(room_context, "_PEER_MESSAGE_MEMO_ENTRIES", 3)
    room = uuid.uuid4()
    for n in range(10):
        room_context._peer_messages_fenced([f"message {n}"], room)
    assert len(room_context._peer_message_memo) == 3
    noted = room_context._peer_message_memo_rooms[room]
    assert len(noted) <= 4 and set(room_context._peer_message_memo) <= noted


async def test_deleting_a_room_leaves_none_of_its_texts_in_the_memo(
    make_open_room: Any, empty_memo: None
) -> None:
    setup = await database_sync_to_async(make_open_room)()
    other = await database_sync_to_async(make_open_room)(prefix="other-")
    a, b = await join(setup.room.id, setup.a.token), await join(setup.room.id, setup.b.token)
    c = await join(other.room.id, other.a.token)
    words = ["Only 40 EUR each this month.", "Saturday at Mani, then?"]
    for n, text in enumerate(words):
        await a.send_json_to(say(text, f"a-{n}"))
        await next_frame_of(b, "message")
    await b.send_json_to(frame("context_request", {}, "c-1"))
    assert len((await next_frame_of(b, "context"))["body"]["peer_messages"]) == 2
    await c.send_json_to(say("A room that stays.", "c-1"))
    await next_frame_of(c, "sent")
    assert {_key(t) for t in words} <= set(room_context._peer_message_memo)

    await database_sync_to_async(room_delete)(owner=setup.b.owner, room_id=setup.room.id)
    for socket in (a, b):  # each is told the room closed and is closed
        while (await socket.receive_output(timeout=5))["type"] != "websocket.close":
            pass
        await socket.disconnect()
    assert not {_key(t) for t in words} & set(room_context._peer_message_memo)
    assert setup.room.id not in room_context._peer_message_memo_rooms
    assert _key("A room that stays.") in room_context._peer_message_memo  # still served here
    await c.disconnect()
