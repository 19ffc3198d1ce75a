"""Device keys, vault items, signed slips and their capability records.

Rooms and agents are referenced by UUID value, not by foreign key: ``slips`` sits below
``rooms`` and must not import it. Rules live in ``slips.services`` / ``slips.selectors`` /
``slips.verification``; the models only describe storage.
"""

from __future__ import annotations

import uuid
from typing import Any

from django.conf import settings
from django.db import models
from django.db.models.signals import post_delete
from django.dispatch import receiver


class KeyCustody(models.TextChoices):
    """Who holds a key's private half."""

    # The owner's browser (non-extractable WebCrypto key): the only custody outside the demo.
    DEVICE = "device", "On the owner's device"
    # The server, for the seeded demo owners of the practice room only (``practice``): every
    # slip and approval such a key signs says so in the ledger.
    DEMO_SEEDING = "demo_seeding", "Held by the server (demo only)"


class DeviceKey(models.Model):
    """The public half of an Ed25519 key made in an owner's browser (the private half never
    leaves that device). A retired key (rotated away) still verifies the slips it signed but
    signs no new ones; a revoked key clears nothing at all. The practice room's demo owners
    are the one exception: their keys are held by the server (``custody``)."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="device_keys"
    )
    label = models.CharField(max_length=80)
    public_key = models.BinaryField(max_length=32, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    retired_at = models.DateTimeField(null=True, blank=True)
    replaced_by = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    revoked_at = models.DateTimeField(null=True, blank=True)
    # Enrolled while the owner had no usable key left: shown to their room partners.
    after_key_loss = models.BooleanField(default=False)
    custody = models.CharField(max_length=16, choices=KeyCustody.choices, default=KeyCustody.DEVICE)

    class Meta:
        ordering = ["created_at"]

    def __str__(self) -> str:
        return self.label


class KeyChallengePurpose(models.TextChoices):
    ENROLL = "enroll", "Enroll"
    ROTATE = "rotate", "Rotate"


class KeyChallenge(models.Model):
    """A single-use, expiring value the browser signs with a new key to prove it holds it."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    purpose = models.CharField(max_length=10, choices=KeyChallengePurpose.choices)
    value = models.CharField(max_length=64, unique=True)
    expires_at = models.DateTimeField()
    used_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"{self.purpose} challenge for owner {self.owner_id}"


class VaultItem(models.Model):
    """One private item of an owner's vault; its content is AES-GCM encrypted at rest."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="vault_items"
    )
    kind = models.CharField(max_length=20)
    sealed = models.BinaryField()
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["kind", "created_at"]

    def __str__(self) -> str:
        return f"{self.kind} {self.id}"


class Slip(models.Model):
    """A permission slip as the owner signed it: the canonical payload bytes and signature.

    ``payload`` holds exactly the bytes that were signed (after the domain tag), so every
    use re-verifies the signature over the stored bytes; the columns beside it are copies of
    signed fields for lookups, re-checked against the payload on each verification.
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    # Looked up by the (owner, room, agent) index, which leads with the owner.
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+", db_index=False
    )
    room_id = models.UUIDField(db_index=True)
    agent_id = models.UUIDField()
    key = models.ForeignKey(DeviceKey, on_delete=models.PROTECT, related_name="slips")
    payload = models.BinaryField()
    signature = models.BinaryField(max_length=64)
    nonce = models.CharField(max_length=64, unique=True)
    issued_at = models.BigIntegerField()
    expires_at = models.BigIntegerField()
    created_at = models.DateTimeField(auto_now_add=True)
    superseded_at = models.DateTimeField(null=True, blank=True)
    superseded_by = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        ordering = ["-issued_at"]
        indexes = [models.Index(fields=["owner", "room_id", "agent_id"])]
        constraints = [
            # At most one live slip per (owner, room, agent): a newer one supersedes it.
            models.UniqueConstraint(
                fields=["owner", "room_id", "agent_id"],
                condition=models.Q(superseded_at__isnull=True),
                name="slips_one_live_slip",
            )
        ]

    def __str__(self) -> str:
        return f"slip {self.id} (room {self.room_id})"


class SlipCapability(models.Model):
    """Use counter for one capability record of a slip (the record itself is in the payload)."""

    # Looked up by the (slip, position) constraint's index, which leads with the slip.
    slip = models.ForeignKey(
        Slip, on_delete=models.CASCADE, related_name="capabilities", db_index=False
    )
    position = models.PositiveSmallIntegerField()
    resource = models.CharField(max_length=80)
    operation = models.CharField(max_length=10)
    uses_left = models.PositiveIntegerField()

    class Meta:
        ordering = ["position"]
        constraints = [
            models.UniqueConstraint(fields=["slip", "position"], name="slips_capability_position"),
            models.CheckConstraint(
                condition=models.Q(uses_left__gte=0), name="slips_uses_left_non_negative"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.resource}/{self.operation} ({self.uses_left} left)"


class Tier(models.TextChoices):
    """Privacy tiers, narrowest first. A tier only ever narrows what a slip grants."""

    SANDBOX = "sandbox", "Sandbox"
    ROOM_ONLY = "room_only", "Room Only"
    COLLABORATIVE = "collaborative", "Collaborative"


class RoomTier(models.Model):
    """The tier one owner chose for a room; the room runs under the narrowest one chosen."""

    room_id = models.UUIDField()
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    tier = models.CharField(max_length=15, choices=Tier.choices)
    chosen_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["room_id", "owner"], name="slips_one_tier_per_owner")
        ]

    def __str__(self) -> str:
        return f"{self.tier} for room {self.room_id}"


class SlipConflict(models.Model):
    """Where two owners' live slips disagree on a shared resource: which rule won and why.

    Recomputed whenever a slip in the room changes; both owners of the room can read it.
    """

    room_id = models.UUIDField(db_index=True)
    resource = models.CharField(max_length=80)
    operation = models.CharField(max_length=10)
    field = models.CharField(max_length=30)
    values = models.JSONField()  # {owner_id: value}
    winner = models.JSONField()
    reason = models.CharField(max_length=200)
    resolved_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["resource", "operation", "field"]

    def __str__(self) -> str:
        return f"{self.resource}/{self.operation} {self.field}"


@receiver(post_delete, sender=settings.AUTH_USER_MODEL, dispatch_uid="slips-owner-data-key-destroy")
def _owner_data_key_destroy(sender: Any, instance: Any, **kwargs: Any) -> None:
    """An account's deletion (``rooms.deletion.account_delete``, ``reapply_deletions``, or any
    other path) destroys its data key in the key store, inside the deleting transaction: the
    journal line is already written, so a failed commit is completed by a reapply, and the
    owner's vault in every older database backup can no longer be opened."""
    from slips.datakeys import data_keys_destroy, owner_since

    data_keys_destroy(
        kind="owner", subject=str(instance.pk), since=owner_since(instance.date_joined)
    )
