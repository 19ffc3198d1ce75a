"""The say path's database work: statements per message, and several sockets' runs recorded
in one transaction (``services.messages_say_runs``, used by the consumers' say desk), each
message still checked on its own."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any
from uuid import uuid4

import pytest
from django.db import DatabaseError, connection
from django.test.utils import CaptureQueriesContext

from rooms import services
from rooms.consumers import SayDesk
from rooms.models import Message, Room, RoomMember, RoomState, SeatStanding
from tests.statement_parses import uncached_parses
from tests.threads import run_together

pytestmark = pytest.mark.django_db(transaction=True)


def _kinds(captured: CaptureQueriesContext) -> list[str]:
    return [q["sql"].split()[0].upper() for q in captured.captured_queries]


def test_a_single_say_is_its_checked_statements_and_nothing_else(make_open_room: Any) -> None:
    setup = make_open_room()
    services.messages_say(room_id=setup.room.id, agent_id=setup.a.agent.id, says=[("w", "warm")])
    with CaptureQueriesContext(connection) as captured:
        said = services.messages_say(
            room_id=setup.room.id, agent_id=setup.a.agent.id, says=[("a-1", "hello")]
        )
    assert [m.seq for m in said] == [2]
    if connection.vendor == "postgresql":
        # One statement: the UPDATE … RETURNING (room state, seat, standing, revocation;
        # the number) feeding the INSERT, in its own implicit transaction.
        assert _kinds(captured) == ["WITH"], captured.captured_queries
        sql = captured.captured_queries[0]["sql"]
        assert "UPDATE" in sql and "INSERT" in sql
        assert connection.get_autocommit()
    else:
        kinds = [
            k for k in _kinds(captured) if k not in ("BEGIN", "COMMIT", "SAVEPOINT", "RELEASE")
        ]
        # The UPDATE … RETURNING re-checks and takes the number; the INSERT stores it.
        assert kinds == ["UPDATE", "INSERT"], captured.captured_queries
        assert len(captured) <= 4
    stored = Message.objects.get(room_id=setup.room.id, seq=2)
    assert (stored.text, stored.client_id, stored.sender_id) == ("hello", "a-1", setup.a.agent.id)


def test_a_lone_say_refused_or_resent_stores_nothing_and_takes_no_number(
    make_open_room: Any,
) -> None:
    """Alone, the say is one statement on PostgreSQL (no transaction around it): a check
    that refuses stores nothing, and a resent frame id rolls the number back with the
    failed INSERT, so the record stays gapless either way."""
    setup = make_open_room()
    room, agent = setup.room.id, setup.a.agent.id
    assert [
        m.seq for m in services.messages_say(room_id=room, agent_id=agent, says=[("a-1", "x")])
    ] == [1]
    assert services.messages_say(room_id=room, agent_id=agent, says=[("a-1", "again")]) == []
    services.room_transition(owner=setup.a.owner, room_id=room, to=RoomState.PAUSED)
    assert services.messages_say(room_id=room, agent_id=agent, says=[("a-2", "paused")]) == []
    services.room_transition(owner=setup.a.owner, room_id=room, to=RoomState.OPEN)
    said = services.messages_say(room_id=room, agent_id=agent, says=[("a-3", "open again")])
    assert [m.seq for m in said] == [2]
    services.agent_revoke(owner=setup.a.owner, agent_id=agent)
    assert services.messages_say(room_id=room, agent_id=agent, says=[("a-4", "revoked")]) == []
    assert list(
        Message.objects.filter(room_id=room).order_by("seq").values_list("seq", "text")
    ) == [
        (1, "x"),
        (2, "open again"),
    ]
    setup.room.refresh_from_db()
    assert setup.room.last_seq == 2


def test_runs_of_several_sockets_share_one_transaction_each_message_checked(
    make_open_room: Any,
) -> None:
    one, two = make_open_room(prefix="one-"), make_open_room(prefix="two-")
    runs = [
        (one.room.id, one.a.agent.id, [("a-1", "one a 1"), ("a-2", "one a 2")]),
        (two.room.id, two.b.agent.id, [("b-1", "two b 1")]),
        (one.room.id, one.b.agent.id, [("b-1", "one b 1")]),
    ]
    with CaptureQueriesContext(connection) as captured:
        said = services.messages_say_runs(runs=runs)
    assert [[m.seq for m in run] for run in said] == [[1, 2], [1], [3]]
    # Every run's check read in one statement, the numbers taken in one, one insert: under
    # SQLite's write lock, held from its BEGIN IMMEDIATE, or the room locks PostgreSQL's
    # first statement took. Four messages or forty, the same five.
    kinds = _kinds(captured)
    assert kinds == ["BEGIN", "SELECT", "UPDATE", "INSERT", "COMMIT"], kinds
    stored = list(Message.objects.order_by("room_id", "seq").values_list("room_id", "seq", "text"))
    assert sorted(stored) == sorted(
        [
            (one.room.id, 1, "one a 1"),
            (one.room.id, 2, "one a 2"),
            (one.room.id, 3, "one b 1"),
            (two.room.id, 1, "two b 1"),
        ]
    )


def test_a_refused_or_resent_run_leaves_the_others_recorded(make_open_room: Any) -> None:
    one, two, three = (make_open_room(prefix=f"{n}-") for n in ("one", "two", "three"))
    services.messages_say(room_id=one.room.id, agent_id=one.a.agent.id, says=[("a-1", "first")])
    services.room_transition(owner=three.a.owner, room_id=three.room.id, to=RoomState.PAUSED)
    said = services.messages_say_runs(
        runs=[
            (one.room.id, one.a.agent.id, [("a-1", "resent")]),  # a resent frame id
            (two.room.id, two.a.agent.id, [("a-1", "fresh")]),
            (three.room.id, three.a.agent.id, [("a-1", "while paused")]),  # refused now
        ]
    )
    assert [[m.seq for m in run] for run in said] == [[], [1], []]
    texts = dict(Message.objects.values_list("room_id", "text"))
    assert texts == {one.room.id: "first", two.room.id: "fresh"}
    # No number was taken for the resent or the refused message: the record stays gapless.
    one.room.refresh_from_db()
    three.room.refresh_from_db()
    assert (one.room.last_seq, three.room.last_seq) == (1, 0)


async def test_the_say_desk_records_a_lone_run_at_once_and_runs_that_queue_together(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The first run goes alone (one hop, no waiting for company); runs handed in while it
    is being recorded wait for it and then share one call (one transaction)."""
    calls: list[list[str]] = []
    recording = threading.Event()

    def slow_runs(*, runs: list[Any], tokens: Any = None) -> list[list[Any]]:
        calls.append([says[0][0] for _, _, says in runs])
        recording.set()
        time.sleep(0.3)
        return [[f"said {says[0][0]}"] for _, _, says in runs]

    monkeypatch.setattr(services, "messages_say_runs", slow_runs)
    desk = SayDesk()
    first = asyncio.create_task(desk.record((uuid4(), uuid4(), [("first", "x")])))
    await asyncio.get_running_loop().run_in_executor(None, recording.wait, 5)
    later = [
        asyncio.create_task(desk.record((uuid4(), uuid4(), [(name, "x")])))
        for name in ("second", "third")
    ]
    assert await first == ["said first"]
    assert [await task for task in later] == [["said second"], ["said third"]]
    assert calls == [["first"], ["second", "third"]]


def test_a_hop_checks_each_seat_as_it_stands_and_numbers_the_rest_without_gaps(
    make_open_room: Any,
) -> None:
    """Runs of several rooms and seats in one hop: a run whose room is paused, whose agent
    is revoked or whose seat is no longer active is refused whole (nothing stored, no number
    taken); the others are numbered in order, each room's without a gap."""
    one, two, three, four = (make_open_room(prefix=f"{n}-") for n in ("1", "2", "3", "4"))
    before = services.messages_say(
        room_id=one.room.id, agent_id=one.a.agent.id, says=[("a-0", "hello there")]
    )
    assert [m.seq for m in before] == [1], before
    services.room_transition(owner=two.a.owner, room_id=two.room.id, to=RoomState.PAUSED)
    services.agent_revoke(owner=three.b.owner, agent_id=three.b.agent.id)
    RoomMember.objects.filter(room=four.room, agent=four.a.agent).update(
        standing=SeatStanding.STEPPED_IN
    )
    said = services.messages_say_runs(
        runs=[
            (one.room.id, one.a.agent.id, [("a-1", "one a 1"), ("a-2", "one a 2")]),
            (two.room.id, two.a.agent.id, [("a-1", "paused room")]),
            (three.room.id, three.b.agent.id, [("b-1", "revoked agent")]),
            (three.room.id, three.a.agent.id, [("a-1", "three a 1")]),
            (four.room.id, four.a.agent.id, [("a-1", "stepped-in seat")]),
            (one.room.id, one.b.agent.id, [("b-1", "one b 1"), ("b-2", "one b 2")]),
            (four.room.id, four.b.agent.id, [("b-1", "four b 1")]),
        ]
    )
    assert [[m.seq for m in run] for run in said] == [[2, 3], [], [], [1], [], [4, 5], [1]]
    stored = {
        (room_id, seq): text
        for room_id, seq, text in Message.objects.values_list("room_id", "seq", "text")
    }
    assert stored == {
        (one.room.id, 1): "hello there",
        (one.room.id, 2): "one a 1",
        (one.room.id, 3): "one a 2",
        (one.room.id, 4): "one b 1",
        (one.room.id, 5): "one b 2",
        (three.room.id, 1): "three a 1",
        (four.room.id, 1): "four b 1",
    }
    last = dict(Room.objects.values_list("id", "last_seq"))
    assert [last[r.room.id] for r in (one, two, three, four)] == [5, 0, 1, 1]


def test_a_hop_whose_room_moved_between_its_check_and_its_numbers_stores_nothing(
    make_open_room: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A hop reads every run's check, then moves each room's number from the value it read.
    Nothing can move a room in between (SQLite's transaction holds the write lock; on
    PostgreSQL the read locked the rooms), but if the number read were not the room's, the
    hop fails whole: no message, no number."""
    one, two = make_open_room(prefix="one-"), make_open_room(prefix="two-")
    checks = services._hop_seqs_sql
    # A stale read: the check reports each room one number behind where it stands.
    monkeypatch.setattr(
        services,
        "_hop_seqs_sql",
        lambda vendor, pairs, *tokens: checks(vendor, pairs, *tokens).replace(
            "r.last_seq", "r.last_seq - 1", 1
        ),
    )
    services.messages_say(
        room_id=one.room.id, agent_id=one.a.agent.id, says=[("a-0", "hello there")]
    )
    with pytest.raises(DatabaseError):
        services.messages_say_runs(
            runs=[
                (one.room.id, one.a.agent.id, [("a-1", "after")]),
                (two.room.id, two.a.agent.id, [("a-1", "elsewhere")]),
            ]
        )
    assert list(Message.objects.values_list("text", flat=True)) == ["hello there"]
    last = dict(Room.objects.values_list("id", "last_seq"))
    assert (last[one.room.id], last[two.room.id]) == (1, 0)


def test_a_large_hop_is_the_same_five_statements_and_psycopg_keeps_their_parse(
    make_open_room: Any,
) -> None:
    """PostgreSQL: a hop's pairs, moves and rows go as arrays, so its statements have the same
    text and number of values for any hop, within what psycopg keeps parsed (50 values): a
    hop of 36 messages is five statements, none parsed again."""
    rooms = [make_open_room(prefix=f"many{i}-") for i in range(12)]

    def hop(turn: int) -> list[str]:
        runs = [
            (s.room.id, s.a.agent.id, [(f"t{turn}-{f}", f"frame {f} of {turn}") for f in range(3)])
            for s in rooms
        ]
        with CaptureQueriesContext(connection) as captured:
            said = services.messages_say_runs(runs=runs)
        assert [[m.seq for m in run] for run in said] == [
            [3 * turn + 1, 3 * turn + 2, 3 * turn + 3]
        ] * 12
        return _kinds(captured)

    assert hop(0) == ["BEGIN", "SELECT", "UPDATE", "INSERT", "COMMIT"]
    if connection.vendor == "postgresql":  # psycopg's parse; SQLite parses in C, and keeps it
        with uncached_parses() as parsed:
            assert hop(1) == ["BEGIN", "SELECT", "UPDATE", "INSERT", "COMMIT"]
        assert parsed == [], [q[:120] for q in parsed]
    else:
        assert hop(1) == ["BEGIN", "SELECT", "UPDATE", "INSERT", "COMMIT"]
    texts = dict(Message.objects.filter(room_id=rooms[5].room.id, seq=6).values_list("seq", "text"))
    assert texts == {6: "frame 2 of 1"}


def test_hops_of_two_threads_over_the_same_rooms_wait_for_each_other(
    make_open_room: Any,
) -> None:
    """Two recorders (two processes' desks, as on PostgreSQL) whose hops share rooms, each
    handing them in its own order: the rooms are locked in the order of their ids, so one
    waits for the other instead of deadlocking, and each room's numbers stay gapless."""
    rooms = [make_open_room(prefix=f"both{i}-") for i in range(6)]

    def recorder(seat: str, order: list[Any]) -> None:
        for turn in range(8):
            services.messages_say_runs(
                runs=[
                    (
                        s.room.id,
                        getattr(s, seat).agent.id,
                        [(f"{seat}{turn}-{f}", "x") for f in range(2)],
                    )
                    for s in order
                ]
            )

    assert run_together(lambda: recorder("a", rooms), lambda: recorder("b", rooms[::-1])) == []
    for setup in rooms:
        seqs = sorted(Message.objects.filter(room_id=setup.room.id).values_list("seq", flat=True))
        assert seqs == list(range(1, 33))  # 2 recorders x 8 hops x 2 messages, no gap
