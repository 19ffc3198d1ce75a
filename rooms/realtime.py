"""Telling connected sockets about changes, through the channel layer.

The channel layer is a doorbell, not the record: events may be lost (see ARCHITECTURE.md's
pitfalls), so every event a consumer acts on can be re-derived from the database. Events
about writes are sent only after the transaction commits, so nobody hears of a rolled-back
change. A layer that fails (Redis down) is logged and otherwise ignored: the change it would
announce has already committed, and must neither be undone nor reported to the caller as a
failure.
"""

from __future__ import annotations

import logging
from typing import Any
from uuid import UUID

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.db import transaction

logger = logging.getLogger(__name__)


def room_group(room_id: UUID) -> str:
    return f"room.{room_id.hex}"


def agent_group(agent_id: UUID) -> str:
    return f"agent.{agent_id.hex}"


def _send_after_commit(group: str, event: dict[str, Any]) -> None:
    layer = get_channel_layer()
    if layer is None:
        return

    def send() -> None:
        try:
            async_to_sync(layer.group_send)(group, event)
        except Exception:
            # Raised from an on_commit hook it would reach the caller after the decision
            # committed (a recorded pause or execution reported as an error) and skip later
            # hooks. Sockets catch up from the database instead.
            logger.warning("channel layer unavailable: %s not told of %s", group, event["type"])

    transaction.on_commit(send)


def announce_room_state(room_id: UUID, state: str) -> None:
    _send_after_commit(room_group(room_id), {"type": "room.state", "state": state})


def announce_action_result(agent_id: UUID, ref: str) -> None:
    """The agent's action ``ref`` changed (its grant was decided): the socket re-reads it."""
    _send_after_commit(agent_group(agent_id), {"type": "action.result", "ref": ref})


def announce_agent_revoked(agent_id: UUID) -> None:
    _send_after_commit(agent_group(agent_id), {"type": "agent.revoked"})
