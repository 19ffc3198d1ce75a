"""``{% room_artifacts room %}``: the room page's shared-artifacts section and the Portable
Project Package download, so the room's own view and template need only this one line."""

from __future__ import annotations

from typing import Any

from django import template

from artifacts.selectors import artifacts_for_owner
from rooms.errors import RoomError
from rooms.models import Room

register = template.Library()


@register.inclusion_tag("artifacts/_room_artifacts.html", takes_context=True)
def room_artifacts(context: template.Context, room: Room) -> dict[str, Any]:
    request = context.get("request")
    user = getattr(request, "user", None)
    try:
        artifacts = artifacts_for_owner(owner=user, room_id=room.id) if user else []
    except RoomError:
        artifacts = []  # the page itself already answered 404 to anyone without a seat
    return {"room": room, "artifacts": artifacts, "csrf_token": context.get("csrf_token")}
