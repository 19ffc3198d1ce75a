"""Who is opening this room socket, and may they?

Agents present ``Authorization: Bearer <token>``; browsers present their session cookie and
an ``Origin`` that must be exactly this site's (scheme, host and port). Every refusal is a
``Refusal`` with a documented close code, decided before any room data is sent.

A browser is admitted by its session as the handshake itself reads it (its row and its
owner's user row, judged by ``gatekeeper.standing.session_verdict``), not only on the word of
the auth middleware's earlier read; the socket keeps that session's key
(``Participant.session_key``) and every later delivery reads the session again
(``rooms.standing``): a socket is never given anything on a session that has since ended.

An agent's handshake is one transaction of four written statements (issue 17: the ORM's
compilation was most of a connect's CPU): the token's use (``UPDATE … RETURNING``, which is
also the token check), the seat with its room, the room's ledger head, whether anyone sealed
an offer and whether the agent has a live slip (one ``SELECT``), then the ``Join`` event (the
head's compare-and-set and the insert, ``ledger_append_many``). Every check is made on every
connect, from the record: nothing here is remembered between connects but the SQL text.

An agent's socket keeps the digest of the token it was admitted with
(``Participant.token_digest``: what ``Agent.token_hash`` stores, never the token), and every
later hop compares it with the agent's token as it is then (``rooms.standing``, the say
statements, the context's facts): a socket whose token has since been rotated away is given
nothing more, its words and context requests are refused and it is closed (4401), whether or
not the ``agent.revoked`` announcement arrives.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal
from urllib.parse import urlsplit
from uuid import UUID

from django.conf import settings
from django.contrib.auth.models import AnonymousUser, User
from django.db import DEFAULT_DB_ALIAS, connection, connections, transaction
from django.http.request import validate_host
from django.utils import timezone

from gatekeeper.policy import (
    PolicyRules,
    policy_agent_key,
    policy_rules_column,
    policy_rules_parse,
    tool_specs_for,
)
from gatekeeper.standing import OWNER_ROOM_STATES, join_verdict
from gatekeeper.tools.spec import ToolSpec
from ledger.events import Join
from ledger.models import LedgerHead
from ledger.services import LedgerAppendError, ledger_append_many
from rooms.bearer import secret_digest
from rooms.models import Agent, Room, RoomMember, SealedOffer
from rooms.protocol import CloseCode
from rooms.sealing import ROOM_CHARTER, ROOM_PURPOSE, one_hop, room_text_open
from rooms.standing import Reader, owner_sessions_read, reader_session_verdict
from slips.capabilities import tier_narrowest
from slips.models import Slip
from slips.verification import room_slips_read
from synapsia.db.statements import statement_cursor


@dataclass(frozen=True)
class Participant:
    """An admitted socket: an agent bound to the room, or an owner watching it."""

    kind: Literal["agent", "owner"]
    room_id: UUID
    owner_id: int
    agent_id: UUID | None
    acked_seq: int
    # An agent's socket: its ``Join`` event's number in the room's ledger. The later of two
    # sockets of one agent in one room has the higher, whatever process each is in.
    joined_seq: int | None = None
    # An owner's browser: the key of the session it was admitted with, read again before
    # every delivery (a credential: kept out of the repr, so out of logs).
    session_key: str | None = field(default=None, repr=False)
    # An agent's socket: the digest of the token it was admitted with (as ``Agent.token_hash``
    # stores it; the token itself is never kept), compared with the agent's current one on
    # every hop. Kept out of the repr too.
    token_digest: str | None = field(default=None, repr=False)


@dataclass(frozen=True)
class Refusal:
    code: CloseCode
    reason: str


@dataclass(frozen=True)
class RoomFacts:
    """The room as the handshake read it: what the welcome frame says of it."""

    id: UUID
    purpose: str
    charter: str
    state: str
    terms: Any
    last_seq: int


@dataclass(frozen=True)
class Admission:
    """An admitted socket and what its opening needs, read by the handshake's own statements
    (so the opening reads neither the room nor the agent again)."""

    participant: Participant
    room: RoomFacts
    # An agent's own tool hints and mode (the tools it is listed); an owner's: none.
    advisor_only: bool = False
    declared_tools: list[str] | None = None
    # Someone sealed an offer in the room: the opening asks whether the reveal is due.
    offers_sealed: bool = False
    # The agent's owner has a live slip for it here: the tools it lists are read and checked.
    slip_live: bool = False
    # The agent's sockets joined and not yet left when this one joined (``Agent.socket_joins``):
    # zero, and no earlier socket of it can be open in any room.
    earlier_sockets: int = 0
    # The tool policy's rules for the agent, read by the handshake's statement with its seat
    # (None: not read, the listing reads them).
    policy_rules: PolicyRules | None = None


TOOL_RESOURCE_PREFIX = "tool:"


def _header(headers: list[tuple[bytes, bytes]], name: bytes) -> str | None:
    for key, value in headers:
        if key.lower() == name:
            return value.decode("latin-1")
    return None


_DEFAULT_PORTS = {"http": 80, "https": 443}


def _origin_form(scheme: str, host: str, port: int | None) -> str:
    """``scheme://host[:port]`` lowercased, the scheme's default port left out (RFC 6454)."""
    port = None if port == _DEFAULT_PORTS.get(scheme) else port
    return f"{scheme}://{host.lower()}" + (f":{port}" if port is not None else "")


def _site_scheme(headers: list[tuple[bytes, bytes]], scope_scheme: str | None) -> str:
    """The scheme the browser used, as Django's ``request.is_secure()`` decides it: the
    proxy's header where ``SECURE_PROXY_SSL_HEADER`` trusts one, else the socket's own."""
    trusted = getattr(settings, "SECURE_PROXY_SSL_HEADER", None)
    if trusted:
        name, secure_value = trusted
        header = name.removeprefix("HTTP_").lower().replace("_", "-").encode("latin-1")
        value = _header(headers, header)
        if value is not None:
            return "https" if value.split(",")[0].strip() == secure_value else "http"
    return "https" if scope_scheme == "wss" else "http"


def origin_allowed(
    origin: str,
    *,
    headers: Sequence[tuple[bytes, bytes]] = (),
    scope_scheme: str | None = None,
) -> bool:
    """An Origin is allowed when it is exactly this site's (scheme, host and port of the
    request's ``Host``, which must be an allowed host) or exactly a CSRF-trusted origin.

    A request with no ``Host`` header is not a browser's (browsers always send one, and the
    Origin check only guards against cross-site pages in browsers): its Origin's host must be
    an allowed host.
    """
    if origin in settings.CSRF_TRUSTED_ORIGINS:
        return True
    try:
        parts = urlsplit(origin)
        origin_port = parts.port
    except ValueError:
        return False
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return False
    if parts.path or parts.query or parts.fragment or parts.username is not None:
        return False  # an Origin is scheme, host and port, nothing else
    host = _header(list(headers), b"host")
    if host is None:
        return validate_host(parts.hostname, settings.ALLOWED_HOSTS)
    try:
        site = urlsplit(f"//{host}")
        site_host, site_port = site.hostname, site.port
    except ValueError:
        return False
    if not site_host or not validate_host(site_host, settings.ALLOWED_HOSTS):
        return False
    scheme = _site_scheme(list(headers), scope_scheme)
    expected = _origin_form(scheme, site_host, site_port)
    return _origin_form(parts.scheme, parts.hostname, origin_port) == expected


def admit(
    *,
    room_id: str,
    headers: list[tuple[bytes, bytes]],
    user: User | AnonymousUser,
    scope_scheme: str | None = None,
    session_key: str | None = None,
) -> Admission | Refusal:
    """Decide a room socket's handshake. Runs in one database hop. ``session_key``: a
    browser's session (the cookie's, as the auth middleware resolved it)."""
    origin = _header(headers, b"origin")
    if origin is not None and not origin_allowed(
        origin, headers=headers, scope_scheme=scope_scheme
    ):
        return Refusal(CloseCode.ORIGIN_NOT_ALLOWED, "Origin not allowed.")
    try:
        room_uuid = UUID(room_id)
    except ValueError:
        return Refusal(CloseCode.FORBIDDEN, "Not a member of this room.")

    authorization = _header(headers, b"authorization")
    if authorization is not None:
        scheme, _, token = authorization.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            return Refusal(CloseCode.UNAUTHENTICATED, "Use: Authorization: Bearer <token>.")
        return _agent_admit(room_uuid, token.strip())

    # Browsers: a session, and an Origin (browsers always send one on WebSocket upgrades).
    if origin is None:
        return Refusal(CloseCode.UNAUTHENTICATED, "Browsers must send an Origin header.")
    if not user.is_authenticated or not session_key:
        return Refusal(CloseCode.UNAUTHENTICATED, "Sign in first.")
    # The session as it is now, first: a session that has ended learns nothing of the room.
    reader = Reader(room_uuid, user.pk, None, session_key)
    sessions = owner_sessions_read([(user.pk, session_key)])
    if reader_session_verdict(reader, sessions, timezone.now()) is not None:
        return Refusal(CloseCode.UNAUTHENTICATED, "Your sign-in has ended: sign in again.")
    room = Room.objects.filter(id=room_uuid, members__owner_id=user.pk).first()
    if room is None:
        return Refusal(CloseCode.FORBIDDEN, "Not a member of this room.")
    if room.state not in OWNER_ROOM_STATES:
        return Refusal(CloseCode.ROOM_NOT_JOINABLE, f"The room is {room.state}.")
    facts = RoomFacts(room.id, room.purpose, room.charter, room.state, room.terms, room.last_seq)
    owner = Participant("owner", room_uuid, user.pk, None, 0, session_key=session_key)
    return Admission(owner, facts)


# --- an agent's handshake: written statements, prepared once per process --------------------


def _as_uuid(value: Any) -> UUID:
    # PostgreSQL's driver returns UUIDs; SQLite stores them as 32 hex digits.
    return value if isinstance(value, UUID) else UUID(str(value))


@functools.cache
def _token_use_sql(vendor: str) -> str:
    """Record the token's use and count the join, and return its agent with how many of its
    sockets joined and have not left, only while the token is not revoked: the token check,
    its last-used stamp and the count in one statement. A join is counted from at least the
    leaves (one recorded for a socket whose join was not counted cannot hide a later
    socket). Only our own names are interpolated; the digest and the time are parameters."""
    q = connection.ops.quote_name
    # SQLite's two-argument MAX is a scalar function, PostgreSQL's is GREATEST.
    greatest = "MAX" if vendor == "sqlite" else "GREATEST"
    return (
        f"UPDATE {q(Agent._meta.db_table)} SET token_last_used_at = %s, "  # noqa: S608
        f"socket_joins = {greatest}(socket_joins, socket_leaves) + 1 "
        "WHERE token_hash = %s AND revoked_at IS NULL "
        "RETURNING id, advisor_only, declared_tools, socket_joins - socket_leaves - 1 AS earlier"
    )


@functools.cache
def _socket_count_sql(
    vendor: str, count: Literal["socket_joins", "socket_leaves"], step: int
) -> str:
    """One of the agent's socket counts (``Agent.socket_joins``) moved by ``step``. Only our
    own names and the step are interpolated; the id is a parameter."""
    table = connection.ops.quote_name(Agent._meta.db_table)
    return f"UPDATE {table} SET {count} = {count} + ({step:d}) WHERE id = %s"  # noqa: S608


def socket_leave_count(agent_id: UUID) -> None:
    """Count one of the agent's sockets' leaves, inside the leave's transaction and before
    its ledger head is locked (``rooms.services.agent_leave``): a join locks the agent's row
    first, then the head, so a leave and a join of one agent queue in that one order."""
    db = transaction.get_connection()
    pk = Agent._meta.pk
    assert pk is not None
    with statement_cursor() as cursor:
        cursor.execute(
            _socket_count_sql(db.vendor, "socket_leaves", 1), [pk.get_db_prep_value(agent_id, db)]
        )


def _seat_select(vendor: str, *, agent: str, policy_key: str, head_locked: bool) -> str:
    """The agent's seat in the room (the agent given by ``agent``, SQL: a placeholder or a
    column), with the room, the room's ledger head, whether any offer was sealed there,
    whether its owner has a live slip for it, and the tool policy's rules for it
    (``policy_key``, SQL giving its policy key): one row, or none when the agent holds no
    seat in the room. ``head_locked`` (PostgreSQL): the head is locked until the handshake
    commits, so two agents of a room joining at once take turns at it instead of one failing
    its compare-and-set (the append's slower path); a room without a head yet then reads no
    row."""
    q = connection.ops.quote_name
    member, room, head, offer, slip = (
        q(model._meta.db_table) for model in (RoomMember, Room, LedgerHead, SealedOffer, Slip)
    )
    return (
        "SELECT m.owner_id, m.acked_seq, m.standing, "  # noqa: S608
        "r.purpose, r.charter, r.state, r.terms, r.last_seq, h.seq AS head_seq, "
        "h.hash AS head_hash, "
        f"EXISTS (SELECT 1 FROM {offer} o WHERE o.room_id = r.id) AS offers_sealed, "
        f"EXISTS (SELECT 1 FROM {slip} s WHERE s.room_id = r.id AND s.owner_id = m.owner_id "
        "AND s.agent_id = m.agent_id AND s.superseded_at IS NULL) AS slip_live, "
        f"{policy_rules_column(vendor, policy_key)} AS policy_rules "
        f"FROM {member} m JOIN {room} r ON r.id = m.room_id "
        f"{'' if head_locked else 'LEFT '}JOIN {head} h ON h.room_id = r.id "
        f"WHERE m.room_id = %s AND m.agent_id = {agent}"
        + (" FOR UPDATE OF h" if head_locked else "")
    )


@functools.cache
def _seat_sql(vendor: str, head_locked: bool) -> str:
    """``_seat_select`` of one agent given by its id and its policy key (parameters: the
    policy key, the room, the agent)."""
    return _seat_select(vendor, agent="%s", policy_key="%s", head_locked=head_locked)


@functools.cache
def _admit_sql() -> str:
    """PostgreSQL: ``_token_use_sql`` and ``_seat_sql`` (the head locked) as one statement,
    one round trip: the token's use recorded and its agent returned, then that agent's seat
    read and its head locked, in that order (the agent's row locked first, as a leave locks
    it before the head). No row: an unknown or revoked token; the seat's columns NULL: no
    seat, or no head yet (``_seat_sql`` then reads it without the lock). Parameters: the
    time, the token's digest, the room."""
    seat = _seat_select("postgresql", agent="a.id", policy_key="a.id::text", head_locked=True)
    return (
        f"WITH a AS ({_token_use_sql('postgresql')}) "  # noqa: S608
        "SELECT a.id, a.advisor_only, a.declared_tools, a.earlier, s.* "
        f"FROM a LEFT JOIN LATERAL ({seat}) s ON TRUE"
    )


def _agent_admit(room_id: UUID, token: str) -> Admission | Refusal:
    """The token, the seat, its standing and the room's state, then the ``Join`` event: one
    transaction. A join that cannot be recorded does not happen (nor does its token stamp);
    one refused is not counted among the agent's sockets' joins (``Agent.socket_joins``).
    PostgreSQL reads the token and the seat in one statement (``_admit_sql``)."""
    now = timezone.now()
    agent_pk = Agent._meta.pk
    assert agent_pk is not None
    # The connection itself, looked up once (each use of the proxy is a context-local lookup).
    db = connections[DEFAULT_DB_ALIAS]
    room_param = Room._meta.get_field("id").get_db_prep_value(room_id, db)
    digest = secret_digest(token)
    stamp = [Agent._meta.get_field("token_last_used_at").get_db_prep_save(now, db), digest]
    with transaction.atomic():
        with db.cursor() as cursor:
            # SQLite's IMMEDIATE transaction already holds the one write lock.
            head_locked = db.features.has_select_for_update_of
            seat: tuple[Any, ...] | None
            if head_locked:
                cursor.execute(_admit_sql(), [*stamp, room_param])
                row = cursor.fetchone()
                agent_row, seat = (None, None) if row is None else (row[:4], row[4:])
            else:
                cursor.execute(_token_use_sql(db.vendor), stamp)
                agent_row, seat = cursor.fetchone(), None
            if agent_row is None:
                return Refusal(CloseCode.UNAUTHENTICATED, "Unknown or revoked token.")
            agent_id = _as_uuid(agent_row[0])
            agent_param = agent_pk.get_db_prep_value(agent_id, db)
            if seat is None or seat[0] is None:
                # SQLite; or no seat, or a room whose ledger has no head yet: read unlocked.
                cursor.execute(
                    _seat_sql(db.vendor, False),
                    [policy_agent_key(agent_id), room_param, agent_param],
                )
                seat = cursor.fetchone()
            refused = _seat_refusal(seat)
            if refused is not None:
                # The token's use is still stamped; its join is not counted.
                cursor.execute(_socket_count_sql(db.vendor, "socket_joins", -1), [agent_param])
                return refused
        assert seat is not None  # not refused
        owner_id, acked_seq, _, purpose, charter, state, terms, last_seq = seat[:8]
        head_seq, head_hash, offers_sealed, slip_live, rules = seat[8:]
        try:
            [joined] = ledger_append_many(
                room_id=room_id,
                events=[Join(participant_id=str(agent_id), participant_kind="agent")],
                # The head as read above: the append moves it only if it is still there.
                head_seen=None if head_seq is None else (int(head_seq), str(head_hash)),
            )
        except LedgerAppendError:
            # The append marked this transaction for rollback: nothing of the join is kept.
            return Refusal(CloseCode.TRY_AGAIN, "The room cannot record your join right now.")
    terms_field, tools_field = (
        Room._meta.get_field("terms"),
        Agent._meta.get_field("declared_tools"),
    )
    return Admission(
        # The digest the token statement matched: the socket is the agent's while it still is.
        Participant(
            "agent",
            room_id,
            int(owner_id),
            agent_id,
            int(acked_seq),
            joined.seq,
            token_digest=digest,
        ),
        RoomFacts(
            room_id,
            # Room content, sealed at rest: opened here, checked to be this room's.
            *_room_texts(room_id, purpose, charter),
            str(state),
            terms_field.from_db_value(terms, None, db),  # type: ignore[arg-type]
            int(last_seq),
        ),
        advisor_only=bool(agent_row[1]),
        declared_tools=tools_field.from_db_value(agent_row[2], None, db),  # type: ignore[arg-type]
        offers_sealed=bool(offers_sealed),
        slip_live=bool(slip_live),
        earlier_sockets=int(agent_row[3]),
        policy_rules=policy_rules_parse(rules),
    )


def _seat_refusal(seat: tuple[Any, ...] | None) -> Refusal | None:
    """Why the seat as read (``_seat_sql``'s row, or None: no seat) may not join now: the
    Gatekeeper's rule (``join_verdict``), in words."""
    if seat is None:
        return Refusal(CloseCode.FORBIDDEN, "Not a member of this room.")
    state = seat[5]
    match join_verdict(seat_standing=seat[2], room_state=state):
        case None:
            return None
        case CloseCode.ROOM_NOT_JOINABLE:
            return Refusal(CloseCode.ROOM_NOT_JOINABLE, f"The room is {state}.")
        case refused:
            return Refusal(refused, "Your owner blocked you in this room.")


def _room_texts(room_id: UUID, purpose: Any, charter: Any) -> tuple[str, str]:
    """The room's purpose and charter, sealed at rest: opened, each checked to be this room's
    (one read: the room key's destroyed mark is read once for both)."""
    with one_hop():
        return (
            room_text_open(str(purpose), column=ROOM_PURPOSE, room_id=room_id),
            room_text_open(str(charter), column=ROOM_CHARTER, room_id=room_id),
        )


def tools_listed(admission: Admission, *, now: datetime | None = None) -> list[ToolSpec]:
    """The tools an agent is listed on connect (each one's ``descriptor()`` is its MCP
    definition): tool policy ∩ the tools of its owner's live slip for it ∩ its own hints;
    owners' sockets get none.

    The slip counts only if it verifies now: its signature over the stored bytes, its key's
    owner and revocation, the lookup columns against the signed bytes and its expiry, checked
    on every connect from one written statement (``room_slips_read``; what the bytes say is
    parsed once per process). Being listed clears nothing: every act is decided in full."""
    participant = admission.participant
    if participant.agent_id is None:
        return []
    now = now or timezone.now()
    checked = None
    if admission.slip_live:
        # The tier is not asked here (no use is decided); the default is passed for the record.
        slips = room_slips_read(
            room_id=participant.room_id, tier=tier_narrowest([]).value, lock=False
        )
        checked = slips.slips.get((str(participant.owner_id), participant.agent_id))
    signed = checked.signed if checked is not None and checked.failure is None else None
    now_s = int(now.timestamp())
    slip_tools = (
        frozenset(
            c.resource.removeprefix(TOOL_RESOURCE_PREFIX)
            for c in signed.capabilities
            if c.resource.startswith(TOOL_RESOURCE_PREFIX) and now_s < c.expires_at
        )
        if signed is not None and now_s < signed.expires_at
        else frozenset()
    )
    return tool_specs_for(
        agent_id=participant.agent_id,
        advisor_only=admission.advisor_only,
        declared_tools=admission.declared_tools,
        slip_cleared=slip_tools,
        rules=admission.policy_rules,
    )
