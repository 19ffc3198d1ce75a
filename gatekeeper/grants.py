"""One-action grants: the affected owner's signed, single-use, expiring approval.

A grant is bound to exactly one recorded action: its tool and the hash of its validated
arguments. The owner's browser signs ``GRANT_TAG + RFC 8785(grant_payload)`` with a device key;
the server verifies the signature, the key (the owner's, neither revoked nor retired), the
expiry and that the grant is still pending, and consumes it in the same locked transaction,
so two workers racing on one grant execute the action once. Grants are decided one by one:
there is no "approve all".
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

import rfc8785
from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone

from gatekeeper.records import ActionRecord, ActionStatus, Grant, GrantStatus
from gatekeeper.signals import grant_expired
from ledger.events import Denial, ForkResolved, GrantApproved, GrantDenied, GrantExpired
from ledger.services import ledger_append
from slips.canonical import GRANT_TAG
from slips.errors import Malformed
from slips.models import DeviceKey
from slips.services import key_custody_recorded
from slips.signatures import b64url_decode, signature_valid


class GrantUnusable(Exception):
    """The grant cannot be decided: unknown, not yours, already decided or used."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


@dataclass(frozen=True)
class GrantCheck:
    ok: bool
    rule: str
    record_id: UUID


@dataclass(frozen=True)
class GrantView:
    """What the owner sees at the fork, and the payload their device key signs."""

    grant_id: UUID
    action_id: UUID
    room_id: UUID
    owner_id: int  # the owner who decides (the acting agent's owner)
    tool: str
    arguments: dict[str, Any]
    derived_from_peer: bool
    reason_rule: str
    status: str
    expires_at: datetime
    payload: dict[str, Any]


def grant_payload(grant: Grant) -> dict[str, Any]:
    """The exact document an approval signs (integers and strings only)."""
    return {
        "decision": "approve",
        "grant_id": str(grant.id),
        "room_id": str(grant.room_id),
        "action_id": str(grant.action_id),
        "tool": grant.action.tool,
        "arguments_sha256": grant.action.arguments_hash,
        "owner_id": str(grant.owner_id),
        "expires_at": int(grant.expires_at.timestamp()),
    }


def grant_signed_bytes(grant: Grant) -> bytes:
    return GRANT_TAG + rfc8785.dumps(grant_payload(grant))


def _view(grant: Grant) -> GrantView:
    action = grant.action
    return GrantView(
        grant_id=grant.id,
        action_id=action.id,
        room_id=grant.room_id,
        owner_id=grant.owner_id,
        tool=action.tool,
        arguments=action.arguments,
        derived_from_peer=action.derived_from_peer,
        reason_rule=grant.reason_rule,
        status=grant.status,
        expires_at=grant.expires_at,
        payload=grant_payload(grant),
    )


def grants_of_owner(
    *, owner: User, room_id: UUID | None = None, pending_only: bool = True
) -> list[GrantView]:
    grants = Grant.objects.filter(owner=owner).select_related("action").order_by("created_at")
    if room_id is not None:
        grants = grants.filter(room_id=room_id)
    if pending_only:
        grants = grants.filter(status=GrantStatus.PENDING)
    return [_view(g) for g in grants]


def _pending_locked(*, owner: User, grant_id: UUID) -> Grant:
    grant = (
        Grant.objects.select_for_update()
        .select_related("action")
        .filter(id=grant_id, owner=owner)
        .first()
    )
    if grant is None:
        raise GrantUnusable("No such grant request.")
    if grant.status != GrantStatus.PENDING:
        raise GrantUnusable(f"This grant request is already {grant.status}.")
    return grant


def _expire(grant: Grant) -> None:
    grant.status = GrantStatus.EXPIRED
    grant.decided_at = timezone.now()
    grant.save(update_fields=["status", "decided_at"])
    ActionRecord.objects.filter(id=grant.action_id).update(
        status=ActionStatus.DENIED, rule="grant_expired"
    )
    ledger_append(
        room_id=grant.room_id,
        event=GrantExpired(grant_id=str(grant.id), action_id=str(grant.action_id)),
    )
    # The fork ends unanswered; the room stays paused (the safe default at a fork).
    ledger_append(
        room_id=grant.room_id,
        event=ForkResolved(fork_id=str(grant.id), by="server", resolution="expired"),
    )
    action = grant.action
    transaction.on_commit(
        lambda: grant_expired.send(
            sender=Grant,
            room_id=grant.room_id,
            agent_id=action.agent_id,
            ref=action.idempotency_key,
        )
    )


def grant_approve(*, owner: User, grant_id: UUID, key_id: UUID, signature: str) -> GrantCheck:
    """Verify a signed approval and consume the grant; call inside the caller's transaction.

    A bad signature, a key that is not the owner's live key, or an expired grant is recorded
    and refused (``ok=False``); a grant already decided raises ``GrantUnusable``.
    """
    grant = _pending_locked(owner=owner, grant_id=grant_id)
    subject = str(owner.pk)
    if grant.expires_at <= timezone.now():
        _expire(grant)
        return GrantCheck(False, "grant_expired", grant.action_id)
    key = DeviceKey.objects.filter(
        id=key_id, owner=owner, revoked_at__isnull=True, retired_at__isnull=True
    ).first()
    try:
        raw_signature = b64url_decode(signature, field="signature", length=64)
    except Malformed:
        raw_signature = b""
    if key is None or not signature_valid(
        public_key=bytes(key.public_key), message=grant_signed_bytes(grant), signature=raw_signature
    ):
        rule = "grant_key_not_usable" if key is None else "grant_bad_signature"
        ledger_append(
            room_id=grant.room_id,
            event=Denial(rule=rule, subject_id=subject, resource_id=str(grant.id)),
        )
        return GrantCheck(False, rule, grant.action_id)
    now = timezone.now()
    grant.status = GrantStatus.CONSUMED
    grant.payload = rfc8785.dumps(grant_payload(grant))
    grant.signature = raw_signature
    grant.key = key
    grant.decided_at = grant.consumed_at = now
    grant.save(update_fields=["status", "payload", "signature", "key", "decided_at", "consumed_at"])
    DeviceKey.objects.filter(id=key.id).update(last_used_at=now)
    ledger_append(
        room_id=grant.room_id,
        event=GrantApproved(
            grant_id=str(grant.id),
            action_id=str(grant.action_id),
            owner_id=subject,
            key_id=str(key.id),
            key_custody=key_custody_recorded(key),
        ),
    )
    return GrantCheck(True, "granted", grant.action_id)


@transaction.atomic
def grant_deny(*, owner: User, grant_id: UUID) -> GrantView:
    """The owner says no: the action never runs; the room stays paused for the owners."""
    grant = _pending_locked(owner=owner, grant_id=grant_id)
    grant.status = GrantStatus.DENIED
    grant.decided_at = timezone.now()
    grant.save(update_fields=["status", "decided_at"])
    ActionRecord.objects.filter(id=grant.action_id).update(
        status=ActionStatus.DENIED, rule="grant_denied"
    )
    ledger_append(
        room_id=grant.room_id,
        event=GrantDenied(
            grant_id=str(grant.id),
            action_id=str(grant.action_id),
            owner_id=str(owner.pk),
            reason="owner_denied",
        ),
    )
    return _view(grant)


def grants_expire(*, now: datetime | None = None) -> int:
    """End every pending grant past its deadline as a denial (run by Celery beat)."""
    now = now or timezone.now()
    expired = 0
    for grant_id in Grant.objects.filter(
        status=GrantStatus.PENDING, expires_at__lte=now
    ).values_list("id", flat=True):
        with transaction.atomic():
            grant = (
                Grant.objects.select_for_update()
                .filter(id=grant_id, status=GrantStatus.PENDING)
                .first()
            )
            if grant is not None:
                _expire(grant)
                expired += 1
    return expired
