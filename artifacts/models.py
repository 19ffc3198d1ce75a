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
    agent is decided again, live (``artifacts.delivery``)."""

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
    shared_with_peer = models.BooleanField(default=False)
    created_at = models.DateTimeField()

    class Meta:
        indexes = [models.Index(fields=["room", "created_at"], name="artifact_room_created")]

    def __str__(self) -> str:
        return f"artifact {self.id}"
