"""Reads for agents, rooms and the transcript, always scoped to who is asking."""

from __future__ import annotations

from uuid import UUID

from django.contrib.auth.models import User
from django.db.models import QuerySet
from django.utils import timezone

from rooms.bearer import secret_digest
from rooms.errors import NotFound
from rooms.models import Agent, Message, Room, RoomMember

BACKLOG_LIMIT = 500


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
    return list(messages.only("seq", "sender_id", "text", "created_at")[:limit])
