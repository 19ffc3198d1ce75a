"""End to end on a real Daphne: what the server keeps for a socket whose client never reads is
gone once the server has closed it (4408), counted inside the server process, not by its RSS.

The server runs ``bench.slowreader:synapsia_probe``: the real application with one loopback
path (``/_bench/memory``) that counts, after ``gc.collect()``, the live consumer objects, the
event loop's tasks by coroutine, the in-memory layer's channels and group memberships, the
record sweep's listeners and the limits book. A slow reader is the raw client of
tests/e2e/test_socket_limits.py: it completes the upgrade and never reads.
"""

from __future__ import annotations

import asyncio
import functools
import random
import socket
import string
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agents import RoomClient
from bench.slowreader import never_reading_socket, probe, serving
from tests.e2e.daphne import server_env

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

SEND_BUFFER_MAX = 256 * 1024
LETTERS = string.ascii_lowercase + " "
SLOW_READERS = 2  # one after another: what one leaves behind would add up


async def _until(condition: Callable[[dict[str, Any]], bool], host: str) -> dict[str, Any]:
    """The server's counts once ``condition`` holds for them (the last counts after 60 s)."""
    deadline = time.monotonic() + 60
    while True:
        counts = await asyncio.to_thread(probe, host)
        if condition(counts) or time.monotonic() > deadline:
            return counts
        await asyncio.sleep(0.3)


def _kept(counts: dict[str, Any]) -> dict[str, Any]:
    """What the server keeps for its sockets (everything but the probe's own request)."""
    tasks = dict(counts["tasks"])
    # Each connection's application instance (the probe's own request, an HTTP request not
    # yet reaped); a socket's is counted by its consumer.
    tasks.pop("probed.<locals>.application", None)
    # The Redis layer's one receiving task per process (and shard), started on first use.
    tasks.pop("RedisSingleShardConnection._do_receiving", None)
    return {
        "consumers": counts["consumers"],
        "tasks": tasks,
        "layer": counts["layer"],
        "sweep_listeners": counts["sweep_listeners"],
        "sockets_agent": counts["sockets_agent"],
    }


def _closed_since(closes: float, counts: dict[str, Any]) -> bool:
    return bool(counts["send_buffer_closes"] > closes)


def _same(expected: dict[str, Any], counts: dict[str, Any]) -> bool:
    return _kept(counts) == expected


def test_what_a_slow_reader_leaves_is_gone_once_the_server_closed_it(
    make_open_room: Any, tmp_path: Path
) -> None:
    # A room per slow reader: an agent that comes back to a room it did not read is sent its
    # backlog at once (and, past the send buffer's limit, closed for it: see the report).
    rooms = [make_open_room(prefix=f"r{n}-") for n in range(SLOW_READERS)]
    env = server_env()
    env.update(
        SYNAPSIA_SOCKET_SEND_BUFFER_MAX_BYTES=str(SEND_BUFFER_MAX),
        SYNAPSIA_SOCKET_RATE_SAY="off",
    )
    log = tmp_path / "daphne.log"
    with serving(env, "bench.slowreader:synapsia_probe", log, keepalive=True) as (host, _):

        async def scenario() -> tuple[dict[str, Any], list[dict[str, Any]]]:
            nothing = _kept(await asyncio.to_thread(probe, host))
            rounds: list[dict[str, Any]] = []
            for n, setup in enumerate(rooms):
                path = f"/ws/rooms/{setup.room.id}/"
                async with RoomClient(f"ws://{host}{path}", setup.a.token) as a:
                    # Only the peer connected, at rest: what the slow reader's close returns to.
                    alone = _kept(
                        await _until(lambda c: c["consumers"] == {"RoomConsumer": 1}, host)
                    )
                    reader: socket.socket = await asyncio.to_thread(
                        never_reading_socket, host, path, setup.b.token
                    )
                    try:
                        joined = await _until(lambda c: c["consumers"] == {"RoomConsumer": 2}, host)
                        closes = joined["send_buffer_closes"]
                        for chunk in range(20):
                            # ~7 KB a message, twice that as the fenced frame the reader owes.
                            for i in range(50):
                                text = f"{n}-{chunk}-{i} " + "".join(
                                    random.choices(LETTERS, k=7000)
                                )
                                await a.say(text)
                            counts = await asyncio.to_thread(probe, host)
                            if counts["send_buffer_closes"] > closes:
                                break
                        # The close comes SEND_STALL_SECONDS after the buffer went over its
                        # limit, which a fast server's flood can finish sooner than.
                        counts = await _until(functools.partial(_closed_since, closes), host)
                        # Gone once the server closed it: its consumer, its tasks, its layer
                        # channel and group membership, its record-sweep listener, its
                        # count in the gauge; the peer still connected.
                        settled = await _until(functools.partial(_same, alone), host)
                    finally:
                        reader.close()
                gone = await _until(lambda c: _kept(c) == nothing, host)
                rounds.append(
                    {
                        "alone": alone,
                        "joined": joined,
                        "closes": closes,
                        "counts": counts,
                        "settled": settled,
                        "gone": gone,
                    }
                )
            return nothing, rounds

        nothing, rounds = asyncio.run(scenario())

    assert nothing["consumers"] == {} and nothing["sockets_agent"] == 0
    for n, done in enumerate(rounds):
        alone, joined = done["alone"], _kept(done["joined"])
        assert alone["consumers"] == {"RoomConsumer": 1} and alone["sweep_listeners"] == 1
        assert alone["sockets_agent"] == 1
        # While connected the slow reader had its own: a second consumer, listener, socket.
        assert joined["consumers"] == {"RoomConsumer": 2} and joined["sweep_listeners"] == 2
        assert joined["sockets_agent"] == 2
        assert done["counts"]["send_buffer_closes"] == done["closes"] + 1, "not closed (4408)"
        assert _kept(done["settled"]) == alone, _kept(done["settled"])
        # Nothing of either socket once both are gone, round after round...
        assert _kept(done["gone"]) == nothing, _kept(done["gone"])
        # ...but the limits book, which remembers each agent's rates per room (a reconnect
        # does not refill them; bounded by MAX_AGENTS_REMEMBERED): two agents a room.
        assert done["gone"]["limits_remembered"] == 2 * (n + 1)
    assert log.read_text().count("its client did not read") == SLOW_READERS
