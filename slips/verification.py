"""Verification on every use: may this agent, in this room, use this resource, now?

The Gatekeeper calls ``capability_verdict`` before anything is read or disclosed and
``capability_use`` to spend one use. Each call re-reads live state and re-verifies from the
stored signed bytes: the slip in force, its signature under its key, the key not revoked, the
binding, expiry, the capability record, uses left, the room's tier and the other owner's
rules for shared resources. Nothing is cached across calls. Any error is a denial.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from django.db import transaction
from django.db.models import F

from slips.canonical import SLIP_TAG, payload_parse_canonical
from slips.capabilities import (
    Capability,
    capability_meet_room_rules,
    capability_under_tier,
    recipient_covers,
    tier_narrowest,
)
from slips.config import slips_setting
from slips.models import RoomTier, Slip, SlipCapability
from slips.payload import slip_payload_read
from slips.services import live_slip_capabilities
from slips.signatures import signature_valid

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class CapabilityVerdict:
    """A decision about one use. ``rule`` names why (``cleared`` when allowed).

    When allowed, ``capability`` is the *effective* capability (slip ∩ tier ∩ the other
    owner's room rules), whose ``scope`` says how much of the resource may be shown, and
    ``approval_required`` says the owner must approve this use first (approval ``per_use``).
    """

    allowed: bool
    rule: str
    capability: Capability | None = None
    uses_left: int | None = None
    slip_id: UUID | None = None
    key_id: UUID | None = None
    tier: str | None = None
    approval_required: bool = True


def _deny(rule: str, **context: Any) -> CapabilityVerdict:
    return CapabilityVerdict(allowed=False, rule=rule, **context)


def room_tier(*, room_id: UUID) -> str:
    """The tier the room runs under: the narrowest any owner with a slip or a choice holds."""
    chosen = dict(RoomTier.objects.filter(room_id=room_id).values_list("owner_id", "tier"))
    owners = set(
        Slip.objects.filter(room_id=room_id, superseded_at__isnull=True).values_list(
            "owner_id", flat=True
        )
    )
    tiers = list(chosen.values()) + [tier_narrowest([]).value for o in owners if o not in chosen]
    return tier_narrowest(tiers).value


def _evaluate(
    *,
    room_id: UUID,
    owner_id: Any,
    agent_id: UUID,
    resource: str,
    operation: str,
    recipient: str,
    now: datetime,
    lock: bool,
) -> tuple[CapabilityVerdict, SlipCapability | None]:
    slip = (
        Slip.objects.select_related("key")
        .filter(owner_id=owner_id, room_id=room_id, agent_id=agent_id, superseded_at__isnull=True)
        .first()
    )
    if slip is None:
        return _deny("no_slip"), None
    key = slip.key
    ids = {"slip_id": slip.id, "key_id": key.id}
    if key.owner_id != slip.owner_id:
        return _deny("foreign_key", **ids), None
    if key.revoked_at is not None:
        return _deny("key_revoked", **ids), None
    raw = bytes(slip.payload)
    if not signature_valid(
        public_key=bytes(key.public_key), message=SLIP_TAG + raw, signature=bytes(slip.signature)
    ):
        return _deny("bad_signature", **ids), None
    signed = slip_payload_read(payload_parse_canonical(raw))
    # The lookup columns must say what the signed bytes say, and the request must match both.
    if (
        signed.room_id != slip.room_id
        or signed.agent_id != slip.agent_id
        or signed.owner_id != str(slip.owner_id)
        or signed.key_id != key.id
        or signed.nonce != slip.nonce
        or (signed.issued_at, signed.expires_at) != (slip.issued_at, slip.expires_at)
        or signed.room_id != room_id
        or signed.agent_id != agent_id
        or signed.owner_id != str(owner_id)
    ):
        return _deny("binding_mismatch", **ids), None
    now_s = int(now.timestamp())
    if now_s >= signed.expires_at:
        return _deny("slip_expired", **ids), None
    if now_s < signed.issued_at - int(slips_setting("CLOCK_SKEW_SECONDS")):
        return _deny("slip_not_yet_valid", **ids), None
    match = [
        (i, c)
        for i, c in enumerate(signed.capabilities)
        if c.resource == resource and c.operation == operation
    ]
    if not match:
        return _deny("not_in_slip", **ids), None
    position, granted = match[0]
    if not recipient_covers(granted.recipient, recipient):
        return _deny("recipient_not_cleared", **ids), None
    if now_s >= granted.expires_at:
        return _deny("capability_expired", **ids), None
    rows = SlipCapability.objects.filter(slip=slip, position=position)
    row = (rows.select_for_update() if lock else rows).first()
    if row is None or row.resource != resource or row.operation != operation:
        return _deny("binding_mismatch", **ids), None
    if row.uses_left <= 0:
        return _deny("uses_exhausted", uses_left=0, **ids), row
    tier = room_tier(room_id=room_id)
    effective = capability_under_tier(granted, tier)
    if effective is None:
        return _deny("tier_forbids", tier=tier, **ids), row
    if not effective.is_vault:
        # A shared resource: where the other owner's live slip has a narrower rule, it wins.
        for other_owner, capabilities in live_slip_capabilities(room_id=room_id).items():
            if other_owner == str(owner_id):
                continue
            for theirs in capabilities:
                if (theirs.resource, theirs.operation) == (resource, operation):
                    effective = capability_meet_room_rules(effective, theirs)
    return (
        CapabilityVerdict(
            allowed=True,
            rule="cleared",
            capability=effective,
            uses_left=row.uses_left,
            tier=tier,
            approval_required=effective.approval != "none",
            **ids,
        ),
        row,
    )


def capability_verdict(
    *,
    room_id: UUID,
    owner_id: Any,
    agent_id: UUID,
    resource: str,
    operation: str,
    recipient: str,
    now: datetime,
) -> CapabilityVerdict:
    """Whether ``owner_id``'s slip lets ``agent_id`` use ``resource`` for ``operation`` towards
    ``recipient`` (``own_agent`` or ``peer_agent``) in ``room_id`` at ``now``. Reads only; does
    not spend a use. Any error is a denial (``verification_error``)."""
    try:
        verdict, _ = _evaluate(
            room_id=room_id,
            owner_id=owner_id,
            agent_id=agent_id,
            resource=resource,
            operation=operation,
            recipient=recipient,
            now=now,
            lock=False,
        )
    except Exception:
        logger.exception("capability verification failed: denying")
        return _deny("verification_error")
    return verdict


def capability_use(
    *,
    room_id: UUID,
    owner_id: Any,
    agent_id: UUID,
    resource: str,
    operation: str,
    recipient: str,
    now: datetime,
) -> CapabilityVerdict:
    """Verify as ``capability_verdict`` does and, if allowed, spend one use atomically.

    Race-safe: the counter row is locked and decremented with a conditional UPDATE
    (``uses_left > 0``), so concurrent callers never spend more uses than were granted.
    The returned ``uses_left`` is what remains after this use.
    """
    try:
        with transaction.atomic():
            verdict, row = _evaluate(
                room_id=room_id,
                owner_id=owner_id,
                agent_id=agent_id,
                resource=resource,
                operation=operation,
                recipient=recipient,
                now=now,
                lock=True,
            )
            if not verdict.allowed or row is None:
                return verdict
            spent = SlipCapability.objects.filter(id=row.id, uses_left__gt=0).update(
                uses_left=F("uses_left") - 1
            )
            if spent != 1:
                return _deny("uses_exhausted", uses_left=0, slip_id=verdict.slip_id)
            return CapabilityVerdict(
                allowed=True,
                rule="cleared",
                capability=verdict.capability,
                uses_left=row.uses_left - 1,
                slip_id=verdict.slip_id,
                key_id=verdict.key_id,
                tier=verdict.tier,
                approval_required=verdict.approval_required,
            )
    except Exception:
        logger.exception("capability use failed: denying")
        return _deny("verification_error")
