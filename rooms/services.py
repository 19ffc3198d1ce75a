"""Writes for agents, rooms, invites and the transcript.

Views, API endpoints and consumers call these and nothing else to change state. Each function
validates its input, changes the records in one transaction, and raises a ``RoomError`` with a
clear message (changing nothing) when the request cannot be honoured.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from django.conf import settings
from django.contrib.auth.models import User
from django.db import DatabaseError, IntegrityError, connection, transaction
from django.db.models import Q
from django.utils import timezone

from dining import TermsInvalid, terms_parse
from gatekeeper.errors import ToolPolicyError
from gatekeeper.owner_limits import owner_limit_check
from gatekeeper.policy import tool_hints_validate
from gatekeeper.standing import flare_holding_resume, may_speak_sql
from ledger.events import InjectionSuspected, Join, Leave, RoomClosed, RoomPaused, RoomResumed
from ledger.services import LedgerAppendError, ledger_append, ledger_append_many
from ledger.signing import ledger_sign_head
from rooms import handshake, realtime, selectors
from rooms.bearer import AGENT_TOKEN_PREFIX, INVITE_TOKEN_PREFIX, secret_digest, secret_issue
from rooms.control_tokens import STRIP_CATEGORY_WORDS
from rooms.errors import Invalid, InvalidState, InviteUnusable, NotFound
from rooms.models import (
    WHISPER_MAX_CHARS,
    Agent,
    MemberRole,
    Message,
    Room,
    RoomInvite,
    RoomMember,
    RoomState,
    SeatStanding,
    Whisper,
)
from rooms.sealing import MESSAGE_TEXT, RoomSealer
from rooms.untrusted import FencedText, fence
from synapsia.db.statements import rows_fetched, rows_select, statement_cursor

# Which state changes an owner may ask for, and from where.
_TRANSITIONS: dict[RoomState, frozenset[RoomState]] = {
    RoomState.OPEN: frozenset({RoomState.DRAFT, RoomState.PAUSED}),
    RoomState.PAUSED: frozenset({RoomState.OPEN}),
    RoomState.CLOSED: frozenset({RoomState.DRAFT, RoomState.OPEN, RoomState.PAUSED}),
}


@dataclass(frozen=True)
class IssuedAgent:
    agent: Agent
    token: str  # shown once


@dataclass(frozen=True)
class IssuedInvite:
    invite: RoomInvite
    token: str  # shown once


@dataclass(frozen=True)
class SaidMessage:
    seq: int
    sender_agent_id: UUID
    text: str
    sent_at: datetime
    duplicate: bool
    # Suspicion rule ids the fence raised (stored on the message; never its content).
    flags: tuple[str, ...] = ()
    # The text as the peer agent receives it: fenced untrusted data (None for a duplicate,
    # which is not relayed again).
    fenced: FencedText | None = None


def _clean_text(value: str, *, field: str, max_chars: int, required: bool = True) -> str:
    value = value.strip()
    if required and not value:
        raise Invalid(f"{field} must not be empty.")
    if len(value) > max_chars:
        raise Invalid(f"{field} is limited to {max_chars} characters (got {len(value)}).")
    if "\x00" in value:
        # PostgreSQL cannot store U+0000; refuse it in both profiles alike.
        raise Invalid(f"{field} must not contain U+0000.")
    return value


def _room_words_checked(value: str, *, field: str = "The purpose") -> str:
    """``value`` if the fence would strip nothing from it, else ``Invalid`` naming what.

    A room's purpose and charter reach both agents as the room's own words, outside every
    fence (``docs/protocol.md``: trusted fields), though one owner wrote them; the other
    owner reads them on the invitation before taking the seat. So they may hold nothing that
    peer text is stripped of: a control token, a line imitating the fence, a speaker label
    claiming a role, hidden characters. Refused, not stripped: the owner sees what to change
    instead of a room whose rules differ from what they typed."""
    stripped = fence(value, source="peer", judge=False).stripped
    found = dict.fromkeys(STRIP_CATEGORY_WORDS[s.category] for s in stripped if s.count)
    if found:
        raise Invalid(
            f"{field} holds {'; '.join(found)}. Agents could take that for an instruction "
            "from someone else: remove it and try again."
        )
    return value


def _owned_agent(owner: User, agent_id: UUID) -> Agent:
    try:
        return Agent.objects.get(id=agent_id, owner=owner)
    except Agent.DoesNotExist:
        raise NotFound("No such agent.") from None


def _seat(owner: User, room_id: UUID, *, lock: bool = False) -> RoomMember:
    members = RoomMember.objects.select_related("room")
    if lock:
        members = members.select_for_update()
    try:
        return members.get(room_id=room_id, owner=owner)
    except RoomMember.DoesNotExist:
        raise NotFound("No such room.") from None


# --- agents -------------------------------------------------------------------------------


@transaction.atomic
def agent_register(
    *,
    owner: User,
    name: str,
    advisor_only: bool = False,
    declared_tools: list[str] | None = None,
) -> IssuedAgent:
    """Register an agent for ``owner`` and issue its API token (returned once).

    ``declared_tools`` are the agent's own tool hints (they only narrow); an advisor-only
    agent may declare read-only tools only. An owner has at most their limit of agents not
    revoked (``gatekeeper.owner_limits``).
    """
    name = _clean_text(name, field="Agent name", max_chars=80)
    try:
        tool_hints_validate(advisor_only=advisor_only, declared_tools=declared_tools)
    except ToolPolicyError as refused:
        raise Invalid(refused.message) from None
    owner_limit_check(owner, "agents", Agent.objects.filter(owner=owner, revoked_at__isnull=True))
    issued = secret_issue(AGENT_TOKEN_PREFIX)
    agent = Agent.objects.create(
        owner=owner,
        name=name,
        advisor_only=advisor_only,
        declared_tools=declared_tools,
        token_hash=issued.digest,
        token_prefix=issued.display_prefix,
        token_issued_at=timezone.now(),
    )
    return IssuedAgent(agent=agent, token=issued.value)


def _seated_in(agent_id: UUID) -> list[UUID]:
    """The rooms where the agent holds a seat: where its sockets may be."""
    return list(
        RoomMember.objects.filter(agent_id=agent_id).values_list("room_id", flat=True).distinct()
    )


@transaction.atomic
def agent_rotate_token(*, owner: User, agent_id: UUID) -> IssuedAgent:
    """Issue a new token; the old one stops working at once (open sockets are closed)."""
    agent = _owned_agent(owner, agent_id)
    if agent.revoked_at is not None:
        raise InvalidState("This agent is revoked; register a new one.")
    issued = secret_issue(AGENT_TOKEN_PREFIX)
    agent.token_hash = issued.digest
    agent.token_prefix = issued.display_prefix
    agent.token_issued_at = timezone.now()
    agent.token_last_used_at = None
    agent.save(
        update_fields=["token_hash", "token_prefix", "token_issued_at", "token_last_used_at"]
    )
    realtime.announce_agent_revoked(agent.id, room_ids=_seated_in(agent.id))
    return IssuedAgent(agent=agent, token=issued.value)


@transaction.atomic
def agent_revoke(*, owner: User, agent_id: UUID) -> Agent:
    """Revoke an agent for good: its token is refused and its open sockets are closed."""
    agent = _owned_agent(owner, agent_id)
    if agent.revoked_at is None:
        agent.revoked_at = timezone.now()
        agent.save(update_fields=["revoked_at"])
        realtime.announce_agent_revoked(agent.id, room_ids=_seated_in(agent.id))
    return agent


# --- rooms --------------------------------------------------------------------------------


def room_terms_check(terms: Mapping[str, Any] | None) -> dict[str, Any]:
    """A room's dinner terms in their JSON form: the given fields over the defaults of their
    catalogue (the deployment's default catalogue if none is named). Raises ``Invalid`` with
    each problem in words."""
    try:
        return terms_parse(terms or {}).as_json()
    except TermsInvalid as invalid:
        raise Invalid(" ".join(invalid.problems)) from None


@transaction.atomic
def room_create(
    *,
    owner: User,
    purpose: str,
    charter: str,
    terms: Mapping[str, Any] | None = None,
    dinner: bool = True,
) -> Room:
    """Create a draft room with ``owner`` in the first seat.

    A room is a dinner unless ``dinner=False``: its terms are ``terms`` over the defaults
    (``room_terms_check``); a room that is not a dinner has none (and ``terms`` must be None).
    An owner has created at most their limit of rooms not closed (``gatekeeper.owner_limits``).
    """
    if not dinner and terms is not None:
        raise Invalid("Only a dinner room has dinner terms.")
    checked = room_terms_check(terms) if dinner else None
    owner_limit_check(
        owner, "rooms", Room.objects.filter(created_by=owner).exclude(state=RoomState.CLOSED)
    )
    room = Room.objects.create(
        created_by=owner,
        terms=checked,
        purpose=_room_words_checked(_clean_text(purpose, field="Purpose", max_chars=200)),
        charter=_room_words_checked(
            _clean_text(
                charter,
                field="Charter",
                max_chars=settings.SYNAPSIA["MAX_CHARTER_CHARS"],
                required=False,
            ),
            field="The charter",
        ),
    )
    RoomMember.objects.create(room=room, owner=owner, role=MemberRole.CREATOR)
    ledger_append(
        room_id=room.id, event=Join(participant_id=str(owner.pk), participant_kind="owner")
    )
    return room


@transaction.atomic
def invite_create(*, owner: User, room_id: UUID) -> IssuedInvite:
    """Issue a single-use, expiring invitation to the room's second seat. An owner has at
    most their limit of invitations waiting to be used (``gatekeeper.owner_limits``)."""
    seat = _seat(owner, room_id, lock=True)
    room = seat.room
    if room.state == RoomState.CLOSED:
        raise InvalidState("This room is closed.")
    if room.members.count() >= 2:
        raise InvalidState("Both seats in this room are taken.")
    now = timezone.now()
    waiting = RoomInvite.objects.filter(created_by=owner, used_at__isnull=True, expires_at__gt=now)
    owner_limit_check(owner, "invites", waiting)
    issued = secret_issue(INVITE_TOKEN_PREFIX)
    invite = RoomInvite.objects.create(
        room=room,
        token_hash=issued.digest,
        created_by=owner,
        expires_at=now + timedelta(hours=settings.SYNAPSIA["INVITE_TTL_HOURS"]),
    )
    return IssuedInvite(invite=invite, token=issued.value)


@transaction.atomic
def invite_accept(*, owner: User, token: str) -> RoomMember:
    """Take the second seat of the invite's room. The invite is spent even if this fails late."""
    try:
        invite = (
            RoomInvite.objects.select_for_update()
            .select_related("room")
            .get(token_hash=secret_digest(token))
        )
    except RoomInvite.DoesNotExist:
        raise InviteUnusable("This invitation is not valid.") from None
    if invite.used_at is not None:
        raise InviteUnusable("This invitation has already been used.")
    if invite.expires_at <= timezone.now():
        raise InviteUnusable("This invitation has expired; ask for a new one.")
    room = Room.objects.select_for_update().get(id=invite.room_id)
    if room.state == RoomState.CLOSED:
        raise InviteUnusable("This room is closed.")
    if room.members.filter(owner=owner).exists():
        raise InvalidState("You already have a seat in this room.")
    if room.members.count() >= 2:
        raise InviteUnusable("Both seats in this room are taken.")
    invite.used_at = timezone.now()
    invite.used_by = owner
    invite.save(update_fields=["used_at", "used_by"])
    ledger_append(
        room_id=room.id, event=Join(participant_id=str(owner.pk), participant_kind="owner")
    )
    return RoomMember.objects.create(room=room, owner=owner, role=MemberRole.INVITEE)


@transaction.atomic
def room_bind_agent(*, owner: User, room_id: UUID, agent_id: UUID) -> RoomMember:
    """Bind one of ``owner``'s agents to their seat. Only while the room is a draft."""
    seat = _seat(owner, room_id, lock=True)
    if seat.room.state != RoomState.DRAFT:
        raise InvalidState("Agents can only be bound while the room is a draft.")
    agent = _owned_agent(owner, agent_id)
    if agent.revoked_at is not None:
        raise InvalidState("That agent is revoked.")
    seat.agent = agent
    seat.save(update_fields=["agent"])
    return seat


def resume_refused_over_a_flare(owner: User, room: Room, *, then: str = "") -> None:
    """Raise ``InvalidState`` (in words, with ``then`` as the owner's next step) if the
    Gatekeeper's rule (``flare_holding_resume``) keeps ``owner`` from resuming ``room`` now:
    the other owner's agent's Signal Flare they have not answered."""
    holding = flare_holding_resume(owner.pk, selectors.flares_unanswered(room_id=room.id))
    if holding is not None:
        other = holding.seat.owner
        name = selectors.owner_name(other)
        raise InvalidState(
            f"{name}'s agent raised a Signal Flare that {name} has not answered yet. The room "
            f"resumes when {name} answers it; until then only {name} can resume it.{then}"
        )


# Each state, and the change into it, in the owner's words (for refusals on the room page).
_TRANSITION_VERBS: dict[RoomState, str] = {
    RoomState.DRAFT: "made a draft again",
    RoomState.OPEN: "opened",
    RoomState.PAUSED: "paused",
    RoomState.CLOSED: "closed",
}
_STATE_WORDS: dict[RoomState, str] = {
    RoomState.DRAFT: "a draft",
    RoomState.OPEN: "open",
    RoomState.PAUSED: "paused",
    RoomState.CLOSED: "closed",
}


def _transition_refused_words(current: RoomState, to: RoomState) -> str:
    """Why a room in ``current`` cannot become ``to``, and what to do: usually the page was
    out of date (the other owner, or another tab, moved the room first)."""
    reload = "Reload the page to see where it stands."
    if current == to:
        return f"The room is already {_STATE_WORDS[current]}. {reload}"
    if current == RoomState.DRAFT and to == RoomState.PAUSED:
        return "The room has not opened yet, so it cannot be paused. Open it first."
    already = "already " if current == RoomState.CLOSED else ""
    return (
        f"The room is {already}{_STATE_WORDS[current]}, so it cannot be "
        f"{_TRANSITION_VERBS[to]}. {reload}"
    )


@transaction.atomic
def room_transition(*, owner: User, room_id: UUID, to: RoomState) -> Room:
    """Open, pause, resume or close a room on behalf of one of its owners."""
    seat = _seat(owner, room_id)
    room = Room.objects.select_for_update().get(id=seat.room_id)
    allowed_from = _TRANSITIONS.get(to, frozenset())
    if room.state not in allowed_from:
        raise InvalidState(_transition_refused_words(RoomState(room.state), to))
    if to == RoomState.OPEN and room.state == RoomState.DRAFT:
        seats = list(room.members.select_related("agent"))
        if len(seats) < 2:
            raise InvalidState("Invite the second owner before opening the room.")
        if any(s.agent is None or s.agent.revoked_at is not None for s in seats):
            raise InvalidState("Each owner must bind an active agent before the room opens.")
    if to == RoomState.OPEN and room.state == RoomState.PAUSED:
        resume_refused_over_a_flare(owner, room)
    by = str(owner.pk)
    if to == RoomState.PAUSED:
        ledger_append(room_id=room.id, event=RoomPaused(by=by, reason_rule="owner_request"))
    elif to == RoomState.CLOSED:
        ledger_append(room_id=room.id, event=RoomClosed(by=by))
    elif room.state == RoomState.PAUSED:
        ledger_append(room_id=room.id, event=RoomResumed(by=by))
    room.state = to
    room.state_changed_at = timezone.now()
    room.save(update_fields=["state", "state_changed_at"])
    if to in (RoomState.PAUSED, RoomState.CLOSED):
        # Both owners' browsers compare later histories against this signed head.
        ledger_sign_head(room_id=room.id)
    realtime.announce_room_state(room.id, room.state)
    return room


@transaction.atomic
def agent_leave(*, room_id: UUID, agent_id: UUID) -> None:
    """Record that an agent's socket left the room, and count it among the agent's sockets'
    leaves (``handshake.socket_leave_count``, first: see there why).

    Written statements, as the join's: every socket leaves once, and the same statements
    compiled by the ORM cost a leave nearly twice the CPU on SQLite (docs/benchmarks-log.md)."""
    handshake.socket_leave_count(agent_id)
    ledger_append_many(
        room_id=room_id, events=[Leave(participant_id=str(agent_id), participant_kind="agent")]
    )


# --- transcript ---------------------------------------------------------------------------


class SpeakRefused(Exception):
    """Why an agent's message could not be recorded (mapped to an error frame or close code)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason  # "room_not_open" | "not_member" | "revoked" | "ledger_unavailable"


@functools.cache
def _next_seq_sql(vendor: str, token: bool = False) -> str:
    """``_next_seq``'s statement; ``token``: the speaking socket's token digest is its last
    parameter (``may_speak_sql``'s ``token``)."""
    room = connection.ops.quote_name(Room._meta.db_table)
    # Only our own table names are interpolated; every value is a bound parameter.
    return (
        f"UPDATE {room} SET last_seq = last_seq + 1 WHERE id = %s AND "  # noqa: S608
        f"{may_speak_sql(room, '%s', '%s' if token else None)} RETURNING last_seq"
    )


def _next_seq(
    room_id: UUID, agent_id: UUID, standing: SeatStanding, token: str | None = None
) -> int | None:
    """Take the room's next sequence number if ``agent_id``'s seat may speak there right now.

    One statement: it locks the room row (the UPDATE), checks the room is open, the agent is
    bound to it and not revoked, the seat has the given standing (active for the agent,
    stepped-in for its owner speaking in person), ``token`` (the digest of the token an agent's
    socket was admitted with, if given) still the agent's, and bumps ``last_seq``. None if not.
    """
    db = transaction.get_connection()  # the connection itself (see _MessageRows)
    params = [
        Room._meta.pk.get_db_prep_value(room_id, db),
        RoomState.OPEN.value,
        Agent._meta.pk.get_db_prep_value(agent_id, db),
        standing.value,
    ]
    if token is not None:
        params.append(token)
    with statement_cursor() as cursor:
        cursor.execute(_next_seq_sql(db.vendor, token is not None), params)
        row = cursor.fetchone()
    return int(row[0]) if row else None


@functools.cache
def _hop_seqs_sql(vendor: str, pairs: int, tokens: bool = False) -> str:
    """``_next_seq``'s check for each of a hop's ``(index, room, agent)`` pairs in one
    statement: ``[index, the room's last_seq]`` for each pair whose seat may speak now (the
    room open, the agent bound to it with an active seat and not revoked). ``tokens``: each
    pair carries a fourth value, the digest of the token its socket was admitted with, which
    must still be the agent's (``may_speak_sql``'s ``token``).

    SQLite: the pairs as values, the answer one row of JSON (``rows_select``: the driver
    gives up the GIL for every row it steps). PostgreSQL: the pairs as three arrays, so the
    text and its number of values are the same for any hop (psycopg keeps its parse of a
    statement of at most 50 values), and the rooms locked in the order of their ids (two
    processes' hops wait for each other instead of deadlocking): each number read is the
    room's until the hop commits. Only our own table names are interpolated; every value is
    a bound parameter."""
    room = connection.ops.quote_name(Room._meta.db_table)
    speaks = may_speak_sql("r", "v.column3", "v.column4" if tokens else None)
    if vendor == "postgresql":
        arrays = "%b::bigint[], %b::uuid[], %b::uuid[]" + (", %b::text[]" if tokens else "")
        columns = "column1, column2, column3" + (", column4" if tokens else "")
        pairs_from = f"unnest({arrays}) AS v({columns})"
        return (
            f"SELECT v.column1, r.last_seq FROM {pairs_from} "  # noqa: S608
            f"JOIN {room} r ON r.id = v.column2 WHERE {speaks} "
            "ORDER BY r.id FOR UPDATE OF r"
        )
    values = ", ".join(["(%s, %s, %s, %s)" if tokens else "(%s, %s, %s)"] * pairs)
    return rows_select(
        vendor,
        ("v.column1", "r.last_seq"),
        f"FROM (VALUES {values}) v JOIN {room} r ON r.id = v.column2 WHERE {speaks}",
        ordered=False,
    )


@functools.cache
def _hop_seqs_take_sql(vendor: str, rooms: int) -> str:
    """Each room's ``last_seq`` moved from the value read to the last number taken (on
    PostgreSQL the rooms as arrays, as ``_hop_seqs_sql``'s pairs are)."""
    room = connection.ops.quote_name(Room._meta.db_table)
    if vendor == "postgresql":
        moves = "unnest(%b::uuid[], %b::bigint[], %b::bigint[]) AS v(column1, column2, column3)"
    else:
        moves = f"(VALUES {', '.join(['(%s, %s, %s)'] * rooms)}) v"
    return (
        f"UPDATE {room} SET last_seq = v.column3 FROM {moves} "  # noqa: S608
        f"WHERE {room}.id = v.column1 AND {room}.last_seq = v.column2"
    )


def _hop_checks(
    prepared: _MessageRows,
    wanted: list[tuple[int, UUID, UUID, int]],
    tokens: Sequence[str | None] | None = None,
) -> dict[int, int]:
    """The first of a hop's two numbering statements (``_hop_numbers`` is the second):
    ``wanted`` as ``(run index, room, agent, messages)``, the answer each run's room's number
    now, for each run whose seat may speak now (a run refused is absent). ``tokens`` (by run
    index): the token digest each run's socket was admitted with, still its agent's.

    What ``_next_seq`` does once per message, in two statements for the whole hop: the
    checks of every run read in this one, every room's number moved in the other. Both run
    in the hop's transaction, and nothing can move a room between them: on SQLite the
    transaction holds the database's write lock from its ``BEGIN IMMEDIATE``; on PostgreSQL
    this statement locked the rooms it read. So a check read here holds when the numbers are
    taken, as when one statement did both."""
    vendor = prepared.db.vendor
    params: list[Any] = []
    if vendor == "postgresql":
        params += [
            [index for index, _, _, _ in wanted],
            [prepared.room(room_id) for _, room_id, _, _ in wanted],
            [prepared.sender(agent_id) for _, _, agent_id, _ in wanted],
        ]
        if tokens is not None:
            params.append([_run_token(tokens, index) for index, _, _, _ in wanted])
    else:
        for index, room_id, agent_id, _ in wanted:
            params += [index, prepared.room(room_id), prepared.sender(agent_id)]
            if tokens is not None:
                params.append(_run_token(tokens, index))
    params += [RoomState.OPEN.value, SeatStanding.ACTIVE.value]
    with statement_cursor() as cursor:
        cursor.execute(_hop_seqs_sql(vendor, len(wanted), tokens is not None), params)
        return {int(i): int(seq) for i, seq in rows_fetched(cursor, vendor)}


def _run_token(tokens: Sequence[str | None], index: int) -> str:
    """Run ``index``'s token digest where the hop checks tokens: a run without one is given
    one no token has (it fails closed: refused, as a rotated token's)."""
    return tokens[index] or ""


def _hop_numbers(
    prepared: _MessageRows, wanted: list[tuple[int, UUID, UUID, int]], last: Mapping[int, int]
) -> dict[int, int]:
    """The first number of each of ``wanted``'s runs that ``_hop_checks`` found may speak
    (``last``: its answer), in the order they are taken: its messages take that and the next
    ones. Each room's number is moved from the value read, and the hop fails if any room had
    moved (it cannot: see ``_hop_checks``)."""
    read: dict[UUID, int] = {}  # room -> its number as read
    moved: dict[UUID, int] = {}  # room -> the last number taken
    firsts: dict[int, int] = {}
    for index, room_id, _, count in wanted:
        if index not in last:
            continue  # refused now: the run goes the one-by-one way
        read.setdefault(room_id, last[index])
        first = moved.get(room_id, read[room_id]) + 1
        firsts[index], moved[room_id] = first, first + count - 1
    if moved:
        vendor = prepared.db.vendor
        rows = [(prepared.room(room_id), read[room_id], taken) for room_id, taken in moved.items()]
        params: list[Any]
        if vendor == "postgresql":  # a column's values an array
            params = [list(column) for column in zip(*rows, strict=True)]
        else:
            params = [value for row in rows for value in row]
        with statement_cursor() as cursor:
            cursor.execute(_hop_seqs_take_sql(vendor, len(moved)), params)
            if cursor.rowcount != len(moved):
                raise DatabaseError("a room's numbers moved inside the hop's transaction")
    return firsts


@functools.cache
def _acks_taken_sql(tokens: bool = False) -> str:
    """PostgreSQL: ``_ack_sql`` for a hop's riding acks in one statement, the seats as
    arrays (one text for any hop): each seat's ack moved (never backwards) where the room's
    record reaches it, the seats locked in the order of their room and agent, as
    ``riding_acks_refused`` takes them one by one (two processes' hops wait instead of
    deadlocking). The answer: the seats whose ack was taken. ``tokens``: a fourth array, each
    seat's socket's token digest, which must still be its agent's (``_ack_token_sql``)."""
    member, room = (connection.ops.quote_name(m._meta.db_table) for m in (RoomMember, Room))
    arrays, columns, current = "%b::uuid[], %b::uuid[], %b::bigint[]", "room, agent, ack", ""
    if tokens:
        arrays, columns = f"{arrays}, %b::text[]", f"{columns}, token"
        current = f" WHERE {_ack_token_sql('m', 'v.token')}"
    return (
        "WITH wanted AS (SELECT m.id, v.ack "  # noqa: S608
        f"FROM unnest({arrays}) AS v({columns}) "
        f"JOIN {member} m ON m.room_id = v.room AND m.agent_id = v.agent "
        f"JOIN {room} r ON r.id = v.room AND r.last_seq >= v.ack{current} "
        "ORDER BY m.room_id, m.agent_id FOR UPDATE OF m) "
        f"UPDATE {member} SET acked_seq = GREATEST({member}.acked_seq, wanted.ack) "
        f"FROM wanted WHERE {member}.id = wanted.id "
        f"RETURNING {member}.room_id, {member}.agent_id"
    )


def _acks_taken_refused(
    prepared: _MessageRows,
    runs: list[tuple[UUID, UUID, list[tuple[str, str]]]],
    acks: list[int | None],
    tokens: Sequence[str | None] | None = None,
) -> set[int]:
    """PostgreSQL: ``riding_acks_refused`` for a hop, in one statement (``_acks_taken_sql``);
    one by one when two runs ride acks for one seat (the statement would move its seat once).
    ``tokens``: as ``riding_acks_refused``'s."""
    riding = [(index, ack) for index, ack in enumerate(acks) if ack is not None]
    seats = [(runs[index][0], runs[index][1]) for index, _ in riding]
    if len(set(seats)) != len(seats):
        return riding_acks_refused(runs, acks, tokens)
    params: list[Any] = [
        [prepared.room(room_id) for room_id, _ in seats],
        [prepared.sender(agent_id) for _, agent_id in seats],
        [ack for _, ack in riding],
    ]
    if tokens is not None:
        params.append([_run_token(tokens, index) for index, _ in riding])
    with statement_cursor() as cursor:
        cursor.execute(_acks_taken_sql(tokens is not None), params)
        taken = set(map(tuple, cursor.fetchall()))  # PostgreSQL's driver gives UUIDs
    return {index for (index, _), seat in zip(riding, seats, strict=True) if seat not in taken}


_MESSAGE_COLUMNS = ("room", "seq", "sender", "client_id", "text", "flags", "author", "created_at")


def _message_columns() -> str:
    return ", ".join(
        connection.ops.quote_name(Message._meta.get_field(name).column)  # type: ignore[union-attr,arg-type]
        for name in _MESSAGE_COLUMNS
    )


@functools.cache
def _insert_messages_sql(vendor: str, rows: int) -> str:
    """The INSERT of a hop's messages: on SQLite a row of values each; on PostgreSQL the
    columns that differ from row to row as arrays (room, number, sender, frame id, sealed
    text; the same text and five values for any hop, as ``_hop_seqs_sql``) and the
    columns a hop's rows share (flags, author, time) once each."""
    table = connection.ops.quote_name(Message._meta.db_table)
    into = f"INSERT INTO {table} ({_message_columns()}) "
    if vendor == "postgresql":
        return (
            f"{into}SELECT v.room, v.seq, v.sender, v.client_id, v.text, %s, %s, %s "  # noqa: S608
            "FROM unnest(%b::uuid[], %b::bigint[], %b::uuid[], %b::text[], %b::text[]) "
            "AS v(room, seq, sender, client_id, text)"
        )
    row = "(" + ", ".join(["%s"] * len(_MESSAGE_COLUMNS)) + ")"
    # Only our own table and column names are interpolated; every value is a bound parameter.
    return f"{into}VALUES " + ", ".join([row] * rows)


@functools.cache
def _say_statement_sql(vendor: str, acked: bool = False, token: bool = False) -> str:
    """PostgreSQL: ``_next_seq``'s check-and-number and the message's INSERT as one
    statement (a data-modifying CTE): no row is stored unless the check passed, and the
    number is the one the check took. SQLite has no such CTE; it runs the two.

    ``acked``: the ack riding the message's frame first, as ``messages_ack``'s statement
    (parameters before the say's): the message is taken only if the ack was, and the row
    returned says both (the acks it moved, 0 or 1; the number taken, or NULL). ``token``:
    the speaking socket's token digest is checked too (``_next_seq_sql``), and by the ack
    riding it (``_ack_sql``'s ``token``)."""
    table = connection.ops.quote_name(Message._meta.db_table)
    seq = connection.ops.quote_name(Message._meta.get_field("seq").column)  # type: ignore[arg-type]
    returning = " AND EXISTS (SELECT 1 FROM acked) RETURNING id, last_seq" if acked else None
    taken = _next_seq_sql(vendor, token).replace(
        " RETURNING last_seq", returning or " RETURNING id, last_seq"
    )
    # Only our own table and column names are interpolated; every value is a bound parameter.
    insert = (
        f"INSERT INTO {table} ({_message_columns()}) "  # noqa: S608
        "SELECT taken.id, taken.last_seq, %s, %s, %s, %s, %s, %s FROM taken "
        f"RETURNING {seq}"
    )
    if not acked:
        return f"WITH taken AS ({taken}) {insert}"
    return (
        f"WITH acked AS ({_ack_sql(vendor, token)} RETURNING 1), taken AS ({taken}), "  # noqa: S608
        f"stored AS ({insert}) SELECT (SELECT COUNT(*) FROM acked), (SELECT {seq} FROM stored)"
    )


class _MessageRows:
    """Prepares the message rows of one hop: each text sealed under its room's data key
    (one key look-up per room), the constant columns prepared once; the constants once per
    process would be the ORM's ``bulk_create`` without its per-run compilation (which cost
    more than the insert on the say path)."""

    def __init__(self, created_at: datetime, rooms: Collection[UUID]) -> None:
        field = Message._meta.get_field
        # The connection itself, looked up once (``transaction.get_connection``):
        # ``django.db.connection`` is a proxy that looks it up again (asgiref's ``Local``,
        # ~1 us) on every attribute read, and a field's prep reads ``features`` per value.
        self.db = db = transaction.get_connection()
        self._room, self._sender = field("room"), field("sender")
        self._sealer = RoomSealer(rooms)
        # The values every row of the hop has alike: flags, author, time.
        self.shared: tuple[Any, ...] = (
            field("flags").get_db_prep_save([], db),  # type: ignore[union-attr]
            "agent",
            field("created_at").get_db_prep_save(created_at, db),  # type: ignore[union-attr]
        )
        self._prepared: dict[UUID, Any] = {}

    def _id(self, value: UUID, field: Any) -> Any:
        if value not in self._prepared:
            self._prepared[value] = field.get_db_prep_save(value, self.db)
        return self._prepared[value]

    def after_seq(self, room_id: UUID, agent_id: UUID, client_id: str, text: str) -> list[Any]:
        """The values after ``(room, seq)``: sender, client id, sealed text, then ``shared``."""
        return [
            self._id(agent_id, self._sender),
            client_id,
            self.sealed(room_id, text),
            *self.shared,
        ]

    def sealed(self, room_id: UUID, text: str) -> str:
        return self._sealer.text(room_id=room_id, column=MESSAGE_TEXT, text=text)

    def room(self, room_id: UUID) -> Any:
        return self._id(room_id, self._room)

    def sender(self, agent_id: UUID) -> Any:
        return self._id(agent_id, self._sender)


def _insert_messages(prepared: _MessageRows, rows: list[tuple[UUID, UUID, int, str, str]]) -> None:
    """Insert unflagged agents' ``(room_id, agent_id, seq, client_id, text)`` rows in one
    statement (any rooms)."""
    params: list[Any] = []
    vendor = prepared.db.vendor
    if vendor == "postgresql":  # the shared values once, then a column's values an array
        params = list(prepared.shared)
        params += [
            [prepared.room(room_id) for room_id, _, _, _, _ in rows],
            [seq for _, _, seq, _, _ in rows],
            [prepared.sender(agent_id) for _, agent_id, _, _, _ in rows],
            [client_id for _, _, _, client_id, _ in rows],
            [prepared.sealed(room_id, text) for room_id, _, _, _, text in rows],
        ]
    else:
        for room_id, agent_id, seq, client_id, text in rows:
            params += [
                prepared.room(room_id),
                seq,
                *prepared.after_seq(room_id, agent_id, client_id, text),
            ]
    with statement_cursor() as cursor:
        cursor.execute(_insert_messages_sql(vendor, len(rows)), params)


def _say_statement(
    prepared: _MessageRows,
    room_id: UUID,
    agent_id: UUID,
    client_id: str,
    text: str,
    ack: int | None = None,
    token: str | None = None,
) -> tuple[int | None, bool]:
    """PostgreSQL: check, number and store one message in one statement
    (``_say_statement_sql``), with the ack riding its frame when ``ack`` is given, and the
    speaking socket's token digest checked when ``token`` is. The number taken, or None when
    a check refused it (nothing stored); and whether the ack was taken (True when there is
    none; refused, nothing is stored)."""
    room, agent = prepared.room(room_id), prepared.sender(agent_id)
    params = [room, RoomState.OPEN.value, agent, SeatStanding.ACTIVE.value]
    if token is not None:
        params.append(token)
    params += prepared.after_seq(room_id, agent_id, client_id, text)
    if ack is not None:
        # messages_ack's parameters first (the token, given, checks the ack too)
        params = [ack, room, agent, ack, *([] if token is None else [token]), *params]
    with statement_cursor() as cursor:
        cursor.execute(
            _say_statement_sql(prepared.db.vendor, ack is not None, token is not None), params
        )
        row = cursor.fetchone()
    if ack is not None:
        acked, seq = row
        return (None if seq is None else int(seq)), bool(acked)
    return (int(row[0]) if row else None), True


def _earlier(room_id: UUID, agent_id: UUID, client_id: str) -> SaidMessage | None:
    earlier = (
        Message.objects.filter(room_id=room_id, sender_id=agent_id, client_id=client_id)
        .only("room_id", "seq", "text", "created_at", "flags")
        .first()
    )
    if earlier is None:
        return None
    return SaidMessage(
        earlier.seq,
        agent_id,
        earlier.text,
        earlier.created_at,
        duplicate=True,
        flags=tuple(earlier.flags),
    )


def message_say(
    *,
    room_id: UUID,
    agent_id: UUID,
    client_id: str,
    text: str,
    author: str = "agent",
    token: str | None = None,
) -> SaidMessage:
    """Record what an agent said, with the next gapless sequence number of the room.

    Membership, revocation and room state are re-read on every message (nothing about the
    sender is trusted from when it connected), in the same statement that takes the number;
    so is ``token``, given for an agent's socket: the digest of the token it was admitted
    with must still be the agent's (a rotated token is refused as ``revoked``).
    A resent frame id returns the message recorded the first time. ``author="owner"`` is the
    seat's owner speaking in person after stepping in at a Signal Flare (rooms.flares).

    The text is fenced as untrusted peer data before anything is stored (SYN-TRUST-003): the
    peer agent only ever receives the fenced form. Each suspicion the fence raises is an
    ``InjectionSuspected`` ledger event (rule and message number, no content) in the same
    transaction as the message, so an unflagged message costs no extra write; a flag that
    cannot be recorded refuses the message (``ledger_unavailable``).
    """
    fenced = fence(text, source="peer")  # pure CPU, before the room row is locked
    flags = tuple(s.rule.value for s in fenced.suspicions)
    try:
        with transaction.atomic():
            standing = SeatStanding.STEPPED_IN if author == "owner" else SeatStanding.ACTIVE
            seq = _next_seq(room_id, agent_id, standing, token)
            if seq is not None:
                message = Message.objects.create(
                    room_id=room_id,
                    seq=seq,
                    sender_id=agent_id,
                    client_id=client_id,
                    text=text,
                    flags=list(flags),
                    author=author,
                )
                for rule in flags:
                    ledger_append(
                        room_id=room_id,
                        event=InjectionSuspected(
                            source_agent_id=str(agent_id), message_seq=seq, rule=rule
                        ),
                    )
                _memo_prime_on_commit([(room_id, text, fenced)])
                return SaidMessage(
                    seq,
                    agent_id,
                    text,
                    message.created_at,
                    duplicate=False,
                    flags=flags,
                    fenced=fenced,
                )
    except LedgerAppendError:
        # The flag could not be recorded, so the message was not either (one transaction).
        raise SpeakRefused("ledger_unavailable") from None
    except IntegrityError:
        # The frame id was recorded before (the unique constraint said so); the number taken
        # above rolled back with the failed insert, so no gap is left.
        earlier = _earlier(room_id, agent_id, client_id)
        if earlier is None:
            raise
        return earlier
    earlier = _earlier(room_id, agent_id, client_id)
    if earlier is not None:
        return earlier  # a resend while paused still learns its message was recorded
    dead = Q(revoked_at__isnull=False) if token is None else ~Q(token_hash=token, revoked_at=None)
    if Agent.objects.filter(dead, id=agent_id).exists():
        raise SpeakRefused("revoked")  # revoked, or (``token``) rotated since the socket opened
    seat = RoomMember.objects.filter(room_id=room_id, agent_id=agent_id).only("standing").first()
    if seat is None:
        raise SpeakRefused("not_member")
    if seat.standing != (SeatStanding.STEPPED_IN if author == "owner" else SeatStanding.ACTIVE):
        raise SpeakRefused("withdrawn")
    raise SpeakRefused("room_not_open")


def messages_say(
    *, room_id: UUID, agent_id: UUID, says: list[tuple[str, str]], token: str | None = None
) -> list[SaidMessage]:
    """Record a run of an agent's ``(client_id, text)`` says, in order, in one transaction.

    The same checks as ``message_say``, per message: each one takes its number with the
    statement that re-reads room state, membership, revocation and seat standing at that
    moment. One commit for the run instead of one per message (the commit dominates the cost
    of a say). Returns the recorded messages for a prefix of ``says``, possibly empty; the
    caller sends the rest through ``message_say`` one by one, which answers every case this
    fast path leaves out: a refusal, a flagged text (its ledger events may fail and refuse
    it alone), a resent frame id (the unique constraint rolls the whole run back).
    ``token``: as ``message_say``'s.
    """
    tokens = None if token is None else [token]
    return messages_say_runs(runs=[(room_id, agent_id, says)], tokens=tokens)[0]


# A bound on the messages one ``messages_say_runs`` records (and so on its INSERT's size).
SAY_RUNS_MAX_MESSAGES = 512


def messages_say_runs(
    *,
    runs: list[tuple[UUID, UUID, list[tuple[str, str]]]],
    tokens: Sequence[str | None] | None = None,
) -> list[list[SaidMessage]]:
    """``messages_say`` for several sockets' runs at once (any rooms): one transaction and
    one commit for them all, each message still checked as it stands then (its room's state,
    its seat's membership and standing, its agent's revocation). Every run's check is read
    in one statement and the numbers taken in another (``_hop_checks``, ``_hop_numbers``:
    under the write lock SQLite's transaction holds from its start, or the room locks
    PostgreSQL's first statement takes), and one INSERT stores them all. One message
    alone: on PostgreSQL its check, number and INSERT are one statement
    (``_say_statement``), its own transaction; on SQLite ``_next_seq``'s one and the
    INSERT. Returns, per run, the recorded prefix (as ``messages_say``).

    Rooms are locked in the order of their ids, so two processes recording overlapping rooms
    at once wait for each other instead of deadlocking (PostgreSQL). A resent frame id in
    any run rolls the whole transaction back; each run is then recorded alone, so only the
    run with the resent id falls back to the one-by-one path.

    ``tokens`` (one per run), for sockets' runs: the digest of the token each socket was
    admitted with, checked by the same statements (a run whose token is no longer its
    agent's is refused, as a revoked agent's); None: the server's own runs (no socket).
    """
    return [said or [] for said in _runs_recorded(runs, None, tokens)]


def messages_say_runs_acked(
    *,
    runs: list[tuple[UUID, UUID, list[tuple[str, str]]]],
    acks: list[int | None],
    tokens: Sequence[str | None] | None = None,
) -> list[list[SaidMessage] | None]:
    """PostgreSQL: ``messages_say_runs`` for runs that carry the ack riding their first
    frame (``acks``, one per run or None), each ack recorded as the ``ack`` frame sent just
    before its run would be (``messages_ack``): a lone message and its ack are one
    statement, no transaction; a hop of several messages records all its acks in one
    statement (``_acks_taken_refused``), between the check of its runs and the numbers they
    take. A run whose ack the record refuses stores nothing and is answered None. A run
    whose first frame the fence holds back still has its ack recorded. When a resent frame id
    rolls everything back, the acks are recorded again on their own and every run is
    answered as not recorded (each frame then takes the one-by-one path). ``tokens``: as for
    ``messages_say_runs``."""
    if connection.vendor != "postgresql":
        raise ValueError("an ack rides a say's own statement on PostgreSQL only")
    return _runs_recorded(runs, acks, tokens)


def _runs_recorded(
    runs: list[tuple[UUID, UUID, list[tuple[str, str]]]],
    acks: list[int | None] | None,
    tokens: Sequence[str | None] | None = None,
) -> list[list[SaidMessage] | None]:
    prepared: list[list[tuple[str, str, FencedText]]] = []
    for _, _, says in runs:
        run: list[tuple[str, str, FencedText]] = []
        for client_id, text in says:
            fenced = fence(text, source="peer")  # pure CPU, before any room row is locked
            if fenced.suspicions:
                break
            run.append((client_id, text, fenced))
        prepared.append(run)
    riding = acks or [None] * len(runs)
    if not any(prepared) and not any(ack is not None for ack in riding):
        return [[] for _ in runs]
    now = timezone.now()
    taken: list[list[tuple[int, str, str]]] = [[] for _ in runs]
    refused: set[int] = set()
    stored = {room_id for (room_id, _, _), run in zip(runs, prepared, strict=True) if run}
    rows_for = _MessageRows(now, stored)
    # PostgreSQL checks, numbers and stores a lone message in one statement (with the ack
    # riding its frame), in its own implicit transaction (no BEGIN, no COMMIT). Any other
    # hop of several messages is numbered in two statements (``_hop_checks`` and
    # ``_hop_numbers``) and stored by one INSERT, on either database, the acks riding its
    # runs recorded between the two by one more (PostgreSQL: ``_acks_taken_refused``; the
    # rooms are locked first, then the seats, as a context turn locks them). SQLite numbers
    # a lone message with ``_next_seq``'s one.
    messages = sum(map(len, prepared))
    one_statement = rows_for.db.vendor == "postgresql" and messages == 1
    alone = one_statement and all(
        run or ack is None for run, ack in zip(prepared, riding, strict=True)
    )
    order = sorted(range(len(runs)), key=lambda i: runs[i][0].bytes)
    try:
        with contextlib.nullcontext() if alone else transaction.atomic():
            # A hop of several messages, on either database (one_statement has one).
            firsts: dict[int, int] | None = None
            wanted = [(i, runs[i][0], runs[i][1], len(prepared[i])) for i in order if prepared[i]]
            last = _hop_checks(rows_for, wanted, tokens) if messages > 1 else {}
            if acks is not None and not one_statement:
                refused = _acks_taken_refused(rows_for, runs, acks, tokens)
            if messages > 1:
                firsts = _hop_numbers(rows_for, [w for w in wanted if w[0] not in refused], last)
            rows: list[tuple[UUID, UUID, int, str, str]] = []
            for index in order:
                room_id, agent_id, _ = runs[index]
                ack = riding[index]
                if index in refused:
                    continue  # its ack was refused: nothing of the run happens
                token = None if tokens is None else _run_token(tokens, index)
                if ack is not None and not prepared[index]:
                    if one_statement and not messages_ack(
                        room_id=room_id, agent_id=agent_id, seq=ack, token=token
                    ):
                        refused.add(index)
                    continue
                for number, (client_id, text, _) in enumerate(prepared[index]):
                    if one_statement:
                        seq, acked = _say_statement(
                            rows_for, room_id, agent_id, client_id, text, ack, token
                        )
                        ack = None  # it rides the run's first message only
                        if not acked:
                            refused.add(index)
                            break
                    elif firsts is not None:
                        first = firsts.get(index)
                        seq = None if first is None else first + number
                    else:
                        seq = _next_seq(room_id, agent_id, SeatStanding.ACTIVE, token)
                    if seq is None:
                        break  # refused now: this one and the rest go the one-by-one way
                    taken[index].append((seq, client_id, text))
                    if not one_statement:
                        rows.append((room_id, agent_id, seq, client_id, text))
            # Stored before anyone hears of them: the caller announces after this commits.
            if rows:
                _insert_messages(rows_for, rows)
            _memo_prime_on_commit(
                [
                    (room_id, text, fenced)
                    for done, run, (room_id, _, _) in zip(taken, prepared, runs, strict=True)
                    for (_, _, text), (_, _, fenced) in zip(done, run, strict=False)
                ]
            )
    except IntegrityError:
        if acks is not None:
            return _acks_alone(runs, acks, tokens)
        if len(runs) == 1:
            return [[]]  # a resent frame id; nothing of the run was stored
        return [
            messages_say(
                room_id=r,
                agent_id=a,
                says=says,
                token=None if tokens is None else _run_token(tokens, index),
            )
            for index, (r, a, says) in enumerate(runs)
        ]
    return [
        None
        if index in refused
        else [
            SaidMessage(seq, agent_id, text, now, duplicate=False, fenced=fenced)
            for (seq, _, text), (_, _, fenced) in zip(done, run, strict=False)
        ]
        for index, (done, run, (_, agent_id, _)) in enumerate(
            zip(taken, prepared, runs, strict=True)
        )
    ]


def _acks_alone(
    runs: list[tuple[UUID, UUID, list[tuple[str, str]]]],
    acks: list[int | None],
    tokens: Sequence[str | None] | None = None,
) -> list[list[SaidMessage] | None]:
    """After a resent frame id rolled a hop back: each run's ack recorded on its own, every
    run answered as not recorded, or None where its ack was refused."""
    with transaction.atomic():
        refused = riding_acks_refused(runs, acks, tokens)
    return [None if index in refused else [] for index in range(len(runs))]


def riding_acks_refused(
    runs: list[tuple[UUID, UUID, list[tuple[str, str]]]],
    acks: list[int | None],
    tokens: Sequence[str | None] | None = None,
) -> set[int]:
    """Record the ack riding each run (``acks``, one per run or None) as its ``ack`` frame
    (``messages_ack``), seats in one order, so two processes' hops wait for each other
    instead of deadlocking: the indices of the runs whose ack the record refused.
    ``tokens`` (one per run, as ``messages_say_runs``'s): each run's socket's token digest,
    which must still be its agent's for its ack to be taken."""
    riding = [(index, ack) for index, ack in enumerate(acks) if ack is not None]
    refused: set[int] = set()
    for index, ack in sorted(riding, key=lambda r: (str(runs[r[0]][0]), str(runs[r[0]][1]))):
        room_id, agent_id, _ = runs[index]
        token = None if tokens is None else _run_token(tokens, index)
        if not messages_ack(room_id=room_id, agent_id=agent_id, seq=ack, token=token):
            refused.add(index)
    return refused


def _memo_prime_on_commit(said: list[tuple[UUID, str, FencedText]]) -> None:
    """Once the messages are stored, hand the peer's next context what the say path's fence
    made of each ``(room_id, text, block)``, so that context need not fence it again
    (``rooms.context`` keeps a block only where its own fence would make the same one, and
    forgets a room's when this process stops serving it). Nothing if the transaction rolls
    back."""
    from rooms.context import peer_message_memo_prime  # context imports this module

    if said:
        transaction.on_commit(lambda: [peer_message_memo_prime(t, f, r) for r, t, f in said])


def _ack_token_sql(member: str, token: str) -> str:
    """The condition an agent's socket's ack adds (``token``: a parameter or a column, the
    digest of the token the socket was admitted with): the seat's agent not revoked and that
    token still its own, as ``may_speak_sql`` asks it of a say. Only our own names are
    interpolated."""
    agent = connection.ops.quote_name(Agent._meta.db_table)
    return (
        f"EXISTS (SELECT 1 FROM {agent} a WHERE a.id = {member}.agent_id "  # noqa: S608
        f"AND a.revoked_at IS NULL AND a.token_hash = {token})"
    )


@functools.cache
def _ack_sql(vendor: str, token: bool = False) -> str:
    """``messages_ack``'s statement; ``token``: an agent's socket's token digest is its last
    parameter (``_ack_token_sql``)."""
    member, room = (connection.ops.quote_name(m._meta.db_table) for m in (RoomMember, Room))
    # SQLite's two-argument MAX is a scalar function, PostgreSQL's is GREATEST.
    greatest = "MAX" if vendor == "sqlite" else "GREATEST"
    current = f" AND {_ack_token_sql(member, '%s')}" if token else ""
    # Only our own table names are interpolated; every value is a bound parameter.
    return (
        f"UPDATE {member} SET acked_seq = {greatest}(acked_seq, %s) "  # noqa: S608
        "WHERE room_id = %s AND agent_id = %s AND EXISTS ("
        f"SELECT 1 FROM {room} r WHERE r.id = {member}.room_id AND r.last_seq >= %s){current}"
    )


def _ack_params(db: Any, room_id: UUID, agent_id: UUID, seq: int, token: str | None) -> list[Any]:
    """``_ack_sql``'s parameters (``db``: the connection itself)."""
    params = [
        seq,
        RoomMember._meta.get_field("room").get_db_prep_save(room_id, db),
        RoomMember._meta.get_field("agent").get_db_prep_save(agent_id, db),
        seq,
    ]
    return params if token is None else [*params, token]


def messages_ack(*, room_id: UUID, agent_id: UUID, seq: int, token: str | None = None) -> bool:
    """Record that ``agent_id`` has received everything up to ``seq``. False if ``seq`` is
    beyond the room's record (or the agent has no seat). Acks never move backwards.

    ``token``: an agent's socket's token digest, as it was admitted with: the ack is recorded
    only while the agent is not revoked and that token is still its own (False otherwise: a
    rotated token's socket moves nothing). None: the server itself records it.

    One precompiled statement (the ORM's compilation of the same UPDATE cost more than
    running it, once per acknowledgement); the token is a condition of it."""
    db = transaction.get_connection()  # the connection itself (see _MessageRows)
    with statement_cursor() as cursor:
        cursor.execute(
            _ack_sql(db.vendor, token is not None),
            _ack_params(db, room_id, agent_id, seq, token),
        )
        return cursor.rowcount == 1


# --- whispers -----------------------------------------------------------------------------


@transaction.atomic
def whisper_send(*, owner: User, room_id: UUID, text: str) -> Whisper:
    """An owner whispers to their own agent in a room (seat-checked).

    Stored as room content; it reaches only that agent: its context (``rooms.context``) and
    its own sockets, told after commit. Neither the other owner nor their agent ever sees it.
    """
    seat = _seat(owner, room_id)
    if seat.room.state == RoomState.CLOSED:
        raise InvalidState("This room is closed.")
    if seat.agent_id is None:
        raise InvalidState("Bind your agent to this room before whispering to it.")
    whisper = Whisper.objects.create(
        room_id=seat.room_id,
        owner=owner,
        agent_id=seat.agent_id,
        text=_clean_text(text, field="Whisper", max_chars=WHISPER_MAX_CHARS),
    )
    realtime.announce_whisper(agent_id=seat.agent_id, room_id=seat.room_id, whisper_id=whisper.id)
    return whisper
