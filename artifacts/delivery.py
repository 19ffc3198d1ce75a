"""What the other agent receives of the room's shared artifacts: fenced untrusted data only.

``artifacts_for_agent`` is called once per turn of an agent (context assembly). For every
artifact another agent of the room published, the Gatekeeper decides now, live, whether it may
reach this agent (``gatekeeper.sharing``: the publisher's slip, this agent's seat, the room's
state). Each artifact delivered is recorded in the ledger as a ``disclosure`` naming the
artifact, its publisher's owner, this agent and the turn, before it is returned (in one
transaction with the caller's): if the ledger cannot record it, nothing is delivered. A
refusal is recorded as a ``denial`` and the artifact is left out. A check that failed (an
error, a timeout, a clock jump) delivers nothing and says so (``error``: the caller pauses the
room, as for any failed check).

An artifact whose sharing could not be decided when it was published (that check failed, so
the room paused: ``share_undecided``) is offered like a shared one, and the first delivery's
live decision settles it: allowed, it is shared from then on; refused by the publisher's
slip, it stays with the two owners, as publishing would have left it (the denial recorded
once, not at every turn); refused for this agent's seat or the room, it stays undecided.

The title and body reach the agent only inside ``rooms.untrusted.fence`` (source
``artifact``): controls stripped, wrapped in an unforgeable boundary, suspected injections
flagged; never as instructions. The flags are the ones judged once when it was published
(``artifacts.services``), which the owners see too; only an artifact published before that
judgement existed is judged here, for the agent alone.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from uuid import UUID

from django.db import transaction
from django.db.models import Q

from artifacts.models import Artifact
from artifacts.sealing import artifact_open
from gatekeeper.decision import Decision, RoomFacts, decide_guarded
from gatekeeper.sharing import ArtifactShareRequest, share_goes_onward
from ledger.events import Denial, Disclosure, LedgerEventRecord, rule_id_from
from ledger.services import ledger_append_many
from rooms.models import Room, RoomMember, SeatStanding
from rooms.untrusted import FencedText, fence

# An artifact's body is at most 32,000 UTF-8 bytes (the tool's schema) plus its title and the
# fence: one artifact always fits whole.
ARTIFACT_FENCE_CAP_BYTES = 34_000
_CHECK_FAILED = frozenset({"slip_verification_error"})
_RECIPIENT_RULES = frozenset({"agent_revoked", "agent_withdrawn", "room_not_open"})


@dataclass(frozen=True)
class SharedArtifact:
    """One artifact as the other agent receives it: metadata the room vouches for, and the
    fenced text (title, a blank line, body) that is the publisher's words."""

    artifact_id: UUID
    media_type: str
    size_bytes: int
    published_at: datetime
    fenced: str
    nonce: str
    truncated: bool
    flags: tuple[str, ...]  # suspicion rule ids the fence raised (no content)
    # May the reader carry it out of the room: the sharing decision's record, after the tier.
    onward_disclosure: bool = False


@dataclass(frozen=True)
class ArtifactDelivery:
    artifacts: tuple[SharedArtifact, ...] = ()
    error: str | None = None  # a failed check's rule: nothing was delivered


def share_check_failed(decision: Decision) -> bool:
    """Whether a sharing decision is a check that failed (an error, a timeout, a clock jump,
    an unverifiable slip) rather than an answer: a denial that pauses the room."""
    return decision.rule.startswith("gatekeeper.") or decision.rule in _CHECK_FAILED


def artifact_fence(*, title: str, body: str, judge: bool = True) -> FencedText:
    """The artifact as untrusted data (source ``artifact``): the title, a blank line and the
    body, fenced whole. ``judge=False`` for one judged already (its stored flags stand)."""
    return fence(
        f"{title}\n\n{body}", source="artifact", cap_bytes=ARTIFACT_FENCE_CAP_BYTES, judge=judge
    )


def artifacts_for_agent(*, room_id: UUID, agent_id: UUID, turn: int) -> ArtifactDelivery:
    """The artifacts other agents published in the room that may reach ``agent_id`` now,
    each fenced; each delivery and each refusal is in the ledger first. Raises
    ``LedgerAppendError`` (nothing delivered) when the ledger cannot record them."""
    with transaction.atomic():
        seat = (
            RoomMember.objects.select_related("agent", "room")
            .filter(room_id=room_id, agent_id=agent_id)
            .first()
        )
        if seat is None or seat.agent is None:
            return ArtifactDelivery()
        room: Room = seat.room
        facts = RoomFacts(room_id=room.id, state=room.state, terms=room.terms)
        published = list(
            Artifact.objects.filter(
                Q(shared_with_peer=True) | Q(share_undecided=True), room_id=room_id
            )
            .exclude(publisher_agent_id=agent_id)
            .order_by("created_at", "id")
        )
        decided: dict[tuple[int, UUID], Decision] = {}
        events: list[LedgerEventRecord] = []
        cleared: list[tuple[Artifact, bool]] = []
        # Artifacts whose sharing this delivery settled (see the module's docstring).
        settled_shared: list[UUID] = []
        settled_kept: list[UUID] = []
        for artifact in published:
            publisher = (artifact.publisher_owner_id, artifact.publisher_agent_id)
            if publisher not in decided:
                decided[publisher] = decide_guarded(
                    ArtifactShareRequest(
                        room=facts,
                        publisher_owner_id=artifact.publisher_owner_id,
                        publisher_agent_id=artifact.publisher_agent_id,
                        recipient_agent_id=agent_id,
                        recipient_revoked=seat.agent.revoked_at is not None,
                        recipient_active=seat.standing == SeatStanding.ACTIVE,
                    )
                )
            decision = decided[publisher]
            if share_check_failed(decision):
                return ArtifactDelivery(error=decision.rule)
            if decision.allowed:
                cleared.append((artifact, share_goes_onward(decision)))
                if artifact.share_undecided:
                    settled_shared.append(artifact.id)
                events.append(
                    Disclosure(
                        owner_id=str(artifact.publisher_owner_id),
                        item_id=str(artifact.id),
                        recipient_agent_id=str(agent_id),
                        turn=turn,
                    )
                )
            else:
                # Who was refused: this agent when its own seat or the room said no, else the
                # publisher (its owner's slip does not share it), so the words name the right
                # owner.
                subject = agent_id if decision.rule in _RECIPIENT_RULES else publisher[1]
                events.append(
                    Denial(
                        rule=rule_id_from(decision.rule),
                        subject_id=str(subject),
                        resource_id=str(artifact.id),
                    )
                )
                if artifact.share_undecided and decision.rule not in _RECIPIENT_RULES:
                    settled_kept.append(artifact.id)
        if events:
            ledger_append_many(room_id=room_id, events=events)
        # After the ledger (in the same transaction): a settlement that is not recorded is
        # not made.
        if settled_shared:
            Artifact.objects.filter(id__in=settled_shared).update(
                share_undecided=False, shared_with_peer=True
            )
        if settled_kept:
            Artifact.objects.filter(id__in=settled_kept).update(share_undecided=False)
        return ArtifactDelivery(artifacts=tuple(_shared(a, onward) for a, onward in cleared))


def _shared(artifact: Artifact, onward_disclosure: bool) -> SharedArtifact:
    content = artifact_open(
        room_id=artifact.room_id, artifact_id=artifact.id, blob=bytes(artifact.sealed)
    )
    # Judged once, when it was published: the agent is told the flags the owners see.
    stored: list[str] | None = artifact.flags
    block = artifact_fence(title=content.title, body=content.body, judge=stored is None)
    flags = tuple(s.rule.value for s in block.suspicions) if stored is None else tuple(stored)
    return SharedArtifact(
        artifact_id=artifact.id,
        media_type=artifact.media_type,
        size_bytes=artifact.size_bytes,
        published_at=artifact.created_at,
        fenced=block.fenced,
        nonce=block.nonce,
        truncated=block.truncated,
        flags=flags,
        onward_disclosure=onward_disclosure,
    )
