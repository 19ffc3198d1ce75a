"""Reading and writing frames: the checks every receiver makes before trusting a frame."""

from __future__ import annotations

import json
import math
import re
import secrets
from functools import lru_cache
from typing import Any

from pydantic import TypeAdapter, ValidationError
from pydantic_core import to_json

from synapsia_protocol.codes import ErrorCode
from synapsia_protocol.frames import (
    CLIENT_FRAME_TYPES,
    PROTOCOL_VERSION,
    SERVER_FRAME_TYPES,
    AnyClientFrame,
    AnyServerFrame,
    ErrorBody,
    ErrorFrame,
    ToolDefinition,
    WelcomeFrame,
    _client_frame,
    _server_frame,
)


class _NotANumber(ValueError):
    """A number JSON's grammar (or Python's) lets through but no field of a frame can hold."""


def _refuse_constant(name: str) -> float:
    # NaN, Infinity and -Infinity: Python's json reads them, JSON itself does not have them.
    raise _NotANumber(f"{name} is not a JSON number.")


def _finite_float(text: str) -> float:
    value = float(text)
    if math.isinf(value):  # 1e400: valid JSON that no double holds
        raise _NotANumber(f"{text[:32]} is too large a number.")
    return value


# An escaped UTF-16 surrogate (as Python's json.dumps writes every emoji): whether it is half
# of a pair or alone is settled by encoding the parsed frame, only for frames that hold one.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def _holds_lone_surrogate(raw: str, data: object) -> bool:
    if "\\u" not in raw or _SURROGATE_ESCAPE.search(raw) is None:
        return False
    try:
        json.dumps(data, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


class FrameError(Exception):
    """A client frame was refused; ``ref`` is its ``id`` when one could be read."""

    def __init__(self, code: ErrorCode, message: str, ref: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.ref = ref


def new_frame_id() -> str:
    return secrets.token_hex(8)


def parse_client_frame(raw: str | None, *, max_bytes: int) -> AnyClientFrame:
    """Decode and validate one client frame, or raise ``FrameError`` with a stable code."""
    if raw is None:
        raise FrameError(ErrorCode.MALFORMED, "Binary frames are not part of the protocol.")
    if len(raw) > max_bytes or len(raw.encode()) > max_bytes:
        raise FrameError(ErrorCode.OVERSIZED, f"Frames are limited to {max_bytes} bytes.")
    try:
        data: Any = json.loads(raw, parse_constant=_refuse_constant, parse_float=_finite_float)
    except _NotANumber as exc:
        raise FrameError(
            ErrorCode.MALFORMED, f"Frame holds a number no field takes: {exc}"
        ) from None
    except ValueError:  # also an integer beyond Python's digit limit
        raise FrameError(ErrorCode.MALFORMED, "Frame is not valid JSON.") from None
    except RecursionError:  # thousands of nested brackets fit in one frame
        raise FrameError(ErrorCode.MALFORMED, "Frame nests too deeply.") from None
    if not isinstance(data, dict):
        raise FrameError(ErrorCode.MALFORMED, "Frame must be a JSON object.")
    ref = data.get("id") if isinstance(data.get("id"), str) else None
    if ref is not None and (
        len(ref) > 64 or (not ref.isascii() and _holds_lone_surrogate(raw, ref))
    ):
        ref = None  # not echoed: it could not be written back as UTF-8
    if _holds_lone_surrogate(raw, data):
        raise FrameError(
            ErrorCode.INVALID_BODY if ref is not None else ErrorCode.MALFORMED,
            "Frame holds a lone surrogate (half of a UTF-16 pair): text must be valid Unicode.",
            ref,
        )
    if set(data) != {"v", "type", "id", "body"}:
        raise FrameError(ErrorCode.MALFORMED, "Frame needs exactly: v, type, id, body.", ref)
    # type() and not ==: true == 1 == 1.0 in Python, and neither is the version.
    if type(data["v"]) is not int or data["v"] != PROTOCOL_VERSION:
        raise FrameError(
            ErrorCode.UNSUPPORTED_VERSION, f"This server speaks v{PROTOCOL_VERSION}.", ref
        )
    # A list or object as the type is unhashable: refuse it before the set lookup raises.
    if not isinstance(data["type"], str) or data["type"] not in CLIENT_FRAME_TYPES:
        raise FrameError(ErrorCode.UNKNOWN_TYPE, f"Unknown frame type {data['type']!r}.", ref)
    try:
        return _client_frame.validate_python(data)
    except ValidationError as exc:
        detail = "; ".join(
            f"{'.'.join(str(p) for p in err['loc'][1:]) or 'frame'}: {err['msg']}"
            for err in exc.errors(include_url=False)
        )
        code = ErrorCode.INVALID_BODY if ref is not None else ErrorCode.MALFORMED
        raise FrameError(code, detail, ref) from None


def frame_json(kind: str, frame_id: str, body: dict[str, Any]) -> str:
    """A server frame's wire form from its fields, written by pydantic's own serializer
    (``pydantic_core.to_json``): byte for byte what the frame's model makes of the same
    values with ``model_dump_json()``, when ``body`` holds its model's fields in the model's
    order with values of the fields' types (tests/rooms/test_say_path_frames.py), without
    building and validating a model. For frames the server writes from what it has itself
    just stored (the say path's `sent` and `message` frames, once or twice a message); a
    frame from outside is still read only through ``parse_client_frame``."""
    return to_json({"v": PROTOCOL_VERSION, "id": frame_id, "type": kind, "body": body}).decode()


_tool_definition: TypeAdapter[ToolDefinition] = TypeAdapter(ToolDefinition)
_tool_definitions: TypeAdapter[list[ToolDefinition]] = TypeAdapter(list[ToolDefinition])

# Tool definitions' texts: the server's tool registry's, a handful, each built once.
_DEFINITION_TEXTS = 256


@lru_cache(maxsize=_DEFINITION_TEXTS)
def tool_definition_json(definition: str) -> str:
    """A tool definition's wire form, from its JSON text: validated as ``ToolDefinition`` and
    written as a frame's model writes it (byte for byte, key order included). Remembered per
    text, since it is a pure function of the text."""
    return _tool_definition.dump_json(_tool_definition.validate_json(definition)).decode()


def welcome_json(frame: WelcomeFrame, tool_definitions: list[str]) -> str:
    """The `welcome` frame's wire form with its tools written from their definitions' JSON
    texts (``tool_definition_json``): byte for byte ``model_dump_json()`` of the same frame
    with those definitions as its ``tools`` (tests/rooms/test_welcome_tools.py), without
    parsing, validating and writing each definition again on every connect (~140 us of an
    agent's connect for seven tools). ``frame`` is given with no tools."""
    if frame.body.tools:
        raise ValueError("welcome_json writes the tools itself: give the frame none")
    text = frame.model_dump_json()
    # ``tools`` is the body's last field and the body the frame's last.
    empty = '"tools":[]}}'
    if not text.endswith(empty):
        raise ValueError("the welcome frame's fields are not in the order this writer expects")
    listed = ",".join(tool_definition_json(definition) for definition in tool_definitions)
    return f'{text[: -len(empty)]}"tools":[{listed}]}}}}'


def error_frame(code: ErrorCode, message: str, ref: str | None) -> str:
    return ErrorFrame(
        type="error", id=new_frame_id(), body=ErrorBody(code=code, message=message, ref=ref)
    ).model_dump_json()


def parse_server_frame(raw: str | bytes) -> AnyServerFrame | None:
    """Decode one frame from the server into its typed model (what the SDK does with each).

    ``None`` for a frame type this package does not know (a newer server may add some; a
    client ignores them). A field this package does not know, in the envelope or in any body,
    is left out of the model: a newer server adds optional fields within v1 and an older SDK
    reads the rest as before (a tool definition keeps its extra keys, as sent). Anything else
    that does not match its schema, a known field missing or of the wrong type, raises
    ``FrameError``: a client never acts on a frame it could not read."""
    try:
        data: Any = json.loads(raw)
    except (ValueError, RecursionError):
        raise FrameError(ErrorCode.MALFORMED, "Frame is not valid JSON.") from None
    if not isinstance(data, dict):
        raise FrameError(ErrorCode.MALFORMED, "Frame must be a JSON object.")
    kind = data.get("type")
    if isinstance(kind, str) and kind not in SERVER_FRAME_TYPES:
        return None
    try:
        frame = _server_frame.validate_python(data, extra="ignore")
    except ValidationError as exc:
        raise FrameError(ErrorCode.INVALID_BODY, str(exc)) from None
    if isinstance(frame, WelcomeFrame) and frame.body.tools:
        # The override reaches the tool definitions too; their extra keys are MCP's, kept.
        tools = _tool_definitions.validate_python(data["body"]["tools"])
        frame = frame.model_copy(update={"body": frame.body.model_copy(update={"tools": tools})})
    return frame
