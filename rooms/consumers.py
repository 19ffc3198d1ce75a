"""The room socket: an adapter between the wire protocol and ``rooms.services``.

Delivery is ordered and exactly-once per socket: ``position`` is the highest room sequence
number this socket has handled (delivered, or its own message), and every message is
delivered in sequence. The channel layer only rings the bell; when an event skips ahead, or
when the process's record sweep (``realtime.RecordSweep``) finds the socket left behind by a
lost bell, the socket reads the gap back from the database. An idle socket issues no query.

Nothing reaches a socket on the word of a channel-layer event alone: each delivery hop (live
messages, a catch-up read, a whisper, an action's outcome, a reveal) re-reads its reader's
standing from the record first (``rooms.standing``), and a reader out of standing is closed
with the documented code instead. An agent's socket is a reader only while the token it was
admitted with is still its agent's (``Participant.token_digest``): the same statement reads
the agent's current token digest, and every frame it sends is decided with it too (``_token``:
`say`, `context_request`, `ack`, `act`, `seal_offer`, `flare`, each compared in the statement
or row its service already reads): a rotated token's socket is given nothing more, records
nothing, runs nothing, is disclosed nothing, and is closed with 4401 at its next delivery,
frame or record sweep, even when the ``agent.revoked`` announcement is lost. An owner's
browser is a reader only while the session it was admitted with still signs its owner in:
that hop reads the session too, and a sign-out, a password change or a deactivation also
tells the owner's sockets at once (``owner_session_check``). Every input is bounded
(``rooms.limits``), and every failure ends in an ``error`` frame and a close code of the
documented table, never a mute socket (docs/protocol.md).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import contextvars
import functools
import logging
import os
import time
import weakref
from collections.abc import Awaitable, Callable, Mapping
from concurrent.futures import Executor
from datetime import datetime
from types import MappingProxyType
from typing import Any, TypeVar
from uuid import UUID

from asgiref.sync import AsyncToSync, SyncToAsync
from channels.consumer import get_handler_name
from channels.exceptions import StopConsumer
from channels.generic.websocket import AsyncWebsocketConsumer
from channels.layers import InMemoryChannelLayer, get_channel_layer
from django.conf import settings
from django.contrib.auth.models import AnonymousUser
from django.db import Error as DatabaseError
from django.db import close_old_connections, connections, transaction
from django.utils import timezone

from gatekeeper.actions import ActionResult, action_result_lookup
from gatekeeper.records import ActionStatus
from rooms import (
    context,
    flares,
    forks,
    handshake,
    limits,
    realtime,
    sealed,
    selectors,
    services,
    standing,
    untrusted,
)
from rooms.handshake import Admission, Participant, Refusal
from rooms.models import FlareReason, Message, RoomState, Whisper
from rooms.protocol import (
    AckFrame,
    ActFrame,
    ActionResultBody,
    ActionResultFrame,
    CloseCode,
    ContextFrame,
    ContextRequestFrame,
    EmptyBody,
    ErrorCode,
    FlareFrame,
    FrameError,
    MessageBody,
    NoticeBody,
    NoticeFrame,
    OfferPlan,
    OffersRevealedBody,
    OffersRevealedFrame,
    PingFrame,
    PongFrame,
    RevealedOffer,
    RoomStateBody,
    RoomStateFrame,
    RoomSummary,
    SayFrame,
    SealOfferFrame,
    SentBody,
    WelcomeBody,
    WelcomeFrame,
    WhisperBody,
    WhisperFrame,
    error_frame,
    frame_json,
    new_frame_id,
    parse_client_frame,
    welcome_json,
)
from slips.selectors import slip_in_force
from synapsia.logs import correlated
from synapsia_protocol.codes import retry_hint

T = TypeVar("T")

try:  # Daphne's WebSocket server (autobahn): a send once the client's close has begun
    from autobahn.exception import Disconnected

    _CLIENT_GONE: tuple[type[BaseException], ...] = (Disconnected,)
except ImportError:  # pragma: no cover
    _CLIENT_GONE = ()

try:  # the production profile's channel layer (Redis); absent in a minimal install
    from redis.exceptions import RedisError

    _LAYER_ERRORS: tuple[type[BaseException], ...] = (OSError, RedisError)
except ImportError:  # pragma: no cover
    _LAYER_ERRORS = (OSError,)

# What each limit's refusal says (docs/protocol.md, Limits).
_RATE_REFUSALS: dict[limits.Kind, tuple[ErrorCode, str]] = {
    "say": (ErrorCode.SAY_RATE_LIMITED, "Too many messages."),
    "context_request": (ErrorCode.CONTEXT_RATE_LIMITED, "Too many context requests."),
    "act": (ErrorCode.ACT_RATE_LIMITED, "Too many actions."),
    "grant_request": (ErrorCode.GRANT_RATE_LIMITED, "Too many requests for your owner's grant."),
}
OWNER_BACKLOG = 200
# Most consecutive queued `say` frames recorded in one hop and one transaction.
SAY_RUN_MAX = 32

logger = logging.getLogger(__name__)


# A connection whose last statement ran this recently is not health-checked again at the
# start of the next hop; one idle longer is (``_Hop``).
HEALTH_CHECK_AFTER_IDLE_S = 1.0


def _note_use(execute: Any, sql: Any, params: Any, many: bool, context: dict[str, Any]) -> Any:
    """Execute wrapper: when a statement on this connection last answered."""
    result = execute(sql, params, many, context)
    context["connection"]._synapsia_answered_at = time.monotonic()
    return result


def _hop_work(
    loop: asyncio.AbstractEventLoop, func: Callable[..., T], *args: Any, **kwargs: Any
) -> T:
    """One hop's work on its database thread, between Django's connection sweeps (as
    channels' ``DatabaseSyncToAsync``: old and broken connections closed before and after),
    with Django's health check (``CONN_HEALTH_CHECKS``: a ``SELECT 1`` round trip before the
    hop's first statement) made only on a connection that has been idle: one whose last
    statement answered more than ``HEALTH_CHECK_AFTER_IDLE_S`` ago, or never. A connection
    that broke while idle is still found out and reopened before the hop uses it; under load,
    where a connection answered a moment ago, the extra round trip per hop is saved. A
    connection with an error since its last commit is checked by Django itself
    (``close_if_unusable_or_obsolete``), whatever its age."""
    # As asgiref's own hop does: an async_to_sync inside the work runs on the socket's loop.
    SyncToAsync.threadlocal.main_event_loop = loop
    SyncToAsync.threadlocal.main_event_loop_pid = os.getpid()
    close_old_connections()
    database = connections["default"]
    if _note_use not in database.execute_wrappers:
        database.execute_wrappers.append(_note_use)
    answered = getattr(database, "_synapsia_answered_at", None)
    if (
        database.connection is not None
        and database.health_check_enabled  # type: ignore[attr-defined]
        and answered is not None
        and time.monotonic() - answered < HEALTH_CHECK_AFTER_IDLE_S
    ):
        database.health_check_done = True  # type: ignore[attr-defined]
    try:
        return func(*args, **kwargs)
    finally:
        close_old_connections()


def _sqlite_thread(loop: asyncio.AbstractEventLoop) -> Executor | None:
    """The one thread asgiref runs thread-sensitive work on for a socket served by Daphne,
    or None where asgiref would choose another (inside ``async_to_sync``, a
    ``ThreadSensitiveContext``, a loop ``async_to_sync`` made: tests, management commands)."""
    if (
        getattr(AsyncToSync.executors, "current", None) is not None
        or SyncToAsync.thread_sensitive_context.get(None) is not None
        or loop in AsyncToSync.loop_thread_executors
    ):
        return None
    return SyncToAsync.single_thread_executor


class _Hop:
    """One socket hop's database work on a worker thread (``_hop_work``).

    A hop is handed to the thread asgiref's ``sync_to_async`` would choose (SQLite: its one
    thread-sensitive thread; PostgreSQL: the loop's pool) by the loop's executor directly,
    in a copy of the caller's context. asgiref's own path (a shielded future, the context's
    variables walked and set back twice, its deadlock guard) cost ~50 us of CPU a hop more
    (a hop of no work: ~35 against ~90 us), and a turn is three or four hops. Where asgiref
    would choose another thread than its usual one (``_sqlite_thread``), it is asgiref's path.
    A cancelled caller leaves the work to finish on its thread, as asgiref does."""

    __slots__ = ("_thread_sensitive", "func")

    def __init__(self, func: Callable[..., T], *, thread_sensitive: bool) -> None:
        self.func = func
        self._thread_sensitive = thread_sensitive

    async def __call__(self, *args: Any, **kwargs: Any) -> Any:
        loop = asyncio.get_running_loop()
        executor = _sqlite_thread(loop) if self._thread_sensitive else None
        if self._thread_sensitive and executor is None:
            work = functools.partial(_hop_work, loop, self.func, *args, **kwargs)
            return await SyncToAsync(work, thread_sensitive=True)()
        context = contextvars.copy_context()
        return await loop.run_in_executor(
            executor, functools.partial(context.run, _hop_work, loop, self.func, *args, **kwargs)
        )


def in_db_thread(func: Callable[..., T]) -> Callable[..., Awaitable[T]]:
    """Run one socket hop's database work in a worker thread (``_Hop``).

    PostgreSQL: any thread from the pool. Channels' default funnels every socket of a Daphne
    process through one thread, which serialised all rooms' round trips (bench/, py-spy); each
    hop is a self-contained transaction, so it needs no particular thread. SQLite has a single
    writer: threads racing for its lock sleep in its busy handler, so there one thread it is.
    """
    thread_sensitive = settings.DATABASES["default"]["ENGINE"].endswith("sqlite3")
    return _Hop(func, thread_sensitive=thread_sensitive)


def _alone_here(layer: Any, group: str, channel: str) -> bool:
    """True when ``channel`` is certainly ``group``'s only member: the in-memory layer's
    groups live in this process only, so it can tell (and its ``group_send`` scans every
    channel and group of the process first, once per connect). Any other layer: not known,
    so False."""
    return isinstance(layer, InMemoryChannelLayer) and not (
        layer.groups.get(group, {}).keys() - {channel}
    )


# The bodies' fields in their models' order, which their wire form keeps.
_SENT_FIELDS = tuple(SentBody.model_fields)
_MESSAGE_FIELDS = tuple(MessageBody.model_fields)


def sent_frame(ref: str, seq: int, *, duplicate: bool) -> str:
    """The `sent` receipt (``SentFrame``) for the client's `say` frame ``ref``."""
    body = dict(zip(_SENT_FIELDS, (ref, seq, duplicate), strict=True))
    return frame_json("sent", new_frame_id(), body)


def message_frame(message: Message | services.SaidMessage, *, for_agent: bool) -> str:
    """The wire form of one transcript message (``MessageFrame``); built once per audience
    and fanned out.

    An agent gets the peer's text only as fenced untrusted data (SYN-TRUST-003); an owner's
    browser gets the text as written, with the same flags, and renders it as text.
    """
    said = isinstance(message, services.SaidMessage)
    sender = message.sender_agent_id if said else message.sender_id  # type: ignore[union-attr]
    sent_at = message.sent_at if said else message.created_at  # type: ignore[union-attr]
    text, fenced_block = message.text, None
    if for_agent:
        # Replays are fenced afresh (new nonce); the live path reuses the say path's fence.
        # A replay's flags are the stored ones (the frame carries message.flags), so the
        # learned flagger, whose verdict would be dropped here, is not asked again.
        fenced = message.fenced if said else None  # type: ignore[union-attr]
        fenced = fenced or untrusted.fence(message.text, source="peer", flagger=False)
        text, fenced_block = fenced.text, fenced.fenced
    seq = int(message.seq)
    values = (
        seq,
        sender if isinstance(sender, UUID) else UUID(str(sender)),
        str(text),
        fenced_block,
        [str(flag) for flag in message.flags],
        sent_at,
        "owner" if isinstance(message, Message) and message.author == "owner" else "agent",
    )
    return frame_json("message", f"msg-{seq}", dict(zip(_MESSAGE_FIELDS, values, strict=True)))


def action_result_frame(ref: str, result: ActionResult) -> str:
    return ActionResultFrame(
        type="action_result",
        id=new_frame_id(),
        body=ActionResultBody(
            ref=ref,
            action_id=result.action_id,
            status=result.status,  # an ActionStatus value
            rule=result.rule,
            detail=result.detail,
            output=result.output,
            replay=result.replay,
        ),
    ).model_dump_json()


def offers_revealed_frame(room_id: Any, reveal: sealed.Reveal) -> str:
    """The wire form of a room's revealed offers; the same frame id every time it is sent."""
    return OffersRevealedFrame(
        type="offers_revealed",
        id=f"offers-revealed-{room_id.hex}",
        body=OffersRevealedBody(
            offers=[
                RevealedOffer(
                    agent_id=agent_id,
                    offer=OfferPlan.model_validate(offer),
                    salt=salt,
                )
                for agent_id, offer, salt in reveal.offers
            ],
            complete=reveal.complete,
        ),
    ).model_dump_json()


SayRun = tuple[Any, Any, list[tuple[str, str]]]  # (room_id, agent_id, [(client_id, text)])
Ack = tuple[Any, Any, int]  # (room_id, agent_id, seq)
# What a run handed to the desk becomes: its recorded prefix (``services.messages_say_runs``),
# or None when the record refused the ack riding it (nothing of the run stored).
SayRunResult = list[services.SaidMessage] | None


Verdicts = dict[standing.Reader, CloseCode | None]
_NO_SESSIONS: Mapping[standing.SessionPair, Any] = MappingProxyType({})


def _desk_hop(
    *,
    acks: list[Ack],
    runs: list[SayRun],
    readers: list[standing.Reader],
    run_acks: list[int | None] | None = None,
    run_tokens: list[str | None] | None = None,
    ack_tokens: list[str | None] | None = None,
    clock: list[float] | None = None,
) -> tuple[list[bool] | Exception, list[SayRunResult] | Exception, Verdicts | Exception]:
    """One hop of the desk: the readers' standing asked before a live delivery (one
    statement, ``standing.readers_standing``, read now: after every question was asked),
    the acknowledgements handed in (one transaction, each still its own statement), then the
    `say` runs (``services.messages_say_runs``, its own transaction, which also records the
    acks riding the runs first, ``run_acks``, one per run or None: ``_say_runs_acked``), each
    checked with the token digest its socket was admitted with (``run_tokens``, one per run:
    a token rotated since refuses the run and the ack riding it; ``ack_tokens``, one per ack
    or None: likewise each ack handed in). Each part's failure is returned, not raised, so it
    reaches only the sockets whose frames it was about.

    ``clock`` (if given) is filled with the work's start, its thread CPU and its end
    (``realtime.say_desk_hop_observed``)."""
    started, cpu_started = time.monotonic(), time.thread_time()
    try:
        return _desk_hop_parts(
            acks=acks,
            runs=runs,
            readers=readers,
            run_acks=run_acks,
            run_tokens=run_tokens,
            ack_tokens=ack_tokens,
        )
    finally:
        if clock is not None:
            clock[:] = [started, time.thread_time() - cpu_started, time.monotonic()]


def _desk_hop_parts(
    *,
    acks: list[Ack],
    runs: list[SayRun],
    readers: list[standing.Reader],
    run_acks: list[int | None] | None = None,
    run_tokens: list[str | None] | None = None,
    ack_tokens: list[str | None] | None = None,
) -> tuple[list[bool] | Exception, list[SayRunResult] | Exception, Verdicts | Exception]:
    verdicts: Verdicts | Exception = {}
    if readers:
        try:
            verdicts = standing.readers_standing(readers)
        except Exception as failed:
            verdicts = failed
    acked: list[bool] | Exception = []
    if acks:
        try:
            results = [False] * len(acks)
            # A lone ack is one statement in its own implicit transaction, as it was alone.
            with transaction.atomic() if len(acks) > 1 else contextlib.nullcontext():
                # Seats updated in one order, so two processes' hops wait instead of
                # deadlocking (PostgreSQL); every ack is answered as its own statement says.
                for index in sorted(
                    range(len(acks)), key=lambda i: (str(acks[i][0]), str(acks[i][1]))
                ):
                    room_id, agent_id, seq = acks[index]
                    # A socket's ack carries its token digest (a rotated one moves nothing).
                    token = None if ack_tokens is None else ack_tokens[index]
                    results[index] = services.messages_ack(
                        room_id=room_id, agent_id=agent_id, seq=seq, token=token
                    )
            acked = results
        except Exception as failed:
            acked = failed
    said: list[SayRunResult] | Exception = []
    if runs:
        # Sockets' runs carry their tokens, each checked (a run without one among them is
        # refused); a hop of none carries none (the server's own runs, as in tests).
        tokens = run_tokens if run_tokens and any(t is not None for t in run_tokens) else None
        try:
            if run_acks is None or all(ack is None for ack in run_acks):
                said = list(services.messages_say_runs(runs=runs, tokens=tokens))
            elif connections["default"].vendor == "postgresql":  # each ack rides its say
                said = services.messages_say_runs_acked(runs=runs, acks=run_acks, tokens=tokens)
            else:
                said = _say_runs_acked(runs, run_acks, tokens)
        except Exception as failed:
            said = failed
    return acked, said, verdicts


def _say_runs_acked(
    runs: list[SayRun], run_acks: list[int | None], run_tokens: list[str | None] | None = None
) -> list[SayRunResult]:
    """SQLite (PostgreSQL: ``services.messages_say_runs_acked``, each ack part of its run's
    first statement): a hop's `say` runs when some carry an ack, in one transaction: each
    riding ack first (``services.messages_ack``, as the ``ack`` frame it stands for, sent
    just before the run), then the runs whose acks the record took
    (``services.messages_say_runs``, nested in it: a resent frame id rolls back its own
    savepoint only). A run whose ack is refused stores nothing and is answered None.
    ``run_tokens``: as ``_desk_hop``'s."""
    results: list[SayRunResult] = [None] * len(runs)
    with transaction.atomic():
        refused = services.riding_acks_refused(runs, run_acks, run_tokens)
        kept = [i for i in range(len(runs)) if i not in refused]
        tokens = None if run_tokens is None else [run_tokens[i] for i in kept]
        said = (
            services.messages_say_runs(runs=[runs[i] for i in kept], tokens=tokens) if kept else []
        )
        for i, done in zip(kept, said, strict=True):
            results[i] = done
    return results


class SayDesk:
    """Where a process's sockets hand in their `say` runs and acks: group commit across
    sockets.

    A run handed in while no recording is under way is recorded at once, alone: a single
    frame pays one hop and one transaction, as before. Runs handed in while a recording is
    under way wait for it and are then recorded together (``services.messages_say_runs``):
    one hop, one transaction and one commit for many sockets' messages, each run still
    checked as it stands (``services._hop_checks``: every run's check read and every room's
    number taken in two statements). One recording at a time, on every database: SQLite has
    one writer, and on PostgreSQL four at once left each hop ~2 frames (every frame arriving
    while fewer than four ran started one), so a message cost a hop, a commit and a standing
    statement of its own: one at a time halved the server's and the database's CPU a message
    at one in flight (docs/benchmarks-log.md, "One recording at a time"). Other processes'
    desks still record at once (their rooms locked in one order).

    An ``ack`` goes the same way: acks waiting when a hop starts are recorded in it, before
    its runs, in one transaction (each its own ``services.messages_ack`` statement, answered
    as that statement says). A socket awaits its ack before its next frame, so its frames are
    still recorded in the order it sent them. An ack riding a `say` (``SayBody.ack``) is part
    of its run instead: recorded in the runs' transaction, just before the run's messages,
    and a run whose ack the record refuses stores nothing (``_say_runs_acked``).

    So does the standing check before a live delivery (``standing``): the checks waiting
    when a hop starts are answered by one ``standing.readers_standing`` statement in it, a
    read made after each was asked (nothing is answered from an earlier read). At one
    message in flight a check with a hop of its own doubled the hops per message; here it
    shares the says'.
    """

    def __init__(self) -> None:
        # Each run with the ack riding it and its socket's token digest (``record``).
        self._waiting: list[
            tuple[SayRun, int | None, str | None, asyncio.Future[SayRunResult]]
        ] = []
        # Each ack with its socket's token digest (``ack``).
        self._acks: list[tuple[Ack, str | None, asyncio.Future[bool]]] = []
        self._checks: list[tuple[standing.Reader, asyncio.Future[CloseCode | None]]] = []
        self._recording = False
        # Standing statements run, for tests and the benchmark.
        self.standing_statements = 0
        # The hop's thread hand-off, made once per desk rather than once per hop.
        self._hop: Callable[..., Awaitable[Any]] | None = None

    async def record(
        self, run: SayRun, *, ack: int | None = None, token: str | None = None
    ) -> SayRunResult:
        """Record a run of `say` frames, after ``ack`` (the ack riding its first frame): its
        recorded prefix, or None when the record refused that ack (nothing of it stored).
        ``token``: the digest of the token the socket was admitted with, checked by the
        statement that checks the run (a socket's run always carries it)."""
        future: asyncio.Future[SayRunResult] = asyncio.get_running_loop().create_future()
        self._waiting.append((run, ack, token, future))
        self._start()
        return await future

    async def ack(self, ack: Ack, *, token: str | None = None) -> bool:
        """Record an acknowledgement; False if the record refuses it (``messages_ack``).
        ``token``: the digest of the token the socket was admitted with, checked by the
        ack's statement (a socket's ack always carries it)."""
        future: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._acks.append((ack, token, future))
        self._start()
        return await future

    async def standing(self, reader: standing.Reader) -> CloseCode | None:
        """The reader's standing, read from the record in the next hop: None, or the close
        code for a reader out of standing. A failed read raises (the caller fails closed)."""
        future: asyncio.Future[CloseCode | None] = asyncio.get_running_loop().create_future()
        self._checks.append((reader, future))
        self._start()
        return await future

    def _start(self) -> None:
        if not self._recording:
            self._recording = True
            asyncio.get_running_loop().create_task(self._record_waiting())

    async def _record_waiting(self) -> None:
        try:
            while self._waiting or self._acks or self._checks:
                acks, self._acks = self._acks, []
                checks, self._checks = self._checks, []
                batch: list[
                    tuple[SayRun, int | None, str | None, asyncio.Future[SayRunResult]]
                ] = []
                size = 0
                while self._waiting and (
                    not batch
                    or size + len(self._waiting[0][0][2]) <= services.SAY_RUNS_MAX_MESSAGES
                ):
                    item = self._waiting.pop(0)
                    batch.append(item)
                    size += len(item[0][2])
                if checks:
                    self.standing_statements += 1
                clock: list[float] = []
                handed = time.monotonic()
                if self._hop is None:
                    self._hop = in_db_thread(_desk_hop)
                try:
                    acked, results, verdicts = await self._hop(
                        acks=[ack for ack, _, _ in acks],
                        ack_tokens=[token for _, token, _ in acks],
                        runs=[run for run, _, _, _ in batch],
                        run_acks=[ack for _, ack, _, _ in batch],
                        run_tokens=[token for _, _, token, _ in batch],
                        readers=[reader for reader, _ in checks],
                        clock=clock,
                    )
                except Exception as failed:
                    acked = results = verdicts = failed
                if len(clock) == 3:
                    realtime.say_desk_hop_observed(
                        handed=handed,
                        started=clock[0],
                        cpu=clock[1],
                        ended=clock[2],
                        answered=time.monotonic(),
                        frames=len(acks) + len(checks) + sum(len(run[2]) for run, _, _, _ in batch),
                    )
                # Standing first: a delivery waits on nothing else of the hop's.
                _settle(
                    [future for _, future in checks],
                    verdicts
                    if isinstance(verdicts, Exception)
                    else [verdicts[reader] for reader, _ in checks],
                )
                _settle([future for _, _, future in acks], acked)
                # A socket that went away meanwhile: its messages are recorded; its client
                # resends the frame ids and learns so (``duplicate``).
                _settle([future for _, _, _, future in batch], results)
        finally:
            self._recording = False


def _invalid_ack(ref: str) -> tuple[ErrorCode, str, str]:
    """The refusal of an ack the record does not take (a seq the room does not have)."""
    return ErrorCode.INVALID_ACK, "No such message to acknowledge.", ref


def _settle(futures: list[asyncio.Future[Any]], outcome: list[Any] | Exception) -> None:
    """Answer each waiting socket with its own result, or all of them with the failure."""
    if isinstance(outcome, Exception):
        for future in futures:
            if not future.done():
                future.set_exception(outcome)
        return
    for future, result in zip(futures, outcome, strict=True):
        if not future.done():
            future.set_result(result)


_desks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, SayDesk] = weakref.WeakKeyDictionary()


def say_desk() -> SayDesk:
    """This event loop's desk (one per Daphne process; one per test)."""
    loop = asyncio.get_running_loop()
    desk = _desks.get(loop)
    if desk is None:
        desk = _desks[loop] = SayDesk()
    return desk


async def _dispatch_each(
    sources: list[Callable[[], Awaitable[Any]]], dispatch: Callable[[Any], Awaitable[None]]
) -> None:
    """channels' ``await_many_dispatch``: each message taken from any of ``sources`` handed
    to ``dispatch``, one at a time, each source's in the order it gave them; the first
    exception (``StopConsumer`` included) ends it, and the sources' waits are cancelled.

    One long-lived task per source and a lock that hands out the turns, instead of an
    ``asyncio.wait`` over the sources and a new task per message (their cost per delivered
    event was most of the consumer's own dispatch, py-spy of the say cell)."""
    turn = asyncio.Lock()
    ended = False

    async def pump(source: Callable[[], Awaitable[Any]]) -> None:
        nonlocal ended
        while True:
            message = await source()
            async with turn:
                if ended:
                    return  # another source's message ended it: nothing after that
                try:
                    await dispatch(message)
                except BaseException:
                    ended = True
                    raise
            await asyncio.sleep(0)  # the other sockets' turn, as a wait per message gave

    tasks = [asyncio.ensure_future(pump(source)) for source in sources]
    try:
        done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        for task in done:
            task.result()
    finally:
        for task in tasks:
            if not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task


class RoomConsumer(AsyncWebsocketConsumer):
    participant: Participant | None = None
    _repetition: flares.RepetitionWatch
    position: int = 0
    # The one task handling this socket's frames, while it has any (none while idle).
    _worker: asyncio.Task[None] | None = None
    _watched = False
    # Sealed offers: a one-shot wait until the reveal deadline this socket was told of, and
    # whether this socket has sent the reveal (it is sent once per socket).
    _seal_wait: asyncio.Task[None] | None = None
    _reveal_sent: bool = False
    # Live deliveries waiting for their standing check, and the one task carrying them (and
    # every catch-up read) to the socket, in order.
    _outbox: collections.deque[tuple[int, str, str, str]]
    _courier: asyncio.Task[None] | None = None
    # The record holds messages this socket has not been given (a lost bell, a gap, an
    # overflowing outbox): the courier reads them back.
    _behind = False
    _accepted = False
    # Closed by the server (nothing more is sent), and whether the leave event is written.
    _closed = False
    _left = False
    # The connected-sockets gauge's label while this socket is counted.
    _counted: str | None = None
    _limits: limits.AgentLimits | None = None
    # Frames received and not yet handled (bounded: SOCKET_INBOX_MAX_FRAMES), and one taken
    # out of turn while a run of `say` frames was gathered.
    _inbox: collections.deque[str | None]
    _held: Any = None
    # An owner's browser: its owner's group (``realtime.owner_group``), joined at connect.
    _owner_group: str | None = None

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        """channels' ``AsyncConsumer.__call__`` (the channel layer's channel, then every
        message from the client and the layer dispatched, one at a time, until
        ``StopConsumer``), with ``_dispatch_each`` in place of channels'
        ``await_many_dispatch``."""
        self._outbox = collections.deque()
        try:
            self.scope = scope
            self.channel_layer = get_channel_layer(self.channel_layer_alias)
            sources = [receive]
            if self.channel_layer is not None:
                self.channel_name = await self.channel_layer.new_channel()
                self.channel_receive = functools.partial(
                    self.channel_layer.receive, self.channel_name
                )
                sources.append(self.channel_receive)
            self.base_send = send
            with contextlib.suppress(StopConsumer):
                await _dispatch_each(sources, self.dispatch)
        finally:
            # Daphne may cancel an instance without a disconnect (a close timeout): leave no
            # task of this socket behind, and count it gone.
            self._unwatch()
            self._uncount()
            for task in (self._worker, self._seal_wait, self._courier):
                if task is not None:
                    task.cancel()

    async def dispatch(self, message: dict[str, Any]) -> None:
        """Route a message to its handler, without channels' per-message connection sweep.

        Channels runs ``close_old_connections`` in a thread before every handler, a thread
        switch per delivered message even when the handler never touches the database. Here
        all database work happens in ``in_db_thread`` hops, which sweep on their own thread.
        An unexpected error in a handler fails closed, visibly (``_fail``).
        """
        handler = getattr(self, get_handler_name(message), None)
        if handler is None:
            raise ValueError(f"No handler for message type {message['type']}")
        try:
            await handler(message)
        except StopConsumer:
            raise
        except Exception as failed:
            await self._fail(failed)
            if message["type"] == "websocket.disconnect":
                raise StopConsumer() from None

    async def send(
        self, text_data: str | None = None, bytes_data: bytes | None = None, close: bool = False
    ) -> None:
        """Nothing is sent once the server has closed the socket. A client that leaves more
        than ``SOCKET_SEND_BUFFER_MAX_BYTES`` unread for ``limits.SEND_STALL_SECONDS`` is
        closed (4408); until then the sender waits (backpressure)."""
        if self._closed:
            return
        if text_data is not None and not close:
            # What ``AsyncWebsocketConsumer.send`` hands the server for a text frame.
            try:
                await self.base_send({"type": "websocket.send", "text": text_data})
            except _CLIENT_GONE:
                # The client closed while this frame was on its way (a hop was awaited): its
                # close handshake has begun and its disconnect is queued behind this handler.
                # Nothing more reaches it; the disconnect still comes, and records the leave.
                self._closed = True
                return
        else:
            await super().send(text_data=text_data, bytes_data=bytes_data, close=close)
        if not limits.send_buffer_over(self.base_send):
            return  # the usual case: the client keeps up (no wait is started)
        backlog = await limits.send_buffer_stalled(self.base_send, closed=lambda: self._closed)
        if backlog is not None:
            # A client that does not read what it is sent: what waits for it is dropped with
            # the connection (Daphne aborts it when the close handshake times out).
            self._log.warning(
                "room socket closed: its client did not read (%d bytes waiting)", backlog
            )
            limits.frame_refused("send_buffer")
            limits.trim_after_slow_reader()
            await self._shut(CloseCode.SLOW_READER)

    async def _shut(
        self, code: CloseCode, error: tuple[ErrorCode, str, str | None] | None = None
    ) -> None:
        """Close the socket once, with a code of the documented table (Daphne refuses any
        other but 1000), after an ``error`` frame if one is given; nothing is sent after it."""
        if self._closed:
            return
        if not self._accepted:
            await self.accept()
            self._accepted = True
        if error is not None:
            await self.send(error_frame(*error))
        self._closed = True
        self._outbox.clear()
        self._inbox_clear()
        current = asyncio.current_task()
        for task in (self._seal_wait, self._courier):
            if task is not None and task is not current:
                task.cancel()
        await self.close(code=int(code))

    async def _fail(self, failed: BaseException, ref: str | None = None) -> None:
        """An unexpected error: an ``error`` frame, the leave event, and a close with a
        documented code. When the database did not answer, the room is paused (the check
        could not be made) and that and the leave are recorded as soon as it answers again."""
        participant = self.participant
        if isinstance(failed, DatabaseError):
            self._log.warning("room socket: the database did not answer (%s)", failed)
            code, error = (
                CloseCode.TRY_AGAIN,
                (ErrorCode.UNAVAILABLE, "The room cannot check this right now; it paused."),
            )
            if participant is not None:
                realtime.outage_desk().pause_when_answering(
                    participant.room_id,
                    leaving_agent=None if self._left else participant.agent_id,
                )
                self._left = True  # the outage desk writes it once the database answers
        elif isinstance(failed, _LAYER_ERRORS):
            self._log.warning("room socket: the channel layer did not answer (%s)", failed)
            code, error = (
                CloseCode.TRY_AGAIN,
                (ErrorCode.UNAVAILABLE, "The room cannot reach its other servers right now."),
            )
        else:
            self._log.error("room socket failed", exc_info=failed)
            code, error = (
                CloseCode.SERVER_ERROR,
                (ErrorCode.SERVER_ERROR, "Something went wrong on the server."),
            )
        if self._accepted and not self._closed:
            await self.send(error_frame(error[0], error[1], ref))
        # Recorded before the close, so a client that sees the close finds the leave.
        await self._leave()
        await self._shut(code)

    async def _leave(self) -> None:
        """Write the agent's leave event, once."""
        participant = self.participant
        if self._left or participant is None or participant.agent_id is None:
            return
        self._left = True
        try:
            await in_db_thread(services.agent_leave)(
                room_id=participant.room_id, agent_id=participant.agent_id
            )
        except DatabaseError:
            realtime.outage_desk().pause_when_answering(
                participant.room_id, leaving_agent=participant.agent_id
            )
        except Exception:
            self._log.exception("room socket: the leave could not be recorded")

    @property
    def _log(self) -> logging.LoggerAdapter[logging.Logger]:
        """This module's logger, its lines naming the socket's room and agent once admitted."""
        participant = self.participant
        if participant is None:
            return correlated(logger)
        return correlated(logger, room=participant.room_id, agent=participant.agent_id)

    def _count(self, kind: str) -> None:
        self._counted = kind
        realtime.SOCKETS_CONNECTED.labels(participant=kind).inc()

    def _uncount(self) -> None:
        if self._counted is not None:
            realtime.SOCKETS_CONNECTED.labels(participant=self._counted).dec()
            self._counted = None

    def _inbox_clear(self) -> None:
        inbox = getattr(self, "_inbox", None)
        if inbox is not None:
            inbox.clear()
        self._held = None

    # --- connection lifecycle -------------------------------------------------------------

    async def connect(self) -> None:
        room_id = self.scope["url_route"]["kwargs"]["room_id"]
        try:
            room_group = realtime.room_group(UUID(room_id))
        except ValueError:
            room_group = None  # refused by the handshake below
        # Subscribe before reading the backlog, so nothing falls between the two; the
        # handshake and the opening reads then share one database hop.
        if room_group is not None:
            await self.channel_layer.group_add(room_group, self.channel_name)
        user: Any = self.scope.get("user") or AnonymousUser()
        session = self.scope.get("session")
        if user.is_authenticated:
            # A browser: its owner's group before the handshake reads its session, so a
            # sign-out after that read still reaches this socket (``owner_session_check``).
            self._owner_group = realtime.owner_group(int(user.pk))
            await self.channel_layer.group_add(self._owner_group, self.channel_name)
        opened = await in_db_thread(self._admit_and_open)(
            room_id=room_id,
            headers=self.scope.get("headers", []),
            user=user,
            scope_scheme=self.scope.get("scheme"),
            session_key=getattr(session, "session_key", None) if session is not None else None,
        )
        if isinstance(opened, Refusal) or opened[0].agent_id is not None:
            await self._owner_group_leave()
        if isinstance(opened, Refusal):
            if room_group is not None:
                await self.channel_layer.group_discard(room_group, self.channel_name)
            # Accept then close, so the client sees a close code it can act on; nothing else
            # is sent first.
            await self._shut(opened.code)
            return
        verdict, earlier_sockets, welcome, backlog, position, seal = opened
        self.participant = verdict
        self._repetition = flares.RepetitionWatch()
        self._inbox = collections.deque()
        self._held = None
        self._backfilling = asyncio.Lock()
        if verdict.agent_id is not None:
            self._limits = limits.limits_book().of(verdict.room_id, verdict.agent_id)
            assert room_group is not None  # admitted: the room's id was one
            if earlier_sockets and not _alone_here(
                self.channel_layer, room_group, self.channel_name
            ):
                # The same agent's earlier socket in this room, if any, closes: the one that
                # joined before this one (``agent_replaced``). Not told when every earlier
                # join of the agent has left (the count the join read) or, on the in-memory
                # layer, when no other socket is in the room.
                await self.channel_layer.group_send(
                    room_group,
                    {
                        "type": "agent.replaced",
                        realtime.FOR_AGENT: verdict.agent_id.hex,
                        realtime.SKIP_CHANNEL: self.channel_name,
                        "joined": verdict.joined_seq,
                    },
                )
        await self.accept()
        self._accepted = True
        self._count(verdict.kind)
        await self.send(welcome)
        for frame in backlog:
            await self.send(frame)
        self.position = position
        # From here on the sweep recovers any bell this socket misses.
        realtime.record_sweep().watch(verdict.room_id, self)
        self._watched = True
        await self._seal_state(seal)

    def _admit_and_open(
        self,
        *,
        room_id: str,
        headers: list[tuple[bytes, bytes]],
        user: Any,
        scope_scheme: str | None,
        session_key: str | None = None,
    ) -> Refusal | tuple[Participant, int, str, list[str], int, sealed.SealState]:
        """The handshake's verdict, the agent's earlier sockets not yet left
        (``Admission.earlier_sockets``) and, if admitted, what the socket is sent first (one
        hop)."""
        admitted = handshake.admit(
            room_id=room_id,
            headers=headers,
            user=user,
            scope_scheme=scope_scheme,
            session_key=session_key,
        )
        if isinstance(admitted, Refusal):
            return admitted
        return (admitted.participant, admitted.earlier_sockets, *self._opening(admitted))

    def _opening(self, admission: Admission) -> tuple[str, list[str], int, sealed.SealState]:
        """The welcome, the backlog and where the socket starts, from what the handshake read
        (the room and the agent are not read again); a read with nothing to find is skipped."""
        participant, room = admission.participant, admission.room
        # The tools decided now; each written from its definition's text, not parsed again.
        listed = [spec.descriptor_json() for spec in handshake.tools_listed(admission)]
        welcome = welcome_json(
            WelcomeFrame(
                type="welcome",
                id=new_frame_id(),
                body=WelcomeBody(
                    room=RoomSummary(
                        id=room.id,
                        purpose=room.purpose,
                        charter=room.charter,
                        state=room.state,
                        terms=room.terms,
                    ),
                    participant=participant.kind,
                    agent_id=participant.agent_id,
                    acked_seq=participant.acked_seq,
                    max_frame_bytes=settings.SYNAPSIA["MAX_FRAME_BYTES"],
                    tools=[],
                ),
            ),
            listed,
        )
        for_agent = participant.kind == "agent"
        after = participant.acked_seq if for_agent else max(0, room.last_seq - OWNER_BACKLOG)
        # A message's seq is taken from the room's last_seq, so none past the one the handshake
        # read existed then; what is recorded since rings the bell this socket listens to.
        backlog = (
            selectors.messages_after(
                room_id=room.id, after_seq=after, exclude_sender=participant.agent_id
            )
            if room.last_seq > after
            else []
        )
        # Everything up to the room's last seq at this moment is handled: shown now, or the
        # agent's own, or acknowledged earlier.
        frames = [message_frame(m, for_agent=for_agent) for m in backlog]
        # A (re)connecting agent is told of the reveal again: the record, not the layer.
        seal = (
            sealed.offers_reveal_if_due(room_id=room.id)
            if for_agent and admission.offers_sealed
            else sealed.SealState()
        )
        # A message recorded after the handshake's read and found by the backlog's is handled
        # too (its bell would otherwise deliver it a second time).
        newest = backlog[-1].seq if backlog else 0
        return welcome, frames, max(room.last_seq, after, newest), seal

    def _unwatch(self) -> None:
        if self._watched and self.participant is not None:
            self._watched = False
            realtime.record_sweep().unwatch(self.participant.room_id, self)

    async def disconnect(self, code: int) -> None:
        self._unwatch()
        self._uncount()
        for task in (self._seal_wait, self._courier):
            if task is not None:
                task.cancel()
        self._outbox.clear()
        if self._worker is not None and not self._closed:
            # Frames that arrived before the disconnect are handled, as they were received.
            await self._worker
        await self._owner_group_leave()
        if self.participant is None:
            return
        try:
            await self.channel_layer.group_discard(
                realtime.room_group(self.participant.room_id), self.channel_name
            )
        except Exception:
            # The layer expires the membership by itself (group_expiry); the leave is recorded.
            self._log.warning("channel layer unavailable: socket not taken out of its room's group")
        await self._leave()

    async def _owner_group_leave(self) -> None:
        group, self._owner_group = self._owner_group, None
        if group is None:
            return
        try:
            await self.channel_layer.group_discard(group, self.channel_name)
        except Exception:
            self._log.warning(
                "channel layer unavailable: socket not taken out of its owner's group"
            )

    # --- frames from the client -----------------------------------------------------------

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        if self.participant is None or self._closed:
            return
        if len(self._inbox) >= settings.SYNAPSIA["SOCKET_INBOX_MAX_FRAMES"]:
            # A client sending faster than its frames can be handled, far past any rate: its
            # queued frames are dropped with the socket (nothing of them was recorded).
            limits.frame_refused("inbox")
            await self._shut(
                CloseCode.INBOX_FULL,
                (ErrorCode.INBOX_FULL, "Too many frames waiting to be handled.", None),
            )
            return
        # Handled in order by ``_work``, so the dispatch loop keeps taking channel-layer events
        # (deliveries) while this socket's database hop runs, and frames that queue up behind
        # a hop can be handled together.
        self._inbox.append(text_data)
        if self._worker is None:
            # No await between the worker's last look at its inbox and its exit, nor between
            # this check and the start: a frame is never left without a worker.
            self._worker = asyncio.create_task(self._work())

    async def _work(self) -> None:
        """Handle the socket's frames one at a time in arrival order, until none is left; a
        run of queued `say` frames is recorded in one hop and one transaction
        (``services.messages_say``)."""
        ref: str | None = None
        try:
            while True:
                if self._closed or (self._held is None and not self._inbox):
                    self._worker = None
                    return
                item = self._next()
                ref = getattr(item, "id", None)
                try:
                    if isinstance(item, FrameError):
                        raise item
                    if isinstance(item, SayFrame) and self._agent_only(item.id):
                        run = await self._say_frames(item)
                        allowed = self._within_rate("say", len(run))
                        if allowed:
                            await self._say_run(run[:allowed])
                        for refused_frame in run[allowed:]:
                            # Only a run's first frame carries an ack (``_say_frames``).
                            if await self._ack_riding(refused_frame.id, refused_frame.body.ack):
                                await self._refuse("say", refused_frame.id)
                    else:
                        await self._handle(item)
                except FrameError as refused:
                    await self.send(error_frame(refused.code, refused.message, refused.ref))
        except Exception as failed:
            # Fail closed, visibly: an error frame naming the frame, a documented close code,
            # the leave event (and the room paused if the database did not answer).
            self._worker = None
            await self._fail(failed, ref)

    def _next(self) -> Any:
        """The next parsed frame (or the ``FrameError`` it raised); the inbox is not empty."""
        if self._held is not None:
            item, self._held = self._held, None
            return item
        return self._parse(self._inbox.popleft())

    def _parse(self, raw: Any) -> Any:
        try:
            parsed: Any = parse_client_frame(raw, max_bytes=settings.SYNAPSIA["MAX_FRAME_BYTES"])
        except FrameError as refused:
            parsed = refused
        limits.frame_received(parsed)
        return parsed

    def _within_rate(self, kind: limits.Kind, frames: int) -> int:
        """How many of ``frames`` frames of ``kind`` the agent's rate allows now (a prefix)."""
        if self._limits is None:
            return frames
        for allowed in range(frames):
            if self._limits.take(kind) > 0:
                return allowed
        return frames

    async def _refuse(self, kind: limits.Kind | None, ref: str, wait: float | None = None) -> None:
        """A limit refused a frame: an error frame with the limit's code; an agent that keeps
        running into its limits is looping, and a `loop` flare stops it for its owner."""
        participant = self.participant
        assert participant is not None and participant.agent_id is not None
        if kind is None:
            code, message = (
                ErrorCode.CONTEXT_TURN_LIMITED,
                "You have had this turn's contexts: say something or wait for the other agent.",
            )
        else:
            if wait is None and self._limits is not None:
                wait = self._limits.wait(kind)
            code, message = _RATE_REFUSALS[kind]
            message = f"{message} {retry_hint(wait or 0)}"
        limits.rate_refused(kind)
        await self.send(error_frame(code, message, ref))
        if self._limits is not None and self._limits.refused():
            await self._flare(FlareReason.LOOP, raised_by="server")

    async def _flare(self, reason: FlareReason, *, raised_by: str) -> None:
        """Raise a flare for the socket's agent: by the agent (a `flare` frame) or by the server
        for what the socket did (a loop). Either way it is asked with the socket's token: a
        revoked agent's, or a token rotated away since the socket opened, pauses nothing
        (``flares.FlareRefused``) and the socket is closed as a revoked agent's (4401)."""
        participant = self.participant
        assert participant is not None and participant.agent_id is not None
        try:
            await in_db_thread(flares.flare_raise)(
                room_id=participant.room_id,
                agent_id=participant.agent_id,
                reason=reason,
                raised_by=raised_by,
                token=self._token(),
            )
        except flares.FlareRefused:
            await self._shut(CloseCode.UNAUTHENTICATED)

    async def _say_frames(self, first: SayFrame) -> list[SayFrame]:
        """``first`` and the `say` frames queued right behind it (up to ``SAY_RUN_MAX``),
        cut after one that would complete a loop, so the flare comes before later frames,
        and before one that carries an ack (which heads the next run: its ack is recorded
        after the messages before it, as it was sent)."""
        run = [first]
        if self._held is not None or not self._inbox:
            return run  # nothing queued behind it (one in flight): no run to cut
        watch = self._repetition.copy()
        if watch.looping(first.body.text):
            return run
        while len(run) < SAY_RUN_MAX and self._held is None and self._inbox:
            item = self._parse(self._inbox.popleft())
            if not isinstance(item, SayFrame) or item.body.ack is not None:
                self._held = item  # handled next, after this run
                break
            run.append(item)
            if watch.looping(item.body.text):
                break
        return run

    async def _handle(self, frame: Any) -> None:
        match frame:
            case SayFrame():
                await self._say(frame)
            case AckFrame():
                await self._ack(frame)
            case ActFrame():
                await self._act(frame)
            case ContextRequestFrame():
                await self._context(frame)
            case SealOfferFrame():
                await self._seal(frame)
            case FlareFrame():
                self._agent_only(frame.id)
                await self._flare(FlareReason(frame.body.reason), raised_by="agent")
            case PingFrame():
                await self.send(
                    PongFrame(type="pong", id=frame.id, body=EmptyBody()).model_dump_json()
                )

    async def _say_run(self, frames: list[SayFrame]) -> None:
        """Record a run of `say` frames in one hop; whatever the fast path leaves (a refusal,
        a flagged text, a resent id) goes through ``_say`` one by one, as if it came alone."""
        participant = self.participant
        assert participant is not None and participant.agent_id is not None
        said = await say_desk().record(
            (participant.room_id, participant.agent_id, [(f.id, f.body.text) for f in frames]),
            ack=frames[0].body.ack,
            token=self._token(),
        )
        if said is None:
            # The record refused the ack riding the first frame: that frame is refused whole
            # (nothing of the run was stored); the frames after it carry no ack of their own.
            if await self._ack_refused(frames[0].id) and frames[1:]:
                await self._say_run(frames[1:])
            return
        for frame, message in zip(frames, said, strict=False):
            await self.send(sent_frame(frame.id, message.seq, duplicate=False))
        if said:
            await self._announce(participant.agent_id, said)
            for message in said:
                if self._repetition.looping(message.text):
                    await self._flare(FlareReason.LOOP, raised_by="server")
        for frame in frames[len(said) :]:
            try:
                await self._say(frame)
            except FrameError as refused:
                await self.send(error_frame(refused.code, refused.message, refused.ref))

    async def _ring(self, group: str, event: dict[str, Any]) -> None:
        """Send a doorbell event for something already recorded. A layer that fails (Redis
        down) is logged: what it would announce has committed, and every socket reads it
        back from the record (the sweep), re-checking its reader's standing as it does."""
        try:
            await self.channel_layer.group_send(group, event)
        except Exception as failed:
            self._log.warning(
                "channel layer unavailable: %s not told of %s (%s)", group, event["type"], failed
            )

    async def _announce(self, agent_id: Any, said: list[services.SaidMessage]) -> None:
        """Ring the room's bell once for messages already stored (one channel-layer event).

        This socket's own messages give it nothing but its position. When they follow it,
        it moves here (``_own_moved``), the event need not come back to it, and a layer that
        can leave the sender out does (``realtime.SKIP_CHANNEL``; one that cannot delivers
        it, and it is then already handled). Otherwise the event comes back to it as to
        every other socket of the room, and moves it in order there."""
        sender = agent_id.hex
        moved = self._own_moved([m.seq for m in said])
        await self._ring(
            realtime.room_group(self.participant.room_id),  # type: ignore[union-attr]
            {
                "type": "room.messages",
                **({realtime.SKIP_CHANNEL: self.channel_name} if moved else {}),
                "sender": sender,
                "messages": [
                    {
                        "seq": m.seq,
                        "frame": message_frame(m, for_agent=True),
                        "owner_frame": message_frame(m, for_agent=False),
                    }
                    for m in said
                ],
            },
        )

    async def _say(self, frame: SayFrame) -> None:
        participant = self._agent_only(frame.id)
        try:
            said = await in_db_thread(services.message_say)(
                room_id=participant.room_id,
                agent_id=participant.agent_id,
                client_id=frame.id,
                text=frame.body.text,
                token=self._token(),
            )
        except services.SpeakRefused as refused:
            if refused.reason == "room_not_open":
                raise FrameError(
                    ErrorCode.ROOM_NOT_OPEN, "The room is not open.", frame.id
                ) from None
            if refused.reason == "withdrawn":
                raise FrameError(
                    ErrorCode.WITHDRAWN, "Your owner has muted you or stepped in.", frame.id
                ) from None
            code = {
                "revoked": CloseCode.UNAUTHENTICATED,
                "ledger_unavailable": CloseCode.TRY_AGAIN,  # nothing was stored; resend later
            }.get(refused.reason, CloseCode.FORBIDDEN)
            await self._shut(code)
            return
        await self.send(sent_frame(frame.id, said.seq, duplicate=said.duplicate))
        if not said.duplicate:
            await self._announce(participant.agent_id, [said])
            if self._repetition.looping(frame.body.text):
                await self._flare(FlareReason.LOOP, raised_by="server")

    async def _act(self, frame: ActFrame) -> None:
        participant = self._agent_only(frame.id)
        if self._limits is not None:
            # Any act may become a grant request, so none runs while they are used up.
            grant_wait = self._limits.wait("grant_request")
            if grant_wait > 0:
                await self._refuse("grant_request", frame.id, grant_wait)
                return
            act_wait = self._limits.take("act")
            if act_wait > 0:
                await self._refuse("act", frame.id, act_wait)
                return
        # Decided with the socket's token: rotated away since it opened (the close lost), the
        # act is a revoked agent's (denied, nothing runs), and the socket is closed after it.
        result = await in_db_thread(forks.action_for_agent)(
            room_id=participant.room_id,
            agent_id=participant.agent_id,
            client_id=frame.id,
            tool=frame.body.tool,
            arguments=frame.body.arguments,
            token=self._token(),
        )
        if result.status == ActionStatus.AWAITING_GRANT and not result.replay and self._limits:
            self._limits.take("grant_request")
        await self.send(action_result_frame(frame.id, result))
        if result.rule == "agent_revoked" and not result.replay:
            await self._shut(CloseCode.UNAUTHENTICATED)

    async def _context(self, frame: ContextRequestFrame) -> None:
        participant = self._agent_only(frame.id)
        ack = frame.body.ack
        if self._limits is not None:
            # Each context is a new turn that spends slip uses: rated, and a few per turn of
            # the room's conversation (until something new is said, there is nothing new).
            wait = self._limits.take("context_request")
            if wait > 0:
                if await self._ack_riding(frame.id, ack):
                    await self._refuse("context_request", frame.id, wait)
                return
            if not self._limits.context_turn(self.position):
                if await self._ack_riding(frame.id, ack):
                    await self._refuse(None, frame.id)
                return
        # Standing first, read by the statement that starts the turn: a reader out of
        # standing (its close lost) has no turn, spends no slip use and is given nothing, not
        # even the peer's messages. The ack riding the request is recorded by that statement
        # too, as the ``ack`` frame just before it would have been
        # (``context.context_for_agent_acked``).
        try:
            assembled = await in_db_thread(context.context_for_agent_acked)(
                room_id=participant.room_id,
                agent_id=participant.agent_id,
                owner_id=participant.owner_id,
                asked=frame.body.ask,
                ack=ack,
                token=self._token(),
            )
        except context.OutOfStanding as out:
            await self._shut(out.code)
            return
        if assembled is None:
            if self._limits is not None:
                self._limits.context_in_turn -= 1  # no turn was had: it does not count
            raise FrameError(*_invalid_ack(frame.id))
        await self.send(ContextFrame(type="context", id=frame.id, body=assembled).model_dump_json())

    async def _seal(self, frame: SealOfferFrame) -> None:
        participant = self._agent_only(frame.id)
        try:
            state = await in_db_thread(sealed.offer_seal)(
                room_id=participant.room_id,
                agent_id=participant.agent_id,
                client_id=frame.id,
                offer=frame.body.offer,
                token=self._token(),
            )
        except sealed.SealRefused as refused:
            code = {
                "room_not_open": ErrorCode.ROOM_NOT_OPEN,
                "withdrawn": ErrorCode.WITHDRAWN,
                "already_sealed": ErrorCode.NOT_ALLOWED,
                "already_revealed": ErrorCode.NOT_ALLOWED,
            }.get(refused.reason)
            if code is not None:
                raise FrameError(code, refused.message, frame.id) from None
            close = {
                "revoked": CloseCode.UNAUTHENTICATED,
                "ledger_unavailable": CloseCode.TRY_AGAIN,  # nothing was stored; resend later
            }.get(refused.reason, CloseCode.FORBIDDEN)
            await self._shut(close)
            return
        await self._seal_state(state)

    async def _seal_state(self, state: sealed.SealState) -> None:
        """Act on where the room's sealed offers stand: ring the room's bell (after the commit)
        for a first seal or a reveal, send the reveal, or wait for the deadline."""
        participant = self.participant
        if participant is None or participant.agent_id is None:
            return
        if state.first_seal or state.revealed_now:
            await self._ring(
                realtime.room_group(participant.room_id),
                {
                    "type": "room.offers",
                    "revealed": state.reveal is not None,
                    "deadline": state.deadline.isoformat() if state.deadline else None,
                },
            )
        if state.reveal is not None:
            await self._send_reveal(state.reveal)
        elif state.deadline is not None and self._seal_wait is None:
            self._seal_wait = asyncio.create_task(self._reveal_at(state.deadline))

    async def _send_reveal(self, reveal: sealed.Reveal) -> None:
        if self._seal_wait is not None and self._seal_wait is not asyncio.current_task():
            self._seal_wait.cancel()  # revealed already: the deadline needs no check
            self._seal_wait = None
        if self._reveal_sent or self.participant is None:
            return
        self._reveal_sent = True
        await self.send(offers_revealed_frame(self.participant.room_id, reveal))

    async def _reveal_at(self, deadline: datetime) -> None:
        """Sleep once until the reveal deadline, then reveal if it is still due."""
        try:
            await asyncio.sleep(max(0.0, (deadline - timezone.now()).total_seconds()) + 0.05)
            verdict, state = await in_db_thread(self._checked)(
                sealed.offers_reveal_if_due,
                room_id=self.participant.room_id,  # type: ignore[union-attr]
            )
            self._seal_wait = None
            if verdict is not None:
                await self._shut(verdict)
            elif state is not None:
                await self._seal_state(state)
        except asyncio.CancelledError:
            pass
        except Exception:
            # The next connect or seal checks again: the record decides, not this wait.
            self._log.exception("sealed offer reveal failed")

    async def _ack(self, frame: AckFrame) -> None:
        participant = self._agent_only(frame.id)
        ack = (participant.room_id, participant.agent_id, frame.body.seq)
        if not await say_desk().ack(ack, token=self._token()):
            await self._ack_refused(frame.id)

    async def _ack_riding(self, ref: str, seq: int | None) -> bool:
        """Record the ack riding frame ``ref`` on its own, as the ``ack`` frame it stands for
        (a limit refused the frame itself, so there is no hop of its own for it to share).
        False, after an ``invalid_ack`` answer (or the close, ``_ack_refused``), when the
        record refuses it: the frame is refused whole. True when there is none, or it was
        recorded."""
        if seq is None:
            return True
        participant = self._agent_only(ref)
        ack = (participant.room_id, participant.agent_id, seq)
        if await say_desk().ack(ack, token=self._token()):
            return True
        await self._ack_refused(ref)
        return False

    async def _ack_refused(self, ref: str) -> bool:
        """The record refused the ack of frame ``ref``: its statement takes an ack only from a
        socket whose token is still its agent's, so a refusal is an ack beyond the record or
        a socket out of standing (its token rotated away, its agent revoked, the close lost),
        and its standing is read to tell which (a refused ack's hop only). Out of standing:
        closed with its code; else an ``invalid_ack`` answer. True when the socket is still
        open."""
        verdict = await say_desk().standing(self._reader())
        if verdict is not None:
            await self._shut(verdict)
            return False
        await self.send(error_frame(*_invalid_ack(ref)))
        return True

    def _agent_only(self, ref: str) -> Any:
        if self.participant is None or self.participant.agent_id is None:
            raise FrameError(ErrorCode.NOT_ALLOWED, "Only the room's agents may send this.", ref)
        return self.participant

    # --- events from the channel layer ----------------------------------------------------

    async def room_messages(self, event: dict[str, Any]) -> None:
        """Messages stored by a socket's say path (several when a run was recorded at once)."""
        self._queue(
            [(m["seq"], event["sender"], m["frame"], m["owner_frame"]) for m in event["messages"]]
        )

    async def room_message(self, event: dict[str, Any]) -> None:
        """One stored message (the event's earlier form, still sent by older processes)."""
        self._queue([(event["seq"], event["sender"], event["frame"], event["owner_frame"])])

    def _queue(self, deliveries: list[tuple[int, str, str, str]]) -> None:
        """Hand live deliveries to the courier. The outbox is bounded: past
        ``SOCKET_OUTBOX_MAX_FRAMES`` what waits is dropped and read back from the record once
        the socket has caught up (the record is the record; the memory stays bounded)."""
        if self.participant is None or self._closed:
            return
        if self._own_only(deliveries):
            return
        if (
            self._behind
            or len(self._outbox) + len(deliveries) > settings.SYNAPSIA["SOCKET_OUTBOX_MAX_FRAMES"]
        ):
            self._outbox.clear()
            self._behind = True
        else:
            self._outbox.extend(deliveries)
        self._carry_on()

    def _nothing_waiting(self) -> bool:
        """No courier at work, nothing queued, no gap to read."""
        return not (
            self._behind or self._outbox or (self._courier is not None and not self._courier.done())
        )

    def _own_moved(self, seqs: list[int]) -> bool:
        """The socket's own messages, just recorded (``seqs`` ascending): when nothing waits
        and they follow its position with no gap, the position moves past them and True.
        Otherwise nothing moves and False: their event then comes back to this socket behind
        what it has still to receive, and moves it there (``_own_only``). A gap here is
        usually the other agent's message recorded just before and still on its way (both
        agents speaking at once); reading it back from the record would cost a hop for a
        message whose event is already queued."""
        if not self._nothing_waiting():
            return False
        position = self.position
        for seq in seqs:
            if seq > position + 1:
                return False
            position = max(position, seq)
        self.position = position
        return True

    def _own_only(self, deliveries: list[tuple[int, str, str, str]]) -> bool:
        """The socket's own messages, with nothing waiting before them: they give the socket
        nothing, so they need no standing check; they only move its position, here, as the
        courier would have, without a courier task per message. A gap is read back from the
        record (the event that fills it was lost). False (nothing done) for anything else."""
        if not self._nothing_waiting():
            return False
        own = self._own_hex()
        if not own or any(sender != own for _, sender, _, _ in deliveries):
            return False
        for seq, _, _, _ in deliveries:
            if seq <= self.position:
                continue  # already handled
            if seq > self.position + 1:
                self._behind = True  # the rest is in the record: the courier reads it
                self._carry_on()
                break
            self.position = seq
        return True

    def _carry_on(self) -> None:
        if self._courier is None or self._courier.done():
            self._courier = asyncio.create_task(self._carry())

    def _reader(self) -> standing.Reader:
        participant = self.participant
        assert participant is not None
        agent = participant.agent_id is not None
        return standing.Reader(
            participant.room_id,
            participant.owner_id,
            participant.agent_id,
            None if agent else participant.session_key,
            self._token() if agent else None,
        )

    def _token(self) -> str:
        """An agent's socket: the digest of the token it was admitted with, which every hop
        compares with the agent's current one. A socket without one (never admitted so) is
        given the empty digest, which no token has: it fails closed, as a rotated token."""
        participant = self.participant
        return (participant.token_digest if participant is not None else None) or ""

    @property
    def owner_session(self) -> tuple[int, str] | None:
        """An owner's browser: (owner, the key of the session it was admitted with)."""
        participant = self.participant
        if participant is None or participant.agent_id is not None:
            return None
        if participant.session_key is None:
            return None
        return participant.owner_id, participant.session_key

    async def owner_session_check(self, event: dict[str, Any]) -> None:
        """The owner signed out, changed their password or was deactivated (``realtime.
        announce_owner_sessions``): this browser re-reads its session with its standing and
        closes if it ended. A sign-out names its session by digest, and that socket closes
        at once (its row may not be deleted yet). The event only hurries what the next
        delivery or sweep would find: nothing is ever kept open on its word."""
        participant = self.participant
        if participant is None or participant.agent_id is not None or self._closed:
            return
        key = participant.session_key
        if key is None or event.get(realtime.SESSION_ENDED) == realtime.session_digest(key):
            await self._shut(CloseCode.UNAUTHENTICATED)
            return
        verdict = await in_db_thread(standing.reader_standing)(self._reader())
        if verdict is not None:
            await self._shut(verdict)

    async def _carry(self) -> None:
        """Deliver what waits, in order: each wake re-checks the reader's standing from the
        record first (one statement for all the process's sockets waking at once), and a
        reader out of standing is given nothing and closed. A gap, or a bell lost, is read
        back from the record in one hop that checks standing too."""
        try:
            while not self._closed and (self._outbox or self._behind):
                if self._behind:
                    self._behind = False
                    await self._backfill()
                    continue
                batch = list(self._outbox)
                self._outbox.clear()
                own = self._own_hex()
                if any(sender != own for _, sender, _, _ in batch):
                    # Only what is given needs the check (its own messages only move position).
                    verdict = await say_desk().standing(self._reader())
                    if verdict is not None:
                        await self._shut(verdict)
                        return
                agent = bool(own)
                async with self._backfilling:
                    for seq, sender, frame, owner_frame in batch:
                        if seq <= self.position:
                            continue  # already handled (backfilled, or a duplicate event)
                        if seq > self.position + 1:
                            self._behind = True  # the rest is in the record
                            break
                        self.position = seq
                        if sender != own:
                            await self.send(frame if agent else owner_frame)
        except asyncio.CancelledError:
            pass
        except Exception as failed:
            await self._fail(failed)

    async def room_catch_up(self, event: dict[str, Any]) -> None:
        """Something was recorded outside a socket (an owner speaking in person): read it."""
        self._behind = True
        self._carry_on()

    async def room_offers(self, event: dict[str, Any]) -> None:
        """Someone in the room sealed first (wait for the deadline) or the offers were
        revealed (read them from the record). The event carries no offer."""
        participant = self.participant
        if participant is None or participant.agent_id is None or self._reveal_sent:
            return
        if event["revealed"]:
            verdict, reveal = await in_db_thread(self._checked)(
                sealed.offers_revealed, room_id=participant.room_id
            )
            if verdict is not None:
                await self._shut(verdict)
            elif reveal is not None:
                await self._send_reveal(reveal)
        elif event["deadline"] and self._seal_wait is None:
            deadline = datetime.fromisoformat(event["deadline"])
            self._seal_wait = asyncio.create_task(self._reveal_at(deadline))

    async def room_state(self, event: dict[str, Any]) -> None:
        # Told only in standing, like anything else from the room: an owner's browser while
        # its session still signs it in, an agent while it is seated on its own token (a lost
        # revocation or rotation must not keep it hearing the room pause and resume). An
        # agent is told the room closed (or was deleted) whatever its standing: it is closed
        # right after, and learns nothing else.
        owner = self.owner_session is not None
        if self.participant is not None and (owner or event["state"] != RoomState.CLOSED):
            check = standing.owner_session_standing if owner else standing.reader_standing
            verdict = await in_db_thread(check)(self._reader())
            if verdict is not None:
                await self._shut(verdict)
                return
        await self.send(
            RoomStateFrame(
                type="room_state", id=new_frame_id(), body=RoomStateBody(state=event["state"])
            ).model_dump_json()
        )
        if event["state"] == RoomState.CLOSED:
            await self._shut(CloseCode.ROOM_NOT_JOINABLE)

    async def room_outcome(self, event: dict[str, Any]) -> None:
        """The room's outcome changed: an owner's browser is rung to read it from the page
        (an agent learns of its own action from its result, and of the other's from it)."""
        if self.owner_session is None or self.participant is None:
            return
        verdict = await in_db_thread(standing.owner_session_standing)(self._reader())
        if verdict is not None:
            await self._shut(verdict)
            return
        await self._notice(
            "outcome_recorded", "The room's outcome was recorded: read it on the room page."
        )

    async def _notice(self, code: str, message: str) -> None:
        """A trusted ``notice`` frame from the room itself."""
        await self.send(
            NoticeFrame(
                type="notice", id=new_frame_id(), body=NoticeBody(code=code, message=message)
            ).model_dump_json()
        )

    def _for_me(self, event: dict[str, Any]) -> bool:
        """An event for one agent, sent through the room's group (``realtime.FOR_AGENT``):
        whether this socket is that agent's (every other socket of the room ignores it)."""
        own = self._own_hex()
        return bool(own) and event.get(realtime.FOR_AGENT) == own

    async def agent_replaced(self, event: dict[str, Any]) -> None:
        """The same agent joined this room again: this socket closes if it joined earlier.
        Each socket subscribes to the room's group before its join is recorded, so it hears
        of every later join; an earlier socket's event, still on its way when a later one
        subscribed, reaches the later one too, and is ignored there."""
        if not self._for_me(event) or self.participant is None:
            return
        joined = self.participant.joined_seq
        if joined is not None and event["joined"] > joined:
            await self._shut(CloseCode.REPLACED)

    def _checked(self, read: Callable[..., T], **kwargs: Any) -> tuple[Any, T | None]:
        """In one hop: the reader's standing, then (only if in standing) ``read(**kwargs)``."""
        verdict = standing.reader_standing(self._reader())
        return (verdict, None) if verdict is not None else (None, read(**kwargs))

    async def action_result(self, event: dict[str, Any]) -> None:
        participant = self.participant
        if participant is None or participant.agent_id is None or not self._for_me(event):
            return
        verdict, result = await in_db_thread(self._checked)(
            action_result_lookup,
            room_id=participant.room_id,
            agent_id=participant.agent_id,
            idempotency_key=event["ref"],
        )
        if verdict is not None:
            await self._shut(verdict)
        elif result is not None:
            await self.send(action_result_frame(event["ref"], result))

    async def slip_key_revoked(self, event: dict[str, Any]) -> None:
        participant = self.participant
        if participant is None or participant.agent_id is None or not self._for_me(event):
            return
        await self._notice(
            "slip_key_revoked", "Your owner revoked the key that signed your slip in this room."
        )
        cleared = await in_db_thread(slip_in_force)(
            room_id=participant.room_id,
            owner_id=participant.owner_id,
            agent_id=participant.agent_id,
            now=timezone.now(),
        )
        if not cleared:
            await self._shut(CloseCode.NO_CLEARANCE)

    async def agent_whisper(self, event: dict[str, Any]) -> None:
        """The owner whispered to this agent: re-read it from the record, for this room and
        this agent only, and pass it on."""
        participant = self.participant
        if participant is None or participant.agent_id is None or not self._for_me(event):
            return
        verdict, whisper = await in_db_thread(self._checked)(
            Whisper.objects.filter(
                id=event["whisper_id"],
                room_id=participant.room_id,
                agent_id=participant.agent_id,
                owner_id=participant.owner_id,
            ).first
        )
        if verdict is not None:
            await self._shut(verdict)
        elif whisper is not None:
            await self.send(
                WhisperFrame(
                    type="whisper",
                    id=f"whisper-{whisper.id.hex}",
                    body=WhisperBody(id=whisper.id, text=whisper.text, sent_at=whisper.created_at),
                ).model_dump_json()
            )

    async def agent_blocked(self, event: dict[str, Any]) -> None:
        if self._for_me(event):
            await self._shut(CloseCode.FORBIDDEN)

    async def agent_revoked(self, event: dict[str, Any]) -> None:
        if self._for_me(event):
            await self._shut(CloseCode.UNAUTHENTICATED)

    # --- reading gaps back from the record ------------------------------------------------

    def _own_hex(self) -> str:
        agent_id = self.participant.agent_id if self.participant else None
        return agent_id.hex if agent_id else ""

    async def _backfill(self) -> None:
        """Read what this socket missed back from the record, in one hop that re-checks the
        reader's standing first (a reader out of standing reads nothing and is closed)."""
        if self.participant is None or self._closed:
            return
        # One read at a time; each message is still sent once, in order, because
        # ``position`` is re-read after the hop.
        async with self._backfilling:
            verdict, missed = await in_db_thread(self._checked)(
                selectors.messages_after,
                room_id=self.participant.room_id,
                after_seq=self.position,
            )
            if verdict is not None:
                await self._shut(verdict)
                return
            own = self.participant.agent_id
            for message in missed or ():
                if message.seq <= self.position:
                    continue
                self.position = message.seq
                if message.sender_id != own:
                    agent = self.participant.kind == "agent"
                    await self.send(message_frame(message, for_agent=agent))

    def swept(
        self,
        seats: list[standing.Seat],
        sessions: Mapping[standing.SessionPair, Any] = _NO_SESSIONS,
    ) -> None:
        """The record sweep read the room's seats (and the watched owners' sessions): a
        reader out of standing is closed. An owner's session that this sweep did not read
        (watched while it read) is judged by the next."""
        if self._closed or self.participant is None:
            return
        reader = self._reader()
        verdict = standing.seat_verdict(reader, seats)
        pair = self.owner_session
        if verdict is None and pair is not None and pair in sessions:
            verdict = standing.reader_session_verdict(reader, sessions, timezone.now())
        if verdict is not None and (self._courier is None or self._courier.done()):
            self._courier = asyncio.create_task(self._shut(verdict))

    def wake(self) -> None:
        """The record sweep found this socket behind the room (a lost bell): the courier
        reads the gap (standing checked in the same hop)."""
        if self._closed:
            return
        self._behind = True
        self._carry_on()
