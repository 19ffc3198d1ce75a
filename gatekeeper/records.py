"""Storage for action requests, grants (one action, or one disclosure) and forks.

Rooms and agents are referenced by UUID value (gatekeeper sits below rooms); owners by the
user model. Rules live in ``gatekeeper.decision``, ``gatekeeper.actions`` and
``gatekeeper.grants``.

An action's arguments and outcome are room content (booking details, an artifact's title and
body): they are stored only sealed under the room's data key (``rooms.sealing``, a leaf module
that imports no room code), so a backup of a deleted room yields none of them once its key is
destroyed. Through the ORM they read as their values; ``arguments_hash`` (the hash of the
canonical arguments) is what idempotency and contradiction checks compare, never the text.
"""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models

from rooms.sealing import SealedContent, SealedJSONField

# Each sealed column's name in the associated data (stable across table or column renames).
ACTION_ARGUMENTS = "action_record.arguments"
ACTION_OUTCOME = "action_record.outcome"


class ActionStatus(models.TextChoices):
    AWAITING_GRANT = "awaiting_grant", "Awaiting the owner's grant"
    DENIED = "denied", "Denied"
    EXECUTED = "executed", "Executed"
    PENDING = "pending", "Sent to the owner's webhook; not yet confirmed"
    FAILED = "failed", "Failed (the adapter refused or was unavailable)"


class ActionRecordQuerySet(models.QuerySet["ActionRecord"]):
    def delete(self) -> tuple[int, dict[str, int]]:
        """Delete without opening: a row's grant cascades, so Django loads the rows before
        deleting them, and a deleted room's rows (a restored backup) cannot be opened any
        more (their key is destroyed). Only the key and room are read."""
        return super(ActionRecordQuerySet, self.only("id", "room_id")).delete()


class ActionRecord(SealedContent):
    """One typed action an agent asked for. ``(room, agent, idempotency_key)`` is unique, so a
    retried, resumed or replayed request finds this row instead of acting twice."""

    objects = ActionRecordQuerySet.as_manager()

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    room_id = models.UUIDField()  # looked up by the one-action-per-key constraint's index
    agent_id = models.UUIDField()
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    tool = models.CharField(max_length=64)
    arguments = SealedJSONField(sealed_as=ACTION_ARGUMENTS)  # the validated arguments, sealed
    arguments_hash = models.CharField(max_length=64)
    idempotency_key = models.CharField(max_length=64)
    # Some argument value appears verbatim in what the peer agent wrote: shown in the ping.
    derived_from_peer = models.BooleanField(default=False)
    status = models.CharField(max_length=16, choices=ActionStatus.choices)
    rule = models.CharField(max_length=64)
    outcome = SealedJSONField(sealed_as=ACTION_OUTCOME, null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    decided_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["room_id", "agent_id", "idempotency_key"], name="one_action_per_key"
            )
        ]
        indexes = [
            # The beat's settling of lost webhook outcomes reads the pending ones only
            # (rooms.forks.actions_pending_settle).
            models.Index(
                fields=["created_at"],
                condition=models.Q(status=ActionStatus.PENDING),
                name="gk_action_pending_created",
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


class GrantKind(models.TextChoices):
    ACTION = "action", "One action"
    DISCLOSURE = "disclosure", "One disclosure of a vault item"


# Grants that are still open: asked and not answered, or (disclosures) approved, not yet used.
OPEN_GRANT_STATUSES = (GrantStatus.PENDING, GrantStatus.APPROVED)


class Grant(models.Model):
    """The affected owner's decision on exactly one thing.

    ``kind`` ``action``: one recorded action with exactly its arguments (``action``).
    ``kind`` ``disclosure``: one use of a slip item whose approval is ``per_use``: showing
    ``owner``'s ``resource`` at ``scope`` to ``recipient_agent_id``, under the slip
    ``slip_id``. An approved disclosure grant waits (``approved``) for the recipient's next
    context assembly, which consumes it in the transaction that discloses.

    Approval is signed in the owner's browser with a device key; the grant is single use and
    expires. It can only ever clear the one thing it was made for.
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    kind = models.CharField(max_length=10, choices=GrantKind.choices, default=GrantKind.ACTION)
    action = models.OneToOneField(
        ActionRecord, on_delete=models.CASCADE, related_name="grant", null=True, blank=True
    )
    room_id = models.UUIDField(db_index=True)
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    reason_rule = models.CharField(max_length=64)
    status = models.CharField(
        max_length=10, choices=GrantStatus.choices, default=GrantStatus.PENDING
    )
    expires_at = models.DateTimeField()
    # Disclosure grants only: what would be shown, to whom, under which signed slip. The
    # owner's own agent (the slip's agent) and the record that clears it (read or disclose).
    recipient_agent_id = models.UUIDField(null=True, blank=True)
    source_agent_id = models.UUIDField(null=True, blank=True)
    recipient = models.CharField(max_length=10, blank=True)  # own_agent or peer_agent
    resource = models.CharField(max_length=64, blank=True)
    operation = models.CharField(max_length=16, blank=True)
    scope = models.CharField(max_length=32, blank=True)
    slip_id = models.UUIDField(null=True, blank=True)
    payload = models.BinaryField(null=True, blank=True)  # the canonical bytes that were signed
    signature = models.BinaryField(null=True, blank=True)
    key = models.ForeignKey("slips.DeviceKey", on_delete=models.PROTECT, null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    decided_at = models.DateTimeField(null=True, blank=True)
    consumed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            # An action grant names its action; a disclosure grant names no action but its
            # recipient, resource and slip. Neither can be mistaken for the other.
            models.CheckConstraint(
                condition=(
                    models.Q(kind="action", action__isnull=False)
                    | models.Q(
                        kind="disclosure",
                        action__isnull=True,
                        recipient_agent_id__isnull=False,
                        source_agent_id__isnull=False,
                        slip_id__isnull=False,
                    )
                    & ~models.Q(resource="")
                    & ~models.Q(scope="")
                ),
                name="grant_kind_fields",
            ),
            # The owner is asked once: one open request per owner, recipient and item kind.
            models.UniqueConstraint(
                fields=["room_id", "owner", "recipient_agent_id", "resource"],
                condition=models.Q(kind="disclosure", status__in=["pending", "approved"]),
                name="one_open_disclosure_grant",
            ),
        ]

    def __str__(self) -> str:
        if self.kind == GrantKind.DISCLOSURE:
            return f"disclosure grant for {self.resource} ({self.status})"
        return f"grant for {self.action_id} ({self.status})"
