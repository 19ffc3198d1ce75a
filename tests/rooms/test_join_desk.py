"""The join desk (issue 17, connect on PostgreSQL): the handshakes of sockets connecting at
once are made in one hop and one transaction, each still checked in full from the record and
refused on its own. These count statements (``CaptureQueriesContext``) and hops, never time."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import AnonymousUser
from django.db import DatabaseError, connection
from django.test.utils import CaptureQueriesContext

from ledger import services as ledger_services
from ledger.models import LedgerEvent
from rooms import consumers, handshake
from rooms.consumers import RoomConsumer
from rooms.handshake import Refusal
from rooms.models import Agent, RoomMember, SeatStanding
from rooms.protocol import CloseCode
from synapsia.asgi import application

pytestmark = pytest.mark.django_db(transaction=True)

# Per handshake in a run: the token's use, the seat with its room, the head's compare-and-set,
# the Join's insert, then (the opening) the tool policy; once per run: BEGIN and COMMIT
# (captured on SQLite). Alone it is 7 a connect (tests/rooms/test_connect_statements.py).
STATEMENTS_PER_JOIN = 5


def _kwargs(room_id: Any, token: str) -> dict[str, Any]:
    return {
        "room_id": str(room_id),
        "headers": [(b"authorization", f"Bearer {token}".encode())],
        "user": AnonymousUser(),
        "scope_scheme": None,
    }


def _joins_of(agent_id: Any) -> int:
    return sum(
        1
        for data in LedgerEvent.objects.filter(kind="join").values_list("data", flat=True)
        if data["participant_id"] == str(agent_id)
    )


def _stamped(agent_id: Any) -> bool:
    return Agent.objects.get(id=agent_id).token_last_used_at is not None


def _run(tokens: list[tuple[Any, str]]) -> tuple[list[Any], list[str]]:
    """``_join_hop`` for these (room id, token) handshakes; its outcomes and statements."""
    with CaptureQueriesContext(connection) as queries:
        outcomes = consumers._join_hop([(RoomConsumer(), _kwargs(r, t)) for r, t in tokens])
    return outcomes, [q["sql"] for q in queries.captured_queries]


def test_handshakes_made_together_share_one_transaction_each_checked(
    make_open_room: Callable[..., Any],
) -> None:
    one, two = make_open_room(prefix="one-"), make_open_room(prefix="two-")
    RoomMember.objects.filter(room_id=two.room.id, agent_id=two.b.agent.id).update(
        standing=SeatStanding.BLOCKED
    )
    outcomes, statements = _run(
        [
            (one.room.id, one.a.token),
            (two.room.id, two.b.token),  # blocked by its owner
            (one.room.id, "not-a-token"),
            (one.room.id, one.b.token),
            (two.room.id, two.a.token),
        ]
    )
    admitted = [o for o in outcomes if not isinstance(o, Refusal)]
    assert [type(o) for o in outcomes] == [tuple, Refusal, Refusal, tuple, tuple], outcomes
    # Each refusal is its own, with the code it would have had alone.
    assert outcomes[1].code == CloseCode.FORBIDDEN
    assert outcomes[2].code == CloseCode.UNAUTHENTICATED
    # Each admitted socket's welcome is its own room's and agent's.
    for outcome, seat, room in zip(
        admitted, (one.a, one.b, two.a), (one.room, one.room, two.room), strict=True
    ):
        participant, welcome, *_ = outcome
        assert participant.agent_id == seat.agent.id and participant.room_id == room.id
        assert f'"agent_id":"{seat.agent.id}"' in welcome
    assert [_joins_of(s.agent.id) for s in (one.a, one.b, two.a, two.b)] == [1, 1, 1, 0]
    assert all(_stamped(s.agent.id) for s in (one.a, one.b, two.a))
    # One transaction: at most one BEGIN and one COMMIT for the five handshakes.
    assert sum(1 for q in statements if q.upper().startswith("BEGIN")) <= 1
    assert sum(1 for q in statements if q.upper().startswith("COMMIT")) <= 1
    assert not any(q.upper().startswith("SAVEPOINT") for q in statements), statements
    # Three joined (5 each) and two refused at the token or the seat (3 at most each), where
    # five connects alone cost 7 each.
    assert len(statements) <= 3 * STATEMENTS_PER_JOIN + 2 * 3 + 2, "\n".join(statements)


def test_a_join_the_ledger_refuses_in_a_run_refuses_that_socket_alone(
    make_open_room: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    one, two = make_open_room(prefix="one-"), make_open_room(prefix="two-")
    real = ledger_services._events_insert

    def refused_in_room_two(db: Any, rows: Any) -> Any:
        if any(row["room_id"] == two.room.id for row in rows):
            raise DatabaseError("the events table refused the insert")
        return real(db, rows)

    monkeypatch.setattr(ledger_services, "_events_insert", refused_in_room_two)
    outcomes, _ = _run([(one.room.id, one.a.token), (two.room.id, two.a.token)])
    assert isinstance(outcomes[1], Refusal) and outcomes[1].code == CloseCode.TRY_AGAIN
    assert not isinstance(outcomes[0], Refusal | Exception), outcomes[0]
    # The run rolled back and each handshake was made again alone: the refused one kept
    # nothing (not even its token's stamp), the other one joined once.
    assert (_joins_of(one.a.agent.id), _joins_of(two.a.agent.id)) == (1, 0)
    assert _stamped(one.a.agent.id) and not _stamped(two.a.agent.id)


def test_a_handshake_that_fails_in_a_run_fails_alone(
    make_open_room: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    one, two = make_open_room(prefix="one-"), make_open_room(prefix="two-")
    real = handshake.ledger_append_many

    def unanswered_in_room_two(*, room_id: Any, **kwargs: Any) -> Any:
        if room_id == two.room.id:
            raise DatabaseError("the database did not answer")
        return real(room_id=room_id, **kwargs)

    monkeypatch.setattr(handshake, "ledger_append_many", unanswered_in_room_two)
    outcomes, _ = _run(
        [(two.room.id, two.b.token), (one.room.id, one.a.token), (one.room.id, one.b.token)]
    )
    # As alone: the failed one raises (its socket fails closed) and keeps nothing; the
    # others of the run are admitted and joined once.
    assert isinstance(outcomes[0], DatabaseError)
    assert all(not isinstance(o, Refusal | Exception) for o in outcomes[1:]), outcomes
    assert [_joins_of(s.agent.id) for s in (two.b, one.a, one.b)] == [0, 1, 1]
    assert not _stamped(two.b.agent.id)


async def test_sockets_connecting_at_once_are_joined_in_one_hop(
    make_open_room: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    one = await database_sync_to_async(make_open_room)(prefix="one-")
    two = await database_sync_to_async(make_open_room)(prefix="two-")
    # One hop at a time, and the desk's first hop held (on the event loop, so the sockets'
    # other hops, their sessions, still run) until all four have handed in their handshakes.
    monkeypatch.setattr(consumers.JoinDesk, "_concurrency", staticmethod(lambda: 1))
    released = asyncio.Event()
    real_hop = consumers.in_db_thread
    hops: list[Any] = []

    def held(func: Callable[..., Any]) -> Callable[..., Any]:
        hop = real_hop(func)
        if getattr(func, "__func__", func) not in (RoomConsumer._admit_and_open, counted):
            return hop
        hops.append(func)

        async def after_release(*args: Any, **kwargs: Any) -> Any:
            await released.wait()
            return await hop(*args, **kwargs)

        return after_release

    runs: list[tuple[int, list[str]]] = []
    real_run = consumers._join_hop

    def counted(items: Any) -> Any:
        with CaptureQueriesContext(connection) as queries:
            outcomes = real_run(items)
        runs.append((len(items), [q["sql"] for q in queries.captured_queries]))
        return outcomes

    handed_in: list[Any] = []
    real_join = consumers.JoinDesk.join

    async def join(desk: Any, consumer: Any, **kwargs: Any) -> Any:
        handed_in.append(consumer)
        return await real_join(desk, consumer, **kwargs)

    monkeypatch.setattr(consumers, "in_db_thread", held)
    monkeypatch.setattr(consumers, "_join_hop", counted)
    monkeypatch.setattr(consumers.JoinDesk, "join", join)

    async def connect(room_id: Any, token: str) -> tuple[WebsocketCommunicator, dict[str, Any]]:
        socket = WebsocketCommunicator(
            application,
            f"/ws/rooms/{room_id}/",
            headers=[(b"authorization", f"Bearer {token}".encode())],
        )
        assert (await socket.connect(timeout=20))[0]
        return socket, await socket.receive_json_from(timeout=20)

    seats = [(one, one.a), (one, one.b), (two, two.a), (two, two.b)]
    connecting = [asyncio.create_task(connect(s.room.id, seat.token)) for s, seat in seats]
    for _ in range(500):  # bounded: until the four handshakes are handed in
        if len(handed_in) == 4:
            break
        await asyncio.sleep(0.01)
    assert len(handed_in) == 4
    released.set()
    opened = await asyncio.gather(*connecting)
    for (_, seat), (_, welcome) in zip(seats, opened, strict=True):
        assert welcome["type"] == "welcome", welcome
        assert welcome["body"]["agent_id"] == str(seat.agent.id)
        assert welcome["body"]["room"]["purpose"] == "Dinner for two"
    # At most two hops for the four (the first may have started before the others came);
    # those that waited were joined together, at most five statements each and one BEGIN
    # and COMMIT per hop.
    desk = consumers.join_desk()
    assert len(hops) <= 2 and desk.joined_together >= 2, (hops, desk.joined_together)
    assert runs and sum(size for size, _ in runs) == desk.joined_together
    for size, statements in runs:
        assert len(statements) <= size * STATEMENTS_PER_JOIN + 2, "\n".join(statements)
    joins = await database_sync_to_async(lambda: [_joins_of(seat.agent.id) for _, seat in seats])()
    assert joins == [1, 1, 1, 1]
    for socket, _ in opened:
        await socket.disconnect()
