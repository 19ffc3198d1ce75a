"""Context assembly: what an agent is given for one turn (SYN-TRUST-005).

A turn's context is built deliberately, never accumulated, from exactly:

* the room's purpose, charter and dinner terms (shared by both owners by design);
* the agent's own owner's vault items that the owner's slip clears for their own agent;
* the other owner's vault items that the other owner's slip clears for this agent, cut to
  the capability's scope (free/busy without titles inside the horizon, a range, ...);
* the agent's own owner's whispers to it;
* the other agent's recent messages, each fenced as untrusted data.

Every vault item passes ``gatekeeper.decide_guarded`` at that moment, spends one use with
``slips.verification.capability_use`` and is recorded as a ``Disclosure`` ledger event naming
the turn it fed, all in one transaction: if the record cannot be written, nothing is
disclosed (invariant 3). A denial simply leaves the item out; a denial that is a failed
check (an error, a timeout, a clock jump) also pauses the room (invariant 4).

An item whose slip record asks for approval per use (``approval_per_use``) is withheld and
its owner is asked, once, through the room (a disclosure grant in their "Waiting for you"
list, ``gatekeeper.grants.disclosure_approval_ask``). When they have approved it by signing,
the recipient's next assembly discloses it once and consumes the grant in the same
transaction; the turn after asks again. Waiting does not pause the room: what the approval
guards (the item) does not proceed, and a pause would show the other side that something was
asked. The waiting agent is told so in words: its own owner's items by kind, the other
owner's only as "some items may be waiting", which no vault content decides.

A *turn* is a per-agent counter (``RoomMember.context_turn``), bumped each time context is
assembled for that agent.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal
from uuid import UUID

from django.db import DatabaseError, transaction
from django.db.models import F
from django.utils import timezone

from gatekeeper.decision import (
    DisclosureRequest,
    Outcome,
    RoomFacts,
    ask_refusal_rule,
    decide_guarded,
)
from gatekeeper.grants import (
    AskState,
    DisclosureAsk,
    disclosure_approval_ask,
    disclosure_grant_claim,
    disclosure_grant_consume,
)
from gatekeeper.records import Grant
from ledger.events import Denial, Disclosure
from ledger.models import LedgerEvent
from ledger.services import LedgerAppendError, ledger_append
from rooms.errors import NotFound
from rooms.forks import room_pause_fail_safe
from rooms.models import Message, Room, RoomMember, RoomState, Whisper
from rooms.protocol import (
    AgentContext,
    ClearedItem,
    ContextMessage,
    ContextWhisper,
    PeerItem,
)
from rooms.untrusted import FencedText, fence, trusted_preamble
from slips.capabilities import VAULT_KINDS
from slips.models import SlipCapability, VaultItem
from slips.vault import vault_scoped_view
from slips.verification import capability_use

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
# Denials that mean a check failed rather than said no: these pause the room.
_ERROR_RULES = frozenset({"slip_verification_error", "verification_error"})


def _is_check_error(rule: str) -> bool:
    return rule.startswith("gatekeeper.") or rule in _ERROR_RULES


@dataclass(frozen=True)
class _Disclosed:
    """What deciding one resource for a turn came to."""

    items: list[ClearedItem]
    error: str | None = None  # a check failed: the rule that pauses the room
    awaiting: bool = False  # withheld until its owner approves (asked, or asked before)


@dataclass(frozen=True)
class _Source:
    """A live slip's vault resource that may feed this agent: whose, signed for which agent."""

    owner_id: int
    agent_id: UUID
    resource: str
    recipient: Literal["own_agent", "peer_agent"]


def context_turn_next(*, room_id: UUID, agent_id: UUID) -> int:
    """Start a new turn for ``agent_id`` in ``room_id`` and return its number."""
    with transaction.atomic():
        bumped = RoomMember.objects.filter(room_id=room_id, agent_id=agent_id).update(
            context_turn=F("context_turn") + 1
        )
        if bumped != 1:
            raise NotFound("No such room.")
        turn: int = (
            RoomMember.objects.filter(room_id=room_id, agent_id=agent_id)
            .values_list("context_turn", flat=True)
            .get()
        )
    return turn


def context_for_agent(*, room_id: UUID, agent_id: UUID, asked: Sequence[str] = ()) -> AgentContext:
    """A new turn for ``agent_id``, and its assembled context (what ``context_request`` gets)."""
    return context_assemble(
        room_id=room_id,
        agent_id=agent_id,
        turn=context_turn_next(room_id=room_id, agent_id=agent_id),
        asked=asked,
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
    room = Room.objects.only("id", "purpose", "charter", "state", "terms").get(id=room_id)
    seats = list(RoomMember.objects.filter(room_id=room_id).only("owner_id", "agent_id"))
    me = next((s for s in seats if s.agent_id == agent_id), None)
    if me is None:
        raise NotFound("No such room.")
    peer = next((s for s in seats if s.agent_id is not None and s.agent_id != agent_id), None)
    notices: list[str] = []
    own_items: list[ClearedItem] = []
    peer_items: list[PeerItem] = []
    errors: list[str] = []
    awaiting_own: list[str] = []
    awaiting_peer = False
    try:
        with transaction.atomic():
            # The room's row first, as every other write to the room takes it (say, act):
            # two turns of the same room then queue here instead of locking slip uses, vault
            # items and the ledger head in different orders and deadlocking on PostgreSQL.
            # The state is re-read under the lock, so each decision sees it live.
            room.state = (
                Room.objects.select_for_update().values_list("state", flat=True).get(id=room_id)
            )
            for source in _sources(room_id=room_id, me=me, peer=peer):
                disclosed = _disclose(
                    room=room, source=source, recipient_agent_id=agent_id, turn=turn
                )
                if disclosed.error is not None:
                    errors.append(disclosed.error)
                    continue
                if source.recipient == "own_agent":
                    own_items.extend(disclosed.items)
                    if disclosed.awaiting:
                        awaiting_own.append(source.resource)
                else:
                    peer_items.extend(_peer_item(item) for item in disclosed.items)
                    awaiting_peer = awaiting_peer or disclosed.awaiting
            refused = _asks_refused(
                asked, given={i.resource for i in peer_items}, room=room, agent_id=agent_id
            )
    except LedgerAppendError:
        # Nothing was disclosed (the transaction rolled back, uses included).
        errors, own_items, peer_items, refused = ["ledger_unavailable"], [], [], []
        awaiting_own, awaiting_peer = [], False
    except DatabaseError:
        logger.exception("context assembly failed: disclosing nothing")
        errors, own_items, peer_items, refused = ["gatekeeper.database_error"], [], [], []
        awaiting_own, awaiting_peer = [], False
    if awaiting_own:
        notices.append(AWAITING_OWN_NOTICE.format(kinds=", ".join(awaiting_own)))
    if awaiting_peer:
        notices.append(AWAITING_PEER_NOTICE)
    if refused:
        notices.append(f"Not cleared for you by the other owner: {', '.join(refused)}.")
    if errors:
        room_pause_fail_safe(room_id=room_id, rule=errors[0])
        notices.append(
            f"The room paused: a check failed ({errors[0]}), so nothing it guarded is included."
        )
    elif room.state != RoomState.OPEN:
        notices.append(f"The room is {room.state}: no vault items are disclosed until it opens.")

    messages = _peer_messages(room_id=room_id, agent_id=agent_id)
    whispers = [
        ContextWhisper(id=w.id, text=w.text, sent_at=w.created_at)
        for w in reversed(
            list(
                Whisper.objects.filter(room_id=room_id, agent_id=agent_id, owner_id=me.owner_id)
                .only("id", "text", "created_at")
                .order_by("-created_at")[:CONTEXT_WHISPERS]
            )
        )
    ]
    nonces = [m.nonce for m in messages] + [i.nonce for i in peer_items]
    return AgentContext(
        room_id=room.id,
        agent_id=agent_id,
        turn=turn,
        preamble=trusted_preamble(nonces=nonces),
        purpose=room.purpose,
        charter=room.charter,
        terms=room.terms,
        own_items=own_items,
        whispers=whispers,
        notices=notices,
        peer_items=peer_items,
        peer_messages=messages,
    )


def _asks_refused(
    asked: Sequence[str], *, given: set[str], room: Room, agent_id: UUID
) -> list[str]:
    """Record a denial for each asked kind of the other owner's items that was not disclosed
    (in the caller's transaction); returns those kinds. The rule does not say whether the
    other owner has such an item at all."""
    rule = ask_refusal_rule(RoomFacts(room_id=room.id, state=room.state, terms=room.terms))
    refused = [kind for kind in dict.fromkeys(asked) if kind not in given]
    for kind in refused:
        ledger_append(
            room_id=room.id,
            event=Denial(rule=rule, subject_id=str(agent_id), resource_id=kind),
        )
    return refused


def _sources(*, room_id: UUID, me: RoomMember, peer: RoomMember | None) -> list[_Source]:
    """Vault resources the live slips of this room's two agents mention for disclosure (one
    query). Only a shortlist: each one is still decided in full before anything is shown."""
    signed_for = {me.agent_id: me.owner_id}
    if peer is not None and peer.agent_id is not None:
        signed_for[peer.agent_id] = peer.owner_id
    rows = (
        SlipCapability.objects.filter(
            slip__room_id=room_id,
            slip__superseded_at__isnull=True,
            slip__agent_id__in=list(signed_for),
            operation__in=("read", "disclose"),
            resource__in=sorted(VAULT_KINDS),
        )
        .values_list("slip__owner_id", "slip__agent_id", "resource", "operation")
        .distinct()
    )
    sources = {
        _Source(
            owner_id=owner_id,
            agent_id=source_agent,
            resource=resource,
            recipient="own_agent" if source_agent == me.agent_id else "peer_agent",
        )
        for owner_id, source_agent, resource, operation in rows
        if signed_for.get(source_agent) == owner_id  # a slip binds its own owner's seat
        and (operation == "disclose" or source_agent == me.agent_id)  # "read": own agent only
    }
    return sorted(sources, key=lambda s: (s.recipient, s.resource))


def _disclose(*, room: Room, source: _Source, recipient_agent_id: UUID, turn: int) -> _Disclosed:
    """Decide, spend and record one resource for this turn: the items it cleared (cut to
    scope), whether it waits for its owner's approval, and, when a check failed, the rule
    that should pause the room."""
    decision = decide_guarded(
        DisclosureRequest(
            room=RoomFacts(room_id=room.id, state=room.state, terms=room.terms),
            owner_id=source.owner_id,
            source_agent_id=source.agent_id,
            recipient_agent_id=recipient_agent_id,
            resource=source.resource,
            recipient=source.recipient,
        )
    )
    now = timezone.now()
    grant: Grant | None = None
    if (
        decision.outcome is Outcome.NEEDS_GRANT
        and decision.rule == "approval_per_use"
        and decision.capability is not None
        and decision.slip_id is not None
    ):
        ask = DisclosureAsk(
            room_id=room.id,
            owner_id=source.owner_id,
            source_agent_id=source.agent_id,
            recipient_agent_id=recipient_agent_id,
            recipient=source.recipient,
            resource=source.resource,
            operation=decision.capability.operation,
            scope=decision.capability.scope,
            slip_id=decision.slip_id,
        )
        # Asked before anything about the vault is read: whether the owner is asked depends
        # on their slip only, never on whether they hold such an item.
        grant = disclosure_grant_claim(ask=ask, now=now)
        if grant is None:
            state = disclosure_approval_ask(ask=ask, now=now)
            return _Disclosed([], awaiting=state is AskState.WAITING)
    elif not decision.allowed or decision.capability is None:
        return _Disclosed([], decision.rule if _is_check_error(decision.rule) else None)
    assert decision.capability is not None
    # Lock the items so none changes between spending the use and recording what was shown.
    item_ids = list(
        VaultItem.objects.select_for_update()
        .filter(owner_id=source.owner_id, kind=source.resource)
        .values_list("id", flat=True)
    )
    if not item_ids:
        # Nothing to show: spend no use (an approval stays for when there is, until it ends).
        return _Disclosed([])
    if grant is not None and not disclosure_grant_consume(grant=grant, now=now):
        return _Disclosed([])
    spent = capability_use(
        room_id=room.id,
        owner_id=source.owner_id,
        agent_id=source.agent_id,
        resource=source.resource,
        operation=decision.capability.operation,  # the record that cleared it pays the use
        recipient=source.recipient,
        now=now,
    )
    if not spent.allowed or (grant is not None and spent.slip_id != grant.slip_id):
        # Not cleared after all (a use spent meanwhile, the slip replaced): nothing is shown.
        # A consumed grant stays consumed: the owner is asked again next turn.
        return _Disclosed([], spent.rule if _is_check_error(spent.rule) else None)
    capability = decision.capability
    views = vault_scoped_view(owner_id=source.owner_id, capability=capability, now=now)
    # Same filter and ordering as the locked ids; an item created since is left out.
    items: list[ClearedItem] = []
    for item_id, view in zip(item_ids, views, strict=False):
        ledger_append(
            room_id=room.id,
            event=Disclosure(
                owner_id=str(source.owner_id),
                item_id=str(item_id),
                recipient_agent_id=str(recipient_agent_id),
                turn=turn,
            ),
        )
        items.append(
            ClearedItem(
                item_id=item_id,
                owner_id=str(source.owner_id),
                resource=source.resource,
                scope=capability.scope,
                content=view,
            )
        )
    return _Disclosed(items)


def _clean_strings(value: Any) -> Any:
    """The other owner's item content with every string stripped like peer text."""
    if isinstance(value, str):
        return fence(value, source="peer.item").text
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
    )
    return PeerItem(
        item_id=item.item_id,
        owner_id=item.owner_id,
        resource=item.resource,
        scope=item.scope,
        content=content,
        fenced=block.fenced,
        nonce=block.nonce,
    )


def _peer_messages(*, room_id: UUID, agent_id: UUID) -> list[ContextMessage]:
    recent = list(
        Message.objects.filter(room_id=room_id)
        .exclude(sender_id=agent_id)
        .only("seq", "sender_id", "text", "flags", "created_at")
        .order_by("-seq")[:CONTEXT_PEER_MESSAGES]
    )
    fenced: list[ContextMessage] = []
    for message in reversed(recent):
        block: FencedText = fence(message.text, source="peer", cap_bytes=CONTEXT_MESSAGE_CAP_BYTES)
        fenced.append(
            ContextMessage(
                seq=message.seq,
                sender_agent_id=message.sender_id,
                fenced=block.fenced,
                nonce=block.nonce,
                flags=list(message.flags),
                truncated=block.truncated,
                sent_at=message.created_at,
            )
        )
    return fenced


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
