"""Actions in a room, and the forks they pause it at.

Rooms supplies the live facts (room state, the agent's seat and owner, what the peer said)
and the pause; ``gatekeeper`` decides, records and executes. Anything that is not allowed
pauses the room at a fork for the owners; a denial or failure to record also pauses it.
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone

from gatekeeper.actions import (
    ActionResult,
    action_delivery_settle,
    action_execute_granted,
    action_request,
    validated_arguments_hash,
)
from gatekeeper.decision import AgentFacts, RoomFacts
from gatekeeper.grants import GrantUnusable, grant_approve, grant_deny
from gatekeeper.models import DeliveryStatus, WebhookDelivery
from gatekeeper.records import ActionRecord, ActionStatus, Grant, GrantKind
from gatekeeper.standing import agent_shut_out
from ledger.events import ForkResolved, RoomResumed
from ledger.services import LedgerAppendError, ledger_append
from rooms import realtime
from rooms.errors import InvalidState, NotFound
from rooms.flares import flare_if_contradicting, flare_if_looping
from rooms.models import Message, Room, RoomMember, RoomState, SeatStanding
from rooms.outcomes import outcome_record
from rooms.pausing import pause_at_fork, room_pause_fail_safe
from rooms.sealing import one_hop, opened_for_room
from rooms.services import resume_refused_over_a_flare

__all__ = ["action_for_agent", "grant_decide", "room_pause_fail_safe"]
PEER_TEXT_WINDOW = 50  # recent peer messages checked for arguments copied from them
SETTLE_BATCH = 500  # pending actions looked at per run of actions_pending_settle


def _agent_facts(seat: RoomMember, token: str | None = None) -> AgentFacts:
    """The Gatekeeper's facts of the seat's agent, from the row just read with the seat.
    ``token``: the digest of the token the asking socket was admitted with; rotated away
    since, the agent is as revoked (``agent_shut_out``). None: the server itself asks."""
    agent = seat.agent
    assert agent is not None
    return AgentFacts(
        agent_id=agent.id,
        owner_id=seat.owner_id,
        advisor_only=agent.advisor_only,
        declared_tools=tuple(agent.declared_tools) if agent.declared_tools is not None else None,
        revoked=agent_shut_out(
            revoked=agent.revoked_at is not None, stored_token=agent.token_hash, token=token
        ),
        active=seat.standing == SeatStanding.ACTIVE,
    )


def action_for_agent(
    *,
    room_id: UUID,
    agent_id: UUID,
    client_id: str,
    tool: str,
    arguments: dict[str, Any],
    token: str | None = None,
) -> ActionResult:
    """An agent's typed action request; pauses the room unless the action was allowed.

    ``token``: an agent's socket's token digest, as it was admitted with, compared with the
    agent's token on the agent row the decision reads anyway: rotated away since, the action
    is decided as a revoked agent's (denied, ``agent_revoked``; nothing runs), and no flare is
    raised on its behalf. None: the server itself asks (an owner in person, a test)."""
    if flare_if_contradicting(
        room_id=room_id,
        agent_id=agent_id,
        tool=tool,
        arguments_sha256=validated_arguments_hash(tool, arguments),
        idempotency_key=client_id,
        token=token,
    ):
        return ActionResult(None, ActionStatus.DENIED, "contradiction")
    try:
        with transaction.atomic():
            room = Room.objects.select_for_update().get(id=room_id)
            seat = RoomMember.objects.select_related("agent").get(room=room, agent_id=agent_id)
            with one_hop():
                peer_texts = opened_for_room(
                    Message.objects.filter(room=room)
                    .exclude(sender_id=agent_id)
                    .order_by("-seq")
                    .values_list("text", flat=True)[:PEER_TEXT_WINDOW],
                    room_id=room.id,
                )
            result = action_request(
                room=RoomFacts(room_id=room.id, state=room.state, terms=room.terms),
                agent=_agent_facts(seat, token),
                tool=tool,
                arguments=arguments,
                idempotency_key=client_id,
                peer_texts=peer_texts,
            )
            if result.pauses_room and not result.replay:
                pause_at_fork(room, by="gatekeeper", rule=result.rule)
            if result.status == ActionStatus.EXECUTED and result.action_id is not None:
                outcome_record(room=room, action_id=result.action_id)  # the room's outcome
    except LedgerAppendError:
        # The decision could not be recorded: nothing happened; stop the room.
        room_pause_fail_safe(room_id=room_id, rule="ledger_unavailable")
        return ActionResult(None, ActionStatus.DENIED, "ledger_unavailable")
    if result.status == ActionStatus.DENIED and result.pauses_room and not result.replay:
        flare_if_looping(room_id=room_id, agent_id=agent_id, token=token)
    return result


def action_pending_settled(*, idempotency_key: str, **_: object) -> bool:
    """``gatekeeper.signals.webhook_delivery_settled`` receiver (the worker, after the
    delivery's final status committed): the action that delivery made, if still recorded as
    pending, is settled from it (``action_delivery_settle``: recorded with its event whether
    or not the agent asks again), the room's outcome recorded from it as for an act (a table
    booked through the webhook is the agreed plan), and its agent's socket told.
    An action settled already (the embedded profile's eager delivery, or the agent's resend
    first) is not settled or announced twice. When the ledger cannot record it, nothing is
    settled and the room pauses, as for an act. Whether it settled the action now."""
    try:
        action_id = UUID(hex=idempotency_key)  # an action's delivery is keyed by its id
    except ValueError:
        return False
    room_id = (
        ActionRecord.objects.filter(id=action_id, status=ActionStatus.PENDING)
        .values_list("room_id", flat=True)
        .first()
    )
    if room_id is None:
        return False  # settled already, or not an action's delivery
    try:
        with transaction.atomic():
            # The room locked before the action, in the order an act locks them.
            room = Room.objects.select_for_update().filter(id=room_id).first()
            if room is None:
                return False
            settled = action_delivery_settle(action_id=action_id)
            if settled is not None and settled.status == ActionStatus.EXECUTED:
                outcome_record(room=room, action_id=settled.id)  # the room's outcome
    except LedgerAppendError:
        room_pause_fail_safe(room_id=room_id, rule="ledger_unavailable")
        return False
    if settled is None:
        return False
    realtime.announce_action_result(
        room_id=settled.room_id, agent_id=settled.agent_id, ref=settled.idempotency_key
    )
    return True


def actions_pending_settle() -> int:
    """Settle every action still ``pending`` whose webhook delivery is final (Celery beat,
    ``rooms.actions_settle``), as ``action_pending_settled`` does: the signal that settles
    one is sent after its delivery's status commits, so a worker stopped between the two
    loses it, and an agent that is gone never resends its act. Without this the booking
    would stay out of the record (no ``action_executed``, no agreed plan) for good. How many
    it settled; at most ``SETTLE_BATCH`` a run, the oldest first (the next run goes on)."""
    pending = ActionRecord.objects.filter(status=ActionStatus.PENDING).order_by("created_at")
    keys = [action_id.hex for action_id in pending.values_list("id", flat=True)[:SETTLE_BATCH]]
    final = (
        WebhookDelivery.objects.filter(idempotency_key__in=keys)
        .exclude(status=DeliveryStatus.PENDING)
        .values_list("idempotency_key", flat=True)
    )
    return sum(action_pending_settled(idempotency_key=key) for key in final)


def grant_decide(
    *,
    owner: User,
    room_id: UUID,
    grant_id: UUID,
    approve: bool,
    key_id: UUID | None = None,
    signature: str = "",
) -> ActionResult:
    """The affected owner answers a fork: a signed approval runs exactly that action once and
    resumes the room; a denial ends the action and leaves the room paused. Either way the
    agent's socket is told once the answer commits (it re-reads the action's result)."""
    with transaction.atomic():
        room = Room.objects.select_for_update().filter(id=room_id, members__owner=owner).first()
        if room is None:
            raise NotFound("No such room.")
        grant = Grant.objects.filter(id=grant_id, room_id=room.id, owner=owner).first()
        if grant is None:
            raise NotFound("No such grant request.")
        if grant.kind == GrantKind.DISCLOSURE:
            return _disclosure_grant_decide(
                owner=owner,
                room=room,
                grant_id=grant_id,
                approve=approve,
                key_id=key_id,
                signature=signature,
            )
        try:
            if approve:
                if key_id is None:
                    raise InvalidState("An approval must be signed with one of your device keys.")
                if room.state == RoomState.PAUSED:
                    # Approving resumes the room to run the action: never around the other
                    # owner's unanswered Signal Flare. Refused before the approval is
                    # recorded, so the request still waits.
                    resume_refused_over_a_flare(
                        owner, room, then=" Approve this request again once the room has resumed."
                    )
                check = grant_approve(
                    owner=owner, grant_id=grant_id, key_id=key_id, signature=signature
                )
            else:
                grant_deny(owner=owner, grant_id=grant_id)
        except GrantUnusable as exc:
            raise InvalidState(exc.message) from None
        record = ActionRecord.objects.get(grant__id=grant_id)
        if not approve:
            ledger_append(
                room_id=room.id,
                event=ForkResolved(fork_id=str(grant_id), by=str(owner.pk), resolution="denied"),
            )
            result = ActionResult(record.id, record.status, record.rule, grant_id=grant_id)
        elif not check.ok:  # a refused signature: nothing was answered, so nothing to tell
            return ActionResult(record.id, record.status, check.rule, grant_id=grant_id)
        else:
            result = _action_grant_approved(
                owner=owner, room=room, grant_id=grant_id, record=record
            )
    # The agent waits on either answer: told once it commits.
    realtime.announce_action_result(
        room_id=room.id, agent_id=record.agent_id, ref=record.idempotency_key
    )
    return result


def _action_grant_approved(
    *, owner: User, room: Room, grant_id: UUID, record: ActionRecord
) -> ActionResult:
    """An approval verified (inside ``grant_decide``'s transaction, the room locked): the fork
    resolved, the room resumed, the action run once and what it means for the room recorded."""
    if room.state == RoomState.CLOSED:
        raise InvalidState("This room is closed.")
    ledger_append(
        room_id=room.id,
        event=ForkResolved(fork_id=str(grant_id), by=str(owner.pk), resolution="approved"),
    )
    if room.state == RoomState.PAUSED:
        ledger_append(room_id=room.id, event=RoomResumed(by=str(owner.pk)))
        room.state = RoomState.OPEN
        room.state_changed_at = timezone.now()
        room.save(update_fields=["state", "state_changed_at"])
        realtime.announce_room_state(room.id, room.state)
    seat = RoomMember.objects.select_related("agent").get(room=room, agent_id=record.agent_id)
    result = action_execute_granted(
        record_id=record.id,
        room=RoomFacts(room_id=room.id, state=room.state, terms=room.terms),
        agent=_agent_facts(seat),
    )
    if result.pauses_room:
        pause_at_fork(room, by="gatekeeper", rule=result.rule)
    if result.status == ActionStatus.EXECUTED and result.action_id is not None:
        outcome_record(room=room, action_id=result.action_id)  # the room's outcome
    return result


def _disclosure_grant_decide(
    *,
    owner: User,
    room: Room,
    grant_id: UUID,
    approve: bool,
    key_id: UUID | None,
    signature: str,
) -> ActionResult:
    """The item's owner answers a disclosure request (inside ``grant_decide``'s transaction,
    the room locked). Approving changes nothing at once: the recipient's next context
    assembly discloses the item once. The room's state is left as it is either way, as the
    request never paused it. ``status`` in the result is the grant's (``approved``,
    ``denied``, or ``pending``/``expired`` when the approval was refused, with the rule)."""
    try:
        if not approve:
            view = grant_deny(owner=owner, grant_id=grant_id)
            return ActionResult(None, view.status, "grant_denied", grant_id=grant_id)
        if key_id is None:
            raise InvalidState("An approval must be signed with one of your device keys.")
        if room.state == RoomState.CLOSED:
            raise InvalidState("This room is closed.")
        check = grant_approve(owner=owner, grant_id=grant_id, key_id=key_id, signature=signature)
    except GrantUnusable as exc:
        raise InvalidState(exc.message) from None
    status = Grant.objects.values_list("status", flat=True).get(id=grant_id)
    return ActionResult(None, status, check.rule, grant_id=grant_id)
