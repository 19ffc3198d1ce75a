"""The load generator: a separate process driving one server with N rooms x 2 sockets.

``python -m bench.loadgen --config CONFIG.json --out RESULT.json`` (the orchestrator writes the
config). Loopback only; bounded by a message count *and* a wall-clock deadline, after which it
drains for a few seconds, closes every socket and exits.

Each socket sends ``say`` frames (the same JSON envelope to both servers; the relay does not
parse it) with a bounded window of messages that its peer has not received yet, so sends are
pipelined without waiting for ``sent``. The text carries the run tag, the sender, an index and
a ``time.monotonic_ns()`` stamp (system-wide on Linux, so valid across processes); the peer
measures delivery latency from it and counts losses and duplicates.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import json
import os
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


# ``--text negotiation``: the reference negotiator's messages over these held-out scenarios
# (bench.injections.benign, as the fence cell's ordinary pool), used in turn.
NEGOTIATION_SEEDS = range(1000, 1020)


def message_bodies(config: dict[str, Any]) -> list[str]:
    """What each message says after its bench prefix (run tag, sender, index, stamp), used in
    turn: ``filler``, x's up to ``text_bytes`` (the text costs the fence the least a text of
    that size can); ``negotiation``, the reference negotiator's own messages (a grammar line
    and a sentence in words, 64-277 characters each, ``text_bytes`` not used), which is what the
    fence reads in a real room. The relay forwards either without reading it."""
    if config.get("text", "filler") == "negotiation":
        from bench.injections.benign import negotiator_messages  # sets Django up: not timed

        return negotiator_messages(NEGOTIATION_SEEDS)
    return ["x" * max(0, config["text_bytes"] - 40)]


def say_frame(frame_id: str, text: str, ack: int | None = None) -> str:
    """A ``say`` frame as an agent sends it (docs/protocol.md), with the ``ack`` riding it if
    one is given."""
    body: dict[str, Any] = {"text": text} if ack is None else {"text": text, "ack": ack}
    return json.dumps({"v": 1, "type": "say", "id": frame_id, "body": body})


def ack_frame(seq: int) -> str:
    """An ``ack`` of everything up to ``seq`` (docs/protocol.md)."""
    return json.dumps({"v": 1, "type": "ack", "id": f"ack-{seq}", "body": {"seq": seq}})


def process_cpu_seconds(pid: int, *, main_thread: bool = False) -> float | None:
    """User + system CPU seconds of a process (all threads), or of its main thread alone
    (whose id is the process's), from ``/proc``; None if gone."""
    path = f"/proc/{pid}/task/{pid}/stat" if main_thread else f"/proc/{pid}/stat"
    try:
        fields = Path(path).read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def servers_cpu_seconds(config: dict[str, Any], *, main_thread: bool = False) -> float | None:
    """The CPU seconds of every server process a run's ``config`` names (``server_pids``,
    or the one ``server_pid``); None if there is none, or one is gone. ``main_thread``:
    only their main threads', where Daphne runs the event loop (the rest is the database
    threads' and any other pool's)."""
    pids = config.get("server_pids") or ([config["server_pid"]] if config.get("server_pid") else [])
    readings = [process_cpu_seconds(int(pid), main_thread=main_thread) for pid in pids]
    if not readings or None in readings:
        return None
    return sum(r for r in readings if r is not None)


class DatabaseCpu:
    """CPU seconds spent by the PostgreSQL backends serving the bench database (services
    profile; the backends run on this machine, so ``/proc`` has them). The server's own
    CPU leaves out the statements' cost on the database side, which shares the same cores.

    The backends are those in ``pg_stat_activity`` for the database at each reading, except
    the reader's own. One that exits between two readings loses its CPU from the figure (the
    servers keep theirs open: ``CONN_MAX_AGE``), so the figure is a floor."""

    def __init__(self) -> None:
        self.url = os.environ.get("DATABASE_URL") or None
        self._before: dict[int, float] = {}

    def _backends(self) -> dict[int, float]:
        import psycopg

        assert self.url is not None
        with psycopg.connect(self.url, autocommit=True, connect_timeout=5) as conn:
            pids = [
                int(row[0])
                for row in conn.execute(
                    "SELECT pid FROM pg_stat_activity "
                    "WHERE datname = current_database() AND pid <> pg_backend_pid()"
                )
            ]
        readings = {pid: process_cpu_seconds(pid) for pid in pids}
        return {pid: cpu for pid, cpu in readings.items() if cpu is not None}

    def start(self) -> None:
        if self.url is not None:
            self._before = self._backends()

    def seconds(self) -> float | None:
        """CPU seconds since ``start`` (None without a database to read)."""
        if self.url is None:
            return None
        after = self._backends()
        return sum(cpu - self._before.get(pid, 0.0) for pid, cpu in after.items())


def _spent(before: float | None, after: float | None) -> float | None:
    return after - before if before is not None and after is not None else None


def _per(total: float | None, count: int, unit: float = 1000.0) -> float | None:
    return total * unit / count if total is not None and count else None


@dataclass
class Client:
    """One socket: an agent of a room (or a relay peer)."""

    name: str
    url: str
    headers: dict[str, str]
    quota: int
    window: asyncio.Semaphore
    ws: ClientConnection | None = None
    peer: Client | None = None
    sent: int = 0  # frames written
    sending_done: bool = False
    confirmed: set[int] = field(default_factory=set)  # indices answered by `sent`
    duplicate_confirms: int = 0
    delivered: set[int] = field(default_factory=set)  # peer's indices received here
    duplicates: int = 0
    out_of_order: int = 0
    foreign: int = 0  # replayed from an earlier run (unacknowledged then)
    errors: list[str] = field(default_factory=list)
    last_seq: int = 0
    acked_seq: int = 0
    latencies_ms: list[float] = field(default_factory=list)
    last_delivery: float = 0.0
    all_in: asyncio.Event = field(default_factory=asyncio.Event)


class Run:
    """One measured run against one server."""

    def __init__(self, config: dict[str, Any]) -> None:
        self.config = config
        self.mode: str = config["mode"]  # "relay" | "synapsia"
        self.tag: str = config["tag"]
        self.window: int = config["window"]
        self.ack_every: int = config["ack_every"]
        self.bodies = message_bodies(config)
        self.clients: list[Client] = []
        per_socket = max(1, config["messages"] // (2 * len(config["rooms"])))
        for index, room in enumerate(config["rooms"]):
            pair = []
            for side in (0, 1):
                headers = {}
                if self.mode == "synapsia":
                    headers["Authorization"] = f"Bearer {room['tokens'][side]}"
                pair.append(
                    Client(
                        name=f"{index}{'ab'[side]}",
                        url=room["urls"][side],
                        headers=headers,
                        quota=per_socket,
                        window=asyncio.Semaphore(self.window),
                    )
                )
            pair[0].peer, pair[1].peer = pair[1], pair[0]
            self.clients.extend(pair)
        self.started = 0.0
        self.deadline = 0.0
        self.drained = False
        self.drain_s = 0.0
        self.database_cpu_s: float | None = None
        self.loop_cpu_s: float | None = None

    # --- connections ----------------------------------------------------------------------

    async def _open(self, client: Client, gate: asyncio.Semaphore) -> None:
        assert urlsplit(client.url).hostname == "127.0.0.1", "loopback only"
        async with gate:
            client.ws = await connect(
                client.url,
                additional_headers=client.headers,
                compression=None,
                max_size=2**20,
                open_timeout=20,
                ping_interval=None,
            )
            if self.mode == "synapsia":
                welcome = json.loads(await client.ws.recv())
                if welcome.get("type") != "welcome":
                    raise RuntimeError(f"{client.name}: expected welcome, got {welcome}")
                client.acked_seq = client.last_seq = welcome["body"]["acked_seq"]

    # --- the two halves of a socket -------------------------------------------------------

    async def _sender(self, client: Client) -> None:
        assert client.ws is not None
        for index in range(client.quota):
            remaining = self.deadline - time.monotonic()
            if remaining <= 0:
                break
            try:
                await asyncio.wait_for(client.window.acquire(), remaining)
            except TimeoutError:
                break
            body = self.bodies[index % len(self.bodies)]
            text = f"{self.tag}|{client.name}|{index}|{time.monotonic_ns()}|{body}"
            await client.ws.send(say_frame(f"{self.tag}-{index}", text))
            client.sent += 1
        client.sending_done = True
        if client.peer is not None and len(client.peer.delivered) >= client.sent:
            client.peer.all_in.set()

    def _delivered(self, client: Client, text: str) -> None:
        now = time.monotonic_ns()
        tag, sender, index_s, stamp, _ = text.split("|", 4)
        if tag != self.tag:
            client.foreign += 1
            return
        peer = client.peer
        assert peer is not None and sender == peer.name
        index = int(index_s)
        if index in client.delivered:
            client.duplicates += 1
            return
        client.delivered.add(index)
        client.latencies_ms.append((now - int(stamp)) / 1e6)
        client.last_delivery = time.monotonic()
        peer.window.release()
        if peer.sending_done and len(client.delivered) >= peer.sent:
            client.all_in.set()

    async def _receiver(self, client: Client) -> None:
        assert client.ws is not None
        with contextlib.suppress(ConnectionClosed):
            async for raw in client.ws:
                frame = json.loads(raw)
                kind = frame.get("type")
                if self.mode == "relay":
                    self._delivered(client, frame["body"]["text"])
                elif kind == "message":
                    seq = frame["body"]["seq"]
                    if seq != client.last_seq + 1:
                        client.out_of_order += 1
                    client.last_seq = max(client.last_seq, seq)
                    self._delivered(client, frame["body"]["text"])
                    if seq - client.acked_seq >= self.ack_every:
                        await self._ack(client)
                elif kind == "sent":
                    index = int(frame["body"]["ref"].rsplit("-", 1)[1])
                    if index in client.confirmed or frame["body"]["duplicate"]:
                        client.duplicate_confirms += 1
                    client.confirmed.add(index)
                elif kind == "error":
                    client.errors.append(f"{frame['body']['code']}: {frame['body']['message']}")

    def _receiver_ended(self, client: Client, task: asyncio.Task[None]) -> None:
        if not task.cancelled() and task.exception() is not None:
            client.errors.append(f"receiver crashed: {task.exception()!r}")

    async def _ack(self, client: Client) -> None:
        assert client.ws is not None
        client.acked_seq = client.last_seq
        await client.ws.send(ack_frame(client.last_seq))

    # --- the whole run ----------------------------------------------------------------------

    async def _progress(self) -> None:
        last, last_t = 0, time.monotonic()
        while True:
            await asyncio.sleep(2)
            now = time.monotonic()
            delivered = sum(len(c.delivered) for c in self.clients)
            rate = (delivered - last) / (now - last_t)
            print(
                f"  [{self.mode}] {now - self.started:5.1f}s delivered {delivered:6d} "
                f"({rate:6.0f} msg/s)",
                file=sys.stderr,
                flush=True,
            )
            last, last_t = delivered, now

    async def execute(self) -> dict[str, Any]:
        gate = asyncio.Semaphore(20)
        connect_start = time.monotonic()
        await asyncio.gather(*(self._open(c, gate) for c in self.clients))
        connect_s = time.monotonic() - connect_start
        receivers = [asyncio.create_task(self._receiver(c)) for c in self.clients]
        for client, task in zip(self.clients, receivers, strict=True):
            task.add_done_callback(functools.partial(self._receiver_ended, client))
        self.database_cpu = DatabaseCpu()
        self.database_cpu.start()
        cpu_before = servers_cpu_seconds(self.config)
        loop_before = servers_cpu_seconds(self.config, main_thread=True)
        own_before = time.process_time()
        self.started = time.monotonic()
        self.deadline = self.started + self.config["duration"]
        progress = asyncio.create_task(self._progress())
        await asyncio.gather(*(self._sender(c) for c in self.clients))
        sending_s = time.monotonic() - self.started
        drain_start = time.monotonic()
        self.drained = True
        try:
            await asyncio.wait_for(
                asyncio.gather(*(c.all_in.wait() for c in self.clients)), self.config["drain"]
            )
        except TimeoutError:
            self.drained = False
        self.drain_s = time.monotonic() - drain_start
        last_delivery = max((c.last_delivery for c in self.clients), default=self.started)
        cpu_after = servers_cpu_seconds(self.config)
        self.loop_cpu_s = _spent(loop_before, servers_cpu_seconds(self.config, main_thread=True))
        self.database_cpu_s = self.database_cpu.seconds()
        own_cpu = time.process_time() - own_before
        progress.cancel()
        if self.mode == "synapsia":
            # Leave nothing unacknowledged for the next run to replay.
            for c in self.clients:
                if c.last_seq > c.acked_seq:
                    await self._ack(c)
            await asyncio.sleep(0.2)
        for c in self.clients:
            assert c.ws is not None
            await c.ws.close()
        for task in receivers:
            task.cancel()
        return self._summary(connect_s, sending_s, last_delivery, cpu_before, cpu_after, own_cpu)

    def _summary(
        self,
        connect_s: float,
        sending_s: float,
        last_delivery: float,
        cpu_before: float | None,
        cpu_after: float | None,
        own_cpu: float,
    ) -> dict[str, Any]:
        sent = sum(c.sent for c in self.clients)
        delivered = sum(len(c.delivered) for c in self.clients)
        elapsed = max(last_delivery - self.started, 1e-9)
        latencies = sorted(x for c in self.clients for x in c.latencies_ms)

        def pct(p: float) -> float | None:
            if not latencies:
                return None
            return latencies[min(len(latencies) - 1, int(p / 100 * len(latencies)))]

        lost = 0
        unconfirmed = 0
        missing: list[str] = []
        for c in self.clients:
            assert c.peer is not None
            if self.mode == "synapsia":
                # Recorded (answered with `sent`) but never delivered to the peer: a loss.
                lost += len(c.confirmed - c.peer.delivered)
                unconfirmed += c.sent - len(c.confirmed)
            else:
                lost += c.sent - len(c.peer.delivered)
            gone = sorted(set(range(c.sent)) - c.peer.delivered)
            if gone:
                missing.append(f"{c.name}->{c.peer.name}: {gone[:10]} of {c.sent}")
        server_cpu = _spent(cpu_before, cpu_after)
        return {
            "mode": self.mode,
            "rooms": len(self.clients) // 2,
            "sockets": len(self.clients),
            "window": self.window,
            "ack_every": self.ack_every if self.mode == "synapsia" else None,
            "connect_s": round(connect_s, 3),
            "sending_s": round(sending_s, 3),
            "elapsed_s": round(elapsed, 3),
            "sent": sent,
            "delivered": delivered,
            "msg_per_s": delivered / elapsed,
            "latency_ms": {
                "p50": pct(50),
                "p95": pct(95),
                "p99": pct(99),
                "max": latencies[-1] if latencies else None,
                "mean": statistics.fmean(latencies) if latencies else None,
            },
            "lost": lost,
            "missing": missing[:10],
            "drained": self.drained,
            "drain_s": round(self.drain_s, 3),
            "duplicates": sum(c.duplicates for c in self.clients),
            "out_of_order": sum(c.out_of_order for c in self.clients),
            "unconfirmed": unconfirmed,
            "duplicate_confirms": sum(c.duplicate_confirms for c in self.clients),
            "replayed_from_earlier_runs": sum(c.foreign for c in self.clients),
            "errors": [e for c in self.clients for e in c.errors][:10],
            "server_cpu_s": server_cpu,
            "server_cpu_ms_per_msg": server_cpu * 1000 / delivered
            if server_cpu is not None and delivered
            else None,
            "server_loop_cpu_s": self.loop_cpu_s,
            "server_loop_cpu_ms_per_msg": _per(self.loop_cpu_s, delivered),
            "database_cpu_s": self.database_cpu_s,
            "database_cpu_ms_per_msg": _per(self.database_cpu_s, delivered),
            "loadgen_cpu_s": own_cpu,
        }


def _percentiles(values: list[float]) -> dict[str, float | None]:
    ordered = sorted(values)

    def pct(p: float) -> float | None:
        if not ordered:
            return None
        return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))]

    return {"p50": pct(50), "p95": pct(95), "p99": pct(99), "max": ordered[-1] if ordered else None}


async def _connect(
    url: str, headers: dict[str, str], synapsia: bool
) -> tuple[ClientConnection, int]:
    """A socket (past its welcome, for Synapsia) and the acked seq it was welcomed with."""
    assert urlsplit(url).hostname == "127.0.0.1", "loopback only"
    ws = await connect(
        url,
        additional_headers=headers,
        compression=None,
        max_size=2**20,
        open_timeout=60,
        ping_interval=None,
        close_timeout=2,
    )
    if not synapsia:
        return ws, 0
    welcome = json.loads(await ws.recv())
    if welcome.get("type") != "welcome":
        raise RuntimeError(f"{url}: expected welcome, got {welcome}")
    return ws, int(welcome["body"]["acked_seq"])


class TurnRun:
    """The turn an agent takes: ask for its context, say something, hear the peer's reply.

    In each room, agent A sends a ``context_request`` and waits for the ``context`` (the
    relay answers it itself, without a database: a request/response over the same socket),
    then says its message; agent B, on hearing it, replies at once; A's turn ends when the
    reply arrives, and the next turn starts. Every message is checked for loss and
    duplication as in the say run. Acknowledgements ride the next frame, as the SDK sends
    them (agents/client.py): B's reply carries B's ack of A's message, A's next
    ``context_request`` carries A's ack of B's reply, so a turn is three frames in
    (``context_request``, A's ``say``, B's ``say``), as on the relay; at the run's end each
    socket acknowledges what it still holds with an ``ack`` frame before it closes.
    """

    def __init__(self, config: dict[str, Any]) -> None:
        self.config = config
        self.synapsia = config["mode"] == "synapsia"
        self.tag: str = config["tag"]
        self.ask: list[str] = config.get("ask", [])
        self.bodies = message_bodies(config)
        self.context_ms: list[float] = []
        self.turn_ms: list[float] = []
        self.context_bytes: list[int] = []
        self.context_items: list[int] = []
        self.sent = 0
        self.delivered = 0
        self.duplicates = 0
        self.errors: list[str] = []

    def _headers(self, room: dict[str, Any], side: int) -> dict[str, str]:
        return {"Authorization": f"Bearer {room['tokens'][side]}"} if self.synapsia else {}

    async def _frames(
        self, ws: ClientConnection, want: str, seen: set[str], acked: list[int]
    ) -> dict[str, Any]:
        """The next frame of type ``want``; messages on the way are checked, and the highest
        seq heard kept in ``acked[1]`` (``acked[0]``: the highest acknowledged) for the
        socket's next frame to carry (``_ride``)."""
        while True:
            frame = json.loads(await ws.recv())
            kind = frame.get("type")
            if kind == "error":
                self.errors.append(f"{frame['body']['code']}: {frame['body']['message']}")
            if kind == "message" or (not self.synapsia and kind == "say"):
                text = frame["body"]["text"]
                # Synapsia fences the peer's text; the marker survives inside the fence.
                marker = text[text.index(self.tag) :].split("|", 3)[:3] if self.tag in text else []
                key = "|".join(marker)
                if key in seen:
                    self.duplicates += 1
                else:
                    seen.add(key)
                    self.delivered += 1
                if self.synapsia:
                    acked[1] = max(acked[1], int(frame["body"]["seq"]))
                if want == "message":
                    return frame
            elif kind == want:
                return frame

    @staticmethod
    def _ride(acked: list[int]) -> int | None:
        """The ack the socket's next frame carries (what it heard and has not acknowledged)."""
        if acked[1] <= acked[0]:
            return None
        acked[0] = acked[1]
        return acked[0]

    async def _connected(self, room: dict[str, Any]) -> tuple[Any, int, Any, int]:
        a, acked_a = await _connect(room["urls"][0], self._headers(room, 0), self.synapsia)
        b, acked_b = await _connect(room["urls"][1], self._headers(room, 1), self.synapsia)
        return a, acked_a, b, acked_b

    async def _room(self, index: int, sockets: tuple[Any, int, Any, int], deadline: float) -> None:
        a, acked_a, b, acked_b = sockets
        seen_a: set[str] = set()
        seen_b: set[str] = set()
        # Per socket: [highest acknowledged, highest heard].
        ack_a, ack_b = [acked_a, acked_a], [acked_b, acked_b]
        turn = 0
        try:
            while time.monotonic() < deadline and turn < self.config["turns_per_room"]:
                started = time.monotonic()
                request: dict[str, Any] = {
                    "v": 1,
                    "type": "context_request",
                    "id": f"{self.tag}-ctx-{index}-{turn}",
                    "body": {"ask": self.ask},
                }
                riding = self._ride(ack_a)
                if riding is not None:
                    request["body"]["ack"] = riding
                await a.send(json.dumps(request))
                context = await self._frames(a, "context", seen_a, ack_a)
                got_context = time.monotonic()
                self.context_ms.append((got_context - started) * 1000)
                self.context_bytes.append(len(json.dumps(context)))
                body = context.get("body") or {}
                if self.synapsia:
                    # What the turn cleared: a run that cleared fewer than the seeded items
                    # (a record run out, a refusal) is not the turn the cell claims to price.
                    self.context_items.append(
                        len(body.get("own_items") or []) + len(body.get("peer_items") or [])
                    )
                for ws, side, own in ((a, "a", ack_a), (b, "b", ack_b)):
                    body = self.bodies[(2 * turn + (side == "b")) % len(self.bodies)]
                    text = f"{self.tag}|{index}{side}|{turn}|{body}"
                    frame_id = f"{self.tag}-{index}{side}-{turn}"
                    await ws.send(say_frame(frame_id, text, self._ride(own)))
                    self.sent += 1
                    # The peer hears it (B hears A's message before it replies).
                    peer, seen, ack = (b, seen_b, ack_b) if side == "a" else (a, seen_a, ack_a)
                    await self._frames(peer, "message", seen, ack)
                self.turn_ms.append((time.monotonic() - started) * 1000)
                turn += 1
            # Nothing left unacknowledged: what rode no frame goes alone.
            for ws, own in ((a, ack_a), (b, ack_b)):
                last = self._ride(own)
                if last is not None:
                    await ws.send(ack_frame(last))
        finally:
            await a.close()
            await b.close()

    async def execute(self) -> dict[str, Any]:
        rooms = self.config["rooms"]
        # Every room's two sockets connect first, so the turns' figures (rate, server CPU per
        # turn) price turns, not connects (the idle cell prices those).
        connected = await asyncio.gather(
            *(self._connected(room) for room in rooms), return_exceptions=True
        )
        self.errors += [repr(c) for c in connected if isinstance(c, BaseException)]
        ready = [(i, c) for i, c in enumerate(connected) if not isinstance(c, BaseException)]
        database_cpu = DatabaseCpu()
        database_cpu.start()
        cpu_before = servers_cpu_seconds(self.config)
        loop_before = servers_cpu_seconds(self.config, main_thread=True)
        started = time.monotonic()
        deadline = started + self.config["duration"]
        done = await asyncio.gather(
            *(self._room(i, sockets, deadline) for i, sockets in ready),
            return_exceptions=True,
        )
        elapsed = time.monotonic() - started
        cpu_after = servers_cpu_seconds(self.config)
        loop_cpu_s = _spent(loop_before, servers_cpu_seconds(self.config, main_thread=True))
        database_cpu_s = database_cpu.seconds()
        # The server's CPU per turn: steadier than the rate on a shared machine, where the
        # rate is mostly how much of a core the server was given.
        server_cpu = _spent(cpu_before, cpu_after)
        self.errors += [repr(d) for d in done if isinstance(d, BaseException)]
        turns = len(self.turn_ms)
        return {
            "cell": "turn",
            "mode": self.config["mode"],
            "rooms": len(rooms),
            "turns": turns,
            "elapsed_s": round(elapsed, 3),
            "turns_per_s": turns / elapsed if elapsed else 0.0,
            "context_ms": _percentiles(self.context_ms),
            "turn_ms": _percentiles(self.turn_ms),
            "context_bytes_median": statistics.median(self.context_bytes)
            if self.context_bytes
            else None,
            "server_cpu_s": server_cpu,
            "server_cpu_ms_per_turn": server_cpu * 1000 / turns
            if server_cpu is not None and turns
            else None,
            "server_loop_cpu_s": loop_cpu_s,
            "server_loop_cpu_ms_per_turn": _per(loop_cpu_s, turns),
            "database_cpu_s": database_cpu_s,
            "database_cpu_ms_per_turn": _per(database_cpu_s, turns),
            "context_items_min": min(self.context_items) if self.context_items else None,
            "context_items_max": max(self.context_items) if self.context_items else None,
            "sent": self.sent,
            "delivered": self.delivered,
            "lost": self.sent - self.delivered,
            "duplicates": self.duplicates,
            "errors": self.errors[:10],
        }


def process_rss_mb(pid: int) -> float | None:
    """Resident memory of a process in MB, from ``/proc``; None if gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


class IdleRun:
    """N connected sockets doing nothing: how long they take to connect (at most ``gate``
    connecting at once), the server's resident memory, and the CPU it spends over a fixed
    idle window while they stay connected."""

    def __init__(self, config: dict[str, Any]) -> None:
        self.config = config
        self.synapsia = config["mode"] == "synapsia"

    async def execute(self) -> dict[str, Any]:
        pid = int(self.config["server_pid"])
        sockets = self.config["sockets"]  # [[url, token-or-null], ...]
        gate = asyncio.Semaphore(self.config.get("gate", 20))
        rss_before = process_rss_mb(pid)
        opened: list[ClientConnection] = []

        async def open_one(url: str, token: str | None) -> None:
            headers = {"Authorization": f"Bearer {token}"} if token else {}
            async with gate:
                ws, _ = await _connect(url, headers, self.synapsia)
            opened.append(ws)

        database_cpu = DatabaseCpu()
        database_cpu.start()
        cpu_start = process_cpu_seconds(pid)
        started = time.monotonic()
        results = await asyncio.gather(
            *(open_one(u, t) for u, t in sockets), return_exceptions=True
        )
        connect_s = time.monotonic() - started
        cpu_connect = process_cpu_seconds(pid)
        connect_database_cpu_s = database_cpu.seconds()
        errors = [repr(r) for r in results if isinstance(r, BaseException)]
        print(
            f"  [{self.config['mode']}] {len(opened)} sockets connected in {connect_s:.1f}s; "
            f"idle for {self.config['idle_s']:g}s",
            file=sys.stderr,
            flush=True,
        )
        await asyncio.sleep(self.config.get("settle_s", 2.0))
        cpu_before = process_cpu_seconds(pid)
        await asyncio.sleep(self.config["idle_s"])
        cpu_after = process_cpu_seconds(pid)
        rss = process_rss_mb(pid)
        # Whatever arrived while idle (nothing should): counted, then closed.
        unexpected = 0
        for ws in opened:
            with contextlib.suppress(TimeoutError, ConnectionClosed):
                while True:
                    await asyncio.wait_for(ws.recv(), 0.001)
                    unexpected += 1
        await asyncio.gather(*(ws.close() for ws in opened), return_exceptions=True)
        idle_cpu = _spent(cpu_before, cpu_after)
        return {
            "cell": "idle",
            "mode": self.config["mode"],
            "sockets": len(sockets),
            "connected": len(opened),
            "connect_s": round(connect_s, 3),
            "connect_cpu_s": cpu_connect - cpu_start
            if cpu_connect is not None and cpu_start is not None
            else None,
            "connect_database_cpu_s": connect_database_cpu_s,
            "idle_s": self.config["idle_s"],
            "idle_cpu_s": idle_cpu,
            "idle_cpu_share": idle_cpu / self.config["idle_s"] if idle_cpu is not None else None,
            "rss_before_mb": rss_before,
            "rss_mb": rss,
            "frames_while_idle": unexpected,
            "errors": errors[:10],
        }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--config", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    config = json.loads(args.config.read_text())
    # A hard stop well past the run's own bounds, in case a socket hangs.
    hard_limit = config["duration"] + config["drain"] + 120
    cell = config.get("cell", "say")
    runner: Run | TurnRun | IdleRun = (
        TurnRun(config) if cell == "turn" else IdleRun(config) if cell == "idle" else Run(config)
    )
    result = asyncio.run(asyncio.wait_for(runner.execute(), hard_limit))
    args.out.write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
