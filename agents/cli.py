"""What every agent's command line shares: ``--url`` and ``--token`` (or
``SYNAPSIA_AGENT_TOKEN``, so the token need not sit in a process list), joining the room, and
the exit codes: 2 when the server refused the agent or something it sent (why is printed in
words, with what to do), 1 when it could not be reached."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Awaitable, Callable

from agents.client import PROTOCOL_ERROR, FrameRefusedError, RoomClient, RoomClosedError
from synapsia_protocol.codes import (
    CLOSE_CODE_MEANINGS,
    FINAL_CLOSE_CODES,
    CloseCode,
    ErrorCode,
    code_is_rate_limited,
)

REFUSED = 2
UNREACHABLE = 1

# What the person running the agent can do about each final close code. What the code means
# is the protocol package's own sentence (CLOSE_CODE_MEANINGS), not repeated here; this is
# only the next step at a command line (the flags, the pages of the app).
_NEXT_STEP: dict[int, str] = {
    CloseCode.UNAUTHENTICATED: (
        "Check the agent's token (--token or SYNAPSIA_AGENT_TOKEN); if it was lost or revoked, "
        "issue a new one on the Agents page."
    ),
    CloseCode.FORBIDDEN: (
        "Check the room's code in --url (the part after /rooms/ in the address of the room's "
        "page) and that this agent is bound to your seat on the room's page."
    ),
    CloseCode.ORIGIN_NOT_ALLOWED: "Connect from the command line without a browser Origin.",
    CloseCode.ROOM_NOT_JOINABLE: (
        "Open the room on its page first; a closed room cannot be joined again."
    ),
    CloseCode.REPLACED: "Another copy of this agent is in the room: keep only one running.",
    CloseCode.NO_CLEARANCE: "Sign a new permission slip on the room's page, then connect again.",
}

# What to do about a frame the room refused, by the protocol's error code; the server's own
# message (already in words) says what went wrong.
_REFUSAL_NEXT_STEP: dict[str, str] = {
    ErrorCode.ROOM_NOT_OPEN: (
        "The room is paused (at a fork or a Signal Flare) or closed: settle it on the room's "
        "page, then run this again."
    ),
    ErrorCode.WITHDRAWN: (
        "Until then it may listen but not speak; the room's page shows which, under Signal Flares."
    ),
    ErrorCode.NOT_ALLOWED: "This agent may not do that in this room.",
    ErrorCode.CONTEXT_TURN_LIMITED: "Say something, or wait for the other agent, first.",
}


def _sentence(text: str) -> str:
    """A protocol sentence made to follow a colon: lower-case start, one full stop."""
    text = text.strip().rstrip(".")
    return text[:1].lower() + text[1:] + "." if text else "no reason was given."


def closed_in_words(closed: RoomClosedError) -> str:
    """Why the server ended the agent's session, and what to do, without the close code."""
    meaning = CLOSE_CODE_MEANINGS.get(closed.code)
    if meaning is not None:
        step = _NEXT_STEP.get(closed.code) or (
            "Reconnecting will not help until that changes."
            if closed.code in FINAL_CLOSE_CODES
            else "Try again in a moment."
        )
        return f"The room ended this agent's session: {_sentence(meaning)} {step}"
    if closed.code == PROTOCOL_ERROR:
        return (
            "The server sent something this program cannot read, so it stopped. Make sure "
            "the agent package is the same version as the server's."
        )
    return "The connection to the room ended. Run this again to rejoin."


def refusal_in_words(refused: FrameRefusedError) -> str:
    """What the room refused, in its own words, and what to do (without the error code)."""
    said = _sentence(refused.message) if refused.message else "it gave no reason."
    if code_is_rate_limited(refused.code):
        step = "This agent sent faster than the room allows: wait, then run this again."
    else:
        step = _REFUSAL_NEXT_STEP.get(refused.code, "Check the room's page, then try again.")
    return f"The room refused what this agent sent: {said} {step}"


def seconds(value: str) -> float:
    """An argument that is a number of seconds, more than none (argparse's ``type``)."""
    try:
        number = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a number of seconds") from None
    if not number > 0 or number == float("inf"):  # not NaN, zero, negative or endless
        raise argparse.ArgumentTypeError(f"{value!r}: give a number of seconds above 0")
    return number


def room_arguments(prog: str, description: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument("--url", required=True, help="ws(s)://host/ws/rooms/<room-id>/")
    parser.add_argument(
        "--token",
        default=os.environ.get("SYNAPSIA_AGENT_TOKEN"),
        help="agent API token (or SYNAPSIA_AGENT_TOKEN)",
    )
    return parser


def room_args(parser: argparse.ArgumentParser, argv: list[str] | None) -> argparse.Namespace:
    args = parser.parse_args(argv)
    if not args.token:
        parser.error("--token (or SYNAPSIA_AGENT_TOKEN) is required")
    return args


async def in_room(args: argparse.Namespace, run: Callable[[RoomClient], Awaitable[int]]) -> int:
    """Join the room and ``run`` there; its exit code, or 2 / 1 as above."""
    try:
        async with RoomClient(args.url, args.token) as room:
            return await run(room)
    except RoomClosedError as closed:
        print(closed_in_words(closed), file=sys.stderr, flush=True)
        return REFUSED
    except FrameRefusedError as refused:  # a say (or other frame) the room would not take
        print(refusal_in_words(refused), file=sys.stderr, flush=True)
        return REFUSED
    except TimeoutError:
        # Raised bare (no reason of its own) when the room did not answer in time.
        print(
            f"The room at {args.url} did not answer in time. Check that the server is running "
            "and reachable, then run this again.",
            file=sys.stderr,
            flush=True,
        )
        return UNREACHABLE
    except OSError as exc:
        why = exc.strerror or str(exc) or "the connection failed"
        print(
            f"Could not connect to {args.url}: {why}. Check the address and that the server is "
            "running, then run this again.",
            file=sys.stderr,
            flush=True,
        )
        return UNREACHABLE
