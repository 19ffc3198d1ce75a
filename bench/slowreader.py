"""``python -m bench.slowreader``: a server's memory while clients never read, and after.

Issue 13, finding 4: a socket that never reads grew the server, and the memory stayed after
the close. Synapsia bounds what waits for a client (``SYNAPSIA_SOCKET_SEND_BUFFER_MAX_BYTES``,
4 MiB) and closes a slow reader with 4408 (docs/protocol.md, Limits). This measures what that
does to the server's resident memory, against the bare relay (``bench/relay_asgi.py``) in the
same run: the relay has **no** buffer limit, so it is the "without limits" reference (it
buffers everything for a client that never reads, until the client itself goes away).

For each profile (embedded; services with ``BENCH_PG_DATABASE`` / ``BENCH_REDIS_DB``) and each
K (1, 10), on a fresh Daphne per run, relay first then Synapsia:

1. K slow readers connect: raw TCP sockets that complete the WebSocket upgrade (an agent's
   bearer token for Synapsia) with a 4 KB receive buffer and never read again; their K peers
   connect, and so does one reading pair (a room whose two sockets read everything);
2. at rest (2 s after connecting): the server's RSS (``/proc/<pid>/status`` VmRSS);
3. the flood: each peer sends ``say`` frames until the server owes its slow reader about
   ``--flood-mb`` (10 MB) of frames (Synapsia sends an agent a 7 KB text as a ~14.3 KB frame:
   698 says; the relay forwards ~7.1 KB: 1,411), at most ``--window`` frames Synapsia has not
   answered with ``sent``, while the reading pair exchange ``--pair-messages`` each; RSS
   sampled every 0.1 s (the peak);
4. Synapsia closes its slow readers itself (counted: ``send_buffer`` refusals, each a 4408
   close, and the log's "did not read" lines; the clients' connections seen ended); the relay
   never does, so once its flood is through the bench closes them from the client side;
5. after ``--quiet`` (10 s) without traffic, everything else still connected: RSS again, then
   the same after ``gc.collect()`` + glibc's ``malloc_trim(0)`` (what the allocator kept).

The servers run this module's ``synapsia_probe`` / ``relay_probe``: the real application
wrapped with one loopback-only HTTP path, ``/_bench/memory``, that reports (after
``gc.collect()``) the live consumer objects, the event loop's tasks by coroutine, the in-memory
layer's channels and group memberships, Synapsia's limits book and record sweep, and a
``/proc/self/smaps`` breakdown; ``?trim=1`` calls ``malloc_trim(0)`` first. With
``BENCH_TRACEMALLOC=1`` the server traces allocations from the first ``?mark=1`` (at rest) and
the probe returns the top lines grown since (slow: for finding where memory is held, not for
figures).

One more Synapsia run on request, on its own server and rooms: ``--flood-only`` sends the
same flood with no slow reader connected (the other agent of each room is away): what the
flood itself leaves (stored messages, caches), to tell apart from what the slow readers leave.
Synapsia trims the allocator itself 3 s after a wave of 4408 closes
(``rooms.limits.trim_after_slow_reader``), so its "after" figure includes that trim.

Reported per run: MB growth during the flood (peak - rest), MB still held after the close and
the quiet (absolute and as a share of the growth), the same after a trim, closes observed,
and messages lost between the reading pair (must be 0). Every run stops by itself (at most
``RUN_LIMIT_S``); JSON to ``var/bench/slowreader.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import ctypes
import functools
import gc
import json
import math
import os
import random
import re
import shutil
import socket
import string
import subprocess
import sys
import tempfile
import threading
import time
import tracemalloc
import urllib.request
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

from bench.loadgen import ack_frame, say_frame

ROOT = Path(__file__).resolve().parents[1]
PROBE_PATH = "/_bench/memory"
# Each run (connect, flood, closes, quiet) stops by itself within this, whatever happens.
RUN_LIMIT_S = 180.0
FLOOD_LIMIT_S = 110.0
CLOSE_WAIT_S = 30.0
DRAIN_S = 20.0
SAMPLE_EVERY_S = 0.1
LETTERS = string.ascii_lowercase + " "

# --- inside the server: the probe ------------------------------------------------------------


def rss_mb(pid: int | str = "self") -> float | None:
    """Resident memory of a process in MB (``/proc/<pid>/status`` VmRSS); None if gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


_MAPPING = re.compile(r"^[0-9a-f]+-[0-9a-f]+ ")


def smaps_breakdown(text: str) -> dict[str, float]:
    """Resident MB of a ``/proc/<pid>/smaps`` text by kind of mapping: ``heap`` (the main
    arena's brk heap), ``anon`` (anonymous mappings: CPython's arenas, glibc's per-thread
    arenas, large blocks), ``file`` (code and data of the binaries) and ``other``
    (``[stack]``, ``[vvar]``...)."""
    totals: dict[str, float] = {"heap": 0.0, "anon": 0.0, "file": 0.0, "other": 0.0}
    kind = "other"
    for line in text.splitlines():
        if _MAPPING.match(line):
            parts = line.split(None, 5)
            name = parts[5].strip() if len(parts) > 5 else ""
            if name == "[heap]":
                kind = "heap"
            elif not name:
                kind = "anon"
            elif name.startswith("["):
                kind = "other"
            else:
                kind = "file"
        elif line.startswith("Rss:"):
            totals[kind] += int(line.split()[1]) / 1024
    return {k: round(v, 1) for k, v in totals.items()}


def largest_anonymous(text: str, count: int = 8) -> list[tuple[int, int]]:
    """The ``count`` anonymous mappings with the most resident memory: (size KB, RSS KB).
    glibc gives each thread that allocates its own arena (64 MB reserved, resident as used);
    CPython's arenas are 1 MB each."""
    found: list[tuple[int, int]] = []
    size, anonymous = 0, False
    for line in text.splitlines():
        if _MAPPING.match(line):
            parts = line.split(None, 5)
            anonymous = len(parts) <= 5 or not parts[5].strip()
        elif line.startswith("Size:"):
            size = int(line.split()[1])
        elif line.startswith("Rss:") and anonymous:
            found.append((size, int(line.split()[1])))
    return sorted(found, key=lambda pair: -pair[1])[:count]


class _MallInfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena",
            "ordblks",
            "smblks",
            "hblks",
            "hblkhd",
            "usmblks",
            "fsmblks",
            "uordblks",
            "fordblks",
            "keepcost",
        )
    ]


def malloc_info() -> dict[str, float] | None:
    """glibc's ``mallinfo2()`` over all arenas, in MB: ``in_use`` (allocated chunks, from
    CPython and from C libraries alike), ``free`` (freed, kept inside the arenas), ``mmapped``
    (large blocks mapped on their own). None without glibc 2.33+."""
    try:
        function = ctypes.CDLL("libc.so.6").mallinfo2
    except (OSError, AttributeError):
        return None
    function.restype = _MallInfo2
    info = function()
    mb = 2**20
    return {
        "in_use": round(info.uordblks / mb, 1),
        "free": round(info.fordblks / mb, 1),
        "mmapped": round(info.hblkhd / mb, 1),
        "arenas_mb": round(info.arena / mb, 1),
    }


def malloc_trim() -> bool:
    """glibc's ``malloc_trim(0)``: give the freed memory of every arena back to the system.
    False where there is no glibc (musl, macOS)."""
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return False
    return bool(libc.malloc_trim(0))


_OBMALLOC_LINES = {
    "# arenas allocated current": "arenas",
    "# bytes in allocated blocks": "allocated",
    "# bytes in available blocks": "available",
}


def obmalloc_stats() -> dict[str, float]:
    """CPython's small-object allocator (``sys._debugmallocstats``, which writes to the C
    stderr: caught through a temporary file): its arenas (each a separate mapping, released
    only when every block in it is free, so a few live objects keep a whole arena) and the MB
    of blocks in use and free within them."""
    with tempfile.TemporaryFile() as caught:
        sys.stderr.flush()
        saved = os.dup(2)
        os.dup2(caught.fileno(), 2)
        try:
            sys._debugmallocstats()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        caught.seek(0)
        text = caught.read().decode(errors="replace")
    stats: dict[str, float] = {}
    for raw in text.splitlines():
        name, _, value = raw.partition("=")
        key = _OBMALLOC_LINES.get(name.strip())
        if key is not None:
            number = int(value.strip().replace(",", ""))
            stats[key] = number if key == "arenas" else round(number / 2**20, 1)
    return stats


_marked: tracemalloc.Snapshot | None = None


def _consumer_counts() -> dict[str, int]:
    from channels.consumer import AsyncConsumer

    counts: Counter[str] = Counter()
    for obj in gc.get_objects():
        kind = type(obj)  # not isinstance: that asks lazy objects for __class__ (and loads them)
        if issubclass(kind, AsyncConsumer):
            counts[kind.__name__] += 1
    return dict(counts)


def _task_counts() -> dict[str, int]:
    counts: Counter[str] = Counter()
    for task in asyncio.all_tasks():
        coro = task.get_coro()
        counts[getattr(coro, "__qualname__", type(coro).__name__)] += 1
    return dict(counts)


def _layer_counts() -> dict[str, Any] | None:
    from channels.layers import InMemoryChannelLayer, get_channel_layer

    layer = get_channel_layer()
    if not isinstance(layer, InMemoryChannelLayer):
        return None  # Redis keeps its state in Redis
    return {
        "channels": len(layer.channels),
        "queued": sum(queue.qsize() for queue in layer.channels.values()),
        "groups": len(layer.groups),
        "memberships": sum(len(members) for members in layer.groups.values()),
    }


def _sample(metric: Any, name: str, labels: dict[str, str]) -> float | None:
    """One sample of one metric object (not the registry: its database collector queries)."""
    for family in metric.collect():
        for sample in family.samples:
            if sample.name == name and sample.labels == labels:
                return float(sample.value)
    return None


def _memo_counts() -> dict[str, float] | None:
    """Entries and MB of the context's peer-message memo (``rooms.context``): an LRU of what
    each peer text cleans to, per text and not per socket, bounded in entries."""
    context = sys.modules.get("rooms.context")
    memo = getattr(context, "_peer_message_memo", None)
    if memo is None:
        return None
    size = 0
    for key, block in list(memo.items()):
        size += sys.getsizeof(key) + sys.getsizeof(block)
        size += sum(sys.getsizeof(getattr(block, name, "")) for name in ("fenced", "text", "nonce"))
    return {"entries": len(memo), "mb": round(size / 2**20, 2)}


def _synapsia_counts() -> dict[str, Any]:
    """What Synapsia keeps per process for its sockets (nothing where the app is not loaded)."""
    if "rooms.consumers" not in sys.modules:
        return {}
    from rooms import limits, realtime
    from synapsia.metrics import SOCKET_FRAMES_REFUSED

    sweep = realtime.record_sweep()
    rooms_watched = getattr(sweep, "_rooms", {})
    return {
        "peer_message_memo": _memo_counts(),
        "limits_remembered": len(getattr(limits.limits_book(), "_agents", {})),
        "sweep_listeners": sum(len(listeners) for listeners in rooms_watched.values()),
        "sockets_agent": _sample(
            realtime.SOCKETS_CONNECTED, "synapsia_sockets_connected", {"participant": "agent"}
        ),
        "send_buffer_closes": _sample(
            SOCKET_FRAMES_REFUSED, "synapsia_socket_frames_refused_total", {"limit": "send_buffer"}
        ),
    }


def memory_probe(*, trim: bool = False, mark: bool = False, top: int = 0) -> dict[str, Any]:
    """The server's memory and what it keeps for its sockets, after a full collection."""
    global _marked
    rss_before = rss_mb()
    gc.collect()
    report: dict[str, Any] = {
        "rss_mb": rss_before,
        "rss_after_gc_mb": rss_mb(),
        "consumers": _consumer_counts(),
        "tasks": _task_counts(),
        "layer": _layer_counts(),
        **_synapsia_counts(),
    }
    report["obmalloc"] = obmalloc_stats()
    report["malloc"] = malloc_info()
    if trim:
        took = time.perf_counter()
        report["trimmed"] = malloc_trim()
        report["trim_ms"] = round((time.perf_counter() - took) * 1000, 2)
        report["rss_after_trim_mb"] = rss_mb()
        report["malloc_after_trim"] = malloc_info()
    smaps = Path("/proc/self/smaps").read_text()
    report["smaps"] = smaps_breakdown(smaps)
    report["anon_largest"] = largest_anonymous(smaps)
    report["threads"] = threading.active_count()
    if mark and os.environ.get("BENCH_TRACEMALLOC") == "1" and not tracemalloc.is_tracing():
        # From the mark on only (tracing the start-up's imports would take minutes).
        tracemalloc.start(1)
    if tracemalloc.is_tracing():
        current, peak = tracemalloc.get_traced_memory()
        report["traced_mb"] = round(current / 2**20, 2)
        report["traced_peak_mb"] = round(peak / 2**20, 2)
        snapshot = tracemalloc.take_snapshot().filter_traces(
            [tracemalloc.Filter(False, tracemalloc.__file__)]
        )
        if top and _marked is not None:
            report["grown_since_mark"] = [
                {
                    "where": str(stat.traceback[0]),
                    "kb": round(stat.size_diff / 1024, 1),
                    "count": stat.count_diff,
                }
                for stat in snapshot.compare_to(_marked, "lineno")[:top]
            ]
        if mark:
            _marked = snapshot
    return report


def probed(app: Any) -> Any:
    """``app`` with ``GET /_bench/memory`` answered from loopback (``memory_probe``)."""

    async def application(scope: dict[str, Any], receive: Any, send: Any) -> Any:
        client = (scope.get("client") or ("", 0))[0]
        if scope["type"] == "http" and scope["path"] == PROBE_PATH and client == "127.0.0.1":
            query = parse_qs(scope.get("query_string", b"").decode())
            body = json.dumps(
                memory_probe(
                    trim="trim" in query,
                    mark="mark" in query,
                    top=int(query.get("top", ["0"])[0]),
                )
            ).encode()
            await send(
                {
                    "type": "http.response.start",
                    "status": 200,
                    "headers": [(b"content-type", b"application/json")],
                }
            )
            await send({"type": "http.response.body", "body": body})
            return None
        return await app(scope, receive, send)

    return application


@functools.cache
def _probed(name: str) -> Any:
    if name == "synapsia_probe":
        from synapsia.asgi import application as app
    else:
        from bench.relay_asgi import application as app
    return probed(app)


def __getattr__(name: str) -> Any:
    # Daphne imports ``bench.slowreader:synapsia_probe``; the application (and Django) load
    # only then, so the orchestrator importing this module loads neither.
    if name in ("synapsia_probe", "relay_probe"):
        return _probed(name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def probe(host: str, **query: int) -> dict[str, Any]:
    """Ask a probed server for ``memory_probe`` (from the orchestrator)."""
    qs = "&".join(f"{k}={v}" for k, v in query.items())
    url = f"http://{host}{PROBE_PATH}" + (f"?{qs}" if qs else "")
    with urllib.request.urlopen(url, timeout=60) as response:
        return dict(json.loads(response.read()))


# --- the clients -------------------------------------------------------------------------------


def never_reading_socket(host: str, path: str, token: str | None) -> socket.socket:
    """A raw TCP client that completes the WebSocket upgrade and then reads nothing (a
    WebSocket library would read in the background); a 4 KB receive buffer, so the kernel
    absorbs little of what the server sends."""
    address, port = host.rsplit(":", 1)
    raw = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    raw.settimeout(20)
    raw.connect((address, int(port)))
    key = base64.b64encode(os.urandom(16)).decode()
    auth = f"Authorization: Bearer {token}\r\n" if token else ""
    raw.sendall(
        (
            f"GET {path} HTTP/1.1\r\nHost: {host}\r\nUpgrade: websocket\r\n"
            f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n"
            f"{auth}\r\n"
        ).encode()
    )
    head = b""
    while b"\r\n\r\n" not in head:
        byte = raw.recv(1)
        if not byte:
            raise RuntimeError(f"{path}: connection closed during the upgrade: {head!r}")
        head += byte
    if not head.startswith(b"HTTP/1.1 101"):
        raise RuntimeError(f"{path}: upgrade refused: {head[:200]!r}")
    return raw


def connection_ended(raw: socket.socket) -> bool:
    """Whether the server has ended this connection: a read finds its end (after at most what
    the kernel still held for it) or a reset; False while it is open (nothing more to read)."""
    raw.setblocking(False)
    try:
        for _ in range(64):
            if not raw.recv(65536):
                return True
    except BlockingIOError:
        return False
    except OSError:
        return True
    return False


@dataclass
class Talker:
    """A socket that reads: a slow reader's peer (the flooder), or one of the reading pair."""

    name: str
    url: str
    token: str | None
    synapsia: bool
    tag: str
    quota: int
    text_bytes: int
    window_size: int
    ws: Any = None
    peer: Talker | None = None
    sent: int = 0
    confirmed: int = 0
    delivered: set[int] = field(default_factory=set)
    duplicates: int = 0
    frame_bytes: int = 0
    errors: list[str] = field(default_factory=list)
    last_seq: int = 0
    acked_seq: int = 0
    window: asyncio.Semaphore = field(init=False)
    padding: str = field(init=False)

    def __post_init__(self) -> None:
        self.window = asyncio.Semaphore(self.window_size)
        self.padding = "".join(random.choices(LETTERS, k=self.text_bytes))

    async def open(self) -> None:
        from websockets.asyncio.client import connect

        headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        self.ws = await connect(
            self.url,
            additional_headers=headers,
            compression=None,
            max_size=2**20,
            open_timeout=20,
            ping_interval=None,
        )
        if self.synapsia:
            welcome = json.loads(await self.ws.recv())
            if welcome.get("type") != "welcome":
                raise RuntimeError(f"{self.name}: expected welcome, got {welcome}")
            self.acked_seq = self.last_seq = welcome["body"]["acked_seq"]

    async def send_all(self, deadline: float, *, windowed: bool) -> None:
        """Send ``quota`` frames; ``windowed``: at most ``window_size`` unanswered (Synapsia's
        ``sent``, or the peer's delivery for the reading pair on the relay)."""
        for index in range(self.quota):
            if windowed:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return
                try:
                    await asyncio.wait_for(self.window.acquire(), remaining)
                except TimeoutError:
                    return
            elif time.monotonic() > deadline:
                return
            head = f"{self.tag}|{self.name}|{index}|"
            text = head + self.padding[: max(1, self.text_bytes - len(head))]
            await self.ws.send(say_frame(f"{self.tag}-{index}", text))
            self.sent += 1

    def _heard(self, text: str) -> None:
        marker = text.find(f"{self.tag}|")
        if marker < 0 or self.peer is None:
            return
        _, sender, index_s, _ = text[marker:].split("|", 3)
        if sender != self.peer.name:
            return
        index = int(index_s)
        if index in self.delivered:
            self.duplicates += 1
            return
        self.delivered.add(index)
        if not self.synapsia:
            self.peer.window.release()

    async def receive_all(self) -> None:
        from websockets.exceptions import ConnectionClosed

        with contextlib.suppress(ConnectionClosed):
            async for raw in self.ws:
                frame = json.loads(raw)
                kind = frame.get("type")
                if kind == "sent":
                    self.confirmed += 1
                    self.window.release()
                elif kind == "message" or (not self.synapsia and kind == "say"):
                    self.frame_bytes = max(self.frame_bytes, len(raw))
                    self._heard(frame["body"]["text"])
                    if self.synapsia:
                        self.last_seq = max(self.last_seq, int(frame["body"]["seq"]))
                        if self.last_seq - self.acked_seq >= 100:
                            await self.ack()
                elif kind == "error":
                    self.errors.append(f"{frame['body']['code']}: {frame['body']['message']}")
                    self.window.release()

    async def ack(self) -> None:
        if self.synapsia and self.last_seq > self.acked_seq:
            self.acked_seq = self.last_seq
            await self.ws.send(ack_frame(self.last_seq))


class RssSampler(threading.Thread):
    """The server's RSS every ``SAMPLE_EVERY_S``: the peak, and one point a second."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid = pid
        self.peak = 0.0
        self.latest = 0.0
        self.timeline: list[tuple[float, float]] = []
        self._halt = threading.Event()
        self._t0 = time.monotonic()

    def run(self) -> None:
        last_point = -1.0
        while not self._halt.is_set():
            rss = rss_mb(self.pid)
            if rss is not None:
                self.latest = rss
                self.peak = max(self.peak, rss)
                now = time.monotonic() - self._t0
                if now - last_point >= 1.0:
                    self.timeline.append((round(now, 1), round(rss, 1)))
                    last_point = now
            self._halt.wait(SAMPLE_EVERY_S)

    def reset_peak(self) -> None:
        self.peak = self.latest

    def stop(self) -> None:
        self._halt.set()
        self.join(timeout=2)


# --- one run -----------------------------------------------------------------------------------


@dataclass
class Scenario:
    mode: str  # "relay" | "synapsia"
    readers: int
    flood_mb: float
    text_bytes: int
    window: int
    pair_messages: int
    quiet_s: float
    rooms: list[dict[str, Any]]  # seeded rooms: K slow-reader rooms + 1 reading pair


async def _wait_until(condition: Any, seconds: float) -> bool:
    """Whether ``condition()`` (counters other tasks move) came true within ``seconds``."""
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.1)
    return True


def frame_bytes(mode: str, text_bytes: int) -> int:
    """About what the server sends a peer for one ``say`` of ``text_bytes``: the relay
    forwards the frame as it came; Synapsia sends an agent the text and its fenced block
    (``message_frame``), about twice the text (measured: 14,338 B for 7,000)."""
    return text_bytes + 90 if mode == "relay" else 2 * text_bytes + 340


def _paths(scenario: Scenario, host: str, index: int) -> tuple[list[str], list[str | None]]:
    """The two sockets' URLs (paths) and tokens of room ``index``."""
    if scenario.mode == "relay":
        return [f"/ws/relay/{index}/{side}/" for side in "ab"], [None, None]
    room = scenario.rooms[index]
    return [f"/ws/rooms/{room['room_id']}/"] * 2, [a["token"] for a in room["agents"]]


async def run_scenario(scenario: Scenario, host: str, pid: int, log_path: Path) -> dict[str, Any]:
    """One bounded run against one fresh server (see the module's docstring)."""
    k = scenario.readers
    synapsia = scenario.mode != "relay"
    label = f"[{scenario.mode} K={k}]"
    tag = f"slow{k}{scenario.mode[0]}{os.getpid()}{int(time.time())}"
    started = time.monotonic()
    sampler = RssSampler(pid)
    sampler.start()
    at_start = probe(host)
    readers: list[socket.socket] = []
    talkers: list[Talker] = []
    tasks: list[asyncio.Task[None]] = []

    def talker(name: str, index: int, side: int, quota: int) -> Talker:
        paths, tokens = _paths(scenario, host, index)
        return Talker(
            name=name,
            url=f"ws://{host}{paths[side]}",
            token=tokens[side],
            synapsia=synapsia,
            tag=tag,
            quota=quota,
            text_bytes=scenario.text_bytes,
            window_size=scenario.window,
        )

    flood_quota = math.ceil(
        scenario.flood_mb * 1e6 / frame_bytes(scenario.mode, scenario.text_bytes)
    )
    try:
        # flood-only: the same peers and flood, their rooms' other agent away (no slow reader).
        for index in range(0 if scenario.mode == "flood-only" else k):
            paths, tokens = _paths(scenario, host, index)
            readers.append(await asyncio.to_thread(never_reading_socket, host, paths[1], tokens[1]))
        flooders = [talker(f"{i}a", i, 0, flood_quota) for i in range(k)]
        pair = [talker(f"{k}{s}", k, i, scenario.pair_messages) for i, s in enumerate("ab")]
        pair[0].peer, pair[1].peer = pair[1], pair[0]
        talkers = [*flooders, *pair]
        for t in talkers:
            await t.open()
        tasks = [asyncio.create_task(t.receive_all()) for t in talkers]
        await asyncio.sleep(2.0)
        rest_mb = rss_mb(pid)
        at_rest = probe(host, mark=1)
        sampler.reset_peak()
        print(
            f"  {label} {k} slow readers, {k} peers and a reading pair connected: "
            f"rss {rest_mb:.1f} MB; flooding {flood_quota} x {scenario.text_bytes} B per peer",
            flush=True,
        )

        flood_started = time.monotonic()
        deadline = flood_started + FLOOD_LIMIT_S
        senders = [
            asyncio.create_task(t.send_all(deadline, windowed=synapsia or t in pair))
            for t in talkers
        ]
        closes = 0.0

        async def progress() -> None:
            nonlocal closes
            while True:
                await asyncio.sleep(2.0)
                if synapsia:
                    with contextlib.suppress(OSError):
                        closes = (await asyncio.to_thread(probe, host)).get(
                            "send_buffer_closes"
                        ) or 0.0
                print(
                    f"  {label} {time.monotonic() - flood_started:5.1f}s rss "
                    f"{sampler.latest:6.1f} MB (peak {sampler.peak:6.1f}); flood sent "
                    f"{sum(t.sent for t in flooders)}/{flood_quota * k}; reading pair heard "
                    f"{sum(len(t.delivered) for t in pair)}/{2 * scenario.pair_messages}; "
                    f"closed by the server {int(closes)}/{k}",
                    flush=True,
                )

        ticker = asyncio.create_task(progress())
        await asyncio.gather(*senders)
        flood_s = time.monotonic() - flood_started
        # The reading pair hears everything sent to it; on Synapsia the flooders' last frames
        # are answered (`sent`), so the flood is through the server (bounded wait).
        await _wait_until(
            lambda: (
                all(len(t.delivered) >= t.peer.sent for t in pair if t.peer is not None)
                and (not synapsia or all(f.confirmed + len(f.errors) >= f.sent for f in flooders))
            ),
            DRAIN_S,
        )
        flood_peak_mb = sampler.peak

        close_started = time.monotonic()
        closed_by_server: list[bool] = [False] * k
        if synapsia and readers:
            while time.monotonic() - close_started < CLOSE_WAIT_S:
                state = await asyncio.to_thread(probe, host)
                closes = state.get("send_buffer_closes") or 0.0
                if closes >= k:
                    break
                await asyncio.sleep(0.5)
            # A second for Daphne's close handshake to time out and drop the connection.
            await asyncio.sleep(1.5)
        elif readers:
            # The relay never closes them: once its flood is through (its RSS flat for 2 s),
            # the slow clients go away by themselves, the only way the relay frees their data.
            flat_since, last = time.monotonic(), sampler.latest
            while time.monotonic() - close_started < CLOSE_WAIT_S:
                await asyncio.sleep(0.5)
                if abs(sampler.latest - last) > 1.0:
                    flat_since, last = time.monotonic(), sampler.latest
                elif time.monotonic() - flat_since >= 2.0:
                    break
        closed_by_server = [connection_ended(raw) for raw in readers]
        peak_mb = sampler.peak
        for raw in readers:
            raw.close()
        readers = []
        ticker.cancel()
        print(
            f"  {label} flood done in {flood_s:.1f}s; closed by the server: "
            f"{sum(closed_by_server)}/{k}; peak rss {peak_mb:.1f} MB; {scenario.quiet_s:g}s quiet",
            flush=True,
        )
        await asyncio.sleep(scenario.quiet_s)
        after_mb = rss_mb(pid)
        peak_mb = max(peak_mb, sampler.peak)  # the relay's frees and copies come late too
        after = probe(host, top=15)
        trimmed = probe(host, trim=1)
        for t in pair:
            await t.ack()
        await asyncio.sleep(0.2)
    finally:
        for raw in readers:
            raw.close()
        for t in talkers:
            if t.ws is not None:
                with contextlib.suppress(Exception):
                    await t.ws.close()
        for task in tasks:
            task.cancel()
        sampler.stop()

    log = await asyncio.to_thread(log_path.read_text, errors="replace")
    growth = peak_mb - rest_mb if rest_mb is not None else None
    held = after_mb - rest_mb if after_mb is not None and rest_mb is not None else None
    held_trim = trimmed.get("rss_after_trim_mb")
    held_after_trim = held_trim - rest_mb if held_trim is not None and rest_mb else None
    pair_lost = sum(t.sent - len(t.peer.delivered) for t in pair if t.peer is not None)
    result = {
        "mode": scenario.mode,
        "slow_readers": k,
        "flood_messages_per_peer": flood_quota,
        "owed_mb_per_reader": round(flood_quota * (max(t.frame_bytes for t in pair) or 0) / 1e6, 1),
        "text_bytes": scenario.text_bytes,
        "flood_sent": sum(t.sent for t in flooders),
        "flood_answered": sum(t.confirmed for t in flooders) if synapsia else None,
        "flood_errors": sorted({e for t in flooders for e in t.errors})[:5],
        "flood_s": round(flood_s, 1),
        "rss_start_mb": at_start["rss_mb"],
        "rss_rest_mb": rest_mb,
        "rss_flood_peak_mb": flood_peak_mb,
        "rss_peak_mb": peak_mb,
        "rss_after_mb": after_mb,
        "rss_after_trim_mb": held_trim,
        "growth_mb": _round(growth),
        "held_mb": _round(held),
        "held_share": _round(held / growth if held is not None and growth else None, 3),
        "held_after_trim_mb": _round(held_after_trim),
        "memo_mb": _memo_growth(at_rest, trimmed),
        "held_after_trim_share": _round(
            held_after_trim / growth if held_after_trim is not None and growth else None, 3
        ),
        "closes_4408": int(after.get("send_buffer_closes") or 0) if synapsia else None,
        "did_not_read_log_lines": log.count("its client did not read"),
        "connections_ended_by_server": sum(closed_by_server),
        "pair_sent": sum(t.sent for t in pair),
        "pair_heard": sum(len(t.delivered) for t in pair),
        "pair_lost": pair_lost,
        "pair_duplicates": sum(t.duplicates for t in pair),
        "pair_frame_bytes": max(t.frame_bytes for t in pair),
        "probe": {"start": at_start, "rest": at_rest, "after": after, "after_trim": trimmed},
        "rss_timeline": sampler.timeline,
        "wall_s": round(time.monotonic() - started, 1),
        "disconnects_logged": log.count("WSDISCONNECT"),
    }
    return result


def _memo_growth(rest: dict[str, Any], after: dict[str, Any]) -> float | None:
    """MB the peer-message memo grew by between two probes (None on the relay)."""
    before, later = rest.get("peer_message_memo"), after.get("peer_message_memo")
    if not before or not later:
        return None
    return round(later["mb"] - before["mb"], 1)


def _round(value: float | None, digits: int = 1) -> float | None:
    return round(value, digits) if value is not None else None


# --- the orchestrator --------------------------------------------------------------------------


def _seed(stack: Any, rooms: int) -> dict[str, Any]:
    from bench.stack import run_module

    out = stack.workdir / "slowreader-seed.json"
    run_module(
        "bench.django_tasks",
        "seed",
        "--rooms",
        str(rooms),
        "--out",
        str(out),
        env=stack.env,
        timeout=600,
    )
    try:
        return dict(json.loads(out.read_text()))
    finally:
        out.unlink()  # it holds agent tokens (throwaway ones, but still)


@contextlib.contextmanager
def serving(
    env: dict[str, str], application: str, log_path: Path, *, keepalive: bool
) -> Iterator[tuple[str, int]]:
    """``bench.stack.running_daphne`` serving ``application``, with ``keepalive=False`` its
    keepalive pings put off for 10 minutes: with Daphne's defaults (a ping after 20 s idle,
    30 s for the pong) a client that never reads is dropped ~50 s after it connects whatever
    it was sent, which a slower flood (K=10 on a loaded machine) reaches before the send
    buffer's limit. Yields (host, pid); always stopped."""
    from bench.stack import running_daphne

    pings = () if keepalive else ("--ping-interval", "600", "--ping-timeout", "600")
    with running_daphne(env, application, log_path, daphne_args=pings, timeout=60.0) as server:
        yield server.host, server.pid


def line(run: dict[str, Any]) -> str:
    """One run as a line of the final table."""

    def f(value: Any, spec: str = ".1f") -> str:
        return "-" if value is None else format(value, spec)

    closes = run["closes_4408"]
    return (
        f"{run['mode']:>8} K={run['slow_readers']:<3} rest {f(run['rss_rest_mb'])} MB, "
        f"peak {f(run['rss_peak_mb'])} (+{f(run['growth_mb'])}), after {f(run['rss_after_mb'])} "
        f"(held {f(run['held_mb'])} = {f(_pct(run['held_share']), '.0f')}% of the growth), "
        f"after trim {f(run['rss_after_trim_mb'])} "
        f"(held {f(run['held_after_trim_mb'])} = {f(_pct(run['held_after_trim_share']), '.0f')}%"
        f"{'' if run.get('memo_mb') is None else ', the peer-message memo ' + f(run['memo_mb'])}); "
        f"4408 closes {'-' if closes is None else closes}, ended by the server "
        f"{run['connections_ended_by_server']}/{run['slow_readers']}; reading pair lost "
        f"{run['pair_lost']} of {run['pair_sent']}"
    )


def _pct(share: float | None) -> float | None:
    return share * 100 if share is not None else None


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench.slowreader", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--profiles", default="embedded,services")
    parser.add_argument("--readers", default="1,10", help="K: slow readers per run")
    parser.add_argument(
        "--flood-mb",
        type=float,
        default=10.0,
        help="MB of frames the server owes each slow reader (Synapsia: ~2 x the text)",
    )
    parser.add_argument("--text-bytes", type=int, default=7000, help="per say (at most 8,000)")
    parser.add_argument("--window", type=int, default=16, help="frames in flight per socket")
    parser.add_argument("--pair-messages", type=int, default=200)
    parser.add_argument("--quiet", type=float, default=10.0, help="seconds after the closes")
    parser.add_argument("--only", help="comma-separated: relay, synapsia, flood-only")
    parser.add_argument(
        "--flood-only",
        action="store_true",
        help="also run Synapsia with the same flood and no slow reader (the flood's own memory)",
    )
    parser.add_argument(
        "--keepalive",
        action="store_true",
        help="keep Daphne's keepalive pings (they drop a never-reading client after ~50 s)",
    )
    parser.add_argument("--json", type=Path, default=ROOT / "var/bench/slowreader.json")
    parser.add_argument("--workdir", type=Path, default=ROOT / "var/bench/slowreader")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from bench.stack import provisioned

    ks = [int(x) for x in args.readers.split(",")]
    results: dict[str, Any] = {
        "started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "commit": subprocess.run(
            [shutil.which("git") or "/usr/bin/git", "rev-parse", "--short", "HEAD"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=False,
        ).stdout.strip(),
        "load_before": os.getloadavg(),
        "args": {k: str(v) for k, v in vars(args).items()},
        "profiles": {},
    }
    args.json.parent.mkdir(parents=True, exist_ok=True)

    def save() -> None:
        args.json.write_text(json.dumps(results, indent=2))

    for profile in args.profiles.split(","):
        print(f"==> {profile}: creating and migrating a throwaway database", flush=True)
        runs: list[dict[str, Any]] = []
        results["profiles"][profile] = {"runs": runs}
        with provisioned(profile, args.workdir / profile, debug=False, keep=False) as stack:
            # Fresh rooms for every Synapsia run (K slow readers' rooms and the reading pair's):
            # a slow reader that joins a room already flooded is sent its backlog at once.
            modes = [
                mode
                for mode, wanted in (
                    ("relay", True),
                    ("synapsia", True),
                    ("flood-only", args.flood_only),
                )
                if wanted and (not args.only or mode in args.only.split(","))
            ]
            wanted = sum(k + 1 for k in ks) * sum(mode != "relay" for mode in modes)
            print(f"==> {profile}: seeding {wanted} rooms", flush=True)
            seeded = _seed(stack, wanted)["rooms"]
            for k in ks:
                for mode in modes:
                    fresh = []
                    if mode != "relay":
                        fresh, seeded = seeded[: k + 1], seeded[k + 1 :]
                    application = (
                        "bench.slowreader:relay_probe"
                        if mode == "relay"
                        else "bench.slowreader:synapsia_probe"
                    )
                    # Rooms 0..K-1: the slow readers and their peers; room K: the reading pair.
                    scenario = Scenario(
                        mode,
                        k,
                        args.flood_mb,
                        args.text_bytes,
                        args.window,
                        args.pair_messages,
                        args.quiet,
                        fresh,
                    )
                    print(
                        f"==> {profile}: {mode}, K={k}: fresh server (load "
                        f"{os.getloadavg()[0]:.2f})",
                        flush=True,
                    )
                    log = stack.workdir / f"{mode.replace('+', '-')}-{k}.log"
                    load = os.getloadavg()
                    try:
                        with serving(stack.env, application, log, keepalive=args.keepalive) as (
                            host,
                            pid,
                        ):
                            result = asyncio.run(
                                asyncio.wait_for(
                                    run_scenario(scenario, host, pid, log), RUN_LIMIT_S
                                )
                            )
                    except Exception as failed:
                        print(f"==> {profile}: {mode}, K={k} failed: {failed!r}", flush=True)
                        result = {"mode": mode, "slow_readers": k, "error": repr(failed)[:2000]}
                    result["load"] = [load, os.getloadavg()]
                    runs.append(result)
                    save()
                    if "error" not in result:
                        print("    " + line(result), flush=True)
    results["load_after"] = os.getloadavg()
    save()
    print("\n==> results (MB of the server's resident memory; relay: no buffer limit)")
    for profile, done in results["profiles"].items():
        for run in done["runs"]:
            if "error" in run:
                print(f"  {profile:>8} {run['mode']} K={run['slow_readers']}: {run['error']}")
            else:
                print(f"  {profile:>8} " + line(run))
    print(f"==> JSON: {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
