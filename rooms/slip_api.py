"""Room-scoped slip endpoints (session auth, CSRF): the template to sign, a preview of a
draft in words, submit, list, tier, conflicts.

These live in ``rooms`` because signing for a room needs a seat in it, and only ``rooms`` may
read seats (``slips`` sits below ``rooms`` and cannot import it). Each endpoint checks the
caller's seat with ``rooms.selectors.room_seat`` (404 when there is none) and passes the agent
bound to that seat to ``slips.services``, which refuses a slip bound to any other agent.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal
from uuid import UUID

from django.http import HttpRequest
from django.utils import timezone
from ninja import Router, Schema, Status
from ninja.security import django_auth

from rooms import selectors as room_selectors
from rooms.errors import InvalidState
from rooms.models import RoomMember
from slips import selectors, services
from slips.api import slip_errors
from slips.capabilities import APPROVALS, NARROWEST, RECIPIENTS, TOOL_SCOPES, VAULT_SCOPES
from slips.models import Slip, Tier
from slips.preview import draft_capabilities, slip_preview
from slips.verification import room_tier
from synapsia.owners import request_owner

router = Router(auth=django_auth, tags=["slips"])


def _seated_agent(request: HttpRequest, room_id: UUID) -> UUID:
    """The agent bound to the caller's seat in the room (404 without a seat, 409 unbound)."""
    seat: RoomMember = room_selectors.room_seat(owner=request_owner(request), room_id=room_id)
    if seat.agent_id is None:
        raise InvalidState("Bind your agent to this room before signing a slip for it.")
    return seat.agent_id


class TemplateOut(Schema):
    payload: dict[str, Any]  # fill key_id and capabilities, canonicalise, sign
    domain_tag: str
    resources: dict[str, list[str]]  # vault kinds -> scopes, narrowest first
    tool_scopes: list[str]
    recipients: list[str]
    approvals: list[str]
    narrowest: dict[str, Any]


class PreviewIn(Schema):
    capabilities: list[Any]  # the draft's capability records, as they would be signed


class PreviewItemOut(Schema):
    resource: str
    title: str  # e.g. "Your budget"
    shown: list[str]  # what arrives, line by line, in words
    note: str  # how the tier or an approval changes it; empty when nothing does


class AgentPreviewOut(Schema):
    agent: str  # "Your agent" / "The other agent"
    recipient: Literal["own_agent", "peer_agent"]
    items: list[PreviewItemOut]


class PreviewOut(Schema):
    tier: str
    tier_name: str
    tier_effect: str
    agents: list[AgentPreviewOut]
    held_back: list[str]  # checked items the room's tier keeps from every agent


class SlipIn(Schema):
    payload: str  # the RFC 8785 canonical JSON text exactly as signed
    signature: str  # unpadded base64url Ed25519 signature of the domain tag + payload


class SlipOut(Schema):
    id: UUID
    room_id: UUID
    agent_id: UUID
    key_id: UUID
    issued_at: int
    expires_at: int
    superseded_at: datetime | None
    capabilities: list[dict[str, Any]]


class TierIn(Schema):
    tier: Literal["sandbox", "room_only", "collaborative"]


class TierOut(Schema):
    chosen: str
    room: str  # the tier the room runs under: the narrowest any owner holds
    words: str  # the tier in force, who chose it and what it does, in a sentence
    conflicts: list[str]  # where the owners' choices differ, in sentences (both see these)


class ConflictOut(Schema):
    resource: str
    operation: str
    field: str
    values: dict[str, Any]
    winner: Any
    reason: str


def _slip_out(slip: Slip) -> SlipOut:
    return SlipOut(
        id=slip.id,
        room_id=slip.room_id,
        agent_id=slip.agent_id,
        key_id=slip.key_id,
        issued_at=slip.issued_at,
        expires_at=slip.expires_at,
        superseded_at=slip.superseded_at,
        capabilities=[c.as_record() for c in selectors.slip_capabilities(slip=slip)],
    )


@router.get("/rooms/{room_id}/slip-template", response=TemplateOut)
@slip_errors
def slip_template(request: HttpRequest, room_id: UUID) -> TemplateOut:
    agent_id = _seated_agent(request, room_id)
    return TemplateOut(
        payload=services.slip_template(
            owner=request_owner(request), room_id=room_id, seated_agent_id=agent_id
        ),
        domain_tag="synapsia-slip-v1\n",
        resources={k: list(v) for k, v in VAULT_SCOPES.items()},
        tool_scopes=list(TOOL_SCOPES),
        recipients=list(RECIPIENTS),
        approvals=list(APPROVALS),
        narrowest=NARROWEST,
    )


@router.post("/rooms/{room_id}/slip-preview", response=PreviewOut)
@slip_errors
def slip_preview_draft(request: HttpRequest, room_id: UUID, payload: PreviewIn) -> PreviewOut:
    """What each agent would receive of the caller's vault if they signed these capabilities
    now, under the room's tier, in words. Nothing is signed, stored, spent or recorded."""
    _seated_agent(request, room_id)
    owner = request_owner(request)
    now = timezone.now()
    preview = slip_preview(
        owner_id=owner.pk,
        capabilities=draft_capabilities(payload.capabilities, now=now),
        tier=room_tier(room_id=room_id),
        now=now,
        zone=timezone.get_current_timezone(),
        currency=selectors.owner_budget_currency(owner_id=owner.pk),
    )
    return PreviewOut(
        tier=preview.tier,
        tier_name=preview.tier_name,
        tier_effect=preview.tier_effect,
        agents=[
            AgentPreviewOut(
                agent=a.agent,
                recipient=a.recipient,
                items=[
                    PreviewItemOut(resource=i.resource, title=i.title, shown=i.shown, note=i.note)
                    for i in a.items
                ],
            )
            for a in preview.agents
        ],
        held_back=preview.held_back,
    )


@router.post("/rooms/{room_id}/slips", response={201: SlipOut})
@slip_errors
def slip_submit(request: HttpRequest, room_id: UUID, payload: SlipIn) -> Status[SlipOut]:
    agent_id = _seated_agent(request, room_id)
    slip = services.slip_submit(
        owner=request_owner(request),
        room_id=room_id,
        seated_agent_id=agent_id,
        payload=payload.payload,
        signature=payload.signature,
    )
    return Status(201, _slip_out(slip))


@router.get("/rooms/{room_id}/slips", response=list[SlipOut])
@slip_errors
def slips_list(request: HttpRequest, room_id: UUID) -> list[SlipOut]:
    room_selectors.room_seat(owner=request_owner(request), room_id=room_id)
    return [
        _slip_out(s)
        for s in selectors.slips_of_owner(owner=request_owner(request), room_id=room_id)
    ]


@router.put("/rooms/{room_id}/tier", response=TierOut)
@slip_errors
def tier_choose(request: HttpRequest, room_id: UUID, payload: TierIn) -> TierOut:
    room_selectors.room_seat(owner=request_owner(request), room_id=room_id)
    owner = request_owner(request)
    row = services.tier_choose(owner=owner, room_id=room_id, tier=payload.tier)
    return TierOut(
        chosen=Tier(row.tier).value,
        room=room_tier(room_id=room_id),
        words=selectors.room_tier_words(room_id, reader_id=owner.pk),
        conflicts=selectors.conflicts_in_words(room_id=room_id, reader_id=owner.pk),
    )


@router.get("/rooms/{room_id}/slip-conflicts", response=list[ConflictOut])
@slip_errors
def slip_conflicts(request: HttpRequest, room_id: UUID) -> list[ConflictOut]:
    """Which rule won where the owners' slips or tiers differ; both owners see the same list."""
    room_selectors.room_seat(owner=request_owner(request), room_id=room_id)
    return [
        ConflictOut.model_validate(c, from_attributes=True)
        for c in selectors.room_conflicts(room_id=room_id)
    ]
