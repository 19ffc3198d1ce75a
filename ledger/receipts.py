"""A room's receipt: a human-readable summary built from its ledger, and a JSON export with
the whole chain so anyone can verify it (``python -m ledger.verify_export FILE.json``)."""

from __future__ import annotations

from collections import Counter
from typing import Any
from uuid import UUID

from django.utils import timezone
from pydantic import BaseModel, ValidationError

from ledger import selectors
from ledger.chain import (
    GENESIS_HASH,
    HEAD_SIGNATURE_PREFIX,
    WITNESS_SIGNATURE_PREFIX,
    occurred_at_text,
)
from ledger.events import (
    ActionExecuted,
    ActionRequested,
    Denial,
    Disclosure,
    FlareRaised,
    ForkOpened,
    ForkResolved,
    GrantApproved,
    GrantDenied,
    GrantExpired,
    GrantRequested,
    InjectionSuspected,
    Join,
    KeyEnrolled,
    KeyRevoked,
    KeyRotated,
    Leave,
    OutcomeRecorded,
    RoomPaused,
    SlipRejected,
    SlipSigned,
    event_record_parse,
)
from ledger.models import LedgerEvent
from ledger.signing import (
    LedgerSigningUnavailable,
    ledger_key_id,
    ledger_policy_stated,
    ledger_public_key,
)
from ledger.verification import CHUNK_SIZE, ledger_verify_room

EXPORT_FORMAT = "synapsia-ledger-export/1"

# A side's coarse reason for "no agreement", in the words an owner reads (the room page and
# the receipt say the same thing). The ledger holds only the code; keys are every NoPlanReason.
NO_PLAN_REASON_WORDS: dict[str, str] = {
    "time": "No time when both of you are free",
    "venue": "No venue open with a table for you",
    "budget": "No price within both of your budgets",
    "allergy": "No venue safe for the allergies",
    "distance": "Every place is too far for one of you",
    "cuisine": "No cuisine you would both eat",
    "rounds": "The agents ran out of rounds",
    "no_reply": "The other agent stopped replying",
}


class ReceiptParticipant(BaseModel):
    participant_id: str
    participant_kind: str
    joins: int = 0
    leaves: int = 0


class ReceiptSlip(BaseModel):
    seq: int
    owner_id: str
    agent_id: str
    slip_id: str
    capability_count: int
    key_custody: str = "device"


class ReceiptItemDisclosures(BaseModel):
    owner_id: str
    item_id: str
    times: int
    recipients: list[str]
    turns: list[int]


class ReceiptFlag(BaseModel):
    """A flare or a suspected injection: which event, who, which rule; for a suspicion about
    a shared artifact rather than a message, which artifact (its id: never its text)."""

    seq: int
    agent_id: str
    rule: str
    artifact_id: str | None = None


class ReceiptOutcome(BaseModel):
    """The room's latest recorded outcome, as the ledger knows it: the kind, the action that
    made it, and for "no agreement" each declaring side's reason code (owner id -> code).
    The plan's venue, time and price are room data, added by the owner's page, not here."""

    outcome: str  # agreed / no_agreement
    seq: int
    action_id: str
    owner_id: str
    reasons: dict[str, str]


class Receipt(BaseModel):
    room_id: UUID
    verified: bool
    first_bad_seq: int | None
    problem: str
    head_seq: int
    head_hash: str
    checkpoint_seq: int
    events: int
    first_event_at: str | None
    last_event_at: str | None
    counts_by_kind: dict[str, int]
    participants: list[ReceiptParticipant]
    slips_signed: list[ReceiptSlip]
    slips_rejected: dict[str, int]  # reason -> count
    key_changes: int
    permissions_granted: int  # capabilities in signed slips + one-action grants approved
    permissions_used: int  # disclosures + actions executed
    disclosures_by_item: list[ReceiptItemDisclosures]
    grants: dict[str, int]  # requested / approved / denied / expired
    actions: dict[str, int]  # requested / executed / failed
    denials_by_rule: dict[str, int]
    flares: list[ReceiptFlag]
    injections_suspected: list[ReceiptFlag]
    forks: dict[str, int]  # opened / resolved
    pauses: int
    unreadable_events: int
    # Slips and grant approvals signed with a server-held demo key (the practice room only).
    demo_key_signatures: int = 0
    outcome: ReceiptOutcome | None = None
    summary: list[str]


def receipt_build(*, room_id: UUID) -> Receipt:
    """Summarise the room's ledger (streamed) and say whether the chain verifies."""
    verdict = ledger_verify_room(room_id=room_id)
    head = selectors.ledger_head(room_id=room_id)
    kinds: Counter[str] = Counter()
    participants: dict[tuple[str, str], ReceiptParticipant] = {}
    slips: list[ReceiptSlip] = []
    rejected: Counter[str] = Counter()
    disclosures: dict[tuple[str, str], ReceiptItemDisclosures] = {}
    grants: Counter[str] = Counter({"requested": 0, "approved": 0, "denied": 0, "expired": 0})
    actions: Counter[str] = Counter({"requested": 0, "executed": 0, "failed": 0})
    denials: Counter[str] = Counter()
    flares: list[ReceiptFlag] = []
    injections: list[ReceiptFlag] = []
    forks: Counter[str] = Counter({"opened": 0, "resolved": 0})
    key_changes = pauses = unreadable = demo_signed = 0
    outcome: ReceiptOutcome | None = None
    first_at: str | None = None
    last_at: str | None = None

    rows = LedgerEvent.objects.filter(room_id=room_id).order_by("seq")
    for row in rows.iterator(chunk_size=CHUNK_SIZE):
        kinds[row.kind] += 1
        last_at = occurred_at_text(row.occurred_at)
        first_at = first_at or last_at
        try:
            record = event_record_parse(kind=row.kind, data=row.data)
        except (ValidationError, TypeError):
            unreadable += 1  # a tampered row: the verdict above says where
            continue
        match record:
            case Join() | Leave():
                key = (record.participant_id, record.participant_kind)
                seen = participants.setdefault(
                    key, ReceiptParticipant(participant_id=key[0], participant_kind=key[1])
                )
                if isinstance(record, Join):
                    seen.joins += 1
                else:
                    seen.leaves += 1
            case SlipSigned():
                slips.append(
                    ReceiptSlip(
                        seq=row.seq,
                        owner_id=record.owner_id,
                        agent_id=record.agent_id,
                        slip_id=record.slip_id,
                        capability_count=record.capability_count,
                        key_custody=record.key_custody,
                    )
                )
                demo_signed += record.key_custody == "demo_seeding"
            case SlipRejected():
                rejected[record.reason] += 1
            case KeyEnrolled() | KeyRotated() | KeyRevoked():
                key_changes += 1
            case Disclosure():
                item = disclosures.setdefault(
                    (record.owner_id, record.item_id),
                    ReceiptItemDisclosures(
                        owner_id=record.owner_id,
                        item_id=record.item_id,
                        times=0,
                        recipients=[],
                        turns=[],
                    ),
                )
                item.times += 1
                if record.recipient_agent_id not in item.recipients:
                    item.recipients.append(record.recipient_agent_id)
                item.turns.append(record.turn)
            case Denial():
                denials[record.rule] += 1
            case GrantRequested():
                grants["requested"] += 1
            case GrantApproved():
                grants["approved"] += 1
                demo_signed += record.key_custody == "demo_seeding"
            case GrantDenied():
                grants["denied"] += 1
            case GrantExpired():
                grants["expired"] += 1
            case ActionRequested():
                actions["requested"] += 1
            case ActionExecuted():
                actions["executed" if record.outcome == "ok" else "failed"] += 1
            case ForkOpened():
                forks["opened"] += 1
            case ForkResolved():
                forks["resolved"] += 1
            case FlareRaised():
                flares.append(
                    ReceiptFlag(seq=row.seq, agent_id=record.agent_id, rule=record.reason)
                )
            case InjectionSuspected():
                # A message's and an artifact's suspicions count alike (spec: every one is
                # counted in the receipt); the artifact's id says which it was.
                injections.append(
                    ReceiptFlag(
                        seq=row.seq,
                        agent_id=record.source_agent_id,
                        rule=record.rule,
                        artifact_id=record.artifact_id,
                    )
                )
            case OutcomeRecorded():
                # An agreement replaces earlier "no plan"s; a later declaration adds its side.
                reasons = {} if outcome is None or record.outcome == "agreed" else outcome.reasons
                if record.reason is not None:
                    reasons = {**reasons, record.owner_id: record.reason}
                outcome = ReceiptOutcome(
                    outcome=record.outcome,
                    seq=row.seq,
                    action_id=record.action_id,
                    owner_id=record.owner_id,
                    reasons=reasons,
                )
            case RoomPaused():
                pauses += 1
            case _:
                pass  # resumed, closed, content deleted, purge: counted by kind only

    granted = sum(s.capability_count for s in slips) + grants["approved"]
    used = sum(d.times for d in disclosures.values()) + actions["executed"]
    receipt = Receipt(
        room_id=room_id,
        verified=verdict.ok,
        first_bad_seq=verdict.first_bad_seq,
        problem=verdict.problem,
        head_seq=head["seq"],
        head_hash=head["hash"],
        checkpoint_seq=head["checkpoint"]["seq"],
        events=sum(kinds.values()),
        first_event_at=first_at,
        last_event_at=last_at,
        counts_by_kind=dict(sorted(kinds.items())),
        participants=list(participants.values()),
        slips_signed=slips,
        slips_rejected=dict(rejected),
        key_changes=key_changes,
        permissions_granted=granted,
        permissions_used=used,
        disclosures_by_item=list(disclosures.values()),
        grants=dict(grants),
        actions=dict(actions),
        denials_by_rule=dict(sorted(denials.items())),
        flares=flares,
        injections_suspected=injections,
        forks=dict(forks),
        pauses=pauses,
        unreadable_events=unreadable,
        demo_key_signatures=demo_signed,
        outcome=outcome,
        summary=[],
    )
    receipt.summary = _summary_lines(receipt)
    return receipt


def _summary_lines(r: Receipt) -> list[str]:
    def plural(n: int, word: str) -> str:
        return f"{n} {word}{'' if n == 1 else 's'}"

    lines = [
        (
            f"Ledger verified: {plural(r.events, 'event')}, each linked to the one before, "
            f"up to #{r.head_seq}."
            if r.verified
            else f"Ledger does NOT verify: it breaks at #{r.first_bad_seq} ({r.problem})."
        ),
        f"{plural(len(r.participants), 'participant')} joined.",
        f"{plural(len(r.slips_signed), 'slip')} signed, granting "
        f"{plural(r.permissions_granted, 'permission')}; {r.permissions_used} used.",
        f"{plural(sum(d.times for d in r.disclosures_by_item), 'disclosure')} of "
        f"{plural(len(r.disclosures_by_item), 'item')}.",
        f"Grants: {r.grants['requested']} requested, {r.grants['approved']} approved, "
        f"{r.grants['denied']} denied, {r.grants['expired']} expired.",
        f"{plural(sum(r.denials_by_rule.values()), 'denial')}; "
        f"{plural(len(r.flares), 'flare')}; "
        f"{plural(len(r.injections_suspected), 'suspected injection')}.",
    ]
    if r.demo_key_signatures:
        lines.append(
            f"{plural(r.demo_key_signatures, 'signature')} (slips or approvals) made with a "
            "demo key the server holds: practice room only, not an owner's own device."
        )
    if r.outcome is not None and r.outcome.outcome == "agreed":
        lines.append(
            f"Outcome: agreed, a table was booked (ledger #{r.outcome.seq}); the plan itself "
            "is on the room page."
        )
    elif r.outcome is not None:
        said = "; ".join(
            NO_PLAN_REASON_WORDS.get(code, "no reason given") for code in r.outcome.reasons.values()
        )
        lines.append(f"Outcome: no agreement ({said}).")
    if r.checkpoint_seq:
        lines.append(f"Events up to #{r.checkpoint_seq} were purged under the retention window.")
    return lines


def receipt_export(room_id: UUID) -> dict[str, Any]:
    """The receipt plus everything a third party needs to verify the chain without us:
    the events as hashed, the checkpoint, the head, signed heads and the server public key."""
    head = selectors.ledger_head(room_id=room_id)
    try:
        key = ledger_public_key()
        server_key: dict[str, str] | None = {
            "algorithm": "Ed25519",
            "public_key": key,
            "key_id": ledger_key_id(key),
        }
    except LedgerSigningUnavailable:
        server_key = None
    return {
        "format": EXPORT_FORMAT,
        "room_id": str(room_id),
        "hashing": {
            "algorithm": "sha256",
            "canonicalization": "RFC 8785",
            "envelope": ["room_id", "seq", "kind", "occurred_at", "data", "prev_hash"],
            "genesis_prev_hash": GENESIS_HASH,
        },
        "checkpoint": head["checkpoint"],
        "head": {"seq": head["seq"], "hash": head["hash"]},
        "events": selectors.ledger_events(room_id=room_id),
        "signed_heads": selectors.ledger_signed_heads(room_id=room_id),
        "signed_message_prefix": HEAD_SIGNATURE_PREFIX.decode(),
        # Owners' device-key countersignatures of signed heads: checkpoints a verifier holds
        # history to (keep an export: it proves a witness the database may later lose).
        "witnesses": selectors.ledger_witnesses_out(room_id=room_id),
        "witness_signed_message_prefix": WITNESS_SIGNATURE_PREFIX.decode(),
        # When the server wrote this file: the offline verifier judges the unsigned tail's
        # age against it (a tail the server should have signed by then).
        "exported_at": occurred_at_text(timezone.now()),
        "server_public_key": server_key,
        "policy": ledger_policy_stated(),
        "receipt": receipt_build(room_id=room_id).model_dump(mode="json"),
    }
