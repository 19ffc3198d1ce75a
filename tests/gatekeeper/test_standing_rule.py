"""The standing rule (``gatekeeper.standing``) as a table: every room state x every kind of
reader x every seat standing, against the rule written out separately here.

Pure: the seats are built in the test, as ``rooms.standing`` would read them. The reading
itself (one statement, the desk, the sockets closing) is ``tests/rooms/test_consumer_standing``.
"""

from __future__ import annotations

import itertools
import uuid
from uuid import UUID

import pytest

from gatekeeper.standing import (
    AGENT_ROOM_STATES,
    OWNER_ROOM_STATES,
    SeatFacts,
    flare_holding_resume,
    join_verdict,
    standing_verdict,
)
from rooms import standing as rooms_standing
from rooms.models import Flare, RoomMember, RoomState, SeatStanding
from rooms.protocol import CloseCode

ALICE, BOB, MALLORY = 1, 2, 3
ALICE_AGENT, BOB_AGENT, OTHER_AGENT = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()

# Reader kinds: (name, owner id, agent id or None for the owner's browser).
READERS: list[tuple[str, int, UUID | None]] = [
    ("alice's browser", ALICE, None),
    ("alice's agent in its seat", ALICE, ALICE_AGENT),
    ("another agent of alice's, not the one in her seat", ALICE, OTHER_AGENT),
    ("bob's agent in alice's seat", ALICE, BOB_AGENT),
    ("a stranger's browser", MALLORY, None),
    ("a stranger's agent", MALLORY, OTHER_AGENT),
]


def _expected(
    *,
    owner_id: int,
    agent_id: UUID | None,
    state: str,
    seat_standing: str,
    revoked: bool,
    seats_exist: bool,
    alice_seat_agent: UUID | None,
) -> CloseCode | None:
    """The rule, written out apart from the code (docs/protocol.md, docs/gatekeeper.md)."""
    holds_seat = seats_exist and owner_id in (ALICE, BOB)
    if agent_id is None:
        if not holds_seat:
            return CloseCode.FORBIDDEN
        watch = {RoomState.DRAFT, RoomState.OPEN, RoomState.PAUSED}
        return None if state in watch else CloseCode.ROOM_NOT_JOINABLE
    if not holds_seat or agent_id != alice_seat_agent:
        return CloseCode.FORBIDDEN
    if revoked:
        return CloseCode.UNAUTHENTICATED
    if seat_standing == SeatStanding.BLOCKED:
        return CloseCode.FORBIDDEN
    return None if state in {RoomState.OPEN, RoomState.PAUSED} else CloseCode.ROOM_NOT_JOINABLE


CASES = list(
    itertools.product(
        READERS,
        list(RoomState),
        list(SeatStanding),
        [False, True],  # alice's agent revoked
        [True, False],  # the room's seats exist (False: the room is deleted)
        [ALICE_AGENT, None],  # the agent bound to alice's seat (None: none bound yet)
    )
)


def _seats(
    state: str, seat_standing: str, revoked: bool, exist: bool, alice_agent: UUID | None
) -> list[SeatFacts]:
    if not exist:
        return []
    return [
        SeatFacts(BOB, BOB_AGENT, SeatStanding.ACTIVE, state, False),
        SeatFacts(ALICE, alice_agent, seat_standing, state, revoked),
    ]


@pytest.mark.parametrize(
    ("reader", "state", "seat_standing", "revoked", "exist", "alice_agent"),
    CASES,
    ids=[
        f"{r[0]}|{s}|{st}|{'revoked' if rv else 'live'}|{'seats' if e else 'deleted'}|"
        f"{'bound' if a else 'unbound'}"
        for r, s, st, rv, e, a in CASES
    ],
)
def test_every_state_reader_and_standing(
    reader: tuple[str, int, UUID | None],
    state: str,
    seat_standing: str,
    revoked: bool,
    exist: bool,
    alice_agent: UUID | None,
) -> None:
    _, owner_id, agent_id = reader
    seats = _seats(state, seat_standing, revoked, exist, alice_agent)
    want = _expected(
        owner_id=owner_id,
        agent_id=agent_id,
        state=state,
        seat_standing=seat_standing,
        revoked=revoked,
        seats_exist=exist,
        alice_seat_agent=alice_agent,
    )
    assert standing_verdict(owner_id=owner_id, agent_id=agent_id, seats=seats) == want
    # The reading side answers with the same rule (its public names unchanged).
    room_reader = rooms_standing.Reader(uuid.uuid4(), owner_id, agent_id)
    assert rooms_standing.seat_verdict(room_reader, seats) == want


def test_the_table_covers_every_state_standing_and_verdict() -> None:
    assert len(CASES) == len(READERS) * len(RoomState) * len(SeatStanding) * 2 * 2 * 2
    verdicts = {
        standing_verdict(owner_id=r[1], agent_id=r[2], seats=_seats(s, st, rv, e, a))
        for r, s, st, rv, e, a in CASES
    }
    assert verdicts == {
        None,
        CloseCode.FORBIDDEN,
        CloseCode.UNAUTHENTICATED,
        CloseCode.ROOM_NOT_JOINABLE,
    }


def test_the_state_sets() -> None:
    # A draft is watched by its owners, never joined by agents; a closed room reaches no one.
    assert set(AGENT_ROOM_STATES) == {RoomState.OPEN, RoomState.PAUSED}
    assert set(OWNER_ROOM_STATES) == {RoomState.DRAFT, RoomState.OPEN, RoomState.PAUSED}
    assert RoomState.CLOSED not in AGENT_ROOM_STATES | OWNER_ROOM_STATES


def test_muted_and_stepped_in_agents_are_still_told_what_is_said() -> None:
    for seat_standing in (SeatStanding.MUTED, SeatStanding.STEPPED_IN):
        seats = [SeatFacts(ALICE, ALICE_AGENT, seat_standing, RoomState.OPEN, False)]
        assert standing_verdict(owner_id=ALICE, agent_id=ALICE_AGENT, seats=seats) is None


def test_revocation_is_named_before_a_block() -> None:
    seats = [SeatFacts(ALICE, ALICE_AGENT, SeatStanding.BLOCKED, RoomState.CLOSED, True)]
    verdict = standing_verdict(owner_id=ALICE, agent_id=ALICE_AGENT, seats=seats)
    assert verdict == CloseCode.UNAUTHENTICATED


@pytest.mark.parametrize(
    ("room_state", "seat_standing"), list(itertools.product(RoomState, SeatStanding))
)
def test_who_may_join(room_state: RoomState, seat_standing: SeatStanding) -> None:
    """An agent joins an open or paused room unless its owner blocked it; a room it may not
    be in is named first, whatever the seat (the handshake's refusal names the state)."""
    if room_state in (RoomState.DRAFT, RoomState.CLOSED):
        want = CloseCode.ROOM_NOT_JOINABLE
    elif seat_standing == SeatStanding.BLOCKED:
        want = CloseCode.FORBIDDEN
    else:
        want = None
    assert join_verdict(seat_standing=seat_standing, room_state=room_state) == want


def _flare(owner_id: int, n: int) -> Flare:
    """An unanswered flare of ``owner_id``'s agent (unsaved: the rule reads no database)."""
    return Flare(id=uuid.UUID(int=n), seat=RoomMember(owner_id=owner_id))


@pytest.mark.parametrize(
    ("unanswered", "holding_for_alice", "holding_for_bob"),
    [
        ([], None, None),
        ([(ALICE, 1)], None, 1),  # her own agent's flare: she may resume, Bob may not
        ([(BOB, 1)], 1, None),
        ([(BOB, 1), (BOB, 2)], 1, None),  # the oldest names who the room waits for
        ([(ALICE, 1), (BOB, 2)], 2, 1),  # both flared: each waits for the other's answer
        ([(BOB, 2), (ALICE, 1), (BOB, 3)], 2, 1),
    ],
)
def test_only_the_other_owner_s_unanswered_flare_holds_a_resume(
    unanswered: list[tuple[int, int]], holding_for_alice: int | None, holding_for_bob: int | None
) -> None:
    flares = [_flare(owner, n) for owner, n in unanswered]
    for owner, expected in ((ALICE, holding_for_alice), (BOB, holding_for_bob)):
        holding = flare_holding_resume(owner, flares)
        assert (holding.id.int if holding is not None else None) == expected
