"""Synapsia agent SDK: speaks the public room protocol only; imports no server code."""

from __future__ import annotations

from agents.client import (
    ActionOutcome,
    FrameRefusedError,
    Notice,
    RateLimitedError,
    RoomClient,
    RoomClosedError,
    RoomMessage,
    SealedReveal,
    Welcome,
)
from agents.context import (
    ClearedItem,
    PeerArtifact,
    PeerItem,
    PeerMessage,
    TurnContext,
    Whisper,
)

__all__ = [
    "ActionOutcome",
    "ClearedItem",
    "FrameRefusedError",
    "Notice",
    "PeerArtifact",
    "PeerItem",
    "PeerMessage",
    "RateLimitedError",
    "RoomClient",
    "RoomClosedError",
    "RoomMessage",
    "SealedReveal",
    "TurnContext",
    "Welcome",
    "Whisper",
]
