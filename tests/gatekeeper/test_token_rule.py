"""A socket's token in the standing and speaking rules (``gatekeeper.standing``): an agent's
socket is in standing, and may speak, only while the token it was admitted with is still its
agent's; a rotated token is out as a revoked agent is (4401), whatever else holds.

The reading rule is pure (the seats as ``rooms.standing`` reads them); the speaking rule is
checked against its statement (``may_speak_sql`` through ``services._next_seq``) on every
combination, as ``test_speaking_rule`` does without a token."""

from __future__ import annotations

import uuid
from itertools import product
from typing import Any

import pytest
from django.db import transaction
from django.utils import timezone

from gatekeeper.standing import SeatFacts, may_speak, standing_verdict
from rooms import services
from rooms.bearer import secret_digest
from rooms.models import Agent, Room, RoomMember, RoomState, SeatStanding
from rooms.protocol import CloseCode

ALICE, BOB = 1, 2
ALICE_AGENT, BOB_AGENT = uuid.uuid4(), uuid.uuid4()
CURRENT, ROTATED = "a" * 64, "b" * 64


def _seats(
    *, revoked: bool = False, token: str | None = CURRENT, standing: str = "active"
) -> list[SeatFacts]:
    return [
        SeatFacts(ALICE, ALICE_AGENT, standing, RoomState.OPEN, revoked, token),
        SeatFacts(BOB, BOB_AGENT, SeatStanding.ACTIVE, RoomState.OPEN, False, "c" * 64),
    ]


@pytest.mark.parametrize(
    ("seats", "token", "want"),
    [
        (_seats(), CURRENT, None),
        (_seats(), ROTATED, CloseCode.UNAUTHENTICATED),  # rotated away since it opened
        (_seats(), "", CloseCode.UNAUTHENTICATED),  # a socket that kept none: fails closed
        (_seats(token=None), CURRENT, CloseCode.UNAUTHENTICATED),  # not read: not current
        (_seats(revoked=True), CURRENT, CloseCode.UNAUTHENTICATED),  # revoked, as before
        # Token first, as revocation: the token is dead whatever its seat.
        (_seats(standing=SeatStanding.BLOCKED), ROTATED, CloseCode.UNAUTHENTICATED),
        (_seats(standing=SeatStanding.BLOCKED), CURRENT, CloseCode.FORBIDDEN),
        (_seats(standing=SeatStanding.MUTED), CURRENT, None),  # muted still hears
        (_seats(), None, None),  # the server's own question (no socket): the seat decides
        (_seats(revoked=True), None, CloseCode.UNAUTHENTICATED),
    ],
)
def test_an_agent_socket_is_in_standing_only_with_its_agent_s_current_token(
    seats: list[SeatFacts], token: str | None, want: CloseCode | None
) -> None:
    assert standing_verdict(owner_id=ALICE, agent_id=ALICE_AGENT, seats=seats, token=token) == want


def test_another_agent_s_token_and_an_owner_s_browser_are_unaffected() -> None:
    seats = _seats()
    # Bob's agent's token is compared with Bob's seat, not Alice's.
    assert standing_verdict(owner_id=BOB, agent_id=BOB_AGENT, seats=seats, token="c" * 64) is None
    assert standing_verdict(owner_id=BOB, agent_id=BOB_AGENT, seats=seats, token=CURRENT) == (
        CloseCode.UNAUTHENTICATED
    )
    # An owner's browser has no token: the rule for it is unchanged.
    assert standing_verdict(owner_id=ALICE, agent_id=None, seats=seats) is None


def _number_taken(room_id: Any, agent_id: Any, speaking_as: SeatStanding, token: str) -> bool:
    """Whether the statement would take a number now; rolled back, so it takes none."""
    with transaction.atomic():
        taken = services._next_seq(room_id, agent_id, speaking_as, token) is not None
        transaction.set_rollback(True)
    return taken


@pytest.mark.django_db
def test_the_statement_and_the_rule_agree_with_a_token_on_every_combination(
    make_open_room: Any,
) -> None:
    setup = make_open_room()
    room, agent = setup.room, setup.a.agent
    current = secret_digest(setup.a.token)
    combinations = list(
        product(
            RoomState,
            SeatStanding,
            (False, True),  # revoked
            (True, False),  # the socket's token still the agent's
            (SeatStanding.ACTIVE, SeatStanding.STEPPED_IN),
        )
    )
    allowed = 0
    for state, standing, revoked, token_current, speaking_as in combinations:
        Room.objects.filter(id=room.id).update(state=state)
        RoomMember.objects.filter(room=room, agent=agent).update(standing=standing)
        Agent.objects.filter(id=agent.id).update(revoked_at=timezone.now() if revoked else None)
        rule = may_speak(
            room_state=state,
            seat_standing=standing,
            agent_revoked=revoked,
            speaking_as=speaking_as,
            token_current=token_current,
        )
        token = current if token_current else secret_digest("syn_agent_rotated_away")
        taken = _number_taken(room.id, agent.id, speaking_as, token)
        assert taken == rule, (state, standing, revoked, token_current, speaking_as)
        allowed += rule
    # Only an open room, an agent not revoked, its token current, the seat in that standing.
    assert len(combinations) == 128 and allowed == 2
    room.refresh_from_db()
    assert room.last_seq == 0  # no number was kept
