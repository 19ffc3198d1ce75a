"""Whisper: an owner's private word reaches only their own agent (its socket and context)."""

from __future__ import annotations

from typing import Any

import pytest
from channels.db import database_sync_to_async
from django.test import Client

from ledger.models import LedgerEvent
from rooms.context import context_for_agent
from rooms.models import Whisper
from tests.rooms.test_context_say import join

pytestmark = pytest.mark.django_db(transaction=True)


def whisper(owner: Any, room_id: object, text: str) -> Any:
    client = Client()
    client.force_login(owner)
    return client.post(
        f"/api/rooms/{room_id}/whispers", {"text": text}, content_type="application/json"
    )


async def test_a_whisper_reaches_only_its_own_agent(make_open_room) -> None:
    setup = await database_sync_to_async(make_open_room)()
    alice, bob = await join(setup.room.id, setup.a.token), await join(setup.room.id, setup.b.token)
    answer = await database_sync_to_async(whisper)(
        setup.a.owner, setup.room.id, "Stay under 60 EUR, secretly."
    )
    assert answer.status_code == 201, answer.content

    heard = await alice.receive_json_from(timeout=5)
    assert heard["type"] == "whisper"
    assert heard["body"]["text"] == "Stay under 60 EUR, secretly."
    assert await bob.receive_nothing(timeout=0.5)

    mine = await database_sync_to_async(context_for_agent)(
        room_id=setup.room.id, agent_id=setup.a.agent.id
    )
    theirs = await database_sync_to_async(context_for_agent)(
        room_id=setup.room.id, agent_id=setup.b.agent.id
    )
    assert [w.text for w in mine.whispers] == ["Stay under 60 EUR, secretly."]
    assert theirs.whispers == [] and "secretly" not in theirs.model_dump_json()
    # Room content, not a ledger record.
    data = await database_sync_to_async(
        lambda: [str(e.data) for e in LedgerEvent.objects.filter(room_id=setup.room.id)]
    )()
    assert not any("secretly" in d for d in data)
    await alice.disconnect()
    await bob.disconnect()


def test_whispers_are_seat_checked_and_limited(make_open_room, make_owner) -> None:
    setup = make_open_room()
    assert whisper(make_owner("mallory"), setup.room.id, "hi").status_code == 404
    assert whisper(setup.b.owner, setup.room.id, "x" * 2001).status_code == 422
    assert whisper(setup.b.owner, setup.room.id, "   ").status_code == 422
    assert whisper(setup.b.owner, setup.room.id, "Prefer Saturday.").status_code == 201
    # Bob's whisper went to Bob's agent, whoever asked.
    assert list(Whisper.objects.values_list("agent_id", flat=True)) == [setup.b.agent.id]
    assert context_for_agent(room_id=setup.room.id, agent_id=setup.a.agent.id).whispers == []
