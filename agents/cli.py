"""What every agent's command line shares: ``--url`` and ``--token`` (or
``SYNAPSIA_AGENT_TOKEN``, so the token need not sit in a process list), joining the room, and
the exit codes: 2 when the server refused the agent (the close code is printed), 1 when it
could not be reached."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Awaitable, Callable

from agents.client import RoomClient, RoomClosedError

REFUSED = 2
UNREACHABLE = 1


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
        print(f"refused: {closed}", file=sys.stderr, flush=True)
        return REFUSED
    except (OSError, TimeoutError) as exc:
        print(f"could not connect to {args.url}: {exc}", file=sys.stderr, flush=True)
        return UNREACHABLE
