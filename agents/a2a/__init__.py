"""Seat a remote A2A agent in a room: ``python -m agents.a2a`` (see :mod:`agents.a2a.bridge`)."""

from agents.a2a.bridge import (
    Bridge,
    BridgeResult,
    CardServer,
    agent_client,
    bridge_card,
    reply_moves,
    turn_message,
)

__all__ = [
    "Bridge",
    "BridgeResult",
    "CardServer",
    "agent_client",
    "bridge_card",
    "reply_moves",
    "turn_message",
]
