"""JSON Schemas of the protocol, for ``docs/schemas`` and ``docs/asyncapi.yaml``."""

from __future__ import annotations

from typing import Any

from pydantic import TypeAdapter

from synapsia_protocol.frames import ClientFrame, ServerFrame


def frame_schemas() -> dict[str, dict[str, Any]]:
    """JSON Schemas of every frame, keyed by file stem, for ``docs/schemas``."""
    return {
        "client-frame": TypeAdapter(ClientFrame).json_schema(),
        "server-frame": TypeAdapter(ServerFrame).json_schema(),
    }
