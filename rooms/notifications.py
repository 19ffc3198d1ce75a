"""What an owner hears about their rooms, at the volume they chose.

Urgent Beacon: unanswered Signal Flares of their agents, always. Gentle Tap: a badge counting
forks (grant requests) waiting for them, on unless the owner turned it off. Ambient Digest
("While you were away", opt-in): per room, counts of ledger events since a moment, built from
ledger metadata only, never from content.

The same preference row keeps the owner's time zone (``owner_time_zone``), which every page
shows times in.
"""

from __future__ import annotations

import functools
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from uuid import UUID
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

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
    # The Gentle Tap switch: False means the owner asked for no badge for forks waiting
    # (``forks_waiting`` is still counted, for the pages that list them).
    badge_enabled: bool = True


@dataclass(frozen=True)
class Preferences:
    """What the owner chose, as the settings page shows it."""

    badge: bool
    digest: bool
    time_zone: str  # empty: not chosen yet (times in UTC)


class TimeZoneUnknown(ValueError):
    """A time zone name that is not an IANA zone this server knows."""


@functools.cache
def time_zones_offered() -> tuple[str, ...]:
    """IANA zones an owner can choose, sorted: regions/cities and UTC, without the legacy
    aliases (``US/Pacific``, ``Etc/GMT+5``, ``posix/…``) that only confuse a list. Read from
    tzdata once per process."""
    legacy = ("Etc/", "SystemV/", "posix/", "right/", "US/", "Canada/", "Mexico/", "Brazil/")
    regional = (z for z in available_timezones() if "/" in z and not z.startswith(legacy))
    return (*sorted(regional), "UTC")


def time_zone_checked(name: str) -> str:
    """``name`` if it is a zone on offer, else ``TimeZoneUnknown`` saying what to do."""
    if name not in time_zones_offered():
        raise TimeZoneUnknown(
            f"“{name[:64]}” is not a time zone this server knows. Choose one from the list, "
            "for example Europe/Berlin or America/New_York."
        )
    return name


def preferences_of(*, owner: User) -> Preferences:
    """The owner's choices, or the defaults when they never chose (badge on, digest off)."""
    row = NotificationPreference.objects.filter(owner=owner).first()
    if row is None:
        return Preferences(badge=True, digest=False, time_zone="")
    return Preferences(badge=row.badge, digest=row.digest, time_zone=row.time_zone)


def notification_preference_set(
    *,
    owner: User,
    digest: bool | None = None,
    badge: bool | None = None,
    time_zone: str | None = None,
) -> NotificationPreference:
    """Change what is given (None: leave as it is). A zone not on offer changes nothing and
    raises ``TimeZoneUnknown``."""
    changes: dict[str, object] = {}
    if time_zone is not None:
        changes["time_zone"] = time_zone_checked(time_zone)
    if digest is not None:
        changes["digest"] = digest
    if badge is not None:
        changes["badge"] = badge
    preference, _ = NotificationPreference.objects.update_or_create(owner=owner, defaults=changes)
    return preference


def owner_time_zone(*, owner: User) -> ZoneInfo:
    """The zone the owner's pages show times in: their choice, else UTC."""
    name = (
        NotificationPreference.objects.filter(owner=owner)
        .values_list("time_zone", flat=True)
        .first()
    )
    try:
        return ZoneInfo(name or "UTC")
    except (ZoneInfoNotFoundError, ValueError):
        # A zone removed from tzdata since it was chosen: UTC rather than a broken page.
        return ZoneInfo("UTC")


def notifications_for(*, owner: User, since: datetime) -> Notifications:
    """The owner's urgent flares, waiting forks, and (if opted in) the digest since ``since``."""
    urgent = Flare.objects.filter(seat__owner=owner, resolved_at__isnull=True).count()
    waiting = Grant.objects.filter(owner=owner, status=GrantStatus.PENDING).count()
    preference = NotificationPreference.objects.filter(owner=owner).first()
    badge = preference is None or preference.badge
    if preference is None or not preference.digest:
        return Notifications(urgent, waiting, digest_enabled=False, badge_enabled=badge)
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
    return Notifications(urgent, waiting, digest_enabled=True, digest=digest, badge_enabled=badge)
