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

An agent's socket is also judged by the token it was admitted with (``Reader.token``, its
digest): the same statement reads each seated agent's current digest (``Agent.token_hash``),
and a socket whose token was rotated since is out as a revoked agent's is (4401), with no
statement more.

An owner's browser is also judged by the session it was admitted with (``Reader.session_key``):
where any owner reader is in standing, one more statement of the same hop reads those
sessions' rows and their owners' user rows (``owner_sessions_read``), and the Gatekeeper's
``session_verdict`` closes a socket whose session no longer signs its owner in. An agent's
check reads no session: a hop of agents only is the one statement it was.
"""

from __future__ import annotations

import datetime as dt
import functools
from collections.abc import Iterable, Mapping, Sequence
from importlib import import_module
from types import MappingProxyType
from typing import Any, NamedTuple
from uuid import UUID

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.sessions.backends.base import SessionBase
from django.contrib.sessions.backends.db import SessionStore as DatabaseSessionStore
from django.core.exceptions import FieldDoesNotExist
from django.db import connection, transaction
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from gatekeeper.standing import SeatFacts, SessionFacts, session_verdict, standing_verdict
from rooms.models import Agent, Room, RoomMember
from rooms.protocol import CloseCode
from synapsia.db.statements import rows_fetched, rows_select, statement_cursor

# Rooms per statement: well under SQLite's and PostgreSQL's parameter limits.
ROOMS_PER_STATEMENT = 2000
# Owners' sessions per statement (two parameters each): the same bound.
SESSIONS_PER_STATEMENT = 1000


# One seat as read: owner, agent, standing, room state, revoked, the agent's token digest
# (the Gatekeeper's facts).
Seat = SeatFacts


class Reader(NamedTuple):
    """Who a socket delivers to: an agent in its seat by the token it was admitted with
    (``token``, the digest as stored: out once it is no longer the agent's), or an owner
    (``agent_id`` None) by the browser session it was admitted with (``session_key``; an
    owner reader without one is out of standing: UNAUTHENTICATED). An agent reader without a
    ``token`` is the server's own question (no socket's): its seat alone decides."""

    room_id: UUID
    owner_id: int
    agent_id: UUID | None
    session_key: str | None = None
    token: str | None = None


# An owner browser's session, as ``owner_sessions_read`` is asked for it: (owner, key).
SessionPair = tuple[int, str]


def _verdict(reader: Reader, seats: Sequence[Seat]) -> CloseCode | None:
    """None when ``reader`` is in standing, else the code its socket is closed with: the
    rule is the Gatekeeper's (``gatekeeper.standing.standing_verdict``)."""
    return standing_verdict(
        owner_id=reader.owner_id, agent_id=reader.agent_id, seats=seats, token=reader.token
    )


def _as_uuid(value: Any) -> UUID | None:
    if value is None or isinstance(value, UUID):
        return value
    return UUID(str(value))


def _seats_sql(vendor: str, rooms: int) -> str:
    """The rooms' seats, one row each (``rows_select``: one row of JSON on SQLite, since a
    say hop asks for ~40 rooms' seats): room, owner, agent, standing, the room's state,
    whether the agent is revoked and the digest of its current token."""
    q = connection.ops.quote_name
    member, room, agent = (q(model._meta.db_table) for model in (RoomMember, Room, Agent))
    marks = ", ".join(["%s"] * rooms)
    columns = ("m.room_id", "m.owner_id", "m.agent_id", "m.standing", "r.state")
    # Only our own table names are interpolated; the ids are parameters.
    return rows_select(
        vendor,
        (*columns, "a.revoked_at IS NOT NULL", "a.token_hash"),
        f"FROM {member} m JOIN {room} r ON r.id = m.room_id "
        f"LEFT JOIN {agent} a ON a.id = m.agent_id WHERE m.room_id IN ({marks})",
        ordered=False,
    )


def readers_standing(readers: Iterable[Reader]) -> dict[Reader, CloseCode | None]:
    """Each reader's standing, read from the record: one statement per
    ``ROOMS_PER_STATEMENT`` rooms (the seats of the rooms, their state and their agents'
    revocation and current token digest, which an agent reader's ``token`` must still be;
    raw SQL, since compiling the ORM's join would cost more than the query);
    then, only where an owner's browser among them is still seated, one statement for the
    owners' sessions (``owner_sessions_read``). A muted or stepped-in agent is still in the
    room and is still told what is said there; only its speech and actions are refused
    (``rooms.services``)."""
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
        for room_id, owner_id, agent_id, seat_standing, state, revoked, token in rows:
            if agent_id not in ids:
                ids[agent_id] = _as_uuid(agent_id)
            seat = Seat(int(owner_id), ids[agent_id], seat_standing, state, bool(revoked), token)
            room = ids[room_id] if room_id in ids else _as_uuid(room_id)
            seats.setdefault(room, []).append(seat)  # type: ignore[arg-type]
    verdicts = {reader: _verdict(reader, seats.get(reader.room_id, [])) for reader in wanted}
    # Owners still seated: their sessions, read now in one more statement (none for agents).
    owners = [r for r, verdict in verdicts.items() if verdict is None and r.agent_id is None]
    if owners:
        sessions = owner_sessions_read(
            (r.owner_id, r.session_key) for r in owners if r.session_key is not None
        )
        now = timezone.now()
        for reader in owners:
            verdicts[reader] = reader_session_verdict(reader, sessions, now)
    return verdicts


def reader_session_verdict(
    reader: Reader, sessions: Mapping[SessionPair, SessionFacts | None], now: dt.datetime
) -> CloseCode | None:
    """An owner reader's session verdict (``gatekeeper.standing.session_verdict``) from the
    sessions as read (``owner_sessions_read``); a reader without a session is out."""
    if reader.session_key is None:
        return CloseCode.UNAUTHENTICATED
    found = sessions.get((reader.owner_id, reader.session_key))
    return session_verdict(owner_id=reader.owner_id, session=found, now=now)


# --- owners' browser sessions --------------------------------------------------------------


@functools.cache
def _session_store(engine: str) -> type[SessionBase]:
    """The configured session engine's store (``SESSION_ENGINE``), looked up once per name."""
    store: type[SessionBase] = import_module(engine).SessionStore
    return store


class _UserColumns(NamedTuple):
    """The user model's table and the columns a session's check reads, quoted."""

    table: str
    pk: str
    pk_type: str  # the id's SQL type, for the parameters it is compared with
    password: str
    active: str  # SQL: the active column, or 1 (a model without one counts every user active)


def _user_columns(db: Any) -> _UserColumns:
    meta = get_user_model()._meta
    q = db.ops.quote_name
    pk = meta.pk
    assert pk is not None
    try:
        active = f"u.{q(meta.get_field('is_active').column)}"
    except FieldDoesNotExist:
        active = "1"
    password = q(meta.get_field("password").column)
    return _UserColumns(q(meta.db_table), q(pk.column), pk.db_type(db) or "", password, active)


@functools.lru_cache(maxsize=64)
def _sessions_sql(vendor: str, pairs: int, store_class: type[DatabaseSessionStore]) -> str:
    """The sessions asked for, each with its owner's user row: one row per (owner, key)
    asked (``rows_select``), the session's and the user's columns NULL where no row is.
    Only our own names are interpolated; the keys and the ids are parameters."""
    db = transaction.get_connection()
    user = _user_columns(db)
    session = store_class.get_model_class()._meta
    key_type = session.get_field("session_key").db_type(db)
    values = ", ".join([f"(CAST(%s AS {key_type}), CAST(%s AS {user.pk_type}))"] * pairs)
    return f"WITH w(k, u) AS (VALUES {values}) " + rows_select(
        vendor,
        ("w.u", "w.k", "s.session_data", "s.expire_date", f"u.{user.password}", user.active),
        f"FROM w LEFT JOIN {db.ops.quote_name(session.db_table)} s ON s.session_key = w.k "
        f"LEFT JOIN {user.table} u ON u.{user.pk} = w.u",
        ordered=False,
    )


def _expiry(value: Any) -> dt.datetime | None:
    """A session row's expiry as read (SQLite: text, naive UTC; PostgreSQL: a datetime)."""
    when = parse_datetime(value) if isinstance(value, str) else value
    if when is not None and settings.USE_TZ and timezone.is_naive(when):
        when = timezone.make_aware(when, dt.UTC)
    return when


def owner_sessions_read(
    pairs: Iterable[SessionPair],
) -> dict[SessionPair, SessionFacts | None]:
    """Each (owner, session key)'s session as it is now: its data decoded and its expiry,
    with the owner's user row (password hash, active), or None where the session's row is
    gone. Database-backed engines (``db``, ``cached_db``: the table is the record) are one
    statement for every pair; any other engine loads each session from its own store, and
    the user rows are one statement. Nothing is kept: the next call reads again."""
    wanted = list(dict.fromkeys(pairs))
    if not wanted:
        return {}
    store_class = _session_store(settings.SESSION_ENGINE)
    store = store_class()
    db = transaction.get_connection()
    read: dict[SessionPair, SessionFacts | None] = {}
    if issubclass(store_class, DatabaseSessionStore):
        rows: list[Sequence[Any]] = []
        for start in range(0, len(wanted), SESSIONS_PER_STATEMENT):
            chunk = wanted[start : start + SESSIONS_PER_STATEMENT]
            params = [value for owner_id, key in chunk for value in (key, owner_id)]
            with statement_cursor() as cursor:
                cursor.execute(_sessions_sql(db.vendor, len(chunk), store_class), params)
                rows += rows_fetched(cursor, db.vendor)
        for owner_id, key, data, expires, password, active in rows:
            pair = (int(owner_id), str(key))
            if data is None:
                read[pair] = None  # the row is gone: signed out, ended, or its key cycled
                continue
            read[pair] = SessionFacts(store.decode(data), _expiry(expires), password, bool(active))
        return read
    # Another engine (cache, file, signed cookie): it enforces its own expiry on load.
    users = _user_rows({owner_id for owner_id, _ in wanted})
    for owner_id, key in wanted:
        loaded = store_class(key)
        data = loaded.load()
        if loaded.session_key is None or not data:
            read[(owner_id, key)] = None
            continue
        password, active = users.get(owner_id, (None, False))
        read[(owner_id, key)] = SessionFacts(data, None, password, active)
    return read


def _user_rows(owner_ids: set[int]) -> dict[int, tuple[str, bool]]:
    """The owners' user rows: password hash and whether active (one statement)."""
    user = _user_columns(transaction.get_connection())
    marks = ", ".join(["%s"] * len(owner_ids))
    with statement_cursor() as cursor:
        cursor.execute(
            f"SELECT u.{user.pk}, u.{user.password}, {user.active} "  # noqa: S608
            f"FROM {user.table} u WHERE u.{user.pk} IN ({marks})",
            sorted(owner_ids),
        )
        return {int(row[0]): (str(row[1]), bool(row[2])) for row in cursor.fetchall()}


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
    seated agents' ids as stored, each with its UUID (for the next sweep's reading); the
    record's mark taken before the reading; and the sessions of the owners watching.
    ``unchanged``: the mark equals the one given, so nothing was read (the previous
    sweep's reading is still the record's)."""

    latest: dict[UUID, int]
    seats: dict[UUID, list[Seat]]
    agent_ids: dict[Any, UUID]
    mark: RecordMark
    unchanged: bool = False
    # The watched owners' sessions (``owner_sessions_read``), each pair asked for a key.
    sessions: Mapping[SessionPair, SessionFacts | None] = MappingProxyType({})


def rooms_swept(
    room_ids: list[UUID],
    agent_ids: Mapping[Any, UUID] | None = None,
    since: RecordMark | None = None,
    sessions: Iterable[SessionPair] = (),
) -> Swept:
    """For the record sweep: each room's last sequence number and its seats (as
    ``readers_standing`` reads them, each agent's current token digest included, so a socket
    whose token was rotated is closed by the sweep too), one statement per
    ``ROOMS_PER_STATEMENT`` rooms. A room that is gone has neither.

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
    longer seated is not kept. Every seat is still read by every sweep that reads.

    ``sessions``: the (owner, session key) of every owner's browser watching here, read by
    one more statement of the same hop when the sweep reads (``owner_sessions_read``); a
    sweep of agents only reads none. A session can end by time alone, which commits nothing
    and so leaves the mark as it was: the sweep passes ``since`` None once the first expiry
    it read is due (``realtime.RecordSweep``)."""
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
                f"a.revoked_at, a.token_hash FROM {room} r "
                f"LEFT JOIN {member} m ON m.room_id = r.id "
                f"LEFT JOIN {agent} a ON a.id = m.agent_id WHERE r.id IN ({marks})",
                prepared,
            )
            rows = cursor.fetchall()
        for room_id, last_seq, owner_id, agent_id, seat_standing, state, revoked_at, token in rows:
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
                Seat(int(owner_id), agent_uuid, seat_standing, state, revoked_at is not None, token)
            )
    wanted = list(sessions)
    return swept._replace(sessions=owner_sessions_read(wanted)) if wanted else swept


def seat_verdict(reader: Reader, seats: list[Seat]) -> CloseCode | None:
    """``reader``'s standing among its room's ``seats`` as ``rooms_swept`` read them (the
    seats only: an owner's session is ``reader_session_verdict``)."""
    return _verdict(reader, seats)


def reader_standing(reader: Reader) -> CloseCode | None:
    """One reader's standing, an owner's session included (inside a hop that reads
    something else for it too)."""
    return readers_standing([reader])[reader]


def owner_session_standing(reader: Reader) -> CloseCode | None:
    """An owner reader's session alone (one statement): for what is told to a browser
    whatever its seat says, such as the room's new state (a closed room still tells its
    owners it closed)."""
    pairs = [(reader.owner_id, reader.session_key)] if reader.session_key is not None else []
    return reader_session_verdict(reader, owner_sessions_read(pairs), timezone.now())
