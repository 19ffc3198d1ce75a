"""Both agents of a room asking for their context at the same moment: each turn is assembled,
spent and recorded, and the room never pauses for it (on PostgreSQL, two turns that locked
slip uses, vault items and the ledger head in different orders used to deadlock, and the
loser paused the room as if the ledger were down)."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from django.db import connections

from ledger.models import LedgerEvent
from ledger.verification import ledger_verify_room
from practice.seeding import practice_seed
from rooms.context import context_for_agent
from rooms.models import Room, RoomState

ROUNDS = 8


@pytest.mark.django_db(transaction=True)
def test_simultaneous_turns_of_both_agents_never_pause_the_room() -> None:
    practice = practice_seed()
    agents = [practice.host.agent_id, practice.guest.agent_id]
    barrier = threading.Barrier(len(agents))

    def turns(agent_id: object) -> list[int]:
        counts = []
        try:
            for _ in range(ROUNDS):
                barrier.wait(timeout=30)
                context = context_for_agent(room_id=practice.room_id, agent_id=agent_id)
                counts.append(len(context.own_items) + len(context.peer_items))
        finally:
            connections.close_all()
        return counts

    with ThreadPoolExecutor(len(agents)) as pool:
        results = list(pool.map(turns, agents))

    assert Room.objects.get(id=practice.room_id).state == RoomState.OPEN
    assert not LedgerEvent.objects.filter(room_id=practice.room_id, kind="room_paused").exists()
    # Every turn got its items: Alice's own six and Bob's five shared ones; Bob his own
    # five and Alice's five shared ones.
    assert results == [[11] * ROUNDS, [10] * ROUNDS]
    assert ledger_verify_room(room_id=practice.room_id).ok
