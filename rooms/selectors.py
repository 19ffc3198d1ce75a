"""Reads for agents, rooms and the transcript, always scoped to who is asking."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from uuid import UUID

from django.contrib.auth.models import User
from django.db.models import QuerySet
from django.utils import timezone

from gatekeeper.policy import tool_descriptors_for
from rooms.bearer import secret_digest
from rooms.errors import NotFound
from rooms.models import Agent, Message, Room, RoomMember
from slips.services import live_slip_capabilities

if TYPE_CHECKING:
    from rooms.handshake import Participant

BACKLOG_LIMIT = 500
TOOL_RESOURCE_PREFIX = "tool:"


def agents_of_owner(*, owner: User) -> QuerySet[Agent]:
    return Agent.objects.filter(owner=owner)


def agent_by_token(*, token: str) -> Agent | None:
    """The active agent holding ``token``, recording the use; None if unknown or revoked."""
    agent = Agent.objects.filter(token_hash=secret_digest(token), revoked_at__isnull=True).first()
    if agent is not None:
        now = timezone.now()
        Agent.objects.filter(id=agent.id).update(token_last_used_at=now)
        agent.token_last_used_at = now
    return agent


def rooms_of_owner(*, owner: User) -> QuerySet[Room]:
    return Room.objects.filter(members__owner=owner).distinct()


def room_seat(*, owner: User, room_id: UUID) -> RoomMember:
    """``owner``'s seat in the room; ``NotFound`` if there is none (or no such room)."""
    try:
        return RoomMember.objects.select_related("room", "agent").get(room_id=room_id, owner=owner)
    except RoomMember.DoesNotExist:
        raise NotFound("No such room.") from None


def room_seats(*, room: Room) -> list[RoomMember]:
    return list(room.members.select_related("owner", "agent").order_by("joined_at"))


def messages_after(
    *, room_id: UUID, after_seq: int, exclude_sender: UUID | None = None, limit: int = BACKLOG_LIMIT
) -> list[Message]:
    """Transcript messages with ``seq > after_seq`` in order, optionally without one sender's."""
    messages = Message.objects.filter(room_id=room_id, seq__gt=after_seq).order_by("seq")
    if exclude_sender is not None:
        messages = messages.exclude(sender_id=exclude_sender)
    return list(messages.only("seq", "sender_id", "text", "flags", "author", "created_at")[:limit])


def tools_listed(*, participant: Participant) -> list[dict[str, Any]]:
    """MCP definitions of the tools an agent may request: tool policy ∩ its owner's live slip
    ∩ its own hints. Owners' sockets get none."""
    if participant.agent_id is None:
        return []
    agent = Agent.objects.get(id=participant.agent_id)
    in_slip = live_slip_capabilities(room_id=participant.room_id).get(str(participant.owner_id), ())
    slip_tools = frozenset(
        c.resource.removeprefix(TOOL_RESOURCE_PREFIX)
        for c in in_slip
        if c.resource.startswith(TOOL_RESOURCE_PREFIX)
    )
    return tool_descriptors_for(
        agent_id=agent.id,
        advisor_only=agent.advisor_only,
        declared_tools=agent.declared_tools,
        slip_cleared=slip_tools,
    )
