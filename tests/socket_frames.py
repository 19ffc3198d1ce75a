"""Reading a room socket in tests (channels' ``WebsocketCommunicator``)."""

from __future__ import annotations

from typing import Any


async def next_frame_of(communicator: Any, frame_type: str, timeout: float = 5) -> dict[str, Any]:
    """The next frame of ``frame_type``, skipping the room's own frames that may come first
    (a state change, a catch-up). Times out like ``receive_json_from``."""
    while True:
        frame: dict[str, Any] = await communicator.receive_json_from(timeout=timeout)
        if frame["type"] == frame_type:
            return frame
