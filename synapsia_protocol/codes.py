"""Stable codes of the room protocol: ``error`` frame codes and WebSocket close codes."""

from __future__ import annotations

import enum


class ErrorCode(enum.StrEnum):
    """Stable codes carried by ``error`` frames. The connection stays open after each."""

    MALFORMED = "malformed"  # not a JSON object with v, type, id and body
    OVERSIZED = "oversized"  # frame larger than the server's limit
    UNSUPPORTED_VERSION = "unsupported_version"
    UNKNOWN_TYPE = "unknown_type"
    INVALID_BODY = "invalid_body"  # body does not match the type's schema
    ROOM_NOT_OPEN = "room_not_open"  # e.g. saying something while the room is paused
    NOT_ALLOWED = "not_allowed"  # this participant may not send this type
    WITHDRAWN = "withdrawn"  # your owner muted you or stepped in to speak in person
    INVALID_ACK = "invalid_ack"  # acknowledging a message that does not exist


class CloseCode(enum.IntEnum):
    """WebSocket close codes. Handshake refusals are sent before any room data."""

    UNAUTHENTICATED = 4401  # no, malformed, unknown or revoked credentials
    FORBIDDEN = 4403  # not a member of this room, or no such room (indistinguishable)
    ORIGIN_NOT_ALLOWED = 4406  # a browser Origin outside the allowed hosts
    ROOM_NOT_JOINABLE = 4409  # the room is a draft or closed
    REPLACED = 4001  # the same agent connected again; the older socket is closed
    TRY_AGAIN = 1013  # the join could not be recorded in the ledger; retry later
    NO_CLEARANCE = 4412  # the owner's slip stopped clearing this agent (its key was revoked)


# Close codes after which reconnecting cannot help, with what they mean to an agent author
# (docs/protocol.md, "Close codes"); every other close code is worth a reconnect. A test
# keeps every CloseCode in exactly one of the two.
FINAL_CLOSE_CODES: dict[int, str] = {
    CloseCode.UNAUTHENTICATED: "unauthenticated",
    CloseCode.FORBIDDEN: "forbidden",
    CloseCode.ORIGIN_NOT_ALLOWED: "origin not allowed",
    CloseCode.ROOM_NOT_JOINABLE: "room not joinable",
    CloseCode.REPLACED: "replaced by a newer connection",
    CloseCode.NO_CLEARANCE: "no clearance: the owner must sign a new slip",
}
RETRYABLE_CLOSE_CODES: frozenset[int] = frozenset({CloseCode.TRY_AGAIN})
# What each close code tells an agent author, as published (docs/schemas/close-code.json and
# docs/asyncapi.yaml): every CloseCode needs one, or `make schemas` fails.
CLOSE_CODE_MEANINGS: dict[int, str] = {
    CloseCode.UNAUTHENTICATED: "No, malformed, unknown or revoked credentials.",
    CloseCode.FORBIDDEN: "Not a member of this room, or no such room (indistinguishable).",
    CloseCode.ORIGIN_NOT_ALLOWED: "A browser Origin outside the allowed hosts.",
    CloseCode.ROOM_NOT_JOINABLE: "The room is a draft or closed.",
    CloseCode.REPLACED: "The same agent connected again; the older socket is closed.",
    CloseCode.TRY_AGAIN: "The join could not be recorded in the ledger; retry later.",
    CloseCode.NO_CLEARANCE: "The owner's slip stopped clearing this agent (its key was revoked).",
}
