"""Limits on what one agent may ask of a room through its socket (docs/protocol.md, Limits).

Rates are token buckets kept in the process's memory, per agent and room, so a reconnect to
the same process does not refill them and the say path pays no statement for them. Each rate
is ``SYNAPSIA["SOCKET_RATES"][kind]`` in the REST API's ``count/period`` form (period ``s``,
``m``, ``h`` or ``d``; ``off`` for none): the bucket holds ``count`` and refills at
``count`` per period, so a burst of ``count`` is allowed and then ``count`` per period.

An agent that keeps running into a limit is looping, not negotiating: after
``LOOP_REFUSALS`` refusals within ``LOOP_WINDOW_SECONDS`` the socket raises a `loop` Signal
Flare for it (the room pauses for its owner) instead of letting it spin.

What the sockets take and refuse is counted for the operator (``frame_received``,
``rate_refused``, ``frame_refused``: ``synapsia_socket_frames_*`` in ``synapsia.metrics``), by
frame type and limit name only.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import ctypes
import functools
import time
import weakref
from dataclasses import dataclass, field
from typing import Any, Literal
from uuid import UUID

from django.conf import settings

from synapsia.metrics import SOCKET_FRAMES_RECEIVED, SOCKET_FRAMES_REFUSED
from synapsia_protocol import CLIENT_FRAME_TYPES

Kind = Literal["say", "context_request", "act", "grant_request"]
# The limits a frame can be refused by, as the metrics name them (docs/operations.md).
Limit = Literal[
    "say_rate", "context_rate", "context_turn", "act_rate", "grant_rate", "inbox", "send_buffer"
]
_RATE_LIMITS: dict[Kind, Limit] = {
    "say": "say_rate",
    "context_request": "context_rate",
    "act": "act_rate",
    "grant_request": "grant_rate",
}

_PERIODS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}

# Refusals within the window that make an agent a looping one (flared once per window).
LOOP_REFUSALS = 20
LOOP_WINDOW_SECONDS = 60.0
# Agents remembered per process; the least recently limited are forgotten first.
MAX_AGENTS_REMEMBERED = 10_000


@dataclass(frozen=True)
class Rate:
    count: int
    seconds: float


@functools.lru_cache(maxsize=64)
def rate_parse(text: str) -> Rate | None:
    """``"120/m"`` -> ``Rate(120, 60.0)``; ``"off"`` -> None. Raises ValueError otherwise.

    Kept per text (the setting's few values): every frame asks for its kind's rate, and the
    answer is the text's meaning, not a decision (the bucket still decides each frame)."""
    if text.strip().lower() == "off":
        return None
    count, _, period = text.partition("/")
    unit = period.strip().lower()[:1]
    if unit not in _PERIODS or not count.strip().isdigit() or int(count) < 1:
        raise ValueError(f"not a rate (count/period, or off): {text!r}")
    return Rate(int(count), _PERIODS[unit])


@dataclass
class _Bucket:
    tokens: float
    at: float

    def take(self, rate: Rate, now: float) -> float:
        """Take one token; 0.0 when taken, else the seconds until one is available."""
        self.tokens = min(rate.count, self.tokens + (now - self.at) * rate.count / rate.seconds)
        self.at = now
        if self.tokens >= 1:
            self.tokens -= 1
            return 0.0
        return (1 - self.tokens) * rate.seconds / rate.count


@dataclass
class AgentLimits:
    """One agent's buckets in one room, and the refusals that tell a loop."""

    buckets: dict[str, _Bucket] = field(default_factory=dict)
    refusals: collections.deque[float] = field(default_factory=collections.deque)
    flared_at: float | None = None
    # Context requests since the room last moved (``position``), and where it stood then.
    context_position: int = -1
    context_in_turn: int = 0

    def take(self, kind: Kind, now: float | None = None) -> float:
        """Spend one ``kind``; 0.0 if allowed, else the seconds to wait (a refusal)."""
        rate = rate_parse(settings.SYNAPSIA["SOCKET_RATES"][kind])
        if rate is None:
            return 0.0
        now = time.monotonic() if now is None else now
        bucket = self.buckets.get(kind)
        if bucket is None:
            bucket = self.buckets[kind] = _Bucket(float(rate.count), now)
        return bucket.take(rate, now)

    def wait(self, kind: Kind, now: float | None = None) -> float:
        """The seconds until one ``kind`` is available (0.0: now), spending nothing."""
        rate = rate_parse(settings.SYNAPSIA["SOCKET_RATES"][kind])
        bucket = self.buckets.get(kind)
        if rate is None or bucket is None:
            return 0.0
        now = time.monotonic() if now is None else now
        tokens = min(rate.count, bucket.tokens + (now - bucket.at) * rate.count / rate.seconds)
        return 0.0 if tokens >= 1 else (1 - tokens) * rate.seconds / rate.count

    def context_turn(self, position: int) -> bool:
        """Count a context request at room position ``position``; False when the agent has
        already had ``CONTEXT_REQUESTS_PER_TURN`` contexts since the room last moved (each
        one is a new turn that spends slip uses, for nothing new to read)."""
        if position != self.context_position:
            self.context_position, self.context_in_turn = position, 0
        if self.context_in_turn >= settings.SYNAPSIA["CONTEXT_REQUESTS_PER_TURN"]:
            return False
        self.context_in_turn += 1
        return True

    def refused(self, now: float | None = None) -> bool:
        """Record a refusal; True exactly when it makes the agent a looping one (once per
        window: the flare pauses the room, and a second one would be the same flare)."""
        now = time.monotonic() if now is None else now
        self.refusals.append(now)
        while self.refusals and self.refusals[0] < now - LOOP_WINDOW_SECONDS:
            self.refusals.popleft()
        if len(self.refusals) < LOOP_REFUSALS:
            return False
        if self.flared_at is not None and self.flared_at > now - LOOP_WINDOW_SECONDS:
            return False
        self.flared_at = now
        return True


class LimitsBook:
    """Every agent's limits in this process, so a reconnect does not reset them."""

    def __init__(self) -> None:
        self._agents: collections.OrderedDict[tuple[UUID, UUID], AgentLimits] = (
            collections.OrderedDict()
        )

    def of(self, room_id: UUID, agent_id: UUID) -> AgentLimits:
        key = (room_id, agent_id)
        limits = self._agents.get(key)
        if limits is None:
            limits = self._agents[key] = AgentLimits()
            while len(self._agents) > MAX_AGENTS_REMEMBERED:
                self._agents.popitem(last=False)
        else:
            self._agents.move_to_end(key)
        return limits


_books: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, LimitsBook] = (
    weakref.WeakKeyDictionary()
)


def limits_book() -> LimitsBook:
    """This event loop's book (one per Daphne process; one per test)."""
    loop = asyncio.get_running_loop()
    book = _books.get(loop)
    if book is None:
        book = _books[loop] = LimitsBook()
    return book


# Each label's series looked up once: ``labels()`` takes the metric's lock and builds its key
# on every call (py-spy, bench turn cell: 2% of the server's time, once per frame).
_FRAMES_RECEIVED = {
    kind: SOCKET_FRAMES_RECEIVED.labels(frame=kind) for kind in (*CLIENT_FRAME_TYPES, "unreadable")
}


def frame_received(frame: object) -> None:
    """Count a frame a socket took up for handling, by its type: a parsed client frame, or
    anything else (the ``FrameError`` parsing raised) as ``unreadable``."""
    kind = getattr(frame, "type", None)
    _FRAMES_RECEIVED[kind if kind in CLIENT_FRAME_TYPES else "unreadable"].inc()


def rate_refused(kind: Kind | None) -> None:
    """Count a frame refused by ``kind``'s rate, or (None) by the contexts allowed per turn."""
    frame_refused(_RATE_LIMITS[kind] if kind is not None else "context_turn")


def frame_refused(limit: Limit) -> None:
    """Count a frame refused by ``limit`` (``inbox``: the one that overflowed it;
    ``send_buffer``: the socket closed because its client did not read)."""
    SOCKET_FRAMES_REFUSED.labels(limit=limit).inc()


def send_backlog(send: Any) -> int | None:
    """Bytes written to a socket's connection that its client has not taken yet, where the
    server is Daphne: its ASGI ``send`` is bound to the connection's protocol, whose Twisted
    transport buffers what the kernel would not accept (``FileDescriptor``'s write buffer).
    None under any other server (the test communicator): nothing to measure there."""
    args = getattr(send, "args", None)
    if not args:
        return None
    transport = getattr(args[0], "transport", None)
    buffered = getattr(transport, "dataBuffer", None)
    if buffered is None:
        return None
    return (
        len(buffered)
        - int(getattr(transport, "offset", 0))
        + int(getattr(transport, "_tempDataLen", 0))
    )


# Over the send buffer's limit right after a write may be a burst of the server's own (a
# reconnect's backlog of up to 500 messages, a backfill) that the transport has not had a turn
# to hand to the kernel yet: a client is a slow reader only when it leaves that much unread
# this long. Meanwhile the socket's sender waits, so the buffer stays within the limit plus a
# frame per sender.
SEND_STALL_SECONDS = 5.0


def send_buffer_over(send: Any) -> bool:
    """Whether the socket's connection holds more than ``SOCKET_SEND_BUFFER_MAX_BYTES``
    unread right now (``send_buffer_stalled`` then waits to see if the client takes it)."""
    backlog = send_backlog(send)
    return backlog is not None and backlog > settings.SYNAPSIA["SOCKET_SEND_BUFFER_MAX_BYTES"]


async def send_buffer_stalled(send: Any, *, closed: Any) -> int | None:
    """The bytes still unread once the client had ``SEND_STALL_SECONDS`` to take the buffer
    below ``SOCKET_SEND_BUFFER_MAX_BYTES``; None when it did (or nothing can be measured, or
    ``closed()`` says the socket was closed meanwhile)."""
    limit = settings.SYNAPSIA["SOCKET_SEND_BUFFER_MAX_BYTES"]
    backlog = send_backlog(send)
    deadline = time.monotonic() + SEND_STALL_SECONDS
    while backlog is not None and backlog > limit:
        if time.monotonic() >= deadline:
            return backlog
        await asyncio.sleep(0.05)  # the reactor writes to the kernel meanwhile
        if closed():
            return None
        backlog = send_backlog(send)
    return None


# glibc keeps the pages a slow reader's buffer is freed to (bench.slowreader: of the 57-85 MB
# ten slow readers' floods added, 47-72 MB stayed resident after their closes, 26-34 MB of it
# given back by one trim in 2-3 ms of the loop). The buffer goes with the connection, which
# Daphne drops when the close handshake times out (1 s) and then reaps: one trim for a wave,
# TRIM_DELAY_SECONDS after its last close (each close moves it later), and never more than
# TRIM_WAIT_MAX_SECONDS after the wave's first.
TRIM_DELAY_SECONDS = 3.0
TRIM_WAIT_MAX_SECONDS = 30.0


@dataclass
class _Trim:
    handle: asyncio.TimerHandle
    first: float


_trims: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Trim] = weakref.WeakKeyDictionary()


def _malloc_trim() -> None:
    """Give the allocator's free pages back to the system (glibc's ``malloc_trim``; nothing
    where there is no glibc)."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)


def trim_after_slow_reader() -> None:
    """Trim the allocator ``TRIM_DELAY_SECONDS`` from now, on this event loop; a pending trim
    is moved later (a wave of closes gets one trim, after its last), up to
    ``TRIM_WAIT_MAX_SECONDS`` after the first close it waits for."""
    loop = asyncio.get_running_loop()
    now = loop.time()
    pending = _trims.get(loop)
    first = now
    if pending is not None and not pending.handle.cancelled() and pending.handle.when() > now:
        if now - pending.first > TRIM_WAIT_MAX_SECONDS:
            return  # the pending trim stays where it is
        pending.handle.cancel()
        first = pending.first

    def trim() -> None:
        _trims.pop(loop, None)
        _malloc_trim()

    _trims[loop] = _Trim(loop.call_later(TRIM_DELAY_SECONDS, trim), first)
