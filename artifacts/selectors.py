"""What the room's two owners see of its shared artifacts (the room page, the export).

Both owners of a room see every artifact published in it, whichever agent published it and
whether or not it was shared with the other agent: they are the people the room works for.
Each suspicion the room raised on it when it was published is shown in the words a flagged
message gets (``frontend.transcript.flag_sentence``). Anyone without a seat gets
``NotFound``, exactly as for a room that does not exist.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from uuid import UUID

from django.contrib.auth.models import User

from artifacts.models import Artifact, MediaType
from artifacts.sealing import artifact_open
from frontend.transcript import flag_sentence
from rooms import selectors as room_selectors
from rooms.selectors import owner_name
from slips.errors import Misconfigured

UNREADABLE = "This artifact cannot be read any more."


@dataclass(frozen=True)
class ArtifactView:
    artifact_id: UUID  # for the export's file names only; never shown on a page
    title: str
    body: str
    media_type: str  # "text/markdown"
    media_words: str  # "Markdown"
    size_bytes: int
    published_at: datetime
    by_you: bool
    who: str  # "Your agent (Scout)", "Bob's agent (Ferret)"
    shared_words: str  # whether the other agent was given it, in words
    body_sha256: str
    readable: bool
    flags: tuple[str, ...] = ()  # each suspected injection, in words (flag_sentence)


def artifacts_for_owner(*, owner: User, room_id: UUID) -> list[ArtifactView]:
    """The room's artifacts, oldest first, opened for one of its owners (``NotFound`` for
    anyone else). An artifact whose key is gone reads as ``UNREADABLE``, never as text."""
    seat = room_selectors.room_seat(owner=owner, room_id=room_id)
    seats = room_selectors.room_seats(room=seat.room)
    agents = {s.agent_id: s for s in seats if s.agent_id is not None}
    views = []
    rows = (
        Artifact.objects.filter(room_id=seat.room_id)
        .select_related("publisher_owner")
        .order_by("created_at", "id")
    )
    for artifact in rows:
        publisher = agents.get(artifact.publisher_agent_id)
        by_you = artifact.publisher_owner_id == owner.pk
        agent_name = publisher.agent.name if publisher and publisher.agent else ""
        whose = "Your agent" if by_you else f"{owner_name(artifact.publisher_owner)}'s agent"
        who = f"{whose} ({agent_name})" if agent_name else whose
        whose_slip = "your" if by_you else f"{owner_name(artifact.publisher_owner)}'s"
        if artifact.share_undecided:
            shared = (
                "Not given to the other agent yet: the check of whether "
                f"{whose_slip} permission slip shares it failed, so the room paused. Once the "
                "room resumes, the other agent's next turn decides it again."
            )
        elif artifact.shared_with_peer:
            shared = "Shared with the other agent, as fenced untrusted text."
        else:
            shared = (
                f"Not given to the other agent: {whose_slip} permission slip does not share "
                "published documents with it. Both owners can read it here."
            )
        try:
            content = artifact_open(
                room_id=artifact.room_id, artifact_id=artifact.id, blob=bytes(artifact.sealed)
            )
            title, body, readable = content.title, content.body, True
        except Misconfigured:
            title, body, readable = UNREADABLE, "", False
        views.append(
            ArtifactView(
                artifact_id=artifact.id,
                title=title,
                body=body,
                media_type=artifact.media_type,
                media_words=MediaType(artifact.media_type).label,
                size_bytes=artifact.size_bytes,
                published_at=artifact.created_at,
                by_you=by_you,
                who=who,
                shared_words=shared,
                body_sha256=artifact.body_sha256,
                readable=readable,
                flags=tuple(flag_sentence(str(code)) for code in artifact.flags or ()),
            )
        )
    return views


def artifact_publishers(*, room_id: UUID, ids: Iterable[UUID | str]) -> dict[str, int]:
    """Artifact id (text) -> the publishing owner's id, for those of ``ids`` that are
    artifacts of ``room_id`` (for naming ledger events and what fed a turn). Metadata only:
    nothing is opened; an id that is not one of this room's artifacts is left out."""
    valid = []
    for value in ids:
        try:
            valid.append(value if isinstance(value, UUID) else UUID(str(value)))
        except ValueError:
            continue  # not an artifact id: nothing to name
    if not valid:
        return {}
    found = Artifact.objects.filter(room_id=room_id, id__in=valid).values_list(
        "id", "publisher_owner_id"
    )
    return {str(artifact_id): owner_id for artifact_id, owner_id in found}
