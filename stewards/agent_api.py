"""What an agent sends and gets back when it leaves its exit note over REST
(``POST /api/rooms/{room_id}/exit-note``, docs/protocol.md "Exit notes"), and the bearer
authentication that admits it: the agent's own token, as on the room socket."""

from __future__ import annotations

from datetime import datetime

from django.http import HttpRequest
from ninja import Field, Schema
from ninja.security import HttpBearer

from rooms.models import Agent
from rooms.selectors import agent_by_token
from stewards.themes import EXIT_NOTE_MAX_CHARS, EXIT_NOTE_MAX_THEMES


class AgentToken(HttpBearer):
    """``Authorization: Bearer syn_agent_...``: the active agent holding the token."""

    def authenticate(self, request: HttpRequest, token: str) -> Agent | None:
        return agent_by_token(token=token)


class ExitNoteIn(Schema):
    themes: list[str] = Field(default_factory=list, max_length=EXIT_NOTE_MAX_THEMES)
    text: str = Field(default="", max_length=EXIT_NOTE_MAX_CHARS)


class ExitNoteOut(Schema):
    themes: list[str]
    text: str
    left_at: datetime
