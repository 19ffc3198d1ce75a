"""What a context carries of the conversation, read by the turn's facts statement
(``rooms.context._recent_columns``): the peer's newest messages and the owner's newest
whispers to this agent, oldest first, each capped, and nothing else; at no statement of
their own."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from rooms import context, services
from rooms.models import Message, Whisper

pytestmark = pytest.mark.django_db(transaction=True)


def _say(setup: Any, seat: Any, n: int) -> None:
    services.message_say(
        room_id=setup.room.id, agent_id=seat.agent.id, client_id=f"{seat.owner.pk}-{n}", text=f"{n}"
    )


def _bobs(setup: Any) -> Any:
    return context.context_for_agent(room_id=setup.room.id, agent_id=setup.b.agent.id)


def test_the_newest_messages_and_whispers_oldest_first_and_only_the_readers(
    make_open_room: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(context, "CONTEXT_PEER_MESSAGES", 3)
    monkeypatch.setattr(context, "CONTEXT_WHISPERS", 2)
    setup = make_open_room()
    for n in range(1, 6):
        _say(setup, setup.a, n)  # seq 2n - 1: 1, 3, 5, 7, 9
        _say(setup, setup.b, n)  # Bob's agent's own: never in its context
    for n in range(1, 4):
        services.whisper_send(owner=setup.b.owner, room_id=setup.room.id, text=f"whisper {n}")
    services.whisper_send(owner=setup.a.owner, room_id=setup.room.id, text="alice's own")
    # A whisper row naming Bob's agent but written by another owner: not his owner's word.
    Whisper.objects.create(
        room_id=setup.room.id, owner=setup.a.owner, agent=setup.b.agent, text="not bob's"
    )

    given = _bobs(setup)
    assert [m.seq for m in given.peer_messages] == [5, 7, 9]
    said = {m.seq: m for m in Message.objects.filter(room_id=setup.room.id)}
    for message in given.peer_messages:
        assert message.sender_agent_id == setup.a.agent.id
        assert message.sent_at == said[message.seq].created_at
        assert f"\n{said[message.seq].text}\n" in message.fenced
    assert [w.text for w in given.whispers] == ["whisper 2", "whisper 3"]
    assert all(w.sent_at.utcoffset() is not None for w in given.whispers)
    alices = context.context_for_agent(room_id=setup.room.id, agent_id=setup.a.agent.id)
    assert [m.seq for m in alices.peer_messages] == [6, 8, 10]
    assert [w.text for w in alices.whispers] == ["alice's own"]


def test_a_quiet_room_carries_nothing(make_open_room: Any) -> None:
    given = _bobs(make_open_room())
    assert given.peer_messages == [] and given.whispers == []


def test_the_conversation_costs_no_statement_of_its_own(make_open_room: Any) -> None:
    setup = make_open_room()
    _say(setup, setup.a, 1)
    services.whisper_send(owner=setup.b.owner, room_id=setup.room.id, text="hello")
    _bobs(setup)  # the first turn of a process prepares what later ones reuse
    message, whisper = Message._meta.db_table, Whisper._meta.db_table
    with CaptureQueriesContext(connection) as captured:
        given = _bobs(setup)
    assert len(given.peer_messages) == 1 and len(given.whispers) == 1
    reading = [q["sql"] for q in captured.captured_queries if message in q["sql"]]
    assert len(reading) == 1, reading  # the facts statement, which starts the turn
    assert whisper in reading[0] and "context_turn" in reading[0]
