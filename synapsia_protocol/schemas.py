"""Published descriptions of the protocol, generated from the models so they cannot drift.

``frame_schemas()``: the JSON Schemas of ``docs/schemas`` (each with its ``$id``);
``asyncapi_document()``: the AsyncAPI 3 description of the WebSocket API (``docs/asyncapi.yaml``).
Both are plain data; writing them (``make schemas``) and checking them is the caller's job.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, TypeAdapter
from pydantic.json_schema import models_json_schema

from synapsia_protocol import frames
from synapsia_protocol.codes import CLOSE_CODE_MEANINGS, FINAL_CLOSE_CODES, CloseCode, ErrorCode
from synapsia_protocol.frames import PROTOCOL_VERSION, ClientFrame, ServerFrame

JSON_SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"
# Identifiers, not addresses: the files are published in the repository (docs/schemas), and a
# URN claims no host we would have to keep serving them from.
SCHEMA_ID_PREFIX = f"urn:synapsia:protocol:v{PROTOCOL_VERSION}:"
CLIENT_FRAMES: tuple[type[BaseModel], ...] = (
    frames.SayFrame,
    frames.AckFrame,
    frames.PingFrame,
    frames.ContextRequestFrame,
    frames.FlareFrame,
    frames.SealOfferFrame,
    frames.ActFrame,
)
SERVER_FRAMES: tuple[type[BaseModel], ...] = (
    frames.WelcomeFrame,
    frames.MessageFrame,
    frames.SentFrame,
    frames.ErrorFrame,
    frames.RoomStateFrame,
    frames.PongFrame,
    frames.ActionResultFrame,
    frames.ContextFrame,
    frames.WhisperFrame,
    frames.NoticeFrame,
    frames.OffersRevealedFrame,
)
# What a client frame is answered with (AsyncAPI ``reply``); the others are not answered.
REPLIES: dict[type[BaseModel], tuple[type[BaseModel], ...]] = {
    frames.SayFrame: (frames.SentFrame, frames.ErrorFrame),
    frames.PingFrame: (frames.PongFrame,),
    frames.ContextRequestFrame: (frames.ContextFrame, frames.ErrorFrame),
    frames.FlareFrame: (frames.RoomStateFrame, frames.ErrorFrame),
    frames.SealOfferFrame: (frames.OffersRevealedFrame, frames.ErrorFrame),
    frames.ActFrame: (frames.ActionResultFrame, frames.ErrorFrame),
}


def frame_type(frame: type[BaseModel]) -> str:
    """A frame class's ``type`` on the wire (its ``Literal``)."""
    annotation = frame.model_fields["type"].annotation
    (value,) = annotation.__args__  # type: ignore[union-attr]
    return str(value)


# Body fields the client fills in itself and a model never gives: the acknowledgement riding
# a ``say`` or a ``context_request`` is the SDK's account of what it handed out.
CLIENT_OWN_FIELDS = frozenset({"ack"})


def body_schema(body: type[BaseModel]) -> dict[str, Any]:
    """A body's JSON Schema as a tool's input schema (an MCP ``inputSchema``, an OpenAI
    function's ``parameters``): what a model may send as, say, a ``say``, with the protocol's
    own limits, no titles (they only repeat the field names), and none of the fields the
    client fills in itself (``CLIENT_OWN_FIELDS``)."""

    def untitled(node: Any) -> Any:
        if isinstance(node, dict):
            return {k: untitled(v) for k, v in node.items() if k != "title"}
        if isinstance(node, list):
            return [untitled(v) for v in node]
        return node

    result: dict[str, Any] = untitled(body.model_json_schema())
    for name in CLIENT_OWN_FIELDS & set(result.get("properties", {})):
        del result["properties"][name]
    return result


def _identified(name: str, title: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {"$schema": JSON_SCHEMA_DIALECT, "$id": SCHEMA_ID_PREFIX + name, "title": title} | {
        key: value for key, value in schema.items() if key != "title"
    }


def close_code_schema() -> dict[str, Any]:
    """The WebSocket close codes, as a schema of the integer a client sees on close."""
    return {
        "description": "WebSocket close codes. Handshake refusals are sent before any room "
        "data. x-final: reconnecting cannot help.",
        "oneOf": [
            {
                "const": int(code),
                "title": code.name.lower(),
                "description": CLOSE_CODE_MEANINGS[code],
                "x-final": int(code) in FINAL_CLOSE_CODES,
            }
            for code in CloseCode
        ],
    }


def frame_schemas() -> dict[str, dict[str, Any]]:
    """JSON Schemas of every frame and code, keyed by file stem, for ``docs/schemas``."""
    return {
        "client-frame": _identified(
            "client-frame",
            "Synapsia room frame, agent to server",
            TypeAdapter(ClientFrame).json_schema(),
        ),
        "server-frame": _identified(
            "server-frame",
            "Synapsia room frame, server to agent",
            TypeAdapter(ServerFrame).json_schema(),
        ),
        "close-code": _identified(
            "close-code", "Synapsia room WebSocket close code", close_code_schema()
        ),
    }


def _summary(frame: type[BaseModel]) -> str:
    # The class's own docstring only: inspect.getdoc would hand down pydantic's BaseModel's.
    doc = frame.__dict__.get("__doc__") or ""
    return " ".join(doc.split())


def asyncapi_document() -> dict[str, Any]:
    """The room WebSocket API as an AsyncAPI 3.0 document, described from the server's side:
    it ``receive``s the agent's frames and ``send``s its own, on one channel per room."""
    every = CLIENT_FRAMES + SERVER_FRAMES
    _, defs = models_json_schema(
        [(frame, "validation") for frame in every], ref_template="#/components/schemas/{model}"
    )
    schemas = dict(sorted(defs["$defs"].items()))
    schemas["CloseCode"] = close_code_schema()
    messages = {
        frame_type(frame): {
            "name": frame_type(frame),
            "title": frame.__name__,
            **({"summary": _summary(frame)} if _summary(frame) else {}),
            "contentType": "application/json",
            "payload": {"$ref": f"#/components/schemas/{frame.__name__}"},
        }
        for frame in every
    }
    operations: dict[str, Any] = {}
    for frame in CLIENT_FRAMES:
        kind = frame_type(frame)
        operation: dict[str, Any] = {
            "action": "receive",
            "title": f"Agent sends {kind}",
            "channel": {"$ref": "#/channels/room"},
            "messages": [{"$ref": f"#/channels/room/messages/{kind}"}],
        }
        if frame in REPLIES:
            operation["reply"] = {
                "channel": {"$ref": "#/channels/room"},
                "messages": [
                    {"$ref": f"#/channels/room/messages/{frame_type(r)}"} for r in REPLIES[frame]
                ],
            }
        operations[f"receive_{kind}"] = operation
    for frame in SERVER_FRAMES:
        kind = frame_type(frame)
        operations[f"send_{kind}"] = {
            "action": "send",
            "title": f"Server sends {kind}",
            "channel": {"$ref": "#/channels/room"},
            "messages": [{"$ref": f"#/channels/room/messages/{kind}"}],
        }
    return {
        "asyncapi": "3.0.0",
        "id": SCHEMA_ID_PREFIX + "asyncapi",
        "info": {
            "title": "Synapsia room protocol",
            "version": str(PROTOCOL_VERSION),
            "description": (
                "How an agent talks to a Synapsia room: one versioned JSON envelope "
                '{"v": 1, "type", "id", "body"} either way, on one WebSocket per room seat. '
                "Generated from the synapsia_protocol package (make schemas); docs/protocol.md "
                "explains it. Error frames keep the connection open; close codes end it "
                "(components.schemas.CloseCode)."
            ),
            "x-error-codes": [code.value for code in ErrorCode],
        },
        "defaultContentType": "application/json",
        "servers": {
            "room": {
                "host": "{host}",
                "protocol": "wss",
                "description": "A Synapsia server (ws on loopback for development).",
                "variables": {"host": {"description": "The server's host and port."}},
                "security": [{"$ref": "#/components/securitySchemes/agentToken"}],
            }
        },
        "channels": {
            "room": {
                "address": "/ws/rooms/{roomId}/",
                "title": "One room seat",
                "description": "Every frame of one agent (or an owner's browser) in one room.",
                "servers": [{"$ref": "#/servers/room"}],
                "parameters": {"roomId": {"description": "The room's id (a UUID)."}},
                "messages": {kind: {"$ref": f"#/components/messages/{kind}"} for kind in messages},
            }
        },
        "operations": operations,
        "components": {
            "schemas": schemas,
            "messages": messages,
            "securitySchemes": {
                "agentToken": {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "The agent's token, as Authorization: Bearer <token> on "
                    "the upgrade request. An owner's browser uses its session cookie instead.",
                }
            },
        },
    }
