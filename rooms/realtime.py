"""Telling connected sockets about changes, through the channel layer.

The channel layer is a doorbell, not the record: events may be lost (see ARCHITECTURE.md's
pitfalls), so every event a consumer acts on can be re-derived from the database. Events
about writes are sent only after the transaction commits, so nobody hears of a rolled-back
change. A layer that fails (Redis down) is logged and otherwise ignored: the change it would
announce has already committed, and must neither be undone nor reported to the caller as a
failure.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import datetime as dt
import hashlib
import logging
import os
import time
import weakref
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Protocol
from uuid import UUID

from asgiref.sync import async_to_sync
from channels import layers as _channels_layers
from channels.db import database_sync_to_async
from channels.exceptions import ChannelFull
from channels.layers import InMemoryChannelLayer, get_channel_layer
from django.conf import settings
from django.db import transaction
from django.utils import timezone
from prometheus_client import Gauge, Histogram

from synapsia.metrics import REGISTRY

if TYPE_CHECKING:  # rooms.standing imports the models; the sweep imports it when it runs
    from rooms.standing import RecordMark

logger = logging.getLogger(__name__)

# In-process (per Daphne process; sum them): sockets admitted and not yet gone, by who holds
# them. Labels are the two kinds only, never a room or an agent.
SOCKETS_CONNECTED = Gauge(
    "synapsia_sockets_connected",
    "Room sockets connected to this process, by participant kind (agent or owner).",
    ["participant"],
    registry=REGISTRY,
)
for _kind in ("agent", "owner"):
    SOCKETS_CONNECTED.labels(participant=_kind).set(0)

# In-process, and only where ``SYNAPSIA_SAY_DESK_TIMING=1`` (the benchmark sets it; the series
# are not in docs/operations.md's table): where the wall time of a say desk hop
# (rooms.consumers.SayDesk) goes. "queued": from the hop's hand-off to the thread pool until
# its work starts on the thread (the pool's queue, the GIL, the connection sweep before it);
# "run": the work on the thread, of which "cpu" is the thread's own CPU; "answered": from the
# work's end until the event loop takes the answer (the sweep after it, the loop's queue).
SAY_DESK_TIMING = os.environ.get("SYNAPSIA_SAY_DESK_TIMING") == "1"
SAY_DESK_HOP_SECONDS = Histogram(
    "synapsia_say_desk_hop_seconds",
    "Say desk hops: seconds by phase (queued, run, cpu, answered).",
    ["phase"],
    registry=REGISTRY if SAY_DESK_TIMING else None,
    buckets=(0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 1.0),
)
SAY_DESK_HOP_FRAMES = Histogram(
    "synapsia_say_desk_hop_frames",
    "Say desk hops: the frames one hop answered (says, acks and standing checks).",
    registry=REGISTRY if SAY_DESK_TIMING else None,
    buckets=(1, 2, 4, 8, 16, 32, 64, 128),
)


def say_desk_hop_observed(
    *, handed: float, started: float, cpu: float, ended: float, answered: float, frames: int
) -> None:
    """Record one say desk hop's phases (monotonic seconds; ``cpu`` is thread CPU seconds)."""
    if not SAY_DESK_TIMING:
        return
    SAY_DESK_HOP_SECONDS.labels(phase="queued").observe(max(0.0, started - handed))
    SAY_DESK_HOP_SECONDS.labels(phase="run").observe(max(0.0, ended - started))
    SAY_DESK_HOP_SECONDS.labels(phase="cpu").observe(max(0.0, cpu))
    SAY_DESK_HOP_SECONDS.labels(phase="answered").observe(max(0.0, answered - ended))
    SAY_DESK_HOP_FRAMES.observe(frames)


# An event's key naming the one member channel that need not get it: the sender, which has
# already done what the event would make it do (``RoomConsumer._announce``). The in-memory
# layer leaves it out; any other layer delivers it, and the sender finds it handled.
SKIP_CHANNEL = "skip_channel"


class SweptInMemoryChannelLayer(InMemoryChannelLayer):
    """The embedded profile's layer: channels' in-memory layer, its expiry sweep run at most
    once per ``EXPIRY_SWEEP_SECONDS``.

    Channels sweeps every channel and group of the process for expired messages and
    memberships on every ``receive`` and ``group_send``: with a room socket's two groups
    and a few events per turn, that scan was most of the layer's CPU (py-spy, bench turn
    cell). Messages expire after a minute and memberships after a day, so a sweep a second
    ends them within a second of their time; what the bell would have said is in the record
    anyway (the sockets' record sweep).
    """

    EXPIRY_SWEEP_SECONDS = 1.0
    _swept_at = float("-inf")

    def _clean_expired(self) -> None:
        now = time.monotonic()
        if now - self._swept_at < self.EXPIRY_SWEEP_SECONDS:
            return
        self._swept_at = now
        super()._clean_expired()

    # Channels' own ``send``, ``receive`` and ``group_send`` with the same checks and the same
    # outcome, without what their per-event cost was made of (py-spy, the say cell): a new
    # ``asyncio.Queue`` built on every call even when the channel has one (``setdefault``'s
    # argument), a task per member and ``asyncio.as_completed`` per ``group_send`` (each send
    # is a ``put_nowait`` that never waits), and a generic ``deepcopy`` per member.

    def _queue(self, channel: str) -> asyncio.Queue[Any]:
        queue = self.channels.get(channel)
        if queue is None:
            queue = self.channels[channel] = asyncio.Queue(maxsize=self.get_capacity(channel))
        return queue

    def _put(self, channel: str, message: dict[str, Any]) -> None:
        # Stamped on channels' own clock, which its expiry sweep reads.
        stamped = (_channels_layers.time.time() + self.expiry, _copied(message))
        try:
            self._queue(channel).put_nowait(stamped)
        except asyncio.QueueFull:
            raise ChannelFull(channel) from None

    async def send(self, channel: str, message: dict[str, Any]) -> None:
        assert isinstance(message, dict), "message is not a dict"
        self.require_valid_channel_name(channel)
        assert "__asgi_channel__" not in message
        self._put(channel, message)

    async def receive(self, channel: str) -> dict[str, Any]:
        self.require_valid_channel_name(channel)
        self._clean_expired()
        queue = self._queue(channel)
        try:
            _, message = await queue.get()
        finally:
            if queue.empty():
                self.channels.pop(channel, None)
        return message

    async def group_send(self, group: str, message: dict[str, Any]) -> None:
        assert isinstance(message, dict), "Message is not a dict"
        self.require_valid_group_name(group)
        assert "__asgi_channel__" not in message
        self._clean_expired()
        skip = message.get(SKIP_CHANNEL)
        # Every member's name was checked when it joined (``group_add``); a full channel
        # misses the event, as with channels' own (the record sweep reads it back).
        for channel in list(self.groups.get(group, ())):
            if channel != skip:
                with contextlib.suppress(ChannelFull):
                    self._put(channel, message)


_IMMUTABLE = frozenset({str, int, float, bool, bytes, type(None)})


def _copied(value: Any) -> Any:
    """A deep copy of a channel-layer event (``deepcopy``'s result, each receiver its own),
    made directly for what events are made of (dicts, lists and JSON scalars); anything
    else goes through ``deepcopy``."""
    kind = type(value)
    if kind in _IMMUTABLE:
        return value
    if kind is dict:
        return {key: _copied(item) for key, item in value.items()}
    if kind is list:
        return [_copied(item) for item in value]
    return copy.deepcopy(value)


def room_group(room_id: UUID) -> str:
    return f"room.{room_id.hex}"


# An event for one agent's socket in one room goes through that room's group and names the
# agent here: every socket of the room gets it and only that agent's acts on it. A group per
# agent cost every agent socket a second subscription on the Redis layer (a SUBSCRIBE at
# connect, an UNSUBSCRIBE at close), and it spanned the agent's rooms, so an event meant for
# one room's socket (replaced, blocked) reached its sockets in every room.
FOR_AGENT = "for_agent"


def _send_after_commit(group: str, event: dict[str, Any]) -> None:
    layer = get_channel_layer()
    if layer is None:
        return

    def send() -> None:
        try:
            async_to_sync(layer.group_send)(group, event)
        except Exception:
            # Raised from an on_commit hook it would reach the caller after the decision
            # committed (a recorded pause or execution reported as an error) and skip later
            # hooks. Sockets catch up from the database instead.
            logger.warning("channel layer unavailable: %s not told of %s", group, event["type"])

    transaction.on_commit(send)


def announce_room_state(room_id: UUID, state: str) -> None:
    _send_after_commit(room_group(room_id), {"type": "room.state", "state": state})


def _to_agent(room_id: UUID, agent_id: UUID, event: dict[str, Any]) -> None:
    _send_after_commit(room_group(room_id), {**event, FOR_AGENT: agent_id.hex})


def announce_action_result(*, room_id: UUID, agent_id: UUID, ref: str) -> None:
    """The agent's action ``ref`` changed (its grant was decided): the socket re-reads it."""
    _to_agent(room_id, agent_id, {"type": "action.result", "ref": ref})


def announce_slip_key_revoked(*, affected: list[tuple[UUID, UUID]], **_: object) -> None:
    """``slips.signals.key_revoked`` receiver (sent after the revocation committed): tell each
    affected agent's sessions, which then re-check whether anything still clears them."""
    for room_id, agent_id in affected:
        # Already after commit, so this sends at once (and, like every announcement, a layer
        # failure is logged rather than raised into the revocation that already happened).
        _to_agent(room_id, agent_id, {"type": "slip.key_revoked"})


def announce_whisper(*, agent_id: UUID, room_id: UUID, whisper_id: UUID) -> None:
    """Ids only (a doorbell): the agent's socket re-reads the whisper from the record and
    checks it is for this room and this agent before sending it."""
    _to_agent(room_id, agent_id, {"type": "agent.whisper", "whisper_id": whisper_id.hex})


def announce_outcome(room_id: UUID) -> None:
    """The room's outcome changed (``rooms.outcomes``): its owners' pages read it again."""
    _send_after_commit(room_group(room_id), {"type": "room.outcome"})


def announce_recorded(room_id: UUID) -> None:
    """Messages were recorded outside any socket: every socket reads the record again."""
    _send_after_commit(room_group(room_id), {"type": "room.catch_up"})


def announce_agent_blocked(*, room_id: UUID, agent_id: UUID) -> None:
    """Its owner blocked the agent at a Signal Flare: its socket in the room is closed."""
    _to_agent(room_id, agent_id, {"type": "agent.blocked"})


def announce_grant_expired(*, room_id: UUID, agent_id: UUID, ref: str, **_: object) -> None:
    """``gatekeeper.signals.grant_expired`` receiver: the agent learns its action's end."""
    announce_action_result(room_id=room_id, agent_id=agent_id, ref=ref)


def owner_group(owner_id: int) -> str:
    """The group of one owner's browser sockets, in every room (agents' sockets never join
    it): how a sign-out, a password change or a deactivation reaches that owner's open tabs."""
    return f"owner.{int(owner_id)}"


def session_digest(session_key: str) -> str:
    """What an event says of a session: its key's digest, never the key (a credential)."""
    return hashlib.sha256(session_key.encode()).hexdigest()


# The owner-sockets event: each socket re-reads its session (``rooms.standing``) and closes
# if it no longer signs its owner in; ``SESSION_ENDED`` names a session known to be ending.
OWNER_SESSION_CHECK = "owner.session_check"
SESSION_ENDED = "ended"


def announce_owner_sessions(owner_id: int, *, ended_session: str | None = None) -> None:
    """The owner signed out, changed their password, or was deactivated or deleted: their
    browser sockets re-check their sessions now, rather than at their next delivery or sweep
    (each would find it too: this only hurries it). ``ended_session``: the key of a session
    being signed out, whose sockets close at once (the sign-out's event is sent before its
    row is deleted, so a re-read could still find it)."""
    event: dict[str, Any] = {"type": OWNER_SESSION_CHECK}
    if ended_session:
        event[SESSION_ENDED] = session_digest(ended_session)
    _send_after_commit(owner_group(owner_id), event)


def announce_agent_revoked(agent_id: UUID, *, room_ids: Iterable[UUID]) -> None:
    """The agent's token stopped working (revoked, or rotated: the sockets opened with the old
    one): its sockets in ``room_ids`` (every room it holds a seat in) are closed. Only a
    hurry: each hop of such a socket compares its token with the agent's anyway
    (``rooms.standing``), so a lost announcement still closes it at its next hop or sweep."""
    for room_id in room_ids:
        _to_agent(room_id, agent_id, {"type": "agent.revoked"})


# --- the record sweep: one per process, for every connected socket -----------------------


class Listener(Protocol):
    """A connected socket as the sweep sees it: how far it has read, how to wake it, how to
    tell it the standing the sweep read for its reader, and (an owner's browser) the session
    it was admitted with, as (owner, session key)."""

    position: int

    @property
    def owner_session(self) -> tuple[int, str] | None:
        """An owner's browser: its (owner, session key); an agent's socket: None."""

    def wake(self) -> None:
        """Read the record past ``position`` (the bell for something was lost)."""

    def swept(self, seats: list[Any], sessions: Any) -> None:
        """The room's seats and the watched owners' sessions as this sweep read them: close
        if out of standing."""


class RecordSweep:
    """The safety net under the bell: one task per process (event loop) for all its sockets.

    A socket learns of new messages from the room's channel-layer event, never by polling,
    so an idle socket costs no query. Events can be lost (a full channel, a reconnect), so
    every ``CATCH_UP_SECONDS / 2`` one statement reads the latest seq of every room with a
    socket here, and a socket still behind the seq the *previous* sweep saw is woken: it read
    nothing for at least one sweep interval after that message committed, so its bell was
    lost (a socket merely waiting for an event in flight is left alone). Whatever was lost
    is read back within ``CATCH_UP_SECONDS``, from the record, once (the socket's position
    decides what it has handled). The same statement reads each room's seats (with each
    seated agent's revocation and current token digest), so a socket whose reader lost its
    standing, or whose token was rotated since it opened, is closed within a sweep even when
    its close announcement was lost and nothing is said. Where owners' browsers are watching, the
    same hop reads their sessions too (one more statement), so a tab whose session ended
    (signed out, password changed, deactivated, the row deleted) is closed within a sweep
    even when the owner's event was lost and the room is silent.

    When the database shows that nothing was committed since the previous sweep's reading
    (the record's mark, ``rooms.standing.record_mark``) and no socket was watched since,
    that reading is still the record's and every socket here was judged against it: the
    statement is not run, and the sockets a lost bell left behind are woken as above. An
    idle process then costs one small statement a sweep, whatever the number of its sockets.
    A session that ends by time commits nothing, so the sweep reads in full once the
    earliest expiry of the sessions it read is due.
    """

    def __init__(self) -> None:
        self._rooms: dict[UUID, set[Listener]] = {}
        self._seen: dict[UUID, int] = {}
        # The previous reading's mark, and whether a socket was watched since it began
        # (one the reading may not have judged).
        self._mark: RecordMark | None = None
        self._watched_since = True
        # The seated agents' ids as the last sweep read them, with their UUIDs: parsed once,
        # not on every sweep (rooms.standing.rooms_swept).
        self._agent_ids: dict[Any, UUID] = {}
        # The earliest expiry among the owners' sessions the last reading read: due, the
        # next sweep reads in full though nothing was committed.
        self._sessions_expire_at: dt.datetime | None = None
        self._task: asyncio.Task[None] | None = None
        # A process-wide count of sweeps, for tests and the benchmark's idle cell.
        self.sweeps = 0

    def watch(self, room_id: UUID, listener: Listener) -> None:
        listeners = self._rooms.get(room_id)
        if listeners is None:
            listeners = self._rooms[room_id] = set()
            # The room is served here from now on, until ``unwatch`` lets its last socket go:
            # only meanwhile may this process keep what its texts clean to.
            from rooms.context import peer_message_memo_serve  # context imports realtime

            peer_message_memo_serve(room_id)
        listeners.add(listener)
        self._watched_since = True
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run())

    def unwatch(self, room_id: UUID, listener: Listener) -> None:
        listeners = self._rooms.get(room_id)
        if listeners is None:
            return
        listeners.discard(listener)
        if not listeners:
            del self._rooms[room_id]
            self._seen.pop(room_id, None)
            # No socket here serves the room any more (deleting it closes them all): what
            # this process keeps of its texts goes too.
            from rooms.context import peer_message_memo_forget  # context imports realtime

            peer_message_memo_forget(room_id)

    async def _run(self) -> None:
        with contextlib.suppress(asyncio.CancelledError):
            while self._rooms:
                await asyncio.sleep(settings.SYNAPSIA["CATCH_UP_SECONDS"] / 2)
                try:
                    await self.sweep()
                except Exception:
                    # The next sweep tries again; the bell still rings meanwhile.
                    logger.exception("record sweep failed")
        self._task = None

    async def sweep(self) -> None:
        """One pass: the record's mark and one statement (or, the record unchanged, the mark
        alone), then wake the sockets a lost bell left behind."""
        room_ids = list(self._rooms)
        if not room_ids:
            return
        from rooms.standing import rooms_swept  # standing imports models; keep it lazy

        engine = settings.DATABASES["default"]["ENGINE"]
        expiry_due = (
            self._sessions_expire_at is not None and timezone.now() >= self._sessions_expire_at
        )
        since = None if self._watched_since or expiry_due else self._mark
        self._watched_since = False  # a socket watched from here on sets it again
        # The owners' browsers watching now, each by the session it was admitted with.
        sessions = {
            pair
            for listeners in self._rooms.values()
            for listener in listeners
            if (pair := listener.owner_session) is not None
        }
        try:
            swept = await database_sync_to_async(
                rooms_swept, thread_sensitive=engine.endswith("sqlite3")
            )(room_ids, self._agent_ids, since, sessions)
        except BaseException:
            self._watched_since = True  # nothing judged: the next sweep reads in full
            raise
        self.sweeps += 1
        if swept.unchanged:
            for room_id, watching in list(self._rooms.items()):
                self._wake_behind(watching, self._seen.get(room_id))
            return
        self._mark, self._agent_ids = swept.mark, swept.agent_ids
        self._sessions_expire_at = min(
            (f.expires_at for f in swept.sessions.values() if f and f.expires_at), default=None
        )
        for room_id in room_ids:
            listeners = self._rooms.get(room_id)
            if not listeners:
                continue
            room_seats = swept.seats.get(room_id, [])
            previous = self._seen.get(room_id)
            if room_id in swept.latest:
                self._seen[room_id] = swept.latest[room_id]
            for listener in list(listeners):
                # The same statement read every reader's standing: one that lost it (its
                # close announcement lost too) is closed even while nothing is said.
                listener.swept(room_seats, swept.sessions)
            self._wake_behind(listeners, previous)

    @staticmethod
    def _wake_behind(listeners: set[Listener], previous: int | None) -> None:
        """Wake the sockets still behind the seq the previous reading saw: their bell for
        it was lost (one merely waiting for an event in flight is left alone)."""
        if previous is None:
            return
        for listener in list(listeners):
            if listener.position < previous:
                listener.wake()


_sweeps: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, RecordSweep] = (
    weakref.WeakKeyDictionary()
)


def record_sweep() -> RecordSweep:
    """This event loop's sweep (Daphne runs one loop per process; tests one per test)."""
    loop = asyncio.get_running_loop()
    sweep = _sweeps.get(loop)
    if sweep is None:
        sweep = _sweeps[loop] = RecordSweep()
    return sweep


# --- pausing a room once the database answers again ---------------------------------------

# How often a process retries what an outage kept it from recording.
OUTAGE_RETRY_SECONDS = 1.0


class OutageDesk:
    """What a socket could not record while the database did not answer, recorded once it
    answers: the room paused (``gatekeeper.database_error``, the safe direction) and the
    agent's leave. One retry task per process, for every room waiting."""

    def __init__(self) -> None:
        self._rooms: dict[UUID, set[UUID]] = {}
        self._task: asyncio.Task[None] | None = None

    def pause_when_answering(self, room_id: UUID, *, leaving_agent: UUID | None) -> None:
        leaving = self._rooms.setdefault(room_id, set())
        if leaving_agent is not None:
            leaving.add(leaving_agent)
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run())

    def waiting(self) -> set[UUID]:
        return set(self._rooms)

    async def _run(self) -> None:
        engine = settings.DATABASES["default"]["ENGINE"]
        record = database_sync_to_async(_record_outage, thread_sensitive=engine.endswith("sqlite3"))
        with contextlib.suppress(asyncio.CancelledError):
            while self._rooms:
                await asyncio.sleep(OUTAGE_RETRY_SECONDS)
                for room_id in list(self._rooms):
                    try:
                        await record(room_id, sorted(self._rooms[room_id]))
                    except Exception as failed:  # still down: the next round tries again
                        logger.warning(
                            "room %s: still cannot record the outage (%s)", room_id, failed
                        )
                        continue
                    del self._rooms[room_id]
        self._task = None


def _record_outage(room_id: UUID, leaving: list[UUID]) -> None:
    from rooms.models import Room  # models' neighbours import this module; keep it lazy
    from rooms.pausing import room_pause_fail_safe
    from rooms.services import agent_leave

    # One transaction: the pause and the leaves are on record together, and the room's
    # "paused" announcement (sent on commit) never reaches a socket before the leaves are.
    with transaction.atomic():
        if not Room.objects.filter(id=room_id).exists():
            return  # deleted meanwhile: nothing left to pause
        room_pause_fail_safe(room_id=room_id, rule="gatekeeper.database_error")
        for agent_id in leaving:
            agent_leave(room_id=room_id, agent_id=agent_id)


_outages: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, OutageDesk] = (
    weakref.WeakKeyDictionary()
)


def outage_desk() -> OutageDesk:
    """This event loop's outage desk (one per Daphne process; one per test)."""
    loop = asyncio.get_running_loop()
    desk = _outages.get(loop)
    if desk is None:
        desk = _outages[loop] = OutageDesk()
    return desk
