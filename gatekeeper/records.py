"""Storage for action requests, one-action grants and forks.

Rooms and agents are referenced by UUID value (gatekeeper sits below rooms); owners by the
user model. Rules live in ``gatekeeper.decision``, ``gatekeeper.actions`` and
``gatekeeper.grants``.
"""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models


class ActionStatus(models.TextChoices):
    AWAITING_GRANT = "awaiting_grant", "Awaiting the owner's grant"
    DENIED = "denied", "Denied"
    EXECUTED = "executed", "Executed"
    PENDING = "pending", "Sent to the owner's webhook; not yet confirmed"
    FAILED = "failed", "Failed (the adapter refused or was unavailable)"


class ActionRecord(models.Model):
    """One typed action an agent asked for. ``(room, agent, idempotency_key)`` is unique, so a
    retried, resumed or replayed request finds this row instead of acting twice."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    room_id = models.UUIDField(db_index=True)
    agent_id = models.UUIDField()
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    tool = models.CharField(max_length=64)
    arguments = models.JSONField()
    arguments_hash = models.CharField(max_length=64)
    idempotency_key = models.CharField(max_length=64)
    # Some argument value appears verbatim in what the peer agent wrote: shown in the ping.
    derived_from_peer = models.BooleanField(default=False)
    status = models.CharField(max_length=16, choices=ActionStatus.choices)
    rule = models.CharField(max_length=64)
    outcome = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    decided_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["room_id", "agent_id", "idempotency_key"], name="one_action_per_key"
            )
        ]

    def __str__(self) -> str:
        return f"{self.tool} ({self.status})"


class GrantStatus(models.TextChoices):
    PENDING = "pending", "Waiting for the owner"
    APPROVED = "approved", "Approved, not yet used"
    CONSUMED = "consumed", "Used"
    DENIED = "denied", "Denied"
    EXPIRED = "expired", "Expired"


class Grant(models.Model):
    """The affected owner's decision on exactly one action with exactly its arguments.

    Approval is signed in the owner's browser with a device key; the grant is single use and
    expires. It can only ever clear the action it was made for.
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    action = models.OneToOneField(ActionRecord, on_delete=models.CASCADE, related_name="grant")
    room_id = models.UUIDField(db_index=True)
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    reason_rule = models.CharField(max_length=64)
    status = models.CharField(
        max_length=10, choices=GrantStatus.choices, default=GrantStatus.PENDING
    )
    expires_at = models.DateTimeField()
    payload = models.BinaryField(null=True, blank=True)  # the canonical bytes that were signed
    signature = models.BinaryField(null=True, blank=True)
    key = models.ForeignKey("slips.DeviceKey", on_delete=models.PROTECT, null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    decided_at = models.DateTimeField(null=True, blank=True)
    consumed_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"grant for {self.action_id} ({self.status})"
