"""The slow-reader bench's pieces (bench/slowreader.py): the server-side probe and what it
reads (smaps, CPython's arenas), its loopback-only path, and the client's end-of-connection
check. The bench itself runs Daphne and is measured by ``python -m bench.slowreader``."""

from __future__ import annotations

import asyncio
import json
import socket
from typing import Any

from bench import slowreader

SMAPS = """\
55d0c0a00000-55d0c0c00000 r-xp 00000000 08:01 1234 /usr/bin/python3.11
Size:               2048 kB
Rss:                1024 kB
55d0c1000000-55d0c3000000 rw-p 00000000 00:00 0 [heap]
Size:              32768 kB
Rss:               30720 kB
7f0000000000-7f0004000000 rw-p 00000000 00:00 0
Size:              65536 kB
Rss:               10240 kB
7f0010000000-7f0010100000 rw-p 00000000 00:00 0
Rss:                2048 kB
7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0 [stack]
Rss:                 132 kB
"""


def test_smaps_are_split_into_heap_anonymous_file_and_other() -> None:
    assert slowreader.smaps_breakdown(SMAPS) == {
        "heap": 30.0,
        "anon": 12.0,
        "file": 1.0,
        "other": 0.1,
    }


def test_the_small_object_allocator_shows_what_is_in_use() -> None:
    before = slowreader.obmalloc_stats()
    kept = [str(n) * 3 for n in range(200_000)]  # ~10 MB of small strings
    during = slowreader.obmalloc_stats()
    assert before["arenas"] >= 1
    assert during["allocated"] - before["allocated"] > 5
    # The arenas may not grow: earlier tests in this process can leave enough free ones. They
    # hold every block in use, at 1 MiB an arena on 64-bit CPython 3.10 and later.
    assert during["arenas"] >= max(before["arenas"], during["allocated"])
    del kept


def test_the_process_own_memory_is_read() -> None:
    rss = slowreader.rss_mb()
    assert rss is not None and rss > 10
    assert slowreader.rss_mb(2**22 + 12345) is None  # no such process


async def _call(app: Any, scope: dict[str, Any]) -> list[dict[str, Any]]:
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await app(scope, receive, send)
    return sent


def test_the_probe_answers_loopback_only_and_passes_everything_else_on() -> None:
    passed: list[str] = []

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        passed.append(scope["path"])

    wrapped = slowreader.probed(app)
    probe_scope = {
        "type": "http",
        "path": slowreader.PROBE_PATH,
        "query_string": b"trim=1",
        "client": ("127.0.0.1", 5000),
    }
    answered = asyncio.run(_call(wrapped, probe_scope))
    body = json.loads(answered[1]["body"])
    assert answered[0]["status"] == 200 and passed == []
    assert body["rss_mb"] > 0 and "rss_after_trim_mb" in body and body["obmalloc"]["arenas"] > 0
    assert set(body["smaps"]) == {"heap", "anon", "file", "other"}
    # From elsewhere, or any other path: the application's.
    asyncio.run(_call(wrapped, {**probe_scope, "client": ("10.0.0.5", 5000)}))
    asyncio.run(_call(wrapped, {**probe_scope, "path": "/healthz"}))
    assert passed == [slowreader.PROBE_PATH, "/healthz"]


def test_a_connection_is_ended_once_the_other_side_is_gone() -> None:
    ours, theirs = socket.socketpair()
    try:
        assert not slowreader.connection_ended(ours)  # open, nothing to read
        theirs.sendall(b"x" * 10_000)
        assert not slowreader.connection_ended(ours)  # read what was there, still open
        theirs.close()
        assert slowreader.connection_ended(ours)
    finally:
        ours.close()


def test_what_the_server_owes_a_slow_reader_per_say() -> None:
    # The relay forwards the frame; Synapsia sends an agent the text and its fenced block.
    assert slowreader.frame_bytes("relay", 7000) < 7200
    assert 14_000 < slowreader.frame_bytes("synapsia", 7000) < 14_500
