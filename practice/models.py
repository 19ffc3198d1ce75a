"""Storage for the practice room: which users are demo owners, the demo key the server holds
for each, their agents by role, the practice rooms seeded, and one-time login links.

Rules live in ``practice.seeding``, ``practice.custody`` and ``practice.login_links``; the
models only describe storage.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models

from slips.models import DeviceKey


class PracticeOwner(models.Model):
    """A seeded demo owner. Only these users have a server-held signing key and can be
    signed in with a one-time login link."""

    owner = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="practice_owner"
    )
    device_key = models.ForeignKey(
        DeviceKey, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # The Ed25519 seed of ``device_key``, AES-GCM sealed under the vault key and bound to the
    # owner and key id (``slips.vault.vault_secret_seal``). Demo-only custody.
    signing_seed_sealed = models.BinaryField(blank=True, default=b"")
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"demo owner {self.owner_id}"


class AgentRole(models.TextChoices):
    HOST = "host", "Host's negotiator"
    NEGOTIATOR = "negotiator", "Guest's negotiator"
    ADVERSARY = "adversary", "Guest's adversarial agent"


class PracticeAgent(models.Model):
    """A demo owner's agent for one role, registered once and reused by every seeding."""

    # Looked up by the one-agent-per-role constraint's index, which leads with the owner.
    practice_owner = models.ForeignKey(
        PracticeOwner, on_delete=models.CASCADE, related_name="+", db_index=False
    )
    role = models.CharField(max_length=12, choices=AgentRole.choices)
    agent = models.OneToOneField("rooms.Agent", on_delete=models.CASCADE, related_name="+")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["practice_owner", "role"], name="one_agent_per_role")
        ]

    def __str__(self) -> str:
        return f"{self.role} agent {self.agent_id}"


class PracticeRoom(models.Model):
    """A room a seeding made; the next seeding closes it."""

    room = models.OneToOneField("rooms.Room", on_delete=models.CASCADE, related_name="+")
    seeded_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-seeded_at"]

    def __str__(self) -> str:
        return f"practice room {self.room_id}"


class LoginLink(models.Model):
    """A one-time sign-in for a demo owner. Only the SHA-256 of the token is kept."""

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    token_hash = models.CharField(max_length=64, unique=True)
    # Where the link leads after signing in (the practice room it was issued with).
    room_id = models.UUIDField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField()
    used_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"login link for {self.owner_id}"
