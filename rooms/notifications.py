"""What an owner hears about their rooms, at the volume they chose.

Urgent: unanswered Signal Flares of their agents. Badge: forks (grant requests) waiting for
them. Digest ("While you were away", opt-in): per room, counts of ledger events since a moment,
built from ledger metadata only, never from content.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from uuid import UUID

from django.contrib.auth.models import User

from gatekeeper.records import Grant, GrantStatus
from ledger.models import LedgerEvent
from rooms.models import Flare, NotificationPreference, Room


@dataclass(frozen=True)
class RoomDigest:
    room_id: UUID
    purpose: str
    counts: dict[str, int]  # ledger event kind -> how many since ``since``


@dataclass(frozen=True)
class Notifications:
    urgent_flares: int
    forks_waiting: int
    digest_enabled: bool
    digest: list[RoomDigest] = field(default_factory=list)


def notification_preference_set(*, owner: User, digest: bool) -> NotificationPreference:
    preference, _ = NotificationPreference.objects.update_or_create(
        owner=owner, defaults={"digest": digest}
    )
    return preference


def notifications_for(*, owner: User, since: datetime) -> Notifications:
    """The owner's urgent flares, waiting forks, and (if opted in) the digest since ``since``."""
    urgent = Flare.objects.filter(seat__owner=owner, resolved_at__isnull=True).count()
    waiting = Grant.objects.filter(owner=owner, status=GrantStatus.PENDING).count()
    preference = NotificationPreference.objects.filter(owner=owner).first()
    if preference is None or not preference.digest:
        return Notifications(urgent, waiting, digest_enabled=False)
    rooms = {
        r.id: r.purpose for r in Room.objects.filter(members__owner=owner).only("id", "purpose")
    }
    kinds = LedgerEvent.objects.filter(room_id__in=list(rooms), occurred_at__gte=since).values_list(
        "room_id", "kind"
    )
    per_room: dict[UUID, Counter[str]] = {}
    for room_id, kind in kinds:
        per_room.setdefault(room_id, Counter())[kind] += 1
    digest = [
        RoomDigest(room_id, rooms[room_id], dict(sorted(counts.items())))
        for room_id, counts in per_room.items()
    ]
    return Notifications(urgent, waiting, digest_enabled=True, digest=digest)
