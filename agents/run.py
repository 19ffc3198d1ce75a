"""Join a room as an agent, print what arrives, and say lines typed or scripted.

    python -m agents.run --url ws://127.0.0.1:8000/ws/rooms/<room-id>/ --token syn_agent_...
    python -m agents.run --url ... --token ... --say "Friday 7pm?" --say "Or Saturday?" --wait 5

Without --say, each line read from standard input is said (Ctrl-D ends). Each message heard is
printed with its number and who said it, in words ("The other agent", "You"). Exit codes: 0
done, 2 the server refused the agent or a line (why is printed, with what to do), 1 anything
else.
"""

from __future__ import annotations

import asyncio
import sys
from uuid import UUID

from agents.cli import in_room, room_args, room_arguments
from agents.client import RoomClient, RoomMessage


def speaker_words(message: RoomMessage, me: UUID | None) -> str:
    """Who said ``message``, as the person at this command line reads it: compared with the
    agent id the welcome named (the welcome carries no names, and ids mean nothing to people)."""
    mine = me is not None and message.sender_agent_id == me
    if message.author == "owner":
        return "You, in person" if mine else "The other owner, in person"
    return "You" if mine else "The other agent"


async def _print_incoming(room: RoomClient) -> None:
    me = room.welcome.agent_id if room.welcome is not None else None
    async for message in room:
        print(f"[{message.seq}] {speaker_words(message, me)}: {message.text}", flush=True)


async def _read_stdin_lines(room: RoomClient) -> None:
    loop = asyncio.get_running_loop()
    while line := await loop.run_in_executor(None, sys.stdin.readline):
        if text := line.strip():
            seq = await room.say(text)
            print(f"(sent as #{seq})", flush=True)


async def main(argv: list[str] | None = None) -> int:
    parser = room_arguments("python -m agents.run", __doc__.split("\n")[0])
    parser.add_argument(
        "--say", action="append", default=[], help="say this (repeatable); skips stdin"
    )
    parser.add_argument(
        "--wait", type=float, default=2.0, help="with --say: seconds to keep listening afterwards"
    )
    args = room_args(parser, argv)

    async def converse(room: RoomClient) -> int:
        assert room.welcome is not None
        print(f"joined: {room.welcome.room.purpose} ({room.welcome.room.state})", flush=True)
        listener = asyncio.create_task(_print_incoming(room))
        try:
            if args.say:
                for text in args.say:
                    print(f"(sent as #{await room.say(text)})", flush=True)
                await asyncio.sleep(args.wait)
            else:
                await _read_stdin_lines(room)
        finally:  # a refused line ends the run too (in_room says why)
            listener.cancel()
        return 0

    return await in_room(args, converse)


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
