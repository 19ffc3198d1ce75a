"""Storage of the tool layer: sandbox effects, owners' webhook endpoints and deliveries, and
the admin-editable rows of the per-agent tool policy; and the keys of owners' API adds
(``gatekeeper.add_keys``).

Rules live in ``gatekeeper.adapters`` and ``gatekeeper.policy``; models only describe storage
(``ToolPolicyRule.clean`` calls the policy's validator so the admin cannot save an unsafe row).
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models
from django.utils import timezone

from rooms.sealing import SealedContent, SealedJSONField, SealedTextField

# Each sealed column's name in the associated data (stable across table or column renames).
SANDBOX_ARGUMENTS = "sandbox_effect.arguments"
SANDBOX_OUTPUT = "sandbox_effect.output"
WEBHOOK_BODY = "webhook_delivery.body"


class SandboxEffect(SealedContent):
    """One executed tool call in the local sandbox: the record that it happened exactly once.
    Its arguments and output are room content, sealed under the room's data key
    (``rooms.sealing``); ``arguments_sha256`` is what a replay is compared with."""

    idempotency_key = models.CharField(max_length=128, unique=True)
    tool = models.CharField(max_length=64)
    schema_version = models.CharField(max_length=16)
    # SHA-256 of the canonical arguments: a replayed key with other arguments is refused.
    arguments_sha256 = models.CharField(max_length=64)
    arguments = SealedJSONField(sealed_as=SANDBOX_ARGUMENTS)
    output = SealedJSONField(sealed_as=SANDBOX_OUTPUT)
    # Null only in rows from before sealing; a new row names its room (its key seals it).
    room_id = models.UUIDField(null=True, blank=True)
    agent_id = models.UUIDField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at"]

    def __str__(self) -> str:
        return f"sandbox {self.tool} {self.idempotency_key}"


class WebhookEndpoint(models.Model):
    """An owner's outgoing webhook. The signing secret is kept encrypted (AES-GCM under a key
    derived from SECRET_KEY with HKDF), because we must be able to use it to sign; it is
    shown to the owner once, when created."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="webhook_endpoints"
    )
    url = models.CharField(max_length=2000)
    secret_sealed = models.TextField()
    active = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)
    # SHA-256 (hex) of the one-time key of the add that made it (the owner's form's, or an
    # API client's Idempotency-Key) with the address, so that add sent twice (a reload of the
    # answer, a second click, a retry) makes one webhook; "" for an add without a key.
    added_with = models.CharField(max_length=64, blank=True, default="", editable=False)

    class Meta:
        ordering = ["created_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["owner", "added_with"],
                condition=~models.Q(added_with=""),
                name="gatekeeper_webhook_added_once",
            )
        ]

    def __str__(self) -> str:
        return f"webhook {self.id}"


class DeliveryStatus(models.TextChoices):
    PENDING = "pending", "Pending"
    SUCCEEDED = "succeeded", "Succeeded"
    REFUSED = "refused", "Refused"
    UNAVAILABLE = "unavailable", "Unavailable"


def _body_room(body: object) -> uuid.UUID | None:
    # The signed body names the room the call came from (``gatekeeper.webhooks.webhook_body``).
    try:
        found = json.loads(str(body)).get("room_id")
        return uuid.UUID(str(found)) if found else None
    except (ValueError, AttributeError):
        return None


class WebhookDelivery(SealedContent):
    """One tool call delivered to a webhook, retried until final. Keyed by idempotency key, so
    a replayed call is answered from here and never posted twice by us. Its body carries the
    call's arguments (room content): it is stored sealed under the room's data key."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    endpoint = models.ForeignKey(WebhookEndpoint, on_delete=models.CASCADE, related_name="+")
    idempotency_key = models.CharField(max_length=128, unique=True)
    tool = models.CharField(max_length=64)
    arguments_sha256 = models.CharField(max_length=64)
    # The room the call came from (read from the body when the row is made): its key seals
    # the body. Null only in rows from before sealing.
    room_id = models.UUIDField(null=True, blank=True, db_index=True)
    # The exact signed bytes (canonical JSON), identical on every retry; sealed at rest.
    body = SealedTextField(sealed_as=WEBHOOK_BODY)
    status = models.CharField(
        max_length=12, choices=DeliveryStatus.choices, default=DeliveryStatus.PENDING
    )
    attempts = models.PositiveIntegerField(default=0)
    last_status_code = models.PositiveIntegerField(null=True, blank=True)
    reason_code = models.CharField(max_length=64, blank=True)
    message = models.CharField(max_length=300, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # When its task was last queued: when it was made, or when the beat queued it again after
    # it was lost on the way to a worker (``gatekeeper.webhooks.webhook_deliveries_lost``).
    queued_at = models.DateTimeField(default=timezone.now)
    # While an attempt is in flight: when its hold ends. Another copy of the delivery's task
    # posts nothing before then (``gatekeeper.webhooks.webhook_delivery_attempt``).
    attempt_until = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [
            # The beat's look for lost deliveries reads the pending ones only.
            models.Index(
                fields=["queued_at"],
                condition=models.Q(status=DeliveryStatus.PENDING),
                name="gk_delivery_pending_queued",
            )
        ]

    def __str__(self) -> str:
        return f"delivery {self.id} ({self.status})"

    def save(self, *args: Any, **kwargs: Any) -> None:
        # The body names its room; a body that names none has no key and is refused (the
        # sealed field never stores it in plaintext instead).
        if self.room_id is None and self.body is not None:
            self.room_id = _body_room(self.body)
        super().save(*args, **kwargs)


class PolicyEffect(models.TextChoices):
    ALLOW = "allow", "Allow"
    DENY = "deny", "Deny"


class ToolPolicyRule(models.Model):
    """One server-owned policy entry: allow or deny ``tool`` (or ``*``, every tool) to the agent
    ``agent_key`` (an agent's UUID, or ``*`` for every agent). Deny beats allow."""

    agent_key = models.CharField(
        max_length=36, help_text="An agent's id (UUID), or * for every agent."
    )
    tool = models.CharField(max_length=64, help_text="A registered tool name, or * for all.")
    effect = models.CharField(max_length=5, choices=PolicyEffect.choices)
    note = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["agent_key", "tool", "effect"]
        constraints = [
            models.UniqueConstraint(
                fields=["agent_key", "tool", "effect"], name="one_policy_rule_per_effect"
            )
        ]

    def __str__(self) -> str:
        return f"{self.effect} {self.tool} for {self.agent_key}"

    def clean(self) -> None:
        # Imported here: policy imports this module.
        from gatekeeper.errors import ToolPolicyError
        from gatekeeper.policy import tool_policy_entry_validate

        try:
            tool_policy_entry_validate(agent_key=self.agent_key, tool=self.tool, effect=self.effect)
        except ToolPolicyError as exc:
            raise ValidationError(exc.message, code=exc.code) from None


# Action requests and grants live in their own module; imported so Django registers them.
from gatekeeper.records import ActionRecord, Grant  # noqa: E402, F401


class AddKey(models.Model):
    """An add an API client sent with an ``Idempotency-Key`` (``gatekeeper.add_keys``): what
    it made, so that the same add sent again makes nothing more. Digests only (keyed with the
    server's secret: a vault item's content or a room's purpose is not readable from them)."""

    # Indexed by the unique (owner, key_digest), which leads with it.
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="add_keys", db_index=False
    )
    key_digest = models.CharField(max_length=64)
    what = models.CharField(max_length=16)  # "agent", "room", "invite", "vault_item", "whisper"
    request_digest = models.CharField(max_length=64)
    made_id = models.UUIDField(null=True)  # None: an invitation (known by its link only)
    created_at = models.DateTimeField(default=timezone.now, db_index=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["owner", "key_digest"], name="gatekeeper_add_key_once")
        ]

    def __str__(self) -> str:
        return f"add key for a {self.what}"
