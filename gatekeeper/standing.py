"""Standing: may this reader still be given anything from the room? The rule, in one place
(and, at the end, its siblings: whose words may be recorded, ``may_speak``; and whose Signal
Flare keeps an owner from resuming the room, ``flare_holding_resume``).

A reader is a socket's far end: an agent in its seat, or its owner's browser. Every hop that
hands a socket something from the room (a live message, a whisper, a catch-up read, an
action's outcome, a reveal) asks this rule first, on the room's seats as just read from the
record (``rooms.standing`` reads them, in one statement for many readers, and calls
``standing_verdict``). A reader out of standing is given nothing and its socket is closed with
the code the rule names (``docs/protocol.md``). Nothing here reads or caches anything: the
verdict is a pure function of the rows read for this hop.

An owner's browser is a reader only while the session it was admitted with still signs that
owner in (``session_verdict``): a socket outlives the page load that opened it, so signing
out, a password change, a deactivation or a session ended by the server must end what the
socket is given too, judged from the session's row on every hop like the seats.

An agent's socket, likewise, is a reader only while the token it was admitted with is still
its agent's token: rotating the token ends the sockets opened with the old one as revoking
the agent does (``standing_verdict``'s ``token``; ``may_speak``'s ``token_current``), judged
on every hop from the stored digest (``Agent.token_hash``) read with the seats, so a lost
``agent.revoked`` announcement keeps nothing open. What such a socket asks to do (an act, a
seal, a flare) is decided on the same comparison, made on the agent row its path already
reads (``agent_shut_out``): refused as a revoked agent's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, NamedTuple
from uuid import UUID

from django.conf import settings
from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY, get_user_model
from django.db import connection
from django.utils.crypto import constant_time_compare

from rooms.models import Agent, Flare, RoomMember, RoomState, SeatStanding
from rooms.protocol import CloseCode

# An agent may be given room traffic while the room is open or paused, the states in which
# it may join: a paused room still tells its agents what happens (the owners resuming it).
AGENT_ROOM_STATES: frozenset[str] = frozenset({RoomState.OPEN, RoomState.PAUSED})
# An owner's browser also while the room is a draft: an owner may watch a room being set up.
OWNER_ROOM_STATES: frozenset[str] = frozenset({RoomState.DRAFT, RoomState.OPEN, RoomState.PAUSED})


class SeatFacts(NamedTuple):
    """One seat of the reader's room as read for this hop (a tuple, so rows map straight in)."""

    owner_id: int
    agent_id: UUID | None  # the agent bound to the seat, if any
    standing: str  # ``SeatStanding``
    room_state: str  # ``RoomState`` (the same on every seat of a room)
    agent_revoked: bool  # the bound agent's token was revoked
    # The digest of the bound agent's current token as stored (``Agent.token_hash``; None:
    # not read, or no agent), compared with the one a socket was admitted with.
    agent_token: str | None = None


def agent_token_current(stored: str | None, token: str) -> bool:
    """Whether ``token`` (the digest of the token a socket was admitted with) is still the
    agent's token (``stored``: ``Agent.token_hash`` as just read; None: not read), compared in
    constant time: a rotation issues a new one, and the old one's sockets are out. An empty
    digest (a socket that kept none) never is."""
    if not stored or not token:
        return False
    return constant_time_compare(stored, token)


def seat_token_current(seat: SeatFacts, token: str) -> bool:
    """``agent_token_current`` for the seat's agent, as read with the seats."""
    return agent_token_current(seat.agent_token, token)


def agent_shut_out(*, revoked: bool, stored_token: str | None, token: str | None) -> bool:
    """Whether an agent, as just read (``revoked``; ``stored_token``: its ``token_hash``), is
    out whatever its seat: revoked, or, asked for a socket (``token``: the digest the socket was
    admitted with), that token rotated away since (``agent_token_current``). None: a question
    the server asks itself (an owner in person, a test): revocation alone decides. What an
    agent shut out asks for (an act, a flare, a seal, a word) is refused as a revoked agent's."""
    return revoked or (token is not None and not agent_token_current(stored_token, token))


def standing_verdict(
    *,
    owner_id: int,
    agent_id: UUID | None,
    seats: Sequence[SeatFacts],
    token: str | None = None,
) -> CloseCode | None:
    """None when the reader (``owner_id``'s browser when ``agent_id`` is None, else that agent
    in ``owner_id``'s seat) is in standing among its room's ``seats``; else the close code.

    ``token``: an agent's socket's token digest, as it was admitted with: out
    (UNAUTHENTICATED, as revoked) unless it is still the agent's token (``seat_token_current``;
    a seat read without its agent's token counts as rotated). None: a question asked by the
    server itself, not for a socket (the seat alone decides).

    No seats at all means the room is gone (deleted) or the reader never had one: FORBIDDEN,
    the same as a stranger, so a socket learns nothing of why. A muted or stepped-in agent is
    still in standing: it is still told what is said; only its speech and actions are refused
    (``gatekeeper.decision``, rule ``agent_withdrawn``)."""
    seat = next((s for s in seats if s.owner_id == owner_id), None)
    if agent_id is None:
        if seat is None:
            return CloseCode.FORBIDDEN  # no longer a member (or the room was deleted)
        return None if seat.room_state in OWNER_ROOM_STATES else CloseCode.ROOM_NOT_JOINABLE
    if seat is None or seat.agent_id != agent_id:
        return CloseCode.FORBIDDEN  # the seat is gone or holds another agent now
    # Revocation first: the token itself is dead, whatever its seat (UNAUTHENTICATED), and so
    # is one rotated away since the socket opened; then the owner's block (FORBIDDEN); only
    # then the room's state.
    if seat.agent_revoked or (token is not None and not seat_token_current(seat, token)):
        return CloseCode.UNAUTHENTICATED
    if seat.standing == SeatStanding.BLOCKED:
        return CloseCode.FORBIDDEN
    return None if seat.room_state in AGENT_ROOM_STATES else CloseCode.ROOM_NOT_JOINABLE


class SessionFacts(NamedTuple):
    """An owner browser's session as read for this hop: its row's data (decoded) and expiry,
    and its owner's user row. A session whose row is gone is no ``SessionFacts`` at all."""

    data: Mapping[str, Any]  # the session's data, decoded ({} when it does not verify)
    expires_at: datetime | None  # the row's expiry (None: the session engine enforces its own)
    user_password: str | None  # the owner's user row: its password hash (None: no such row)
    user_active: bool


def session_verdict(
    *, owner_id: int, session: SessionFacts | None, now: datetime
) -> CloseCode | None:
    """None while ``session`` still signs ``owner_id`` in, as Django's ``get_user`` decides it
    for a page (the user the session names, through a listed backend, with the auth hash of
    the user's password as it is now); else UNAUTHENTICATED (4401). Narrower than Django in
    one way, the safe one: an inactive user is out whatever backend signed them in.

    Out: the row gone (signed out, ended by the server, the key cycled) or past its expiry;
    data that does not verify or names another user (a session is never borrowed); the user
    gone or deactivated; the password changed since (the hash no longer matches, nor does any
    of ``SECRET_KEY_FALLBACKS``' hashes)."""
    if session is None or (session.expires_at is not None and session.expires_at <= now):
        return CloseCode.UNAUTHENTICATED
    data = session.data
    if str(data.get(SESSION_KEY)) != str(owner_id):
        return CloseCode.UNAUTHENTICATED
    if data.get(BACKEND_SESSION_KEY) not in settings.AUTHENTICATION_BACKENDS:
        return CloseCode.UNAUTHENTICATED
    if session.user_password is None or not session.user_active:
        return CloseCode.UNAUTHENTICATED
    signed = data.get(HASH_SESSION_KEY)
    if not isinstance(signed, str) or not signed:
        return CloseCode.UNAUTHENTICATED
    # The user model's own hash (a custom model may define its own), from the row as read.
    user = get_user_model()(pk=owner_id, password=session.user_password)
    if constant_time_compare(signed, user.get_session_auth_hash()):
        return None
    if any(constant_time_compare(signed, h) for h in user.get_session_auth_fallback_hash()):
        return None  # Django's page load moves such a session to a new key: the row then goes
    return CloseCode.UNAUTHENTICATED


def join_verdict(*, seat_standing: str, room_state: str) -> CloseCode | None:
    """None when an agent seated with ``seat_standing`` may join its room now (its token and
    its seat already found); else the code its socket is refused with. The room's state
    first (a room it may not be in refuses every seat alike), then its owner's block. Once
    joined, ``standing_verdict`` decides each delivery."""
    if room_state not in AGENT_ROOM_STATES:
        return CloseCode.ROOM_NOT_JOINABLE
    if seat_standing == SeatStanding.BLOCKED:
        return CloseCode.FORBIDDEN
    return None


# --- resuming: whose unanswered Signal Flare holds a paused room --------------------------------


def flare_holding_resume(owner_id: int, unanswered: Sequence[Flare]) -> Flare | None:
    """The Signal Flare that keeps ``owner_id`` from resuming their paused room, or None if
    they may: of the room's flares still unanswered (``unanswered``, oldest first), the oldest
    of the OTHER owner's agent. A flaring agent stays paused until its own owner chooses, and
    answering the flare is what resumes the room; an owner may resume over their own agent's
    flare. Every way a paused room resumes asks this (Resume, approving a fork, answering a
    flare), and so does the room page, to offer Resume or say who the room waits for."""
    return next((flare for flare in unanswered if flare.seat.owner_id != owner_id), None)


# --- speech: whose words may be added to the room's record -----------------------------------


def may_speak(
    *,
    room_state: str,
    seat_standing: str,
    agent_revoked: bool,
    speaking_as: str,
    token_current: bool = True,
) -> bool:
    """Whether the words of a seat's bound agent (``speaking_as`` ACTIVE) or of its owner in
    person (STEPPED_IN, after a Signal Flare) may be recorded now: the room open, the agent
    not revoked, and the seat in that standing. A muted or blocked seat says nothing, and an
    agent whose owner stepped in is silent. An agent's socket speaks only with the token it
    was admitted with still its agent's (``token_current``: a rotated one is as revoked).
    ``may_speak_sql`` is this rule as a statement's condition, checked where each message
    takes its number; tests/gatekeeper/test_speaking_rule.py checks the two agree on every
    combination."""
    return (
        room_state == RoomState.OPEN
        and not agent_revoked
        and token_current
        and seat_standing == speaking_as
    )


def may_speak_sql(room: str, agent_id: str, token: str | None = None) -> str:
    """``may_speak`` as SQL, for the statement that takes a message's number: the room
    ``room`` (a table or its alias) in the state of the next parameter (the caller binds
    ``RoomState.OPEN``), and the agent ``agent_id`` (a parameter or a column) bound to it,
    not revoked, its seat in the standing of the parameter after (``speaking_as``), and,
    given ``token`` (a parameter or a column: the digest of the token the speaking socket
    was admitted with, bound after the standing), that token still the agent's. Only our own
    names are interpolated; the state, the standing and the digest are bound parameters."""
    member, agent = (connection.ops.quote_name(m._meta.db_table) for m in (RoomMember, Agent))
    current = "" if token is None else f" AND a.token_hash = {token}"
    return (
        f"{room}.state = %s AND EXISTS ("  # noqa: S608
        f"SELECT 1 FROM {member} m JOIN {agent} a ON a.id = m.agent_id "
        f"WHERE m.room_id = {room}.id AND m.agent_id = {agent_id} AND m.standing = %s "
        f"AND a.revoked_at IS NULL{current})"
    )
