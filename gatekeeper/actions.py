"""Typed action requests: decide, record, and execute at most once.

An agent's action arrives as a typed request (tool name + JSON arguments + idempotency key),
never as text. ``action_request`` decides it through the guarded decision point and records
the decision in the ledger before any effect: allowed actions run through the tool's adapter
once; anything beyond the slip waits for the affected owner's grant (``gatekeeper.grants``);
denials are recorded. The caller (rooms) pauses the room at a fork for anything not allowed.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Any
from uuid import UUID

import rfc8785
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from gatekeeper.adapters.outcomes import (
    AdapterOutcome,
    ExecutionContext,
    Succeeded,
    ToolAdapter,
    Unavailable,
)
from gatekeeper.adapters.sandbox import SandboxAdapter
from gatekeeper.adapters.server import ServerToolAdapter
from gatekeeper.adapters.webhook import PENDING_REASON, WebhookAdapter, webhook_delivery_outcome
from gatekeeper.decision import (
    ActionRequest,
    AgentFacts,
    Decision,
    Outcome,
    RoomFacts,
    decide_guarded,
)
from gatekeeper.errors import GatekeeperError
from gatekeeper.models import DeliveryStatus, WebhookDelivery, WebhookEndpoint
from gatekeeper.records import ActionRecord, ActionStatus, Grant
from gatekeeper.tools.registry import tool_arguments_validate, tool_get
from gatekeeper.tools.spec import ToolSpec
from ledger.events import (
    ActionExecuted,
    ActionRequested,
    Denial,
    ForkOpened,
    GrantRequested,
    rule_id_from,
)
from ledger.services import ledger_append
from slips.verification import capability_use

MIN_PEER_ECHO_CHARS = 4  # shorter argument strings match peer text by chance
# Refusals that need no fork: requests refused for their shape before any permission was
# considered (the agent gets the validation error and can correct itself), and requests from
# an agent its owner has already withdrawn at a Signal Flare.
SHAPE_RULES = frozenset(
    {"unknown_tool", "invalid_arguments", "idempotency_key_reused", "agent_withdrawn"}
)


@dataclass(frozen=True)
class ActionResult:
    """What became of an action request; ``replay`` when the idempotency key was seen before."""

    action_id: UUID | None
    status: str  # an ActionStatus value
    rule: str
    detail: str = ""
    output: dict[str, Any] | None = None
    grant_id: UUID | None = None
    replay: bool = False
    # A read-only lookup of no owner's data (venues_search): refusing it harms no one, so
    # it never stops the room.
    lookup: bool = False

    @property
    def pauses_room(self) -> bool:
        """Anything but an allowed action stops the room at a fork for the owners, except
        refusals for shape and lookups that read no owner's data."""
        if self.rule in SHAPE_RULES or self.lookup:
            return False
        return self.status in (ActionStatus.AWAITING_GRANT, ActionStatus.DENIED)


def arguments_hash(arguments: dict[str, Any]) -> str:
    """SHA-256 of the RFC 8785 canonical arguments: what a grant is bound to."""
    return hashlib.sha256(rfc8785.dumps(arguments)).hexdigest()


def validated_arguments_hash(tool: str, arguments: dict[str, Any]) -> str | None:
    """Hash of the arguments as the schema normalises them (so "Z" and "+00:00" agree)."""
    try:
        return arguments_hash(
            tool_arguments_validate(tool=tool, arguments=arguments).model_dump(mode="json")
        )
    except GatekeeperError:
        return None


def _echoes_peer(arguments: dict[str, Any], peer_texts: Sequence[str]) -> bool:
    """Whether any string argument appears verbatim in what the peer agent wrote."""
    strings = [
        v for v in arguments.values() if isinstance(v, str) and len(v) >= MIN_PEER_ECHO_CHARS
    ]
    return any(s in text for s in strings for text in peer_texts)


def tool_is_lookup(tool: str) -> bool:
    """Whether ``tool`` only reads data that is no owner's (it never pauses the room)."""
    spec = tool_get(tool)
    return spec is not None and spec.read_only and not spec.effective_manifest.touches_owner_data


def _result(record: ActionRecord, *, replay: bool = False, detail: str = "") -> ActionResult:
    grant = Grant.objects.filter(action=record).only("id").first()
    return ActionResult(
        lookup=tool_is_lookup(record.tool),
        action_id=record.id,
        status=record.status,
        rule=record.rule,
        detail=detail,
        output=record.outcome,
        grant_id=grant.id if grant else None,
        replay=replay,
    )


def action_result_lookup(
    *, room_id: UUID, agent_id: UUID, idempotency_key: str
) -> ActionResult | None:
    """The current result of an earlier request (after its grant was decided, say)."""
    record = ActionRecord.objects.filter(
        room_id=room_id, agent_id=agent_id, idempotency_key=idempotency_key
    ).first()
    return _result(record) if record else None


def _record_denial(room: RoomFacts, agent: AgentFacts, rule: str, tool: str | None) -> None:
    ledger_append(
        room_id=room.room_id,
        event=Denial(rule=_rule_id(rule), subject_id=str(agent.agent_id), resource_id=tool),
    )


def _denied_without_record(
    room: RoomFacts, agent: AgentFacts, decision: Decision, tool: str
) -> ActionResult:
    _record_denial(room, agent, decision.rule, tool=None)
    return ActionResult(
        None, ActionStatus.DENIED, decision.rule, decision.detail, lookup=tool_is_lookup(tool)
    )


@transaction.atomic
def action_request(
    *,
    room: RoomFacts,
    agent: AgentFacts,
    tool: str,
    arguments: dict[str, Any],
    idempotency_key: str,
    peer_texts: Sequence[str] = (),
) -> ActionResult:
    """Decide and, if allowed, execute one typed action; replays return the first result.

    Must be given facts read in the caller's transaction. Raises ``LedgerAppendError`` if the
    decision cannot be recorded (then nothing happened; the caller pauses the room).
    """
    earlier = (
        ActionRecord.objects.select_for_update()
        .filter(room_id=room.room_id, agent_id=agent.agent_id, idempotency_key=idempotency_key)
        .first()
    )
    # A revoked agent (or a socket whose token was rotated away) resending an earlier act's
    # key is decided like any act of a revoked agent: denied and recorded, told nothing of
    # the earlier one, and no adapter asked again on its behalf.
    if earlier is not None and not agent.revoked:
        if earlier.tool != tool or earlier.arguments_hash != validated_arguments_hash(
            tool, arguments
        ):
            return ActionResult(earlier.id, ActionStatus.DENIED, "idempotency_key_reused")
        if earlier.status == ActionStatus.PENDING:
            # Its delivery's outcome as it stands now, read from the delivery itself: never
            # through whichever adapter the owner has now (a webhook switched off or replaced
            # meanwhile must not run it in the sandbox or refuse it while it is in flight).
            _pending_settled(earlier)
        return _result(earlier, replay=True)

    decision = decide_guarded(ActionRequest(room=room, agent=agent, tool=tool, arguments=arguments))
    if decision.outcome is Outcome.ALLOW and decision.rule == "cleared":
        decision = _spend_slip_use(decision, room=room, agent=agent, tool=tool)
    if decision.arguments is None:
        # Unknown tool or arguments that fail the schema: nothing to keep but the denial.
        return _denied_without_record(room, agent, decision, tool)
    validated = decision.arguments.model_dump(mode="json")
    spec = tool_get(tool)
    assert spec is not None  # decide() validated the name
    record = ActionRecord.objects.create(
        room_id=room.room_id,
        agent_id=agent.agent_id,
        owner_id=agent.owner_id,
        tool=tool,
        arguments=validated,
        arguments_hash=arguments_hash(validated),
        idempotency_key=idempotency_key,
        derived_from_peer=_echoes_peer(validated, peer_texts),
        status=ActionStatus.DENIED,
        rule=decision.rule,
        decided_at=timezone.now(),
    )
    ledger_append(
        room_id=room.room_id,
        event=ActionRequested(
            action_id=str(record.id), agent_id=str(agent.agent_id), tool=tool, schema_hash=None
        ),
    )
    if decision.outcome is Outcome.ALLOW:
        return _execute(record, room=room, agent=agent, grant_id=None)
    if decision.outcome is Outcome.NEEDS_GRANT:
        grant = Grant.objects.create(
            action=record,
            room_id=room.room_id,
            owner_id=agent.owner_id,
            reason_rule=decision.rule,
            expires_at=timezone.now() + timedelta(seconds=settings.SYNAPSIA["GRANT_TTL_SECONDS"]),
        )
        ledger_append(
            room_id=room.room_id,
            event=GrantRequested(
                grant_id=str(grant.id), action_id=str(record.id), owner_id=str(agent.owner_id)
            ),
        )
        ledger_append(
            room_id=room.room_id,
            event=ForkOpened(
                fork_id=str(grant.id),
                reason_rule=_rule_id(decision.rule),
                owner_id=str(agent.owner_id),
            ),
        )
        record.status = ActionStatus.AWAITING_GRANT
        record.save(update_fields=["status"])
        return _result(record)
    _record_denial(room, agent, decision.rule, tool=tool)
    return _result(record, detail=decision.detail)


def _spend_slip_use(
    decision: Decision, *, room: RoomFacts, agent: AgentFacts, tool: str
) -> Decision:
    """An action the slip clears spends one of its uses (race-safe); if another request took
    the last one meanwhile, this one is beyond the slip after all and needs a grant. A tool
    that touches no owner data needs no slip item, so it spends none."""
    spec = tool_get(tool)
    if spec is not None and not spec.effective_manifest.touches_owner_data:
        return decision
    spent = capability_use(
        room_id=room.room_id,
        owner_id=agent.owner_id,
        agent_id=agent.agent_id,
        resource=f"tool:{tool}",
        operation="act",
        recipient="own_agent",
        now=timezone.now(),
    )
    if spent.allowed:
        return decision
    return replace(decision, outcome=Outcome.NEEDS_GRANT, rule=f"beyond_slip.{spent.rule}")


def _rule_id(rule: str) -> str:
    """Ledger rule ids are short slugs; most decision rules already are (see rule_id_from)."""
    return rule_id_from(rule)


def _grant_id(record: ActionRecord) -> UUID | None:
    grant = Grant.objects.filter(action=record).only("id").first()
    return grant.id if grant else None


def adapter_for(
    *, owner_id: int, spec: ToolSpec | None = None, room: RoomFacts | None = None
) -> ToolAdapter:
    """Where an action runs: in-process for a server-executed tool (from the room's own
    data, never an owner's webhook); else the owner's active webhook if they configured one
    (the real world), otherwise the local sandbox."""
    if spec is not None and spec.effective_manifest.server_executed:
        return ServerToolAdapter(terms=room.terms if room is not None else None)
    endpoint = (
        WebhookEndpoint.objects.filter(owner_id=owner_id, active=True)
        .order_by("-created_at")
        .first()
    )
    return WebhookAdapter(endpoint_id=endpoint.id) if endpoint else SandboxAdapter()


def _execute(
    record: ActionRecord,
    *,
    room: RoomFacts,
    agent: AgentFacts,
    grant_id: UUID | None,
) -> ActionResult:
    """Run an allowed action through its owner's adapter, once, and record the outcome.

    A webhook delivery still being retried comes back pending: the action is recorded as
    ``pending`` (not executed), and asking again with the same idempotency key reports it.
    """
    spec = tool_get(record.tool)
    assert spec is not None
    outcome = adapter_for(owner_id=agent.owner_id, spec=spec, room=room).execute(
        spec=spec,
        arguments=record.arguments,
        idempotency_key=record.id.hex,
        context=ExecutionContext(
            room_id=room.room_id, agent_id=agent.agent_id, owner_id=agent.owner_id
        ),
    )
    _outcome_recorded(record, outcome, grant_id=grant_id)
    return _result(record)


def _outcome_recorded(
    record: ActionRecord, outcome: AdapterOutcome, *, grant_id: UUID | None
) -> None:
    """Record what the adapter answered: a delivery still being retried as ``pending`` (no
    event), anything else as executed or failed with its ``action_executed`` event."""
    record.outcome = outcome.model_dump(mode="json")
    if isinstance(outcome, Unavailable) and outcome.reason_code == PENDING_REASON:
        record.status = ActionStatus.PENDING
        record.save(update_fields=["status", "outcome"])
        return
    succeeded = isinstance(outcome, Succeeded)
    ledger_append(
        room_id=record.room_id,
        event=ActionExecuted(
            action_id=str(record.id),
            agent_id=str(record.agent_id),
            tool=record.tool,
            grant_id=str(grant_id) if grant_id else None,
            outcome="ok" if succeeded else "failed",
        ),
    )
    record.status = ActionStatus.EXECUTED if succeeded else ActionStatus.FAILED
    record.save(update_fields=["status", "outcome"])


@transaction.atomic
def action_delivery_settle(*, action_id: UUID) -> ActionRecord | None:
    """Settle an action recorded as ``pending`` from its webhook delivery, once the delivery
    has its final status (the worker, right after that status commits): the outcome the
    agent's own resend would be given, recorded with its ``action_executed`` event, so the
    record is complete whether or not the agent ever asks again. Nothing is posted. Returns
    the record settled now; None when there was nothing to settle (no such action, settled
    already by the agent's resend or by its own eager delivery, or the delivery not final)."""
    record = (
        ActionRecord.objects.select_for_update()
        .filter(id=action_id, status=ActionStatus.PENDING)
        .first()
    )
    if record is None:
        return None
    _pending_settled(record)
    return None if record.status == ActionStatus.PENDING else record


def _pending_settled(record: ActionRecord) -> None:
    """Record a ``pending`` action's outcome from the webhook delivery it made (keyed by the
    action's id, ``_execute``; locked by the caller), once that delivery is final; while it
    is not, the record stays ``pending``. Nothing is posted, whatever the owner's webhooks
    are now: the act went to this delivery's endpoint and only its answer settles it."""
    delivery = WebhookDelivery.objects.filter(idempotency_key=record.id.hex).first()
    if delivery is None or delivery.tool != record.tool:
        return  # not a delivery of this act: it stays pending (never settled from another's)
    if delivery.status == DeliveryStatus.PENDING:
        return  # not final yet
    _outcome_recorded(
        record, webhook_delivery_outcome(delivery=delivery), grant_id=_grant_id(record)
    )


def action_execute_granted(*, record_id: UUID, room: RoomFacts, agent: AgentFacts) -> ActionResult:
    """Execute an action whose grant ``gatekeeper.grants`` just verified and consumed.

    Called inside the grant's transaction; decides again (live policy, slip, room state) with
    the grant standing in for the missing clearance, so a grant never overrides a denial.
    """
    record = ActionRecord.objects.select_for_update().get(id=record_id)
    if record.status != ActionStatus.AWAITING_GRANT:
        return _result(record, replay=True)
    grant = Grant.objects.get(action=record)
    decision = decide_guarded(
        ActionRequest(
            room=room, agent=agent, tool=record.tool, arguments=record.arguments, grant_ok=True
        )
    )
    if not decision.allowed:
        record.status = ActionStatus.DENIED
        record.rule = decision.rule
        record.save(update_fields=["status", "rule"])
        _record_denial(room, agent, decision.rule, tool=record.tool)
        return _result(record, detail=decision.detail)
    record.rule = decision.rule
    record.save(update_fields=["rule"])
    return _execute(record, room=room, agent=agent, grant_id=grant.id)
