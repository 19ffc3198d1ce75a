"""Typed ledger event records: one frozen pydantic model per event type.

Events hold non-content metadata only: identifiers, rule ids, decisions, counts and hashes.
Every string field has a constrained pattern and length, so message text, vault values or
artifact bodies cannot be slipped into the ledger, even by mistake: a sentence has spaces, and
a vault value does not fit an identifier pattern. Models are strict (no coercion: ``"3"`` is
not an int, ``True`` is not a count) and forbid extra fields.

Callers never pass ``kind``; it defaults to the model's literal and is the union's
discriminator. The fields other than ``kind`` are the event's ``data`` in the hash chain
(see ``docs/ledger.md``).
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, TypeAdapter, model_validator

# An identifier: a UUID, a database id, a key fingerprint, "owner:42". No spaces, no free text.
Identifier = Annotated[
    str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$", max_length=64)
]
# A rule id or short reason slug: "bad_signature", "slip.expired", "SYN-TRUST-002".
RuleId = Annotated[str, StringConstraints(pattern=r"^[A-Za-z][A-Za-z0-9_.-]{0,47}$", max_length=48)]
_NOT_IN_RULE_ID = re.compile(r"[^A-Za-z0-9_.-]")


def rule_id_from(rule: str) -> str:
    """A decision's rule as a ``RuleId``: characters the ledger refuses become ``.`` (``*``
    becomes ``any``) and it is cut to 48. Policy rules name their entry
    (``policy.deny:db:<agent id or *>``) and would otherwise fail to record."""
    return _NOT_IN_RULE_ID.sub(".", rule.replace("*", "any"))[:48]


# A lowercase hex SHA-256 digest.
Sha256Hex = Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{64}$")]
# Counts and turn numbers: non-negative and far below 2**53 (RFC 8785 numbers stay exact).
Count = Annotated[int, Field(ge=0, le=2**31 - 1)]

ParticipantKind = Literal["owner", "agent"]
# Who held the private key that signed: the owner's device, or (the practice room's seeded
# demo owners only) the server. Recorded so both owners can see a server-held key was used.
KeyCustody = Literal["device", "demo_seeding"]


class _Event(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)


# --- presence -------------------------------------------------------------------------------


class Join(_Event):
    kind: Literal["join"] = "join"
    participant_id: Identifier
    participant_kind: ParticipantKind


class Leave(_Event):
    kind: Literal["leave"] = "leave"
    participant_id: Identifier
    participant_kind: ParticipantKind


# --- slips and keys -------------------------------------------------------------------------


class SlipSigned(_Event):
    kind: Literal["slip_signed"] = "slip_signed"
    owner_id: Identifier
    agent_id: Identifier
    slip_id: Identifier
    key_id: Identifier
    capability_count: Count
    key_custody: KeyCustody = "device"


class SlipRejected(_Event):
    kind: Literal["slip_rejected"] = "slip_rejected"
    owner_id: Identifier
    agent_id: Identifier
    reason: RuleId


class KeyEnrolled(_Event):
    kind: Literal["key_enrolled"] = "key_enrolled"
    owner_id: Identifier
    key_id: Identifier
    after_key_loss: bool


class KeyRotated(_Event):
    kind: Literal["key_rotated"] = "key_rotated"
    owner_id: Identifier
    old_key_id: Identifier
    new_key_id: Identifier


class KeyRevoked(_Event):
    kind: Literal["key_revoked"] = "key_revoked"
    owner_id: Identifier
    key_id: Identifier


# --- decisions ------------------------------------------------------------------------------


class Disclosure(_Event):
    """A slip item was placed in an agent's context: which item, whose, to whom, which turn."""

    kind: Literal["disclosure"] = "disclosure"
    owner_id: Identifier
    item_id: Identifier
    recipient_agent_id: Identifier
    turn: Count


class Denial(_Event):
    """A check said no: which rule fired, for whom, about what."""

    kind: Literal["denial"] = "denial"
    rule: RuleId
    subject_id: Identifier
    resource_id: Identifier | None = None


class ActionRequested(_Event):
    kind: Literal["action_requested"] = "action_requested"
    action_id: Identifier
    agent_id: Identifier
    tool: RuleId
    schema_hash: Sha256Hex | None = None


class GrantRequested(_Event):
    """An owner was asked for a grant: for one action (``action_id``), or, with no action, for
    one disclosure of their own vault item (which item kind and to whom stay in the grant,
    shown to that owner only: the other owner does not read the asking owner's slip)."""

    kind: Literal["grant_requested"] = "grant_requested"
    grant_id: Identifier
    action_id: Identifier | None = None
    owner_id: Identifier


class GrantApproved(_Event):
    kind: Literal["grant_approved"] = "grant_approved"
    grant_id: Identifier
    action_id: Identifier | None = None  # None: a disclosure grant
    owner_id: Identifier
    key_id: Identifier | None = None
    key_custody: KeyCustody = "device"


class GrantDenied(_Event):
    kind: Literal["grant_denied"] = "grant_denied"
    grant_id: Identifier
    action_id: Identifier | None = None  # None: a disclosure grant
    owner_id: Identifier
    reason: RuleId


class GrantExpired(_Event):
    kind: Literal["grant_expired"] = "grant_expired"
    grant_id: Identifier
    action_id: Identifier | None = None  # None: a disclosure grant


class ActionExecuted(_Event):
    kind: Literal["action_executed"] = "action_executed"
    action_id: Identifier
    agent_id: Identifier
    tool: RuleId
    grant_id: Identifier | None = None
    outcome: Literal["ok", "failed"]


class ForkOpened(_Event):
    kind: Literal["fork_opened"] = "fork_opened"
    fork_id: Identifier
    reason_rule: RuleId
    owner_id: Identifier | None = None


class ForkResolved(_Event):
    kind: Literal["fork_resolved"] = "fork_resolved"
    fork_id: Identifier
    by: Identifier
    resolution: RuleId


# --- outcome ----------------------------------------------------------------------------------

# Coarse reasons a side gives for "no agreement" (the ``declare_no_plan`` tool's vocabulary).
# A category, never the private fact behind it: "budget", not the budget.
NoPlanReason = Literal[
    "time", "venue", "budget", "allergy", "distance", "cuisine", "rounds", "no_reply"
]  # fmt: skip


class OutcomeRecorded(_Event):
    """The room's outcome changed: ``agreed`` (an executed booking; ``owner_id`` is whose agent
    books) or ``no_agreement`` (an executed ``declare_no_plan``; ``owner_id`` is the side that
    declared, ``reason`` its coarse code). Metadata only: never the venue, time, price or any
    text; the plan itself is room data (``rooms.outcomes``)."""

    kind: Literal["outcome_recorded"] = "outcome_recorded"
    outcome: Literal["agreed", "no_agreement"]
    action_id: Identifier
    owner_id: Identifier
    reason: NoPlanReason | None = None


# --- sealed offers --------------------------------------------------------------------------


class OfferSealed(_Event):
    """An agent sealed its offer (the event's time is when). ``commitment`` is SHA-256 of the
    RFC 8785 form of ``{"offer": ..., "salt": ...}`` with a random salt, revealed only with the
    offer: it says nothing about the plan and lets an owner check the reveal later."""

    kind: Literal["offer_sealed"] = "offer_sealed"
    agent_id: Identifier
    commitment: Sha256Hex


class OffersRevealed(_Event):
    """The room's sealed offers were revealed to both agents at once: whose (never what);
    ``complete`` is false when the deadline passed before every agent sealed."""

    kind: Literal["offers_revealed"] = "offers_revealed"
    agent_ids: list[Identifier] = Field(min_length=1, max_length=2)
    complete: bool


# --- safeguards -----------------------------------------------------------------------------


class FlareRaised(_Event):
    kind: Literal["flare_raised"] = "flare_raised"
    agent_id: Identifier
    reason: RuleId


class InjectionSuspected(_Event):
    """Points at what the fence flagged, never at what it says: a transcript message by its
    number (``message_seq``), or a shared artifact by its id (``artifact_id``, judged once,
    when it was published). Exactly one of the two. Events recorded before ``artifact_id``
    existed lack it in ``data``; they verify as stored and read back as a message's."""

    kind: Literal["injection_suspected"] = "injection_suspected"
    source_agent_id: Identifier
    message_seq: Count | None = None
    rule: RuleId
    artifact_id: Identifier | None = None

    @model_validator(mode="after")
    def _points_at_one_thing(self) -> InjectionSuspected:
        if (self.message_seq is None) == (self.artifact_id is None):
            raise ValueError("a suspected injection names a message_seq or an artifact_id")
        return self


# --- room lifecycle -------------------------------------------------------------------------


class RoomPaused(_Event):
    kind: Literal["room_paused"] = "room_paused"
    by: Identifier
    reason_rule: RuleId


class RoomResumed(_Event):
    kind: Literal["room_resumed"] = "room_resumed"
    by: Identifier


class RoomClosed(_Event):
    kind: Literal["room_closed"] = "room_closed"
    by: Identifier


# Why a room's content was deleted: an owner deleted the room (for both sides), an owner
# deleted their account, its retention window ended, or a deletion was re-applied after a
# restore from backup (rooms.deletion, rooms.retention).
ContentDeletionReason = Literal["owner_request", "account_deleted", "retention", "reapplied"]


class RoomContentDeleted(_Event):
    """Counts of the room content deleted (never the content): ``by`` is the owner, or
    ``retention`` for a purge (``window_days`` then says which window ended)."""

    kind: Literal["room_content_deleted"] = "room_content_deleted"
    by: Identifier
    messages_deleted: Count
    artifacts_deleted: Count
    whispers_deleted: Count = 0
    snapshots_deleted: Count = 0
    notes_deleted: Count = 0
    reason: ContentDeletionReason = "owner_request"
    window_days: Count | None = None


class RetentionPurge(_Event):
    """Events up to ``through_seq`` were purged; ``through_hash`` is the new checkpoint."""

    kind: Literal["retention_purge"] = "retention_purge"
    through_seq: Count
    through_hash: Sha256Hex
    events_purged: Count
    window_days: Count


# --- abuse reports (stewards) ---------------------------------------------------------------

# Why an owner reports a room (stewards.themes.REPORT_REASONS); the report's text stays with
# the report, never in the ledger.
ReportReason = Literal["harassment", "manipulation", "deception", "privacy", "spam", "other"]


class AbuseReported(_Event):
    """An owner of the room reported it to the operator: which report, who, why (a code)."""

    kind: Literal["abuse_reported"] = "abuse_reported"
    report_id: Identifier
    reporter_id: Identifier
    reason: ReportReason


class AbuseReportResolved(_Event):
    """The operator resolved a report about this room (the evidence's 180 days start now)."""

    kind: Literal["abuse_report_resolved"] = "abuse_report_resolved"
    report_id: Identifier


LedgerEventRecord = Annotated[
    Join
    | Leave
    | SlipSigned
    | SlipRejected
    | KeyEnrolled
    | KeyRotated
    | KeyRevoked
    | Disclosure
    | Denial
    | ActionRequested
    | GrantRequested
    | GrantApproved
    | GrantDenied
    | GrantExpired
    | ActionExecuted
    | ForkOpened
    | ForkResolved
    | OutcomeRecorded
    | OfferSealed
    | OffersRevealed
    | FlareRaised
    | InjectionSuspected
    | RoomPaused
    | RoomResumed
    | RoomClosed
    | RoomContentDeleted
    | RetentionPurge
    | AbuseReported
    | AbuseReportResolved,
    Field(discriminator="kind"),
]

# Parses stored ``{"kind": ..., **data}`` back into a record (receipts, tests).
event_record_adapter: TypeAdapter[LedgerEventRecord] = TypeAdapter(LedgerEventRecord)

EVENT_KINDS: tuple[str, ...] = tuple(
    model.model_fields["kind"].default
    for model in _Event.__subclasses__()  # every concrete event type, in declaration order
)


def event_record_parse(*, kind: str, data: dict[str, object]) -> LedgerEventRecord:
    """Rebuild a typed record from a stored event's ``kind`` and ``data`` (raises if invalid)."""
    # Stored JSON has no Python types to be strict about; validate from JSON semantics.
    return event_record_adapter.validate_python({**data, "kind": kind}, strict=False)
