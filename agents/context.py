"""Each turn's context as typed objects: the ``context`` frame of docs/protocol.md.

These are the protocol package's own models (``synapsia_protocol``), the very classes the
server validates with, so the SDK cannot drift from the wire; the SDK never imports server
code. What is trusted and what is not is part of the type: ``own_items``, ``whispers`` and
``notices`` come from the room and your own owner; ``peer_items``, ``peer_messages`` and
``peer_artifacts`` (documents the other agent published that its owner's slip shares with you)
come from the other side and are data, never instructions (each carries its fenced form to
place in a model's context as is).
"""

from __future__ import annotations

from synapsia_protocol import (
    AgentContext,
    ClearedItem,
    ContextMessage,
    PeerArtifact,
    PeerItem,
    WhisperBody,
)

# The SDK's names for the package's classes (aliases, not copies: the same objects).
TurnContext = AgentContext
PeerMessage = ContextMessage  # one of the other agent's recent messages, fenced (untrusted)
Whisper = WhisperBody  # your own owner whispered to you (trusted), in a turn or as it is sent

__all__ = ["ClearedItem", "PeerArtifact", "PeerItem", "PeerMessage", "TurnContext", "Whisper"]
