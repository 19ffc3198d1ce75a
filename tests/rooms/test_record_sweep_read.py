"""The record sweep's read (``rooms.standing.rooms_swept``): every seat read afresh on every
sweep, whatever the previous sweep's ids it is given."""

from __future__ import annotations

import threading
import uuid
from typing import Any

import pytest
from django.db import connection, connections
from django.test.utils import CaptureQueriesContext

from rooms import services, standing
from rooms.models import RoomMember

pytestmark = pytest.mark.django_db


def _seats(swept: standing.Swept, room_id: Any) -> dict[int, tuple[Any, str, str, bool]]:
    return {
        s.owner_id: (s.agent_id, s.standing, s.room_state, s.agent_revoked)
        for s in swept.seats[room_id]
    }


def test_each_sweep_reads_the_seats_as_they_are_now(make_open_room: Any) -> None:
    setup = make_open_room()
    room_id = setup.room.id
    alice, bob = setup.a.owner, setup.b.owner
    first = standing.rooms_swept([room_id])
    assert first.latest == {room_id: setup.room.last_seq}
    assert _seats(first, room_id) == {
        alice.id: (setup.a.agent.id, "active", "open", False),
        bob.id: (setup.b.agent.id, "active", "open", False),
    }
    assert set(first.agent_ids.values()) == {setup.a.agent.id, setup.b.agent.id}

    # Between sweeps: Bob's seat holds another agent (written to the record directly: the
    # services bind only in a draft), Alice's agent is revoked.
    replacement = services.agent_register(owner=bob, name="Bob's other agent")
    RoomMember.objects.filter(room_id=room_id, owner=bob).update(agent=replacement.agent)
    services.agent_revoke(owner=alice, agent_id=setup.a.agent.id)
    second = standing.rooms_swept([room_id], first.agent_ids)
    seats = _seats(second, room_id)
    assert seats[bob.id][0] == replacement.agent.id
    assert seats[alice.id][3] is True
    # Only the agents seated now are carried to the next sweep.
    assert set(second.agent_ids.values()) == {setup.a.agent.id, replacement.agent.id}
    reader = standing.Reader(room_id, bob.id, setup.b.agent.id)
    assert standing.seat_verdict(reader, second.seats[room_id]) is not None


def test_ids_the_previous_sweep_did_not_read_are_parsed_from_the_record(
    make_open_room: Any,
) -> None:
    """The carried ids only spare parsing; a seated agent not among them is parsed."""
    setup = make_open_room()
    room_id = setup.room.id
    seated = set(RoomMember.objects.filter(room_id=room_id).values_list("agent_id", flat=True))
    swept = standing.rooms_swept([room_id], {uuid.uuid4().hex: uuid.uuid4()})
    assert {s.agent_id for s in swept.seats[room_id]} == seated


def test_a_room_that_is_gone_has_neither_number_nor_seats(make_open_room: Any) -> None:
    setup = make_open_room()
    missing = uuid.uuid4()
    swept = standing.rooms_swept([setup.room.id, missing])
    assert missing not in swept.latest and missing not in swept.seats
    assert setup.room.id in swept.latest


# --- the record's mark: a sweep reads nothing only when nothing was committed since ------

sqlite_only = pytest.mark.skipif(
    connection.vendor != "sqlite",
    reason="SQLite's mark belongs to one connection (PostgreSQL's does not): runs in pass 1",
)


MARK_STATEMENTS = ("PRAGMA data_version", "SELECT pg_current_snapshot()::text")


def _in_another_connection(work: Any) -> None:
    """``work`` on a thread of its own, so on a connection of its own (committed there)."""
    failure: list[BaseException] = []

    def run() -> None:
        try:
            work()
        except BaseException as exc:  # re-raised on the test's thread
            failure.append(exc)
        finally:
            connections.close_all()

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(timeout=30)
    assert not thread.is_alive() and not failure, failure


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("writer", ["this connection", "another connection"])
def test_a_reading_is_skipped_only_while_nothing_is_committed(
    make_open_room: Any, writer: str
) -> None:
    setup = make_open_room()
    room_id, bob = setup.room.id, setup.b.owner
    first = standing.rooms_swept([room_id])
    assert first.mark is not None and not first.unchanged
    with CaptureQueriesContext(connection) as idle:
        again = standing.rooms_swept([room_id], first.agent_ids, first.mark)
    assert again.unchanged and again.mark == first.mark
    assert len(idle.captured_queries) == 1  # the mark alone
    assert idle.captured_queries[0]["sql"] in MARK_STATEMENTS

    def revoke() -> None:
        services.agent_revoke(owner=bob, agent_id=setup.b.agent.id)

    if writer == "this connection":
        revoke()
    else:
        _in_another_connection(revoke)
    after = standing.rooms_swept([room_id], first.agent_ids, first.mark)
    assert not after.unchanged and after.mark != first.mark
    revoked = {s.owner_id: s.agent_revoked for s in after.seats[room_id]}
    assert revoked == {setup.a.owner.id: False, bob.id: True}
    # And quiet again from the new reading on.
    assert standing.rooms_swept([room_id], after.agent_ids, after.mark).unchanged


@sqlite_only
@pytest.mark.django_db(transaction=True)
def test_a_mark_from_another_connection_never_skips_a_reading(make_open_room: Any) -> None:
    """The numbers belong to one connection: reopened (or another thread's), it reads."""
    setup = make_open_room()
    first = standing.rooms_swept([setup.room.id])
    connection.close()
    reopened = standing.rooms_swept([setup.room.id], first.agent_ids, first.mark)
    assert not reopened.unchanged and reopened.latest == first.latest
    # A forged mark with the same numbers on a connection that is not this one.
    assert reopened.mark is not None
    forged = reopened.mark._replace(connection=object())
    assert not standing.rooms_swept([setup.room.id], None, forged).unchanged


@pytest.mark.skipif(
    connection.vendor != "postgresql", reason="PostgreSQL's mark, the snapshot: runs in pass 2"
)
@pytest.mark.django_db(transaction=True)
def test_postgresql_s_mark_is_the_snapshot_and_any_commit_moves_it(make_open_room: Any) -> None:
    """Not bound to a connection: a reopened one with nothing committed skips the reading
    (the snapshot decides what any statement sees); a commit anywhere moves it, even one
    that touches no room (it errs towards reading again)."""
    setup = make_open_room()
    first = standing.rooms_swept([setup.room.id])
    connection.close()
    assert standing.rooms_swept([setup.room.id], first.agent_ids, first.mark).unchanged

    def unrelated_commit() -> None:  # an agent registered: no room's seats change
        services.agent_register(owner=setup.a.owner, name="Another agent")

    _in_another_connection(unrelated_commit)
    again = standing.rooms_swept([setup.room.id], first.agent_ids, first.mark)
    assert not again.unchanged and again.latest == first.latest
