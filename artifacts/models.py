"""Storage of shared artifacts: the documents an agent publishes to its room (itineraries,
drafts, code). Rules live in ``artifacts.services``; a model only describes storage.

An artifact is room content: its title and body are stored only sealed (AES-256-GCM under the
room's data key, ``artifacts.sealing``), so the database, its backups and the admin hold
ciphertext; the columns beside it are metadata (sizes, a digest, who, when) that say nothing
of what it says.
"""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models


class MediaType(models.TextChoices):
    """The allowed media types, keyed by the tool's ``format`` argument."""

    PLAIN = "text/plain", "Plain text"
    MARKDOWN = "text/markdown", "Markdown"


class Artifact(models.Model):
    """One published artifact. ``shared_with_peer`` is the Gatekeeper's decision when it was
    published (the publisher's slip cleared it for the other agent); every delivery to that
    agent is decided again, live (``artifacts.delivery``). When that first check failed (an
    error, a timeout), the artifact is ``share_undecided``: the room paused, and the first
    delivery after it resumed decides it as publishing would have, live."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    # Looked up by the artifact_room_created index, which leads with the room.
    room = models.ForeignKey(
        "rooms.Room", on_delete=models.CASCADE, related_name="+", db_index=False
    )
    publisher_owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+"
    )
    publisher_agent_id = models.UUIDField()
    # The executed action's idempotency key: a replayed call finds this row, not a second one.
    action_key = models.CharField(max_length=128, unique=True)
    media_type = models.CharField(max_length=32, choices=MediaType.choices)
    size_bytes = models.PositiveIntegerField()  # the body's UTF-8 size
    body_sha256 = models.CharField(max_length=64)
    # version byte + data key id + nonce + ciphertext and tag of {"title", "body"}.
    sealed = models.BinaryField()
    # The publisher's slip shared it; offered to the other agent's deliveries (each decides it
    # again, live), as an undecided one is (``share_undecided``: the check failed).
    shared_with_peer = models.BooleanField(default=False)
    share_undecided = models.BooleanField(default=False)
    # Suspicion rule ids ``rooms.untrusted.fence`` raised on the title and body when it was
    # published (no content): each is also an InjectionSuspected ledger event naming the
    # artifact, and both owners see them. NULL: published before artifacts were judged then
    # (its deliveries judge it for the agent only, as they did).
    flags = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField()

    class Meta:
        indexes = [models.Index(fields=["room", "created_at"], name="artifact_room_created")]

    def __str__(self) -> str:
        return f"artifact {self.id}"
