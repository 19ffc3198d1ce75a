"""Agents, rooms, membership, invites and the transcript.

Rules about these records live in ``rooms.services`` (writes) and ``rooms.selectors`` (reads);
the models only describe storage.
"""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models


class Agent(models.Model):
    """An AI agent an owner sends into rooms. It authenticates with an API token.

    Only a SHA-256 hash of the token is stored; the token itself is shown once, when issued.
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="agents"
    )
    name = models.CharField(max_length=80)
    # An advisor-only agent may only ever be given read-only tools (checked by gatekeeper).
    advisor_only = models.BooleanField(default=False)
    # Tools the agent itself says it will use; None = declared nothing. It can only narrow
    # what the server-owned tool policy and the slips allow, never widen it.
    declared_tools = models.JSONField(null=True, blank=True)
    token_hash = models.CharField(max_length=64, unique=True)
    # First characters of the token, so an owner can tell tokens apart in lists and logs.
    token_prefix = models.CharField(max_length=16)
    token_issued_at = models.DateTimeField()
    token_last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at"]

    def __str__(self) -> str:
        return self.name


class RoomState(models.TextChoices):
    DRAFT = "draft", "Draft"
    OPEN = "open", "Open"
    PAUSED = "paused", "Paused"
    CLOSED = "closed", "Closed"


class Room(models.Model):
    """A room two owners' agents meet in, under a charter."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="rooms_created"
    )
    purpose = models.CharField(max_length=200)
    charter = models.TextField(blank=True)
    state = models.CharField(max_length=10, choices=RoomState.choices, default=RoomState.DRAFT)
    # Sequence number of the last transcript message; bumped under the room's row lock so
    # numbers are gapless and ordered even with several server processes.
    last_seq = models.PositiveBigIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    state_changed_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return self.purpose


class MemberRole(models.TextChoices):
    CREATOR = "creator", "Creator"
    INVITEE = "invitee", "Invitee"


class RoomMember(models.Model):
    """One owner's seat in a room, and the one agent they bound to it."""

    room = models.ForeignKey(Room, on_delete=models.CASCADE, related_name="members")
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="seats"
    )
    role = models.CharField(max_length=10, choices=MemberRole.choices)
    agent = models.ForeignKey(
        Agent, on_delete=models.PROTECT, null=True, blank=True, related_name="seats"
    )
    # Highest transcript sequence number this seat's agent has acknowledged receiving.
    acked_seq = models.PositiveBigIntegerField(default=0)
    joined_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["room", "owner"], name="one_seat_per_owner"),
            models.UniqueConstraint(fields=["room", "agent"], name="one_seat_per_agent"),
        ]

    def __str__(self) -> str:
        return f"seat {self.role} in room {self.room_id}"


class RoomInvite(models.Model):
    """A single-use, expiring invitation for the second owner. Only the token's hash is kept."""

    room = models.ForeignKey(Room, on_delete=models.CASCADE, related_name="invites")
    token_hash = models.CharField(max_length=64, unique=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField()
    used_at = models.DateTimeField(null=True, blank=True)
    used_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )

    def __str__(self) -> str:
        return f"invite to room {self.room_id}"


class Message(models.Model):
    """One message an agent said in a room: the record delivery is replayed from."""

    room = models.ForeignKey(Room, on_delete=models.CASCADE, related_name="messages")
    seq = models.PositiveBigIntegerField()
    sender = models.ForeignKey(Agent, on_delete=models.PROTECT, related_name="+")
    # The envelope id the sender chose; a resent frame with the same id is not stored twice.
    client_id = models.CharField(max_length=64)
    text = models.TextField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["room", "seq"]
        constraints = [
            models.UniqueConstraint(fields=["room", "seq"], name="gapless_room_seq"),
            models.UniqueConstraint(fields=["room", "sender", "client_id"], name="idempotent_send"),
        ]

    def __str__(self) -> str:
        return f"message {self.seq} in room {self.room_id}"
