"""Whose words may be recorded: the rule is the Gatekeeper's (``gatekeeper.standing``), once
in Python (``may_speak``) and once as the condition of the statement that takes a message's
number (``may_speak_sql``). The two must agree on every room state, seat standing, revocation
and speaker; a stranger's agent never speaks."""

from __future__ import annotations

from itertools import product
from typing import Any

import pytest
from django.db import transaction
from django.utils import timezone

from gatekeeper.standing import may_speak
from rooms import services
from rooms.models import Agent, Room, RoomMember, RoomState, SeatStanding

pytestmark = pytest.mark.django_db


def _number_taken(room_id: Any, agent_id: Any, speaking_as: SeatStanding) -> bool:
    """Whether the statement would take a number now; rolled back, so it takes none."""
    with transaction.atomic():
        taken = services._next_seq(room_id, agent_id, speaking_as) is not None
        transaction.set_rollback(True)
    return taken


def test_the_statement_and_the_rule_agree_on_every_combination(make_open_room: Any) -> None:
    setup = make_open_room()
    room, agent = setup.room, setup.a.agent
    combinations = list(
        product(
            RoomState, SeatStanding, (False, True), (SeatStanding.ACTIVE, SeatStanding.STEPPED_IN)
        )
    )
    allowed = 0
    for state, standing, revoked, speaking_as in combinations:
        Room.objects.filter(id=room.id).update(state=state)
        RoomMember.objects.filter(room=room, agent=agent).update(standing=standing)
        Agent.objects.filter(id=agent.id).update(revoked_at=timezone.now() if revoked else None)
        rule = may_speak(
            room_state=state, seat_standing=standing, agent_revoked=revoked, speaking_as=speaking_as
        )
        assert _number_taken(room.id, agent.id, speaking_as) == rule, (
            state,
            standing,
            revoked,
            speaking_as,
        )
        allowed += rule
    # Only an open room, an agent not revoked, and the seat in the speaker's standing.
    assert len(combinations) == 64 and allowed == 2
    room.refresh_from_db()
    assert room.last_seq == 0  # no number was kept


def test_an_agent_without_a_seat_in_the_room_never_speaks(make_open_room: Any) -> None:
    one, two = make_open_room(prefix="one-"), make_open_room(prefix="two-")
    # Open, active, not revoked, but seated in another room.
    assert not _number_taken(one.room.id, two.a.agent.id, SeatStanding.ACTIVE)
    assert _number_taken(one.room.id, one.a.agent.id, SeatStanding.ACTIVE)
