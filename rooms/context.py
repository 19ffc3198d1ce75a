"""Context assembly: what an agent is given for one turn (SYN-TRUST-005).

A turn's context is built deliberately, never accumulated, from exactly:

* the room's purpose, charter and dinner terms (shared by both owners by design);
* the agent's own owner's vault items that the owner's slip clears for their own agent;
* the other owner's vault items that the other owner's slip clears for this agent, cut to
  the capability's scope (free/busy without titles inside the horizon, a range, ...);
* the agent's own owner's whispers to it;
* the other agent's recent messages, each fenced as untrusted data;
* the shared artifacts the other agent published that its owner's slip shares with this
  agent, each fenced as untrusted data (``artifacts.delivery.artifacts_for_agent``).

Every vault item is decided by the Gatekeeper at that moment (``decide_turn_guarded``: the
turn's disclosures together, each with the rules of ``decide(DisclosureRequest)``), spends
one use of the record that cleared it and is recorded as a ``Disclosure`` ledger event naming
the turn it fed, all in one transaction: if the record cannot be written, nothing is
disclosed (invariant 3). A denial simply leaves the item out; a failed check (an error, a
timeout, a clock jump) discloses nothing this turn and pauses the room (invariant 4).

An item whose slip record asks for approval per use (``approval_per_use``) is withheld and
its owner is asked, once, through the room (a disclosure grant in their "Waiting for you"
list, ``gatekeeper.grants.TurnGrants.ask``). When they have approved it by signing,
the recipient's next assembly discloses it once and consumes the grant in the same
transaction; the turn after asks again. Waiting does not pause the room: what the approval
guards (the item) does not proceed, and a pause would show the other side that something was
asked. The waiting agent is told so in words: its own owner's items by kind, the other
owner's only as "some items may be waiting", which no vault content decides.

A *turn* is a per-agent counter (``RoomMember.context_turn``), bumped each time context is
assembled for that agent.

A turn costs the same few SQL statements whatever the number of items (issue 17): the room
locked; the seat, its turn, its agent's revocation and standing (for a socket's request,
the reader's standing check itself), the other seat, the room's tier, the room itself and
the peer's recent messages and the owner's whispers in one statement; the room's live slips
with their keys and locked capability records in one (each slip's signature verified once
per turn); the recipient's disclosure grants in one when an item asks per use; the items in
one; then the turn's ledger events in one insert (``ledger_append_many``) which on
PostgreSQL also spends its uses (elsewhere one update more), and its grants in at most one
update and one insert. Every item is still decided live, in that transaction, from what it
read; nothing is kept from one turn to the next.

Shared artifacts are decided in the same transaction, after the vault items (so the vault's
ledger batch appends from the head the facts read): whether the other agent published any
the room marked shared is a column of the facts statement, so a turn with none costs no
statement more. With some, ``artifacts_for_agent`` decides each live and records each
delivery and refusal in the ledger first; its statements are its own and are counted apart
(tests/artifacts/test_context_delivery.py). A failed artifact check is a failed check: the
turn's transaction rolls back (no vault item is disclosed either) and the room pauses. In a
room that is not open nothing is decided or recorded per artifact, as for the vault items:
nothing reaches the agent, and the pause or close is in the ledger once, when it happened
(a denial per artifact on every turn of a paused room recorded only that it still was).
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

from django.apps import apps
from django.db import DatabaseError, connection, transaction
from django.utils import timezone
from django.utils.dateparse import parse_datetime
from pydantic import TypeAdapter

from gatekeeper.decision import (
    Decision,
    DisclosureRequest,
    Outcome,
    RoomFacts,
    TurnDisclosures,
    ask_refusal_rule,
    decide_turn_guarded,
)
from gatekeeper.grants import AskState, DisclosureAsk, GrantsChanged, turn_grants_lock
from gatekeeper.records import Grant
from ledger.events import Denial, Disclosure, LedgerEventRecord
from ledger.models import LedgerEvent, LedgerHead
from ledger.services import AlongsideShort, LedgerAppendError, ledger_append_many
from rooms.errors import NotFound
from rooms.forks import room_pause_fail_safe
from rooms.models import Agent, Message, Room, RoomMember, RoomState, SeatStanding, Whisper
from rooms.protocol import (
    AgentContext,
    ClearedItem,
    CloseCode,
    ContextMessage,
    ContextWhisper,
    PeerArtifact,
    PeerItem,
)
from rooms.sealing import (
    MESSAGE_TEXT,
    ROOM_CHARTER,
    ROOM_PURPOSE,
    WHISPER_TEXT,
    hop_marks_note,
    one_hop,
    room_key_cached,
    room_texts_open,
)
from rooms.standing import Reader, Seat, seat_verdict
from rooms.untrusted import (
    SCAN_CHARS_PER_CAP_BYTE,
    FencedText,
    fence,
    fence_clean,
    fences_renonce,
    trusted_preamble,
)
from slips.models import RoomTier, Slip
from slips.vault import TurnKeys, vault_item_scoped_view, vault_items_read
from slips.verification import (
    UsesNotSpent,
    capability_uses_spending,
    room_tier_from_ranks,
    tier_rank_sql,
)
from synapsia.db.statements import statement_cursor

logger = logging.getLogger(__name__)

# Enough recent conversation to act on while keeping one context frame well under a
# megabyte; each agent also receives every message as it is said.
CONTEXT_PEER_MESSAGES = 20
CONTEXT_MESSAGE_CAP_BYTES = 2_048
CONTEXT_WHISPERS = 20
CONTEXT_PEER_ITEM_CAP_BYTES = 16_384
# What an agent is told while its items wait for their owner's approval. The other owner's
# are never named: the sentence says only that the other owner was asked something.
AWAITING_OWN_NOTICE = "Waiting for your owner's approval, so not included this turn: {kinds}."
AWAITING_PEER_NOTICE = (
    "Some of the other owner's items may be waiting for their approval; they are not "
    "included this turn."
)
# What an agent is told when it may not take part right now (its owner muted or blocked it,
# or speaks in person; or it was revoked): nothing from any vault is included.
WITHDRAWN_NOTICE = (
    "Your owner has withdrawn you from this room for now: no vault items are included."
)


def context_for_agent(*, room_id: UUID, agent_id: UUID, asked: Sequence[str] = ()) -> AgentContext:
    """A new turn for ``agent_id``, and its assembled context (what ``context_request`` gets)."""
    assembled = _assemble(room_id=room_id, agent_id=agent_id, turn=None, asked=asked, ack=None)
    assert assembled is not None  # only a refused ack answers None
    return assembled


def context_for_agent_acked(
    *,
    room_id: UUID,
    agent_id: UUID,
    owner_id: int,
    asked: Sequence[str] = (),
    ack: int | None,
    token: str | None = None,
) -> AgentContext | None:
    """``context_for_agent`` for a socket's ``context_request``, whose agent is ``owner_id``'s
    and which was admitted with the token whose digest is ``token``.

    The reader's standing first (``rooms.standing``: the Gatekeeper's rule on the seat as
    read): from the turn's own facts, read under the room's lock by the statement that starts
    the turn, so it costs no statement of its own. Out of standing (revoked, its token
    rotated since the socket opened, blocked, the seat or the room gone, a room not open to
    agents), ``OutOfStanding`` with the close code: the turn it started rolls back, so no
    turn was had, no use spent, nothing disclosed, and no ack recorded.

    The ack the request carries is recorded as the ``ack`` frame sent just before it would be
    (``rooms.services.messages_ack``: never backwards, refused beyond the room's record), by
    the same statement. None when the record refuses it: then no turn was had, no use spent,
    nothing disclosed. A turn that fails after it still keeps the ack."""
    return _assemble(
        room_id=room_id,
        agent_id=agent_id,
        turn=None,
        asked=asked,
        ack=ack,
        reader=owner_id,
        token=token,
    )


def context_assemble(
    *, room_id: UUID, agent_id: UUID, turn: int, asked: Sequence[str] = ()
) -> AgentContext:
    """Assemble ``agent_id``'s context for ``turn`` (see the module docstring).

    ``asked``: kinds of the other owner's items the agent asked for. Asking clears nothing: each
    asked kind the other owner's slip did not clear for it this turn is recorded as a denial
    (both owners see what the agent asked for) and named in a notice.

    Raises ``NotFound`` if the agent has no seat in the room. When a disclosure cannot be
    recorded, none is made: the room pauses and the context carries no vault items.
    """
    assembled = _assemble(room_id=room_id, agent_id=agent_id, turn=turn, asked=asked, ack=None)
    assert assembled is not None  # only a refused ack answers None
    return assembled


@dataclass(frozen=True)
class _TurnFacts:
    """What one statement reads for a turn, after the room is locked."""

    turn: int
    owner_id: int
    standing: str
    agent_revoked: bool  # revoked, or (a socket's turn) its token rotated away since it opened
    peer: tuple[int, UUID] | None
    tier: str
    room: RoomFacts
    # The room's purpose and charter as read, sealed at rest under the room's key (a backup
    # holds no purpose): opened with the conversation, after the turn's transaction.
    purpose_sealed: str
    charter_sealed: str
    ledger_head: tuple[int, str] | None
    # Whether another agent published an artifact the room marked shared with the other
    # agent: only then is there anything for the Gatekeeper to decide (and record).
    peer_artifacts_published: bool
    # The conversation the context carries, as read (``_recent_columns``), opened after the
    # turn's transaction (``_recent_opened``).
    recent: tuple[Any, Any]


class OutOfStanding(Exception):
    """The agent asking for a turn is out of standing (``context_for_agent_acked``): no turn
    was had. ``code``: what its socket is closed with (``docs/protocol.md``)."""

    def __init__(self, code: CloseCode) -> None:
        super().__init__(code.name)
        self.code = code


class _AckRefused(Exception):
    """The ack riding the turn's request is beyond the room's record: raised inside the
    turn's transaction, so that the turn it started rolls back."""


class _CheckFailed(Exception):
    """A check of the turn failed after the vault's disclosures were made: raised inside the
    turn's transaction so that they roll back, and the room pauses with nothing disclosed."""

    def __init__(self, rule: str) -> None:
        super().__init__(rule)
        self.rule = rule


def _uuid(value: Any) -> UUID:
    return value if isinstance(value, UUID) else UUID(str(value))


@functools.cache
def _facts_sql(vendor: str, bump: bool, acked: bool = False, token: bool = False) -> str:
    """The turn's facts in one statement (bumping the turn when ``bump``): the seat, its
    agent's revocation (``token``: or ``%(token)s``, the digest of the token the asking
    socket was admitted with, no longer the agent's: a rotated token counts as revoked), the
    other seat, the room's tier (``room_tier_from_ranks``), the room and what the context
    carries of the conversation (``_recent_columns``). Only our own
    table names and tier names are interpolated; values are parameters, named
    (``%(room)s``): the room and the agent are each bound once, though the statement uses
    them many times. ``acked`` (with ``bump``): the seat's ack moved to ``%(ack)s`` as
    ``rooms.services.messages_ack`` moves it (never backwards, only within the room's
    record), and the room's last number returned last, to tell whether it was."""
    q = connection.ops.quote_name
    member, agent, room = (q(m._meta.db_table) for m in (RoomMember, Agent, Room))
    slip, tier = q(Slip._meta.db_table), q(RoomTier._meta.db_table)
    head = q(LedgerHead._meta.db_table)
    # By name, not import: artifacts depends on rooms, not the other way round.
    artifact = q(apps.get_model("artifacts", "Artifact")._meta.db_table)
    peer = (
        f"FROM {member} p WHERE p.room_id = %(room)s AND p.agent_id IS NOT NULL "
        "AND p.agent_id <> %(agent)s ORDER BY p.id"
    )
    current = " AND a.token_hash = %(token)s" if token else ""
    revoked = f"CASE WHEN a.revoked_at IS NULL{current} THEN 0 ELSE 1 END FROM {agent} a"
    columns = (
        f"context_turn, owner_id, standing, (SELECT {revoked} WHERE a.id = %(agent)s), "  # noqa: S608
        f"(SELECT p.owner_id {peer} LIMIT 1), (SELECT p.agent_id {peer} LIMIT 1), "
        f"(SELECT MIN({tier_rank_sql('t.tier')}) FROM {tier} t WHERE t.room_id = %(room)s), "
        f"(SELECT COUNT(*) FROM {slip} s WHERE s.room_id = %(room)s AND s.superseded_at IS NULL "
        f"AND NOT EXISTS (SELECT 1 FROM {tier} t WHERE t.room_id = s.room_id "
        "AND t.owner_id = s.owner_id)), "
        f"(SELECT r.purpose FROM {room} r WHERE r.id = %(room)s), "
        f"(SELECT r.charter FROM {room} r WHERE r.id = %(room)s), "
        f"(SELECT r.state FROM {room} r WHERE r.id = %(room)s), "
        f"(SELECT r.terms FROM {room} r WHERE r.id = %(room)s), "
        # The ledger's head as it stands (the append moves it only if it still is).
        f"(SELECT h.seq FROM {head} h WHERE h.room_id = %(room)s), "
        f"(SELECT h.hash FROM {head} h WHERE h.room_id = %(room)s), "
        f"(SELECT COUNT(*) FROM (SELECT 1 FROM {artifact} x WHERE x.room_id = %(room)s "
        "AND (x.shared_with_peer = %(shared)s OR x.share_undecided = %(shared)s) "
        "AND x.publisher_agent_id <> %(agent)s LIMIT 1) y), "
        f"{_recent_columns(vendor, member)}"
    )
    where = "WHERE room_id = %(room)s AND agent_id = %(agent)s"
    if bump:
        ack = ""
        if acked:
            last = f"(SELECT r.last_seq FROM {room} r WHERE r.id = %(room)s)"  # noqa: S608
            # SQLite's two-argument MAX is a scalar function, PostgreSQL's is GREATEST.
            greatest = "MAX" if vendor == "sqlite" else "GREATEST"
            ack = (
                f", acked_seq = CASE WHEN {last} >= %(ack)s "
                f"THEN {greatest}(acked_seq, %(ack)s) ELSE acked_seq END"
            )
            columns += f", {last}"
        return (
            f"UPDATE {member} SET context_turn = context_turn + 1{ack} {where} "  # noqa: S608
            f"RETURNING {columns}"
        )
    return f"SELECT {columns} FROM {member} {where}"  # noqa: S608


def _turn_facts(
    *,
    room_id: UUID,
    agent_id: UUID,
    turn: int | None,
    ack: int | None = None,
    reader: int | None = None,
    token: str | None = None,
) -> _TurnFacts:
    """Read the turn's facts (bumping the turn unless ``turn`` is given, and recording
    ``ack`` with it, ``_facts_sql``); ``NotFound`` if the agent holds no seat in the room,
    ``_AckRefused`` if ``ack`` is beyond the room's record. ``reader``: the owner whose agent
    asks; then ``OutOfStanding`` first if it is out of standing (a seat not found included).
    ``token``: the digest of the token the asking socket was admitted with; no longer the
    agent's, the agent reads as revoked. Call with the room locked, in the turn's
    transaction."""
    acked = ack is not None and turn is None
    db = transaction.get_connection()  # not the proxy, which looks it up on every read
    parameters = {
        "room": Room._meta.pk.get_db_prep_value(room_id, db),
        "agent": Agent._meta.pk.get_db_prep_value(agent_id, db),
        "shared": True,
        "messages": CONTEXT_PEER_MESSAGES,
        "whispers": CONTEXT_WHISPERS,
        **({"ack": ack} if acked else {}),
        **({"token": token} if token is not None else {}),
    }
    with statement_cursor() as cursor:
        cursor.execute(_facts_sql(db.vendor, turn is None, acked, token is not None), parameters)
        row = cursor.fetchone()
    if row is None:
        if reader is not None:
            # No seat is never standing (the rule says FORBIDDEN; so does the fallback).
            raise OutOfStanding(
                _standing(room_id, agent_id, reader, seat=None) or CloseCode.FORBIDDEN
            )
        raise NotFound("No such room.")
    if acked:
        *row, last_seq = row
    (
        bumped,
        owner_id,
        standing,
        revoked,
        peer_owner,
        peer_agent,
        rank,
        unchosen,
        purpose,
        charter,
        state,
        terms,
        head_seq,
        head_hash,
        artifacts_published,
        messages,
        whispers,
    ) = row
    if reader is not None:
        seat = Seat(int(owner_id), agent_id, str(standing), str(state), bool(revoked))
        verdict = _standing(room_id, agent_id, reader, seat=seat)
        if verdict is not None:
            raise OutOfStanding(verdict)
    if acked:
        assert ack is not None
        if ack > int(last_seq):
            raise _AckRefused
    if isinstance(terms, str | bytes):
        terms = json.loads(terms)
    return _TurnFacts(
        turn=int(bumped) if turn is None else turn,
        owner_id=int(owner_id),
        standing=str(standing),
        agent_revoked=bool(revoked),
        peer=(int(peer_owner), _uuid(peer_agent)) if peer_agent is not None else None,
        tier=room_tier_from_ranks(
            narrowest_chosen=None if rank is None else int(rank),
            slip_owner_unchosen=bool(unchosen),
        ),
        room=RoomFacts(room_id=room_id, state=str(state), terms=terms),
        purpose_sealed=str(purpose),
        charter_sealed=str(charter),
        ledger_head=(int(head_seq), str(head_hash)) if head_seq is not None else None,
        peer_artifacts_published=bool(artifacts_published),
        recent=(messages, whispers),
    )


def _standing(room_id: UUID, agent_id: UUID, reader: int, *, seat: Seat | None) -> CloseCode | None:
    """``reader``'s agent's standing from its seat as the turn's facts read it (None: no
    seat), by the rule every other delivery is checked with (``rooms.standing``)."""
    return seat_verdict(Reader(room_id, reader, agent_id), [] if seat is None else [seat])


def _room_lock(room_id: UUID) -> None:
    """Lock the room's row first, as every other write to the room does (say, act): two turns
    of one room then queue here instead of locking slip uses, vault items and the ledger
    head in different orders and deadlocking on PostgreSQL. Everything the turn decides on is
    read after it, so it is live. (SQLite's IMMEDIATE transaction already serialises.)"""
    db = transaction.get_connection()  # not the proxy, which looks it up on every read
    if not db.features.has_select_for_update:
        return
    table = db.ops.quote_name(Room._meta.db_table)
    with statement_cursor() as cursor:
        cursor.execute(
            f"SELECT 1 FROM {table} WHERE id = %s FOR UPDATE",  # noqa: S608
            [Room._meta.pk.get_db_prep_value(room_id, db)],
        )


@dataclass
class _Placed:
    """What one decided (owner, item kind) came to in this turn."""

    source: DisclosureRequest
    decision: Decision
    events: list[LedgerEventRecord]
    grant: Grant | None = None
    awaiting: bool = False
    items: list[ClearedItem] | None = None


def _disclosures(
    *, facts: _TurnFacts, recipient_agent_id: UUID, asked: Sequence[str]
) -> tuple[list[_Placed], list[str], str | None]:
    """Decide, spend and record the turn's disclosures (in the caller's transaction): what
    each decided (owner, item kind) came to, the asked kinds refused, and the rule of a
    failed check (then nothing is disclosed)."""
    decided = decide_turn_guarded(
        TurnDisclosures(
            room=facts.room,
            recipient_agent_id=recipient_agent_id,
            recipient_owner_id=facts.owner_id,
            recipient_revoked=facts.agent_revoked,
            recipient_active=facts.standing == SeatStanding.ACTIVE,
            peer=facts.peer,
            tier=facts.tier,
        )
    )
    placed = [_Placed(d.request, d.decision, []) for d in decided.items]
    if decided.error is not None:
        placed = []
    now = timezone.now()
    asking = [p for p in placed if _asks_owner(p.decision)]
    grants = (
        turn_grants_lock(room_id=facts.room.room_id, recipient_agent_id=recipient_agent_id)
        if asking
        else None
    )
    for p in asking:
        assert grants is not None and p.decision.capability is not None
        assert p.decision.slip_id is not None
        ask = DisclosureAsk(
            room_id=facts.room.room_id,
            owner_id=p.source.owner_id,
            source_agent_id=p.source.source_agent_id,
            recipient_agent_id=recipient_agent_id,
            recipient=p.source.recipient,
            resource=p.source.resource,
            operation=p.decision.capability.operation,
            scope=p.decision.capability.scope,
            slip_id=p.decision.slip_id,
        )
        # Asked before anything about the vault is used: whether the owner is asked depends
        # on their slip only, never on whether they hold such an item.
        p.grant = grants.claim(ask, now=now, events=p.events)
        if p.grant is None:
            p.awaiting = grants.ask(ask, now=now, events=p.events) is AskState.WAITING
    showing = [p for p in placed if p.decision.allowed or p.grant is not None]
    # Lock the items so none changes between spending the use and recording what was shown.
    rows = vault_items_read(
        wanted=[(p.source.owner_id, p.source.resource) for p in showing], lock=True
    )
    keys = TurnKeys()  # each owner's data key opened once this turn
    # All in one read of the key store, the room key's row with them: its destroyed mark is
    # then read for the hop (rooms.sealing.one_hop), and the purpose, the charter and the
    # conversation, opened after the turn's transaction, read no mark of their own.
    room_key = room_key_cached(facts.room.room_id)
    hop_marks_note(
        keys.read_for(
            (row for found in rows.values() for row in found),
            also=() if room_key is None else (room_key,),
        )
    )
    spend: list[int] = []
    for p in showing:
        found = rows.get((p.source.owner_id, p.source.resource), [])
        capability = p.decision.capability
        if not found or capability is None or p.decision.record_id is None:
            # Nothing to show: spend no use (an approval stays for when there is, until it ends).
            continue
        if p.grant is not None:
            assert grants is not None
            grants.consume(p.grant, now=now)
        spend.append(p.decision.record_id)  # the record that cleared it pays the use
        p.items = []
        for row in found:
            view = vault_item_scoped_view(row, capability=capability, now=now, keys=keys)
            if view is None:
                continue
            p.events.append(
                Disclosure(
                    owner_id=str(p.source.owner_id),
                    item_id=str(row.id),
                    recipient_agent_id=str(recipient_agent_id),
                    turn=facts.turn,
                )
            )
            p.items.append(
                ClearedItem(
                    item_id=row.id,
                    owner_id=str(p.source.owner_id),
                    resource=p.source.resource,
                    scope=capability.scope,
                    content=view,
                    # The decided capability's own field (the tier already applied): no
                    # statement more, and the same for every item it cleared.
                    onward_disclosure=capability.onward_disclosure,
                )
            )
    given = {p.source.resource for p in placed if p.items and p.source.recipient == "peer_agent"}
    refused = [kind for kind in dict.fromkeys(asked) if kind not in given]
    rule = ask_refusal_rule(facts.room)
    refusals: list[LedgerEventRecord] = [
        Denial(rule=rule, subject_id=str(recipient_agent_id), resource_id=kind) for kind in refused
    ]
    # Recorded with their effects, all in this transaction: the events and the uses they
    # record by one statement where the append is one (PostgreSQL), then the grants.
    try:
        ledger_append_many(
            room_id=facts.room.room_id,
            events=[e for p in placed for e in p.events] + refusals,
            head_seen=facts.ledger_head,
            alongside=capability_uses_spending(record_ids=spend),
        )
    except AlongsideShort as short:
        raise UsesNotSpent(str(short)) from None
    if grants is not None:
        grants.write()
    return placed, refused, decided.error


def _asks_owner(decision: Decision) -> bool:
    return (
        decision.outcome is Outcome.NEEDS_GRANT
        and decision.rule == "approval_per_use"
        and decision.capability is not None
        and decision.slip_id is not None
    )


def _assemble(
    *,
    room_id: UUID,
    agent_id: UUID,
    turn: int | None,
    asked: Sequence[str],
    ack: int | None,
    reader: int | None = None,
    token: str | None = None,
) -> AgentContext | None:
    # The room key's destroyed mark is read once for the turn (the purpose and charter of the
    # facts, the messages and the whispers), as each slip's signature is verified once per
    # turn; nothing of it outlives the turn, and a key this process destroys meanwhile is
    # dropped from it at once (rooms.sealing.one_hop).
    with one_hop():
        try:
            return _assembled(
                room_id=room_id,
                agent_id=agent_id,
                turn=turn,
                asked=asked,
                ack=ack,
                reader=reader,
                token=token,
            )
        except _AckRefused:
            return None  # the turn it started rolled back: no turn was had


def _assembled(
    *,
    room_id: UUID,
    agent_id: UUID,
    turn: int | None,
    asked: Sequence[str],
    ack: int | None,
    reader: int | None,
    token: str | None = None,
) -> AgentContext:
    notices: list[str] = []
    own_items: list[ClearedItem] = []
    peer_items: list[PeerItem] = []
    awaiting_own: list[str] = []
    awaiting_peer = False
    error: str | None = None
    refused: list[str] = []
    peer_artifacts: list[PeerArtifact] = []
    try:
        with transaction.atomic():
            _room_lock(room_id)
            facts = _turn_facts(
                room_id=room_id, agent_id=agent_id, turn=turn, ack=ack, reader=reader, token=token
            )
            placed, refused, error = _disclosures(
                facts=facts, recipient_agent_id=agent_id, asked=asked
            )
            if (
                error is None
                and facts.peer_artifacts_published
                and facts.room.state == RoomState.OPEN
            ):
                peer_artifacts = _peer_artifacts(
                    room_id=room_id, agent_id=agent_id, turn=facts.turn
                )
    except _CheckFailed as failed:
        # The turn rolled back: no vault item and no artifact was disclosed.
        error, placed, refused, peer_artifacts = failed.rule, [], [], []
        facts = _facts_after_failure(room_id=room_id, agent_id=agent_id, turn=turn, ack=ack)
    except (LedgerAppendError, DatabaseError, UsesNotSpent, GrantsChanged) as failed:
        # Nothing was disclosed (the transaction rolled back, uses, grants and turn included).
        if not isinstance(failed, LedgerAppendError):
            logger.exception("context assembly failed: disclosing nothing")
        error = "ledger_unavailable" if isinstance(failed, LedgerAppendError) else None
        error = error or "gatekeeper.database_error"
        facts = _facts_after_failure(room_id=room_id, agent_id=agent_id, turn=turn, ack=ack)
        placed, refused, peer_artifacts = [], [], []
    for p in placed:
        if p.source.recipient == "own_agent":
            own_items.extend(p.items or [])
            if p.awaiting:
                awaiting_own.append(p.source.resource)
        else:
            peer_items.extend(_peer_item(item) for item in p.items or [])
            awaiting_peer = awaiting_peer or p.awaiting
    if awaiting_own:
        notices.append(AWAITING_OWN_NOTICE.format(kinds=", ".join(awaiting_own)))
    if awaiting_peer:
        notices.append(AWAITING_PEER_NOTICE)
    if refused:
        notices.append(f"Not cleared for you by the other owner: {', '.join(refused)}.")
    if error:
        room_pause_fail_safe(room_id=room_id, rule=error)
        notices.append(
            f"The room paused: a check failed ({error}), so nothing it guarded is included."
        )
    elif facts.room.state != RoomState.OPEN:
        notices.append(
            f"The room is {facts.room.state}: no vault items are disclosed until it opens."
        )
    elif facts.agent_revoked or facts.standing != SeatStanding.ACTIVE:
        notices.append(WITHDRAWN_NOTICE)

    purpose = _opened_text(facts.purpose_sealed, column=ROOM_PURPOSE, room_id=room_id)
    charter = _opened_text(facts.charter_sealed, column=ROOM_CHARTER, room_id=room_id)
    messages, whispers = _recent_opened(facts.recent, room_id=room_id)
    nonces = [m.nonce for m in messages] + [i.nonce for i in peer_items]
    nonces += [a.nonce for a in peer_artifacts]
    return AgentContext(
        room_id=room_id,
        agent_id=agent_id,
        turn=facts.turn,
        preamble=trusted_preamble(nonces=nonces),
        purpose=purpose,
        charter=charter,
        terms=facts.room.terms,
        own_items=own_items,
        whispers=whispers,
        notices=notices,
        peer_items=peer_items,
        peer_messages=messages,
        peer_artifacts=peer_artifacts,
    )


def _peer_artifacts(*, room_id: UUID, agent_id: UUID, turn: int) -> list[PeerArtifact]:
    """The other agent's shared artifacts that reach ``agent_id`` this turn, decided and
    recorded by ``artifacts.delivery`` in the caller's transaction. Raises ``_CheckFailed``
    when a check failed, or anything in delivering went wrong other than the ledger or the
    database (which the caller already handles): an error is never a delivery."""
    # Imported here: artifacts depends on rooms (its models, fencing), not the reverse.
    from artifacts.delivery import artifacts_for_agent

    try:
        delivery = artifacts_for_agent(room_id=room_id, agent_id=agent_id, turn=turn)
    except (LedgerAppendError, DatabaseError):
        raise
    except Exception:
        logger.exception("artifact delivery failed: disclosing nothing")
        raise _CheckFailed("gatekeeper.error") from None
    if delivery.error is not None:
        raise _CheckFailed(delivery.error)
    return [
        PeerArtifact(
            artifact_id=a.artifact_id,
            media_type=a.media_type,  # validated against the allowed list
            size_bytes=a.size_bytes,
            published_at=a.published_at,
            fenced=a.fenced,
            nonce=a.nonce,
            truncated=a.truncated,
            flags=list(a.flags),
            onward_disclosure=a.onward_disclosure,
        )
        for a in delivery.artifacts
    ]


def _facts_after_failure(
    *, room_id: UUID, agent_id: UUID, turn: int | None, ack: int | None
) -> _TurnFacts:
    """The turn's facts after its transaction rolled back: the turn is started again on its
    own (so it keeps a number of its own), with the ack riding its request (which the
    rollback undid), and nothing is decided from them."""
    with transaction.atomic():
        return _turn_facts(room_id=room_id, agent_id=agent_id, turn=turn, ack=ack)


def _clean_strings(value: Any) -> Any:
    """The other owner's item content with every string stripped like peer text."""
    if isinstance(value, str):
        # Only the clean text is used: no suspicion of an item is reported, so neither the
        # rules nor the learned flagger judge it (they were half of an item's cost).
        return fence_clean(value, source="peer.item")
    if isinstance(value, list):
        return [_clean_strings(v) for v in value]
    if isinstance(value, dict):
        return {k: _clean_strings(v) for k, v in value.items()}
    return value


def _peer_item(item: ClearedItem) -> PeerItem:
    content = _clean_strings(item.content)
    block = fence(
        json.dumps(content, ensure_ascii=False, sort_keys=True),
        source="peer.item",
        cap_bytes=CONTEXT_PEER_ITEM_CAP_BYTES,
        judge=False,  # the block's suspicions are not used (see _clean_strings)
    )
    return PeerItem(
        item_id=item.item_id,
        owner_id=item.owner_id,
        resource=item.resource,
        scope=item.scope,
        content=content,
        # Beside the block, never in it: the room's word, which the item's text cannot change.
        onward_disclosure=item.onward_disclosure,
        fenced=block.fenced,
        nonce=block.nonce,
    )


# Fencing the peer's recent messages afresh on every turn was a fifth of a context request,
# though a message's clean body is a pure function of its text: it is worked out once per
# process per text (an LRU keyed by the text's SHA-256, bounded in entries and so in memory:
# each body is at most CONTEXT_MESSAGE_CAP_BYTES) and each turn's block gets a fresh nonce.
# Nothing about a seat or a decision is kept: only what the text cleans to. Which rooms' texts
# an entry came from is kept beside it, so that a room's are forgotten when this process stops
# serving the room (``peer_message_memo_forget``: its last socket here closed, as deleting the
# room closes them all): a deleted room's words do not stay in a server's memory. A text is
# kept only for a room this process serves at that moment (``peer_message_memo_serve``, when
# its first socket here is watched), checked under the memo's lock: a say or a context still
# on a database thread when the room's last socket closed keeps nothing after the forget.
_PEER_MESSAGE_MEMO_ENTRIES = 4_096
_peer_message_memo: OrderedDict[bytes, FencedText] = OrderedDict()
_peer_message_memo_rooms: dict[UUID, set[bytes]] = {}
_peer_message_memo_served: set[UUID] = set()
_peer_message_memo_lock = threading.Lock()


def _memo_room_note(room_id: UUID, keys: Sequence[bytes]) -> None:
    """Note ``keys`` (in the memo) as ``room_id``'s, under the lock, if this process serves
    the room (callers keep a text only then). A room's note is cut back to the keys still in
    the memo whenever it outgrows the memo, so it stays bounded however long the room
    lives."""
    if room_id not in _peer_message_memo_served:
        return
    noted = _peer_message_memo_rooms.setdefault(room_id, set())
    noted.update(keys)
    if len(noted) > _PEER_MESSAGE_MEMO_ENTRIES:
        noted.intersection_update(_peer_message_memo)


def peer_message_memo_serve(room_id: UUID) -> None:
    """This process serves ``room_id`` now (a socket of it is watched here): what its texts
    clean to may be kept, until ``peer_message_memo_forget``."""
    with _peer_message_memo_lock:
        _peer_message_memo_served.add(room_id)


def peer_message_memo_forget(room_id: UUID) -> None:
    """Forget what the memo keeps of ``room_id``'s texts, and keep none of them from now on
    (this process serves no socket in the room any more). A text another room here shares
    is cleaned again there, once."""
    with _peer_message_memo_lock:
        _peer_message_memo_served.discard(room_id)
        for key in _peer_message_memo_rooms.pop(room_id, ()):
            _peer_message_memo.pop(key, None)


def _peer_messages_fenced(texts: Sequence[str], room_id: UUID) -> list[FencedText]:
    """Each of ``texts`` (``room_id``'s) fenced as a peer message of a context, with a nonce
    of its own (fresh from the system's CSPRNG for every block, as ``fence`` draws it); the
    clean body, its truncation and what was stripped come from the memo when this process
    cleaned the same text before (looked up for all of a turn's texts under one hold of the
    lock), and what it cleans now is kept there if it serves the room. The suspicions are
    the rules' alone: a context's messages carry the flags recorded when each was said, so
    the learned flagger is not asked here."""
    keys = [hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest() for text in texts]
    with _peer_message_memo_lock:
        known = [_peer_message_memo.get(key) for key in keys]
        for key, block in zip(keys, known, strict=True):
            if block is not None:
                _peer_message_memo.move_to_end(key)
        _memo_room_note(room_id, [k for k, b in zip(keys, known, strict=True) if b is not None])
    made: dict[bytes, FencedText] = {}
    blocks: list[FencedText] = []
    for key, text, block in zip(keys, texts, known, strict=True):
        if block is None:
            block = made.get(key)
            if block is None:
                block = made[key] = fence(
                    text, source="peer", cap_bytes=CONTEXT_MESSAGE_CAP_BYTES, flagger=False
                )
        blocks.append(block)
    if made:
        with _peer_message_memo_lock:
            if room_id in _peer_message_memo_served:
                _peer_message_memo.update(made)
                _memo_room_note(room_id, list(made))
                while len(_peer_message_memo) > _PEER_MESSAGE_MEMO_ENTRIES:
                    _peer_message_memo.popitem(last=False)
    return fences_renonce(blocks)  # the memo's nonces stay in the memo


def peer_message_memo_prime(text: str, block: FencedText, room_id: UUID) -> bool:
    """Keep what the say path's fence made of ``text`` (``block``, from ``fence(text,
    source="peer")``) for the next context that carries it, when it is exactly what a
    context's own fence would make (``_peer_messages_fenced``): the same source, the text
    within the context's scan window, nothing cut, and the whole block within the context's
    cap. Then the body, its truncation and what was stripped are equal, the cleaning being
    a pure function of the text below those bounds (tests/rooms/test_context_fence_memo.py
    compares them). Only what the text cleans to is kept, as the memo keeps it; every
    context still gives the block a fresh nonce. Its suspicions are never read by a context
    (each message carries the flags recorded when it was said). Nothing is kept for a room
    this process does not serve (``peer_message_memo_serve``). Whether it was kept."""
    if (
        block.source != "peer"
        or block.truncated
        or len(text) > CONTEXT_MESSAGE_CAP_BYTES * SCAN_CHARS_PER_CAP_BYTE
        or len(block.fenced.encode("utf-8", "surrogatepass")) > CONTEXT_MESSAGE_CAP_BYTES
    ):
        return False
    key = hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()
    with _peer_message_memo_lock:
        if room_id not in _peer_message_memo_served:
            return False  # a room this process does not serve (any more): nothing kept
        _peer_message_memo[key] = block
        _peer_message_memo.move_to_end(key)
        _memo_room_note(room_id, [key])
        while len(_peer_message_memo) > _PEER_MESSAGE_MEMO_ENTRIES:
            _peer_message_memo.popitem(last=False)
    return True


def _recent_columns(vendor: str, member: str) -> str:
    """The peer's recent messages and the seat's owner's recent whispers to its agent (each
    newest first, capped), as two columns of the turn's facts, each a JSON array of rows:
    read under the room's lock with the rest of the turn, at no statement of their own (a
    statement of 20 rows of six typed columns also cost PostgreSQL's driver more to load
    than one JSON text). ``member``: the seat's table as the facts statement names it (the
    whispers are its owner's). Only our own names are interpolated."""
    q = connection.ops.quote_name
    message, whisper = q(Message._meta.db_table), q(Whisper._meta.db_table)
    if vendor == "postgresql":
        rows, array, flags = "json_agg", "json_build_array", "x.flags"
    else:  # SQLite keeps JSON as text: json() embeds the flags as an array, not a string
        rows, array, flags = "json_group_array", "json_array", "json(x.flags)"
    return (
        f"(SELECT {rows}({array}(x.seq, x.sender_id, x.text, {flags}, x.created_at)) "  # noqa: S608
        f"FROM (SELECT seq, sender_id, text, flags, created_at FROM {message} "
        "WHERE room_id = %(room)s AND (sender_id IS NULL OR sender_id <> %(agent)s) "
        "ORDER BY seq DESC LIMIT %(messages)s) x), "
        f"(SELECT {rows}({array}(w.id, w.text, w.created_at)) "
        f"FROM (SELECT id, text, created_at FROM {whisper} WHERE room_id = %(room)s "
        f"AND agent_id = %(agent)s AND owner_id = {member}.owner_id "
        "ORDER BY created_at DESC LIMIT %(whispers)s) w)"
    )


def _json_rows(value: Any) -> list[Any]:
    """A JSON array column as read: PostgreSQL's driver parses ``json`` itself (NULL for no
    rows), SQLite gives the text."""
    if value is None:
        return []
    return list(json.loads(value) if isinstance(value, str | bytes) else value)


def _when(value: Any) -> datetime:
    """A timestamp column as raw SQL read it, aware. PostgreSQL's driver gives an aware one;
    SQLite keeps naive UTC (Django's converter parses it when the column's type comes through
    the statement, else it is the stored text): both are made aware in UTC, as the ORM reads
    them, so a context's times are the same instants on either database."""
    if not isinstance(value, datetime):
        try:  # SQLite's stored form; fromisoformat is several times cheaper than parse_datetime
            parsed: datetime | None = datetime.fromisoformat(str(value))
        except ValueError:
            parsed = parse_datetime(str(value))
        assert parsed is not None
        value = parsed
    # replace() rather than timezone.make_aware: the same value, at half the cost.
    return value if value.utcoffset() is not None else value.replace(tzinfo=UTC)


def _opened_text(value: str, *, column: str, room_id: UUID) -> str:
    """A sealed text column as raw SQL read it, opened (``room_text_open`` without the
    ``OpenedText`` wrapper a model row needs: ``room_content_open`` checks the room)."""
    (text,) = room_texts_open([value], column=column, room_id=room_id)
    return text


def _recent_opened(
    recent: tuple[Any, Any], *, room_id: UUID
) -> tuple[list[ContextMessage], list[ContextWhisper]]:
    """The other agent's recent messages, each fenced, and the owner's recent whispers to
    this agent, oldest first, from the facts' ``recent`` columns (``_recent_columns``)."""
    said = sorted(_json_rows(recent[0]), key=lambda r: int(r[0]))
    whispered_rows = _json_rows(recent[1])
    # Transcript text is sealed at rest under the room's key (rooms.sealing); raw SQL reads
    # the sealed value and opens it here, each value with the room's key (whose destroyed
    # mark the hop read), refusing one sealed for another room or column. Each column's
    # values are opened as one batch (the key and the associated data found once).
    whisper_texts = room_texts_open(
        [str(r[1]) for r in whispered_rows], column=WHISPER_TEXT, room_id=room_id
    )
    whispered = sorted(
        (
            (_when(r[2]), _uuid(r[0]), text)
            for r, text in zip(whispered_rows, whisper_texts, strict=True)
        ),
        key=lambda w: w[0],
    )
    blocks = _peer_messages_fenced(
        room_texts_open([str(r[2]) for r in said], column=MESSAGE_TEXT, room_id=room_id),
        room_id,
    )
    fenced: list[dict[str, Any]] = []
    senders: dict[Any, UUID] = {}  # the other agent's id parsed once, not once per message
    for (seq, sender, _text, flags, created_at), block in zip(said, blocks, strict=True):
        if flags in ("[]", b"[]"):  # most messages were flagged for nothing
            flags = []
        elif isinstance(flags, str | bytes):
            flags = json.loads(flags)
        if sender is not None and sender not in senders:
            senders[sender] = _uuid(sender)
        fenced.append(
            {
                "seq": int(seq),
                "sender_agent_id": senders[sender] if sender is not None else None,
                "fenced": block.fenced,
                "nonce": block.nonce,
                "flags": list(flags or []),
                "truncated": block.truncated,
                "sent_at": _when(created_at),
            }
        )
    whispers = [{"id": wid, "text": text, "sent_at": at} for at, wid, text in whispered]
    return _CONTEXT_MESSAGES.validate_python(fenced), _CONTEXT_WHISPERS.validate_python(whispers)


# A turn's messages (and whispers) validated in one call each: the same checks as one
# ContextMessage(...) per message, without a Python-level model __init__ per message.
_CONTEXT_MESSAGES = TypeAdapter(list[ContextMessage])
_CONTEXT_WHISPERS = TypeAdapter(list[ContextWhisper])


@dataclass(frozen=True)
class TurnItem:
    """One vault item that fed a turn, as the ledger recorded it (no content)."""

    ledger_seq: int
    owner_id: str
    item_id: str
    recorded_at: datetime


def context_turn_items(*, room_id: UUID, agent_id: UUID, turn: int) -> list[TurnItem]:
    """Which vault items fed ``agent_id``'s ``turn`` in ``room_id``: read from the ledger's
    ``Disclosure`` events, the record both owners can verify (not from anything rooms keeps)."""
    events = LedgerEvent.objects.filter(
        room_id=room_id,
        kind="disclosure",
        data__recipient_agent_id=str(agent_id),
        data__turn=turn,
    ).order_by("seq")
    return [
        TurnItem(
            ledger_seq=event.seq,
            owner_id=str(event.data["owner_id"]),
            item_id=str(event.data["item_id"]),
            recorded_at=event.occurred_at,
        )
        for event in events
    ]
