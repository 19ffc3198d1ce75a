"""Publishing a shared artifact (the ``publish_artifact`` tool's effect).

``artifact_publish`` runs inside the action's transaction, after the Gatekeeper allowed the
publish (the publisher's slip clears ``tool:publish_artifact``) and recorded it. It seals the
title and body under the room's data key, decides whether the other agent may read it (the
same slip record's recipient, ``gatekeeper.sharing``) and records a refusal in the ledger
(metadata only). A replayed call (the same action) finds the artifact it made.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from uuid import UUID, uuid4

from django.utils import timezone

from artifacts.models import Artifact, MediaType
from artifacts.sealing import ArtifactContent, artifact_seal
from gatekeeper.decision import RoomFacts, decide_guarded
from gatekeeper.sharing import ArtifactShareRequest
from ledger.events import Denial, rule_id_from
from ledger.services import ledger_append
from rooms.models import Room

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
    """Store one artifact, sealed, and decide (and if refused, record) whether the
    publisher's slip shares it with the other agent. Must run inside the action's
    ``transaction.atomic()``. Raises ``ArtifactRefused`` (nothing stored) for a media type
    outside the allowed list, or when the room does not exist."""
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
    # The slip's answer now; the other agent's seat is decided at each delivery, live.
    decision = decide_guarded(
        ArtifactShareRequest(
            room=RoomFacts(room_id=room.id, state=room.state, terms=room.terms),
            publisher_owner_id=owner_id,
            publisher_agent_id=agent_id,
        )
    )
    if not decision.allowed:
        # Recorded before anything else happens; the artifact stays with the two owners.
        ledger_append(
            room_id=room_id,
            event=Denial(
                rule=rule_id_from(decision.rule),
                subject_id=str(agent_id),
                resource_id=str(artifact_id),
            ),
        )
    digest = hashlib.sha256(encoded).hexdigest()
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
        shared_with_peer=decision.allowed,
        created_at=timezone.now(),
    )
    return Published(artifact_id, digest, decision.allowed)
