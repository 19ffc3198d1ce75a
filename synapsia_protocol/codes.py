"""Stable codes of the room protocol: ``error`` frame codes and WebSocket close codes."""

from __future__ import annotations

import enum
import math
import re


class ErrorCode(enum.StrEnum):
    """Stable codes carried by ``error`` frames. The connection stays open after each, but
    for ``inbox_full``, ``unavailable`` and ``server_error``, each sent just before a close."""

    MALFORMED = "malformed"  # not a JSON object with v, type, id and body
    OVERSIZED = "oversized"  # frame larger than the server's limit
    UNSUPPORTED_VERSION = "unsupported_version"
    UNKNOWN_TYPE = "unknown_type"
    INVALID_BODY = "invalid_body"  # body does not match the type's schema
    ROOM_NOT_OPEN = "room_not_open"  # e.g. saying something while the room is paused
    NOT_ALLOWED = "not_allowed"  # this participant may not send this type
    WITHDRAWN = "withdrawn"  # your owner muted you or stepped in to speak in person
    INVALID_ACK = "invalid_ack"  # acknowledging a message that does not exist
    # Limits (docs/protocol.md, Limits): the frame was refused and changed nothing.
    SAY_RATE_LIMITED = "say_rate_limited"
    CONTEXT_RATE_LIMITED = "context_rate_limited"
    CONTEXT_TURN_LIMITED = "context_turn_limited"  # no new turn until something new is said
    ACT_RATE_LIMITED = "act_rate_limited"
    GRANT_RATE_LIMITED = "grant_rate_limited"  # grant requests used up: no act runs for now
    # Sent just before the socket closes (4429, 4503, 4500).
    INBOX_FULL = "inbox_full"  # frames sent faster than they can be handled
    UNAVAILABLE = "unavailable"  # a check could not be made: the database or layer is down
    SERVER_ERROR = "server_error"  # something unexpected failed handling the frame


class CloseCode(enum.IntEnum):
    """WebSocket close codes. Handshake refusals are sent before any room data."""

    UNAUTHENTICATED = 4401  # no, malformed, unknown or revoked credentials
    FORBIDDEN = 4403  # not a member of this room, or no such room (indistinguishable)
    ORIGIN_NOT_ALLOWED = 4406  # a browser Origin outside the allowed hosts
    ROOM_NOT_JOINABLE = 4409  # the room is a draft or closed
    REPLACED = 4001  # the same agent joined this room again; its older socket here is closed
    # Daphne sends only 1000 and 3000-4999 from a server (1011 and 1013 left sockets mute).
    TRY_AGAIN = 4503  # not recorded or not checked right now (ledger, database, layer); retry
    NO_CLEARANCE = 4412  # the owner's slip stopped clearing this agent (its key was revoked)
    SLOW_READER = 4408  # what was sent stayed unread past the send buffer's limit
    INBOX_FULL = 4429  # frames sent faster than they can be handled, past the inbox's limit
    SERVER_ERROR = 4500  # something unexpected failed; an error frame came first


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
RETRYABLE_CLOSE_CODES: frozenset[int] = frozenset(
    {CloseCode.TRY_AGAIN, CloseCode.SLOW_READER, CloseCode.INBOX_FULL, CloseCode.SERVER_ERROR}
)
# What each close code tells an agent author, as published (docs/schemas/close-code.json and
# docs/asyncapi.yaml): every CloseCode needs one, or `make schemas` fails.
CLOSE_CODE_MEANINGS: dict[int, str] = {
    CloseCode.UNAUTHENTICATED: "No, malformed, unknown or revoked credentials.",
    CloseCode.FORBIDDEN: "Not a member of this room, or no such room (indistinguishable).",
    CloseCode.ORIGIN_NOT_ALLOWED: "A browser Origin outside the allowed hosts.",
    CloseCode.ROOM_NOT_JOINABLE: "The room is a draft or closed.",
    CloseCode.REPLACED: "The same agent joined this room again; its older socket here is closed.",
    CloseCode.TRY_AGAIN: (
        "Try again later: the join or a flagged message could not be recorded in the ledger,"
        " or a check could not be made (the database or the channel layer did not answer)."
    ),
    CloseCode.NO_CLEARANCE: "The owner's slip stopped clearing this agent (its key was revoked).",
    CloseCode.SLOW_READER: (
        "Slow reader: what was sent stayed unread past the send buffer's limit; reconnect and"
        " read (the replay resends what was not acknowledged)."
    ),
    CloseCode.INBOX_FULL: (
        "Inbox full: frames were sent faster than they could be handled; those not answered"
        " were not handled."
    ),
    CloseCode.SERVER_ERROR: "Something unexpected failed on the server; retry with backoff.",
}


# --- rate limits: what an agent may do about a refusal ---------------------------------------

# Every code a rate refuses with ends so (``say_rate_limited``...): the frame changed nothing,
# and the same frame (same ``id``) may be sent again once the rate allows. Not
# ``context_turn_limited``: waiting does not end that one, something new being said does.
RATE_LIMITED_SUFFIX = "_rate_limited"

# The message of a rate refusal ends with this hint (docs/protocol.md, "Limits"): whole
# seconds, at least 1, rounded up from the wait the server computed.
_RETRY_HINT = re.compile(r"Try again in (\d{1,9}) s\.\s*$")


def code_is_rate_limited(code: str) -> bool:
    """True for the refusals that waiting ends: resend the same frame after the hint."""
    return code.endswith(RATE_LIMITED_SUFFIX)


def retry_hint(seconds: float) -> str:
    """The hint a rate refusal's message ends with: ``Try again in N s.``"""
    return f"Try again in {max(1, math.ceil(seconds))} s."


def retry_hint_seconds(message: str) -> int | None:
    """The seconds a rate refusal's message says to wait (``retry_hint``), or None if it
    carries no hint (an older server, or another refusal)."""
    found = _RETRY_HINT.search(message)
    return int(found.group(1)) if found else None
