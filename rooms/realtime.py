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


def announce_slip_key_revoked(*, affected: list[tuple[UUID, UUID]], **_: object) -> None:
    """``slips.signals.key_revoked`` receiver (sent after the revocation committed): tell each
    affected agent's sessions, which then re-check whether anything still clears them."""
    for room_id, agent_id in affected:
        # Already after commit, so this sends at once (and, like every announcement, a layer
        # failure is logged rather than raised into the revocation that already happened).
        _send_after_commit(
            agent_group(agent_id), {"type": "slip.key_revoked", "room_id": room_id.hex}
        )


def announce_whisper(*, agent_id: UUID, room_id: UUID, whisper_id: UUID) -> None:
    """Ids only (a doorbell): the agent's socket re-reads the whisper from the record and
    checks it is for this room and this agent before sending it."""
    _send_after_commit(
        agent_group(agent_id),
        {"type": "agent.whisper", "room_id": room_id.hex, "whisper_id": whisper_id.hex},
    )


def announce_recorded(room_id: UUID) -> None:
    """Messages were recorded outside any socket: every socket reads the record again."""
    _send_after_commit(room_group(room_id), {"type": "room.catch_up"})


def announce_agent_blocked(agent_id: UUID) -> None:
    """Its owner blocked the agent at a Signal Flare: its sockets in the room are closed."""
    _send_after_commit(agent_group(agent_id), {"type": "agent.blocked"})


def announce_grant_expired(*, agent_id: UUID, ref: str, **_: object) -> None:
    """``gatekeeper.signals.grant_expired`` receiver: the agent learns its action's end."""
    announce_action_result(agent_id, ref)


def announce_agent_revoked(agent_id: UUID) -> None:
    _send_after_commit(agent_group(agent_id), {"type": "agent.revoked"})
