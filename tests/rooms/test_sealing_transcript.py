"""The transcript sealed at rest (rooms.sealing): message text (both write paths: the model
and the say path's one INSERT per run) and whisper text are ciphertext in the database, read
back as text by every reader (the transcript selector, the agent's context, the owner's
whispers), and fail closed when copied to another room or column or when the room is deleted."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from uuid import UUID

import pytest
from django.db import connection

from rooms import selectors, services
from rooms.context import context_for_agent
from rooms.deletion import room_delete
from rooms.models import Message, Whisper
from rooms.sealing import MESSAGE_TEXT, RoomContentRefused, room_content_open
from slips.datakeys import DataKeyDestroyed
from tests.conftest import OpenRoom

pytestmark = pytest.mark.django_db(transaction=True)

SAID = "transcript-canary-3e8b: we can go up to 70 EUR each"
WHISPERED = "whisper-canary-a41c: do not go above 55 EUR"


def _raw(model: Any, pk: Any, column: str = "text") -> str:
    table = connection.ops.quote_name(model._meta.db_table)
    pk_value = model._meta.pk.get_db_prep_value(pk, connection)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {column} FROM {table} WHERE id = %s", [pk_value])  # noqa: S608
        return str(cursor.fetchone()[0])


def _raw_set(model: Any, pk: Any, value: str) -> None:
    table = connection.ops.quote_name(model._meta.db_table)
    pk_value = model._meta.pk.get_db_prep_value(pk, connection)
    with connection.cursor() as cursor:
        cursor.execute(f"UPDATE {table} SET text = %s WHERE id = %s", [value, pk_value])  # noqa: S608


def _message(room_id: UUID, seq: int) -> Message:
    return Message.objects.get(room_id=room_id, seq=seq)


def test_both_say_paths_store_ciphertext_and_every_reader_gets_the_text(
    make_open_room: Callable[..., OpenRoom],
) -> None:
    opened = make_open_room()
    room_id = opened.room.id
    services.message_say(room_id=room_id, agent_id=opened.a.agent.id, client_id="one", text=SAID)
    services.messages_say(
        room_id=room_id, agent_id=opened.a.agent.id, says=[("run-1", SAID + " (run)")]
    )
    for seq in (1, 2):
        stored = _raw(Message, _message(room_id, seq).id)
        assert stored.startswith("rc1:") and "canary" not in stored and "EUR" not in stored
    assert [m.text for m in selectors.messages_after(room_id=room_id, after_seq=0)] == [
        SAID,
        SAID + " (run)",
    ]
    # The peer agent's context (raw SQL in rooms.context) opens them, fenced as peer data.
    context = context_for_agent(room_id=room_id, agent_id=opened.b.agent.id)
    assert [SAID in m.fenced for m in context.peer_messages] == [True, True]
    # A resent frame id answers with the message recorded the first time, opened.
    again = services.message_say(
        room_id=room_id, agent_id=opened.a.agent.id, client_id="one", text="other"
    )
    assert (again.duplicate, again.text) == (True, SAID)


def test_a_whisper_is_ciphertext_at_rest_and_reaches_its_agent_as_text(
    make_open_room: Callable[..., OpenRoom],
) -> None:
    opened = make_open_room()
    whisper = services.whisper_send(owner=opened.a.owner, room_id=opened.room.id, text=WHISPERED)
    stored = _raw(Whisper, whisper.id)
    assert stored.startswith("rc1:") and "canary" not in stored
    mine = selectors.whispers_of_owner(owner=opened.a.owner, room_id=opened.room.id)
    assert [w.text for w in mine] == [WHISPERED]
    context = context_for_agent(room_id=opened.room.id, agent_id=opened.a.agent.id)
    assert [w.text for w in context.whispers] == [WHISPERED]


def test_message_text_copied_into_another_room_or_column_is_refused(
    make_open_room: Callable[..., OpenRoom],
) -> None:
    one, other = make_open_room(prefix="one-"), make_open_room(prefix="other-")
    services.message_say(room_id=one.room.id, agent_id=one.a.agent.id, client_id="a", text=SAID)
    services.message_say(
        room_id=other.room.id, agent_id=other.a.agent.id, client_id="b", text="their own"
    )
    copied = _raw(Message, _message(one.room.id, 1).id)
    _raw_set(Message, _message(other.room.id, 1).id, copied)
    with pytest.raises(RoomContentRefused, match="sealed for another room"):
        selectors.messages_after(room_id=other.room.id, after_seq=0)
    with pytest.raises(RoomContentRefused, match="sealed for another room"):
        room_content_open(sealed=copied, column=MESSAGE_TEXT, room_id=other.room.id)

    whisper = services.whisper_send(owner=one.a.owner, room_id=one.room.id, text=WHISPERED)
    _raw_set(Whisper, whisper.id, copied)  # the same room, another column
    with pytest.raises(RoomContentRefused, match="another column"):
        Whisper.objects.get(id=whisper.id)


def test_a_deleted_rooms_transcript_never_opens_again(
    make_open_room: Callable[..., OpenRoom],
) -> None:
    opened = make_open_room()
    services.message_say(
        room_id=opened.room.id, agent_id=opened.a.agent.id, client_id="a", text=SAID
    )
    whisper = services.whisper_send(owner=opened.a.owner, room_id=opened.room.id, text=WHISPERED)
    kept = (_raw(Message, _message(opened.room.id, 1).id), _raw(Whisper, whisper.id))
    room_delete(owner=opened.a.owner, room_id=opened.room.id)
    for sealed, column in zip(kept, (MESSAGE_TEXT, "whisper.text"), strict=True):
        with pytest.raises(DataKeyDestroyed):
            room_content_open(sealed=sealed, column=column, room_id=opened.room.id)
