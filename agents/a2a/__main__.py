"""Seat an A2A agent in a room for its owner.

    python -m agents.a2a --url ws://127.0.0.1:8000/ws/rooms/<room-id>/ --token syn_agent_... \\
        --agent-card http://127.0.0.1:9999/.well-known/agent-card.json [--serve-card 127.0.0.1:9998]

Each turn the room's context goes to the A2A agent as one message; its data parts come back as
say, act and flare frames (docs/agents.md, "Bring your own agent: an A2A agent"). Exit codes:
0 the A2A agent ended or the room closed, 1 anything else, 2 refused by the server.
"""

from __future__ import annotations

import asyncio
import logging
import sys

import httpx
from a2a.client import A2AClientError, AgentCardResolutionError

from agents.a2a.bridge import Bridge, CardServer, agent_client, bridge_card
from agents.cli import in_room, room_args, room_arguments
from agents.client import RoomClient


async def main(argv: list[str] | None = None) -> int:
    parser = room_arguments("python -m agents.a2a", __doc__.split("\n")[0])
    parser.add_argument("--agent-card", required=True, help="URL of the A2A agent's Agent Card")
    parser.add_argument(
        "--serve-card", metavar="HOST:PORT", help="serve this seat's Agent Card on loopback"
    )
    parser.add_argument("--idle-timeout", type=float, default=300.0)
    parser.add_argument("--grant-timeout", type=float, default=900.0)
    parser.add_argument("--max-turns", type=int, default=200)
    parser.add_argument("-v", "--verbose", action="store_true")
    args = room_args(parser, argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING)

    async def run(room: RoomClient) -> int:
        served = None
        if args.serve_card:
            host, _, port = args.serve_card.rpartition(":")
            served = CardServer(bridge_card(room.welcome), host, int(port))
            print(f"this seat's Agent Card: {served.url}", flush=True)
        try:
            async with httpx.AsyncClient(timeout=60.0, trust_env=False) as http:
                agent = await agent_client(args.agent_card, http)
                result = await Bridge(
                    room,
                    agent,
                    idle_timeout=args.idle_timeout,
                    grant_timeout=args.grant_timeout,
                    max_turns=args.max_turns,
                ).run()
        except (AgentCardResolutionError, A2AClientError, httpx.HTTPError) as exc:
            print(f"the A2A agent could not be reached: {exc}", file=sys.stderr, flush=True)
            return 1
        finally:
            if served is not None:
                served.close()
        print(
            f"stopped ({result.stopped}) after {result.turns} turns: {len(result.said)} said, "
            f"{len(result.actions)} actions, {len(result.refused)} refused before sending",
            flush=True,
        )
        return 0 if result.stopped in ("end", "closed") else 1

    return await in_room(args, run)


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
