"""``{% room_exit_and_report room %}``: the room page's section for exit notes and reports,
so the room's own view and template need only this one line."""

from __future__ import annotations

from typing import Any

from django import template

from rooms.models import Room, RoomState
from stewards.forms import ReportForm

register = template.Library()


@register.inclusion_tag("stewards/_room_section.html", takes_context=True)
def room_exit_and_report(context: template.Context, room: Room) -> dict[str, Any]:
    return {
        "room": room,
        "closed": room.state == RoomState.CLOSED,
        "form": ReportForm(),
        "csrf_token": context.get("csrf_token"),
        "request": context.get("request"),
    }
