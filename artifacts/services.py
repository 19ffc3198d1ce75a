"""Publishing a shared artifact (the ``publish_artifact`` tool's effect).

``artifact_publish`` runs inside the action's transaction, after the Gatekeeper allowed the
publish (the publisher's slip clears ``tool:publish_artifact``) and recorded it. It seals the
title and body under the room's data key, judges them once as untrusted text (each suspicion
the fence raises is an ``InjectionSuspected`` ledger event naming the artifact, and stays on
the row for both owners to see), decides whether the other agent may read it (the same slip
record's recipient, ``gatekeeper.sharing``) and records a refusal in the ledger (metadata
only). A check that fails (an error, a timeout) is a denial that pauses the room at a fork;
the artifact is then left undecided, for the first delivery after the owners resume to
decide (``artifacts.delivery``). A replayed call (the same action) finds the artifact it made.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from uuid import UUID, uuid4

from django.db import transaction
from django.utils import timezone

from artifacts.delivery import artifact_fence, share_check_failed
from artifacts.models import Artifact, MediaType
from artifacts.sealing import ArtifactContent, artifact_seal
from gatekeeper.decision import RoomFacts, decide_guarded
from gatekeeper.sharing import ArtifactShareRequest
from ledger.events import Denial, InjectionSuspected, LedgerEventRecord, rule_id_from
from ledger.services import LedgerAppendError, ledger_append_many
from rooms.models import Room
from rooms.pausing import room_pause_fail_safe

# The tool's ``format`` argument names one of the allowed media types (and nothing else).
MEDIA_TYPES: dict[str, MediaType] = {"plain": MediaType.PLAIN, "markdown": MediaType.MARKDOWN}


class ArtifactRefused(Exception):
    """The artifact cannot be published as given; ``message`` says why, for the agent."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code, self.message = code, message


@dataclass(frozen=True)
class Published:
    artifact_id: UUID
    body_sha256: str
    shared_with_peer: bool


def artifact_publish(
    *,
    room_id: UUID,
    agent_id: UUID,
    owner_id: int,
    action_key: str,
    title: str,
    body: str,
    media_format: str,
) -> Published:
    """Store one artifact, sealed and judged, and decide (and if refused, record) whether the
    publisher's slip shares it with the other agent. Must run inside the action's
    ``transaction.atomic()``. Raises ``ArtifactRefused`` (nothing stored) for a media type
    outside the allowed list, when the room does not exist, or when the ledger cannot record
    the refusal or a suspicion (``ledger_unavailable``: a flag that cannot be recorded
    refuses the artifact, as it refuses a message). A sharing check that fails pauses the
    room at the fail-safe fork, recorded, and leaves the artifact ``share_undecided``."""
    existing = Artifact.objects.filter(action_key=action_key).first()
    if existing is not None:
        return Published(existing.id, existing.body_sha256, existing.shared_with_peer)
    media_type = MEDIA_TYPES.get(media_format)
    if media_type is None:
        allowed = ", ".join(sorted(MEDIA_TYPES))
        raise ArtifactRefused("media_type", f"An artifact's format must be one of: {allowed}.")
    encoded = body.encode("utf-8")
    artifact_id = uuid4()
    room = Room.objects.only("id", "state", "terms").filter(id=room_id).first()
    if room is None:
        # A call with no room behind it (a deleted room's replayed action): nowhere to publish.
        raise ArtifactRefused("no_room", "There is no room to publish this artifact in.")
    # Judged once, here, as the other agent would read it: its flags are the ledger's, the
    # owners' and every delivery's (each delivery fences it again, without judging).
    flags = [s.rule.value for s in artifact_fence(title=title, body=body).suspicions]
    # The slip's answer now; the other agent's seat is decided at each delivery, live.
    decision = decide_guarded(
        ArtifactShareRequest(
            room=RoomFacts(room_id=room.id, state=room.state, terms=room.terms),
            publisher_owner_id=owner_id,
            publisher_agent_id=agent_id,
        )
    )
    failed = share_check_failed(decision)
    events: list[LedgerEventRecord] = []
    if not decision.allowed:
        # Recorded before anything else happens; the artifact stays with the two owners (or,
        # when the check failed, undecided until the room resumes).
        events.append(
            Denial(
                rule=rule_id_from(decision.rule),
                subject_id=str(agent_id),
                resource_id=str(artifact_id),
            )
        )
    events += [
        InjectionSuspected(source_agent_id=str(agent_id), artifact_id=str(artifact_id), rule=rule)
        for rule in flags
    ]
    digest = hashlib.sha256(encoded).hexdigest()
    try:
        with transaction.atomic():
            # One savepoint: the events, the pause and the row commit together or not at all.
            if events:
                ledger_append_many(room_id=room_id, events=events)
            if failed:
                # Fail closed as every failed check does: a denial, and the room stops at a
                # fork for the owners, the pause recorded (rooms.pausing).
                room_pause_fail_safe(room_id=room_id, rule=decision.rule)
            Artifact.objects.create(
                id=artifact_id,
                room_id=room_id,
                publisher_owner_id=owner_id,
                publisher_agent_id=agent_id,
                action_key=action_key,
                media_type=media_type,
                size_bytes=len(encoded),
                body_sha256=digest,
                sealed=artifact_seal(
                    room_id=room_id,
                    artifact_id=artifact_id,
                    content=ArtifactContent(title=title, body=body),
                ),
                # Undecided: neither shared nor kept; the next delivery decides it live.
                shared_with_peer=decision.allowed,
                share_undecided=failed,
                flags=flags,
                created_at=timezone.now(),
            )
    except LedgerAppendError:
        # The refusal or a flag could not be recorded, so the artifact was not stored either.
        raise ArtifactRefused(
            "ledger_unavailable",
            "The room's ledger could not record this artifact, so it was not published. "
            "Try again in a moment.",
        ) from None
    return Published(artifact_id, digest, decision.allowed)
