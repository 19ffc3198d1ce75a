"""Standing at delivery: may this socket still be given anything from the room?

A revocation, a block, a lost seat or a closed room is announced to open sockets through the
channel layer, but an announcement can be lost (Redis down, a full channel). So every hop that
hands a socket something from the room (a live message, a whisper, a catch-up read, an
action's outcome, a reveal) re-reads the reader's standing from the record first, in one
statement, and a reader out of standing is given nothing and closed with the close code of
``docs/protocol.md``. Nothing is cached: each hop reads again.

This module is the reading (one statement for many readers); the rule that turns the rows
read into a verdict is the Gatekeeper's, ``gatekeeper.standing.standing_verdict``.

Live deliveries carry no database hop of their own, so a process's sockets hand their checks
to the consumers' ``SayDesk`` (``SayDesk.standing``): the checks waiting when one of its hops
starts are answered by one ``readers_standing`` statement in that hop, beside its acks and
`say` runs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple
from uuid import UUID

from django.db import connection, transaction

from gatekeeper.standing import SeatFacts, standing_verdict
from rooms.models import Agent, Room, RoomMember
from rooms.protocol import CloseCode
from synapsia.db.statements import rows_fetched, rows_select, statement_cursor

# Rooms per statement: well under SQLite's and PostgreSQL's parameter limits.
ROOMS_PER_STATEMENT = 2000


# One seat as read: owner, agent, standing, room state, revoked (the Gatekeeper's facts).
Seat = SeatFacts


class Reader(NamedTuple):
    """Who a socket delivers to: an agent in its seat, or an owner (``agent_id`` None)."""

    room_id: UUID
    owner_id: int
    agent_id: UUID | None


def _verdict(reader: Reader, seats: Sequence[Seat]) -> CloseCode | None:
    """None when ``reader`` is in standing, else the code its socket is closed with: the
    rule is the Gatekeeper's (``gatekeeper.standing.standing_verdict``)."""
    return standing_verdict(owner_id=reader.owner_id, agent_id=reader.agent_id, seats=seats)


def _as_uuid(value: Any) -> UUID | None:
    if value is None or isinstance(value, UUID):
        return value
    return UUID(str(value))


def _seats_sql(vendor: str, rooms: int) -> str:
    """The rooms' seats, one row each (``rows_select``: one row of JSON on SQLite, since a
    say hop asks for ~40 rooms' seats): room, owner, agent, standing, the room's state and
    whether the agent is revoked."""
    q = connection.ops.quote_name
    member, room, agent = (q(model._meta.db_table) for model in (RoomMember, Room, Agent))
    marks = ", ".join(["%s"] * rooms)
    columns = ("m.room_id", "m.owner_id", "m.agent_id", "m.standing", "r.state")
    # Only our own table names are interpolated; the ids are parameters.
    return rows_select(
        vendor,
        (*columns, "a.revoked_at IS NOT NULL"),
        f"FROM {member} m JOIN {room} r ON r.id = m.room_id "
        f"LEFT JOIN {agent} a ON a.id = m.agent_id WHERE m.room_id IN ({marks})",
        ordered=False,
    )


def readers_standing(readers: Iterable[Reader]) -> dict[Reader, CloseCode | None]:
    """Each reader's standing, read from the record: one statement per
    ``ROOMS_PER_STATEMENT`` rooms (the seats of the rooms, their state and their agents'
    revocation; raw SQL, since compiling the ORM's join would cost more than the query).
    A muted or stepped-in agent is still in the room and is still told what is said
    there; only its speech and actions are refused (``rooms.services``)."""
    wanted = list(dict.fromkeys(readers))
    room_ids = list(dict.fromkeys(r.room_id for r in wanted))
    pk = Room._meta.pk
    assert pk is not None
    seats: dict[UUID, list[Seat]] = {}
    # The ids as read (SQLite: hex text) to UUIDs, each parsed once per call: the rooms
    # asked for are known, and an agent seated in several of them is read once per seat.
    ids: dict[Any, UUID | None] = {None: None}
    db = transaction.get_connection()  # not the proxy, which looks it up on every read
    for start in range(0, len(room_ids), ROOMS_PER_STATEMENT):
        chunk = room_ids[start : start + ROOMS_PER_STATEMENT]
        prepared = [pk.get_db_prep_value(r, db) for r in chunk]
        ids.update(zip(prepared, chunk, strict=True))
        with statement_cursor() as cursor:
            cursor.execute(_seats_sql(db.vendor, len(chunk)), prepared)
            rows = rows_fetched(cursor, db.vendor)
        for room_id, owner_id, agent_id, seat_standing, state, revoked in rows:
            if agent_id not in ids:
                ids[agent_id] = _as_uuid(agent_id)
            seat = Seat(int(owner_id), ids[agent_id], seat_standing, state, bool(revoked))
            room = ids[room_id] if room_id in ids else _as_uuid(room_id)
            seats.setdefault(room, []).append(seat)  # type: ignore[arg-type]
    return {reader: _verdict(reader, seats.get(reader.room_id, [])) for reader in wanted}


class RecordMark(NamedTuple):
    """Where the record stood when a sweep read it: two equal marks mean nothing was
    committed to the database in between, so a reading made between them is still exact.

    SQLite: ``PRAGMA data_version`` changes whenever another connection (any thread or
    process) commits, but not for the connection's own writes; ``total_changes`` counts
    those (rows written, even if rolled back, which only errs towards reading again). Both
    belong to one connection. PostgreSQL: the snapshot (``pg_current_snapshot()``: the
    transactions in progress and the next one's id), which any commit anywhere in the
    cluster changes, and which decides everything a statement can see."""

    connection: Any  # SQLite: the DB-API connection the numbers belong to; PostgreSQL: None
    position: tuple[int, int] | str


def record_mark() -> RecordMark:
    """The record's mark now (``RecordMark``), in one statement."""
    with statement_cursor() as cursor:
        if connection.vendor == "sqlite":
            cursor.execute("PRAGMA data_version")
            (version,) = cursor.fetchone()
            raw = connection.connection
            return RecordMark(raw, (int(version), raw.total_changes))
        cursor.execute("SELECT pg_current_snapshot()::text")
        (snapshot,) = cursor.fetchone()
        return RecordMark(None, str(snapshot))


class Swept(NamedTuple):
    """What one record sweep read: each room's last sequence number, its seats, and the
    seated agents' ids as stored, each with its UUID (for the next sweep's reading); and
    the record's mark taken before the reading.
    ``unchanged``: the mark equals the one given, so nothing was read (the previous
    sweep's reading is still the record's)."""

    latest: dict[UUID, int]
    seats: dict[UUID, list[Seat]]
    agent_ids: dict[Any, UUID]
    mark: RecordMark
    unchanged: bool = False


def rooms_swept(
    room_ids: list[UUID],
    agent_ids: Mapping[Any, UUID] | None = None,
    since: RecordMark | None = None,
) -> Swept:
    """For the record sweep: each room's last sequence number and its seats (as
    ``readers_standing`` reads them), one statement per ``ROOMS_PER_STATEMENT`` rooms. A
    room that is gone has neither.

    ``since``: the mark the previous sweep's reading was taken at. When the record's mark
    is the same (nothing committed since), that reading is still exactly what the statement
    would return, so it is not run: an idle process's sweep is one small statement. The
    mark is taken before the statement, so a commit racing the reading moves the next mark
    and the next sweep reads again.

    Parsing the ids as read (SQLite: hex text) to UUIDs was most of a sweep's CPU (two per
    seat; 13-14 ms a sweep of 1,000 rooms). The rooms' are not parsed: they are the ids
    asked for, mapped from the form they were sent in. The agents' come from
    ``agent_ids``, the previous sweep's (an id's UUID does not change; only an agent seated
    since is parsed), and the ones read now are returned for the next sweep, so an agent no
    longer seated is not kept. Every seat is still read by every sweep that reads."""
    mark = record_mark()
    if since is not None and mark == since:
        return Swept({}, {}, {}, mark, unchanged=True)
    db = transaction.get_connection()  # not the proxy, which looks it up on every read
    q = db.ops.quote_name
    member, room, agent = (q(model._meta.db_table) for model in (RoomMember, Room, Agent))
    pk = Room._meta.pk
    assert pk is not None
    known = agent_ids or {}
    swept = Swept({}, {}, {}, mark)
    for start in range(0, len(room_ids), ROOMS_PER_STATEMENT):
        chunk = room_ids[start : start + ROOMS_PER_STATEMENT]
        prepared = [pk.get_db_prep_value(r, db) for r in chunk]
        rooms = dict(zip(prepared, chunk, strict=True))
        marks = ", ".join(["%s"] * len(chunk))
        with statement_cursor() as cursor:
            # Only our own table names are interpolated; the ids are parameters.
            cursor.execute(
                f"SELECT r.id, r.last_seq, m.owner_id, m.agent_id, m.standing, r.state, "  # noqa: S608
                f"a.revoked_at FROM {room} r LEFT JOIN {member} m ON m.room_id = r.id "
                f"LEFT JOIN {agent} a ON a.id = m.agent_id WHERE r.id IN ({marks})",
                prepared,
            )
            rows = cursor.fetchall()
        for room_id, last_seq, owner_id, agent_id, seat_standing, state, revoked_at in rows:
            room_uuid = rooms[room_id] if room_id in rooms else _as_uuid(room_id)
            assert room_uuid is not None
            swept.latest[room_uuid] = int(last_seq)
            room_seats = swept.seats.setdefault(room_uuid, [])
            if owner_id is None:
                continue
            agent_uuid = None
            if agent_id is not None:
                agent_uuid = known.get(agent_id) or _as_uuid(agent_id)
                assert agent_uuid is not None
                swept.agent_ids[agent_id] = agent_uuid
            room_seats.append(
                Seat(int(owner_id), agent_uuid, seat_standing, state, revoked_at is not None)
            )
    return swept


def seat_verdict(reader: Reader, seats: list[Seat]) -> CloseCode | None:
    """``reader``'s standing among its room's ``seats`` as ``rooms_swept`` read them."""
    return _verdict(reader, seats)


def reader_standing(reader: Reader) -> CloseCode | None:
    """One reader's standing (inside a hop that reads something else for it too)."""
    return readers_standing([reader])[reader]
