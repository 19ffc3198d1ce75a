"""Synapsia agent SDK: speaks the public room protocol only; imports no server code."""

from __future__ import annotations

from agents.client import (
    ActionOutcome,
    FrameRefusedError,
    RoomClient,
    RoomClosedError,
    RoomMessage,
    Welcome,
)

__all__ = [
    "ActionOutcome",
    "FrameRefusedError",
    "RoomClient",
    "RoomClosedError",
    "RoomMessage",
    "Welcome",
]
