"""Agents, rooms, membership, invites and the transcript.

Rules about these records live in ``rooms.services`` (writes) and ``rooms.selectors`` (reads);
the models only describe storage.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import models

from rooms.sealing import (
    MESSAGE_TEXT,
    OUTCOME_PLAN,
    ROOM_CHARTER,
    ROOM_PURPOSE,
    SEALED_OFFER,
    WHISPER_TEXT,
    SealedContent,
    SealedJSONField,
    SealedTextField,
    SealedTextOnReadField,
)


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
    # Its room sockets' joins and leaves, counted by the statements that record them
    # (``rooms.handshake``, ``rooms.services.agent_leave``). A join that finds every earlier
    # join left need not tell the room to close the agent's earlier socket (a publish to every
    # process on a shared layer). A socket that ends without its leave keeps the difference
    # above zero, so the count errs only towards telling the room.
    socket_joins = models.PositiveBigIntegerField(default=0)
    socket_leaves = models.PositiveBigIntegerField(default=0)

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
    """A room two owners' agents meet in, under a charter. Its purpose and charter are room
    content, sealed at rest under the room's own data key (rooms.sealing) and opened when
    read, so loading the row for its state costs no key (``services`` keeps the limits)."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="rooms_created"
    )
    purpose = SealedTextOnReadField(sealed_as=ROOM_PURPOSE, room_field="id")
    charter = SealedTextOnReadField(sealed_as=ROOM_CHARTER, room_field="id", blank=True)
    state = models.CharField(max_length=10, choices=RoomState.choices, default=RoomState.DRAFT)
    # The dinner terms (dining.DinnerTerms, JSON form): catalogue, time zone, horizon, dinner
    # length, start times, party size, travel limit. Null for a room that is not a dinner.
    terms = models.JSONField(null=True, blank=True)
    # Sequence number of the last transcript message; bumped under the room's row lock so
    # numbers are gapless and ordered even with several server processes.
    last_seq = models.PositiveBigIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    state_changed_at = models.DateTimeField(auto_now_add=True)
    # When the transcript's retention window ended for this closed room and the purge
    # replaced its purpose and charter and cleared its outcome's plan (rooms.retention): the
    # sealed columns cannot be queried, so this says which rooms are done. Null until then.
    content_purged_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return self.purpose


class MemberRole(models.TextChoices):
    CREATOR = "creator", "Creator"
    INVITEE = "invitee", "Invitee"


class SeatStanding(models.TextChoices):
    ACTIVE = "active", "Active"
    MUTED = "muted", "Muted by its owner"
    BLOCKED = "blocked", "Blocked by its owner"
    STEPPED_IN = "stepped_in", "Its owner is speaking in person"


class RoomMember(models.Model):
    """One owner's seat in a room, and the one agent they bound to it."""

    # Looked up by the one-seat-per-owner constraint's index, which leads with the room.
    room = models.ForeignKey(Room, on_delete=models.CASCADE, related_name="members", db_index=False)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="seats"
    )
    role = models.CharField(max_length=10, choices=MemberRole.choices)
    agent = models.ForeignKey(
        Agent, on_delete=models.PROTECT, null=True, blank=True, related_name="seats"
    )
    # Highest transcript sequence number this seat's agent has acknowledged receiving.
    acked_seq = models.PositiveBigIntegerField(default=0)
    # Context turns assembled for this seat's agent so far; the last one is the current turn.
    # Disclosure ledger events name the turn they fed (rooms.context).
    context_turn = models.PositiveIntegerField(default=0)
    joined_at = models.DateTimeField(auto_now_add=True)
    # What the owner decided at this seat's last Signal Flare (rooms.flares): while not
    # "active", the agent may not speak or act; "blocked" also keeps it out of the room.
    standing = models.CharField(max_length=12, choices=SeatStanding.choices, default="active")

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


class Message(SealedContent):
    """One message an agent said in a room: the record delivery is replayed from. Its text is
    sealed at rest under the room's data key (rooms.sealing) and reads back as text."""

    # No index of its own: the (room, seq) constraint's index leads with the room and serves
    # every look-up by room. A second one was a second index page written for every message
    # (issue 17: the say path's pages per hop).
    room = models.ForeignKey(
        Room, on_delete=models.CASCADE, related_name="messages", db_index=False
    )
    seq = models.PositiveBigIntegerField()
    sender = models.ForeignKey(Agent, on_delete=models.PROTECT, related_name="+")
    # The envelope id the sender chose; a resent frame with the same id is not stored twice.
    client_id = models.CharField(max_length=64)
    text = SealedTextField(sealed_as=MESSAGE_TEXT)
    # "owner" when the seat's owner stepped in and spoke in person (after a Signal Flare).
    author = models.CharField(max_length=5, default="agent")
    # Suspicion rule ids ``rooms.untrusted.fence`` raised on this text (no content); each is
    # also an InjectionSuspected ledger event, and both owners see them.
    flags = models.JSONField(default=list, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        # No default ordering: ordering by "room" made every lookup join the room table.
        constraints = [
            models.UniqueConstraint(fields=["room", "seq"], name="gapless_room_seq"),
            models.UniqueConstraint(fields=["room", "sender", "client_id"], name="idempotent_send"),
        ]
        # The operator's metric of messages in the last minutes (synapsia_messages_recent)
        # counts by time across rooms: without it, a scan of every message.
        indexes = [models.Index(fields=["created_at"], name="message_created_at")]

    def __str__(self) -> str:
        return f"message {self.seq} in room {self.room_id}"


WHISPER_MAX_CHARS = 2_000


class Whisper(SealedContent):
    """An owner's private word to their own agent in a room: room content, shown to no one else.

    It reaches only ``agent``'s context (and socket); the other owner and agent never see it.
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    # Looked up by the whisper_to_agent index, which leads with the room.
    room = models.ForeignKey(
        Room, on_delete=models.CASCADE, related_name="whispers", db_index=False
    )
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="+")
    text = SealedTextField(sealed_as=WHISPER_TEXT)  # sealed under the room's data key
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        indexes = [models.Index(fields=["room", "agent", "created_at"], name="whisper_to_agent")]

    def __str__(self) -> str:
        return f"whisper in room {self.room_id}"


class FlareReason(models.TextChoices):
    LOOP = "loop", "Stuck in a loop"
    CONTRADICTION = "contradiction", "Contradiction"
    DISTRESS = "distress", "Distress"
    REPEATED_DENIALS = "repeated_denials", "Repeated denials"


class FlareChoice(models.TextChoices):
    RESET_RESUME = "reset_resume", "Reset and resume"
    MUTE = "mute", "Mute the agent"
    BLOCK = "block", "Block the agent"
    STEP_IN = "step_in", "Step in personally"


class Flare(models.Model):
    """A Signal Flare: an agent (or the server, on its behalf) stops and asks its owner."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    room = models.ForeignKey(Room, on_delete=models.CASCADE, related_name="flares")
    seat = models.ForeignKey(RoomMember, on_delete=models.CASCADE, related_name="flares")
    reason = models.CharField(max_length=20, choices=FlareReason.choices)
    raised_by = models.CharField(max_length=6)  # "agent" or "server"
    raised_at = models.DateTimeField(auto_now_add=True)
    resolved_at = models.DateTimeField(null=True, blank=True)
    choice = models.CharField(max_length=12, choices=FlareChoice.choices, blank=True)

    def __str__(self) -> str:
        return f"flare {self.reason} in room {self.room_id}"


class NotificationPreference(models.Model):
    """How loudly an owner hears about rooms, and the owner's time zone. Flares are always
    urgent (the Urgent Beacon cannot be turned off); the Gentle Tap badge for forks waiting is
    on unless turned off; the "While you were away" digest is opt-in."""

    owner = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="notification_preference"
    )
    digest = models.BooleanField(default=False)
    badge = models.BooleanField(default=True)
    # IANA zone name the owner chose; empty: not chosen yet, times are shown in UTC and the
    # settings page offers the browser's own zone.
    time_zone = models.CharField(max_length=64, blank=True, default="")

    def __str__(self) -> str:
        return f"notification preference of {self.owner_id}"


class OutcomeKind(models.TextChoices):
    AGREED = "agreed", "Agreed"
    NO_AGREEMENT = "no_agreement", "No agreement"


# The booked plan's parts, each read as an attribute of the outcome (``RoomOutcome.plan``).
PLAN_FIELDS = (
    "venue_id",
    "venue_name",
    "starts_at",
    "time_zone",
    "party_size",
    "price_per_person_minor",
    "currency",
)


class RoomOutcome(SealedContent):
    """One change of a room's outcome, derived by ``rooms.outcomes`` from an executed typed
    action, never from text; the room's outcome is its latest row. ``agreed``: the plan of an
    executed ``book_table`` (snapshotted from the room's catalogue when it was booked, so a later
    catalogue edit does not rewrite it), sealed at rest under the room's data key. ``no_agreement``:
    the standing coarse reason of each side that executed ``declare_no_plan`` (codes the ledger
    holds too). Room data (the ledger has only the codes)."""

    # Looked up by the room_outcome_latest index, which leads with the room.
    room = models.ForeignKey(
        Room, on_delete=models.CASCADE, related_name="outcomes", db_index=False
    )
    # The executed action this row derives from (a gatekeeper ActionRecord id): unique, so a
    # replayed or re-reported action never records twice.
    action_id = models.UUIDField(unique=True)
    kind = models.CharField(max_length=12, choices=OutcomeKind.choices)
    # Whose agent books (agreed), or the side that declared (no agreement).
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    # Agreed: venue id and name, start (ISO 8601 with its offset), time zone, party size,
    # price per person in minor units, currency. Null for no agreement.
    plan = SealedJSONField(sealed_as=OUTCOME_PLAN, null=True, blank=True)
    # No agreement: owner id (as text) -> reason code, one per side that declared.
    reasons = models.JSONField(default=dict, blank=True)
    recorded_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        indexes = [models.Index(fields=["room", "-id"], name="room_outcome_latest")]

    def __str__(self) -> str:
        return f"outcome {self.kind} in room {self.room_id}"

    def _planned(self, name: str) -> Any:
        return (self.plan or {}).get(name)

    @property
    def venue_id(self) -> str:
        return str(self._planned("venue_id") or "")

    @property
    def venue_name(self) -> str:
        return str(self._planned("venue_name") or "")

    @property
    def starts_at(self) -> datetime | None:
        start = self._planned("starts_at")
        return datetime.fromisoformat(start) if isinstance(start, str) else None

    @property
    def time_zone(self) -> str:
        return str(self._planned("time_zone") or "")

    @property
    def party_size(self) -> int | None:
        party = self._planned("party_size")
        return int(party) if party is not None else None

    @property
    def price_per_person_minor(self) -> int | None:
        price = self._planned("price_per_person_minor")
        return int(price) if price is not None else None

    @property
    def currency(self) -> str:
        return str(self._planned("currency") or "")


class SealedOffer(SealedContent):
    """An agent's sealed offer in a room (rooms.sealed): room content, read by no one until the
    reveal (``revealed_at`` set for all of the room's offers at once). The ledger holds only
    that and when it was sealed, and a salted commitment to it."""

    # Looked up by the one-sealed-offer-per-agent constraint's index, which leads with it.
    room = models.ForeignKey(
        Room, on_delete=models.CASCADE, related_name="sealed_offers", db_index=False
    )
    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="+")
    # The ``seal_offer`` frame's id: resending it is not a second offer.
    client_id = models.CharField(max_length=64)
    # The validated plan (rooms.protocol.OfferPlan, JSON form), sealed at rest under the
    # room's data key like the transcript (rooms.sealing).
    offer = SealedJSONField(sealed_as=SEALED_OFFER)
    # Hex of 32 random bytes; the commitment is SHA-256 of RFC 8785 {"offer": ..., "salt": ...}.
    salt = models.CharField(max_length=64)
    commitment = models.CharField(max_length=64)
    sealed_at = models.DateTimeField(auto_now_add=True)
    revealed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["room", "agent"], name="one_sealed_offer_per_agent")
        ]

    def __str__(self) -> str:
        return f"sealed offer in room {self.room_id}"


class DeletionReason(models.TextChoices):
    OWNER_REQUEST = "owner_request", "An owner deleted the room"
    ACCOUNT_DELETED = "account_deleted", "An owner deleted their account"


class RoomDeletion(models.Model):
    """That a room was deleted for both sides: its id, when and by whom, never its content.

    It outlives the content on purpose (``rooms.deletion.deletions_reapply`` deletes again
    whatever a restored backup brings back). No foreign keys: the room is gone, and the owner
    who deleted it may have deleted their account since. ``rooms.deletion`` also writes each
    record to a journal outside the database, which a restored backup cannot roll back.
    """

    room_id = models.UUIDField(unique=True)
    deleted_at = models.DateTimeField()
    deleted_by_id = models.BigIntegerField()  # the owner's user id (the user may be gone)
    reason = models.CharField(max_length=16, choices=DeletionReason.choices)
    # Who held the room's seats: [{"user_id": 7, "date_joined": "2026-...+00:00"}, ...]. Its
    # ledger stays theirs to read and verify (rooms.ledger_api); an account is named by id
    # and the moment it joined, so a later account that gets the same id is not one of them.
    owners = models.JSONField(default=list, blank=True)

    def __str__(self) -> str:
        return f"deletion of room {self.room_id}"


class AccountDeletion(models.Model):
    """That an owner deleted their account: the user id and when (no name, no content). Like
    ``RoomDeletion``, journalled outside the database and re-applied after a restore."""

    user_id = models.BigIntegerField(unique=True)
    deleted_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"deletion of account {self.user_id}"


class RoomDeletionNotice(models.Model):
    """Tells an owner that the other owner deleted a room they shared: "alice deleted the room
    'Dinner'". It keeps the room's name and the deleter's name only, until the recipient
    dismisses it or ``DELETION_NOTICE_RETENTION_DAYS`` pass (rooms.retention)."""

    recipient = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+"
    )
    room_id = models.UUIDField()
    room_purpose = models.CharField(max_length=200)
    deleted_by_name = models.CharField(max_length=150)
    account_deleted = models.BooleanField(default=False)
    created_at = models.DateTimeField()

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"deletion notice for {self.recipient_id}"
