"""What a process keeps of a room's texts (the peer message memo, rooms/context.py) goes when
the process stops serving the room: its last socket there closed, as deleting the room closes
them all. A deleted room's words do not stay in a server's memory until the memo happens to
evict them."""

from __future__ import annotations

import asyncio
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


def _empty() -> None:
    room_context._peer_message_memo.clear()
    room_context._peer_message_memo_rooms.clear()
    room_context._peer_message_memo_served.clear()


@pytest.fixture
def empty_memo() -> Any:
    _empty()
    yield
    _empty()


def _served() -> uuid.UUID:
    room = uuid.uuid4()
    room_context.peer_message_memo_serve(room)
    return room


def test_forgetting_a_room_drops_its_texts_and_keeps_the_others(empty_memo: None) -> None:
    kept_room, gone_room = _served(), _served()
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
    room = _served()
    for n in range(10):
        room_context._peer_messages_fenced([f"message {n}"], room)
    assert len(room_context._peer_message_memo) == 3
    noted = room_context._peer_message_memo_rooms[room]
    assert len(noted) <= 4 and set(room_context._peer_message_memo) <= noted


def test_nothing_is_kept_for_a_room_no_longer_served(empty_memo: None) -> None:
    """A say committed, or a context cleaned, after the room's last socket here closed (its
    work still on a database thread when the forget ran) keeps nothing of the room's texts:
    they are still fenced, and the memo keeps them again only once the room is served."""
    room, other = _served(), _served()
    room_context._peer_messages_fenced(["Both rooms say this."], other)
    room_context.peer_message_memo_forget(room)
    said = "Tuesday is out for me."
    assert not room_context.peer_message_memo_prime(
        said, room_context.fence(said, source="peer"), room
    )
    given = room_context._peer_messages_fenced(["My budget is tight.", said], room)
    assert [b.text for b in given] == ["My budget is tight.", said]
    # What another room here keeps is still read for this one, and this one noted nowhere.
    assert room_context._peer_messages_fenced(["Both rooms say this."], room)[0].text
    assert set(room_context._peer_message_memo) == {_key("Both rooms say this.")}
    assert list(room_context._peer_message_memo_rooms) == [other]

    room_context.peer_message_memo_serve(room)  # a socket of the room is watched here again
    room_context._peer_messages_fenced([said], room)
    assert _key(said) in room_context._peer_message_memo


def test_a_room_is_served_from_its_first_watched_socket_to_its_last(empty_memo: None) -> None:
    """The record sweep (rooms.realtime) says which rooms this process serves: from the
    first socket of a room it watches until the last one goes."""
    from rooms.realtime import RecordSweep

    sweep, room = RecordSweep(), uuid.uuid4()
    first, second = object(), object()
    said = "Saturday at Mani, then?"

    def kept() -> bool:
        return room_context.peer_message_memo_prime(
            said, room_context.fence(said, source="peer"), room
        )

    assert not kept()

    async def watched() -> None:
        sweep.watch(room, first)  # type: ignore[arg-type]
        sweep.watch(room, second)  # type: ignore[arg-type]

    asyncio.run(watched())
    assert kept()
    sweep.unwatch(room, first)  # type: ignore[arg-type]
    assert kept() and _key(said) in room_context._peer_message_memo
    sweep.unwatch(room, second)  # type: ignore[arg-type]
    assert _key(said) not in room_context._peer_message_memo
    assert not kept()


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
