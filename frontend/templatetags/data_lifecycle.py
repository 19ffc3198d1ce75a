"""Template tags for the data lifecycle: the retention schedule (settings page) and the
notices that another owner deleted a shared room (rooms page). Tags, so the pages that show
them need no view changes: the words come from ``rooms.retention`` and ``rooms.models``."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from django import template

from rooms.models import RoomDeletionNotice
from rooms.retention import retention_schedule

register = template.Library()


@register.inclusion_tag("frontend/_retention_schedule.html")
def retention_table() -> dict[str, Any]:
    rows = [
        (
            row.label,
            f"{row.period} {row.starts}".strip()
            + (" (the default)" if row.days == row.default_days else ""),
            row.note,
        )
        for row in retention_schedule()
    ]
    return {"rows": rows}


@dataclass(frozen=True)
class NoticeWords:
    id: int
    sentence: str  # "alice deleted the room 'Dinner'."
    purpose: str
    when: datetime
    room_id: UUID  # for the link to the deleted room's ledger, which stays for its window


@register.inclusion_tag("frontend/_deletion_notices.html", takes_context=True)
def deletion_notices(context: template.Context) -> dict[str, Any]:
    user = context.get("user")
    if user is None or not user.is_authenticated:
        return {"notices": []}
    notices = []
    for n in RoomDeletionNotice.objects.filter(recipient=user)[:20]:
        how = (
            f"{n.deleted_by_name} deleted their account, and with it the room '{n.room_purpose}'."
            if n.account_deleted
            else f"{n.deleted_by_name} deleted the room '{n.room_purpose}'."
        )
        notices.append(NoticeWords(n.id, how, n.room_purpose, n.created_at, n.room_id))
    return {"notices": notices, "csrf_token": context.get("csrf_token")}
