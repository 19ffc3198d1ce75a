"""A small asyncio client for the Synapsia room protocol (see docs/protocol.md).

It speaks only the documented wire protocol and imports no server code: every frame from the
server is decoded with the protocol package (``synapsia_protocol``), the same classes the server
validates with, and a frame that does not match them is never acted on. It keeps the socket
alive across drops: on reconnect the server replays everything after the last acknowledged
message, and the client drops anything it has already handed out, so each message is seen
exactly once, in order. Unacknowledged ``say`` frames are resent with the same id, which the
server records only once. A frame a rate refuses (``*_rate_limited``) is resent with the same
id after the wait the refusal names, a bounded number of times (``RateLimitedError`` after).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
import random
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake

from agents.context import TurnContext
from synapsia_protocol import (
    PROTOCOL_VERSION,
    ActionResultBody,
    ActionResultFrame,
    AnyServerFrame,
    ContextFrame,
    ErrorFrame,
    FrameError,
    MessageBody,
    MessageFrame,
    NoticeBody,
    NoticeFrame,
    OffersRevealedBody,
    OffersRevealedFrame,
    PongFrame,
    RoomStateFrame,
    SentFrame,
    WelcomeBody,
    WelcomeFrame,
    WhisperBody,
    WhisperFrame,
    parse_server_frame,
)
from synapsia_protocol.codes import (
    FINAL_CLOSE_CODES,
    code_is_rate_limited,
    retry_hint_seconds,
)

log = logging.getLogger("synapsia.agents")

ACK_BATCH = 32  # while busy, acknowledge at least this often
# How long an acknowledgement of what was handed out waits to ride the next ``say`` or
# ``context_request`` (one frame instead of two) before it goes alone as an ``ack`` frame. An
# agent that answers from code does so within milliseconds; one waiting on a model takes
# seconds, and its ack should not wait for that: until acknowledged, a message is replayed
# after a reconnect (and dropped here as seen), so the wait bounds that replay, not delivery.
ACK_RIDE_SECONDS = 0.25
# The frames an acknowledgement may ride (docs/protocol.md: their ``ack`` field).
ACK_RIDES = frozenset({"say", "context_request"})
# A rate refusal without a hint (an older server) is waited out with backoff from this.
RATE_BACKOFF_FIRST = 0.5
PROTOCOL_ERROR = 1002  # RFC 6455: we close with it when the server's frame is unreadable

# The SDK's names for the package's bodies (aliases, not copies: the very same classes).
# RoomMessage: one of the other agent's messages, untrusted data already stripped by the
# server; ``fenced`` is the same text as one nonce-bounded untrusted block (what to give a
# model), ``flags`` the suspicion rules it raised, ``author`` is ``owner`` when the peer's owner
# stepped in and wrote it in person (still untrusted to you).
RoomMessage = MessageBody
Notice = NoticeBody  # a trusted notice from the room itself (e.g. ``slip_key_revoked``)
Welcome = WelcomeBody  # the room, who you are, your last acknowledgement, your tools
ActionOutcome = ActionResultBody  # what became of an ``act`` (``ref``: its idempotency key)
Whisper = WhisperBody  # your own owner whispered to you (trusted)


class RoomClosedError(Exception):
    """The server ended the session for good; ``code`` says why."""

    def __init__(self, code: int, reason: str) -> None:
        super().__init__(f"connection closed by the server: {code} ({reason})")
        self.code = code


class FrameRefusedError(Exception):
    """The server answered one of our frames with an ``error`` frame."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


class RateLimitedError(FrameRefusedError):
    """A rate kept refusing one of our frames: ``refusals`` times in all (the first answer and
    each resend), or once with a wait longer than the client will wait (``retry_after``, the
    seconds the server named; None if it named none). Nothing of the frame was recorded."""

    def __init__(
        self, kind: str, code: str, message: str, retry_after: int | None, refusals: int
    ) -> None:
        super().__init__(code, message)
        self.kind = kind
        self.retry_after = retry_after
        self.refusals = refusals
        waited = f"refused {refusals} time{'s' * (refusals != 1)}"
        self.args = (f"{code}: the room's rate for {kind} frames {waited}; gave up ({message})",)


def rate_limit_delay(refusals: int, retry_after: int | None, max_wait: float) -> float:
    """How long to wait before resending a frame a rate refused for the ``refusals``-th time:
    the server's hint plus a little jitter (so agents refused together do not all come back
    in the same instant), or without one exponential backoff from ``RATE_BACKOFF_FIRST`` with
    equal jitter; never more than ``max_wait``."""
    jitter = random.random()  # noqa: S311 (jitter, not crypto)
    if retry_after is not None:
        delay = retry_after + min(1.0, 0.1 * retry_after) * jitter
    else:
        step = RATE_BACKOFF_FIRST * 2 ** (refusals - 1)
        delay = step / 2 + step / 2 * jitter
    return min(delay, max_wait)


@dataclass(frozen=True)
class SealedReveal:
    """The room's sealed offers, revealed to both agents at once (the ``offers_revealed``
    body, as decoded, in ``body``), with plain views of it: ``offers`` are ``(agent id, offer
    in JSON form)`` in sealing order; ``complete`` is False when the deadline passed before
    every agent sealed; ``salts`` per agent id (docs/protocol.md, "Sealed offers")."""

    body: OffersRevealedBody

    @property
    def offers(self) -> list[tuple[str, dict[str, Any]]]:
        return [(str(o.agent_id), o.offer.model_dump(mode="json")) for o in self.body.offers]

    @property
    def complete(self) -> bool:
        return self.body.complete

    @property
    def salts(self) -> dict[str, str]:
        return {str(o.agent_id): o.salt for o in self.body.offers}


@dataclass
class _Pending:
    frame: dict[str, Any]
    future: asyncio.Future[Any] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )


class RoomClient:
    """One agent's connection to one room.

    ``async with RoomClient(url, token) as room:`` connects and waits for the welcome;
    ``await room.say(text)`` returns the message's sequence number; ``await room.next_message()``
    (or ``async for message in room``) yields the peer's messages in order, acknowledging each.

    A frame a rate refuses (``say_rate_limited``, ``context_rate_limited``,
    ``act_rate_limited``, ``grant_rate_limited``) is resent, with the same id, after the wait
    the refusal names (or a backoff), up to ``rate_limit_retries`` times; then, or at once if
    the named wait is longer than ``rate_limit_max_wait`` seconds, the request raises
    ``RateLimitedError``. Each refusal counts towards the server's looping agent flare (20 in
    a minute), so keep the retries few. ``rate_limit_waits`` counts the waits so far.
    """

    def __init__(
        self,
        url: str,
        token: str,
        *,
        reconnect: bool = True,
        max_backoff: float = 10.0,
        origin: str | None = None,
        rate_limit_retries: int = 3,
        rate_limit_max_wait: float = 30.0,
    ) -> None:
        self.url = url
        self.token = token
        self.reconnect = reconnect
        self.max_backoff = max_backoff
        self.origin = origin
        self.rate_limit_retries = rate_limit_retries
        self.rate_limit_max_wait = rate_limit_max_wait
        self.rate_limit_waits = 0
        self.welcome: Welcome | None = None
        self.room_state: str | None = None
        self.last_seq = 0  # highest seq handed out; anything at or below is a replay
        self.reconnects = 0
        self._socket: ClientConnection | None = None
        self._inbox: asyncio.Queue[RoomMessage | BaseException] = asyncio.Queue()
        self._pending: dict[str, _Pending] = {}
        self._ids = itertools.count(1)
        self._session = uuid.uuid4().hex[:12]
        self._connected = asyncio.Event()
        self._runner: asyncio.Task[None] | None = None
        self._closing = False
        self._final_error: RoomClosedError | None = None
        self._unreadable: str | None = None  # why the server's last frame could not be read
        self._action_updates: dict[str, asyncio.Queue[ActionOutcome]] = {}
        self._handed_out = 0  # highest seq returned by next_message
        self._acked = 0  # highest seq acknowledged to the server
        self._ack_alone: asyncio.Task[None] | None = None  # the plain ack, if none rides first
        self._state_changed = asyncio.Event()
        self.whispers: asyncio.Queue[Whisper] = asyncio.Queue()  # from your own owner
        self.notices: asyncio.Queue[Notice] = asyncio.Queue()  # from the room itself
        # The room's sealed offers once revealed (kept, so a later seal_offer returns at once).
        self.sealed_reveal: SealedReveal | None = None

    async def __aenter__(self) -> RoomClient:
        await self.connect()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def __aiter__(self) -> RoomClient:
        return self

    async def __anext__(self) -> RoomMessage:
        try:
            return await self.next_message()
        except RoomClosedError:
            raise StopAsyncIteration from None

    # --- public API -----------------------------------------------------------------------

    async def connect(self, timeout: float = 10.0) -> Welcome:
        self._runner = asyncio.create_task(self._run())
        waiter = asyncio.create_task(self._connected.wait())
        done, _ = await asyncio.wait(
            {waiter, self._runner}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED
        )
        if self._runner in done:
            waiter.cancel()
            self._runner.result()  # raises why the connection could not be made, if it failed
            raise self._final_error or ConnectionError(f"could not join {self.url}")
        if waiter not in done:
            waiter.cancel()
            await self.close()
            raise TimeoutError(f"no welcome from {self.url} within {timeout}s")
        assert self.welcome is not None
        return self.welcome

    async def say(self, text: str, timeout: float = 30.0) -> int:
        """Say ``text`` in the room; returns its sequence number once the server recorded it."""
        result: Any = await self._request("say", {"text": text}, timeout)
        return int(result.seq)

    async def say_when_open(self, text: str, timeout: float = 300.0, poll: float = 2.0) -> int:
        """Say ``text``, waiting while the room is paused (at a fork or a flare).

        Room-state frames can be lost between server processes, so while paused this retries
        every ``poll`` seconds as well as on each state change; the server decides each time."""
        deadline = asyncio.get_running_loop().time() + timeout
        while True:
            self._state_changed.clear()
            try:
                return await self.say(text)
            except FrameRefusedError as refused:
                if refused.code != "room_not_open":
                    raise
            remaining = deadline - asyncio.get_running_loop().time()
            if remaining <= 0:
                raise TimeoutError(f"the room stayed {self.room_state} for {timeout}s")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._state_changed.wait(), min(poll, remaining))

    async def act(
        self,
        tool: str,
        arguments: dict[str, Any],
        timeout: float = 30.0,
        *,
        ref: str | None = None,
    ) -> ActionOutcome:
        """Ask for a typed action. ``ref`` (the frame id) is the idempotency key: passing an
        earlier outcome's ``ref`` again never runs the action twice and reports its state.
        If the outcome is ``awaiting_grant``, the room is paused until the owner decides;
        ``await room.settle(outcome)`` waits for the final outcome."""
        outcome: ActionOutcome = await self._request(
            "act", {"tool": tool, "arguments": arguments}, timeout, frame_id=ref
        )
        return outcome

    async def settle(
        self,
        outcome: ActionOutcome,
        tool: str,
        arguments: dict[str, Any],
        *,
        timeout: float = 900.0,
        poll: float = 5.0,
    ) -> ActionOutcome:
        """Wait until the action ``outcome`` reports is final (its owner decided the grant, or
        the webhook answered). Updates are pushed, but a push can be lost between server
        processes, so every ``poll`` seconds this also re-asks with the same ``ref``."""
        deadline = asyncio.get_running_loop().time() + timeout
        while not outcome.settled:
            remaining = deadline - asyncio.get_running_loop().time()
            if remaining <= 0:
                raise TimeoutError(f"action {outcome.ref} still {outcome.status} after {timeout}s")
            try:
                outcome = await self.action_update(outcome.ref, timeout=min(poll, remaining))
            except TimeoutError:
                outcome = await self.act(tool, arguments, ref=outcome.ref)
        return outcome

    async def context(self, timeout: float = 30.0, *, ask: Sequence[str] = ()) -> TurnContext:
        """Start a new turn and return its assembled context: only what the slips clear now.

        ``ask`` names kinds of the other owner's items you want (``budget``, ...): asking
        clears nothing; each one not cleared is a denial both owners see in the ledger."""
        request = {"ask": list(ask)} if ask else {}
        context: TurnContext = await self._request("context_request", request, timeout)
        return context

    async def seal_offer(self, offer: dict[str, Any], timeout: float = 90.0) -> SealedReveal:
        """Seal your offer (``venue_id``, ``start``, ``party_size``, ``price_per_person_minor``,
        ``currency``) and wait for the reveal: both agents' offers at once when both have
        sealed, or what there is at the room's deadline (``complete`` False). One per room; if
        the room's offers were already revealed, returns that reveal without sending."""
        if self.sealed_reveal is not None:
            return self.sealed_reveal
        reveal: SealedReveal = await self._request("seal_offer", {"offer": offer}, timeout)
        return reveal

    async def flare(self, reason: str) -> None:
        """Raise a Signal Flare (``loop``, ``contradiction`` or ``distress``): the room pauses
        and your owner decides what happens next."""
        await self._send_quietly(
            {
                "v": PROTOCOL_VERSION,
                "type": "flare",
                "id": self._next_id(),
                "body": {"reason": reason},
            }
        )

    async def action_update(self, ref: str, timeout: float | None = None) -> ActionOutcome:
        """The next result the server reports for the action ``ref`` (after its grant)."""
        queue = self._action_updates.setdefault(ref, asyncio.Queue())
        return await asyncio.wait_for(queue.get(), timeout)

    async def ping(self, timeout: float = 10.0) -> None:
        await self._request("ping", {}, timeout)

    async def next_message(self, timeout: float | None = None) -> RoomMessage:
        """The next message from the peer, in order and exactly once.

        Acknowledgements are cumulative and batched: once the inbox is drained, the ack rides
        the next ``say`` or ``context_request`` (its ``ack`` field), or goes alone as an ``ack``
        frame after ``ACK_RIDE_SECONDS`` if neither is sent (so an idle agent is soon fully
        acknowledged); while busy, an ``ack`` frame at least every ``ACK_BATCH`` messages.
        Anything unacknowledged is replayed after a reconnect and dropped here.
        """
        item = await asyncio.wait_for(self._inbox.get(), timeout)
        if isinstance(item, BaseException):
            self._inbox.put_nowait(item)  # keep telling later callers too
            raise item
        self._handed_out = item.seq
        if item.seq - self._acked >= ACK_BATCH:
            await self._ack()
        elif self._inbox.empty() and self._ack_alone is None:
            self._ack_alone = asyncio.get_running_loop().create_task(self._ack_after_wait())
        return item

    async def _ack_after_wait(self) -> None:
        """The plain ``ack`` of what was handed out, when no frame took it along meanwhile."""
        await asyncio.sleep(ACK_RIDE_SECONDS)
        self._ack_alone = None
        await self._ack()

    def _ack_riding(self) -> int | None:
        """The ack a frame about to be sent takes along (counted as sent), or None."""
        if self._handed_out <= self._acked:
            return None
        self._acked = self._handed_out
        return self._acked

    async def _ack(self) -> None:
        if self._handed_out > self._acked:
            self._acked = self._handed_out
            await self._send_quietly(
                {
                    "v": PROTOCOL_VERSION,
                    "type": "ack",
                    "id": self._next_id(),
                    "body": {"seq": self._acked},
                }
            )

    async def close(self) -> None:
        self._closing = True
        if self._ack_alone is not None:
            self._ack_alone.cancel()
            self._ack_alone = None
        await self._ack()  # leave nothing handed out unacknowledged
        if self._socket is not None:
            await self._socket.close()
        if self._runner is not None:
            self._runner.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._runner

    # --- internals ------------------------------------------------------------------------

    def _next_id(self) -> str:
        return f"{self._session}-{next(self._ids)}"

    async def _request(
        self, kind: str, body: dict[str, Any], timeout: float, *, frame_id: str | None = None
    ) -> Any:
        """Send a frame and wait for its answer (``timeout`` for each sending); a rate's
        refusal is waited out and the same frame resent, a bounded number of times."""
        frame_id = frame_id or self._next_id()
        ack = self._ack_riding() if kind in ACK_RIDES else None
        if ack is not None:
            # Part of the frame from here on: every resend of it (a reconnect, a rate's wait)
            # carries it, and the server records it even when it refuses the frame itself.
            body = {**body, "ack": ack}
        frame = {"v": PROTOCOL_VERSION, "type": kind, "id": frame_id, "body": body}
        refusals = 0
        while True:
            try:
                return await self._send_and_wait(frame, timeout)
            except FrameRefusedError as refused:
                if not code_is_rate_limited(refused.code):
                    raise
                refusals += 1
                hint = retry_hint_seconds(refused.message)
                if refusals > self.rate_limit_retries or (
                    hint is not None and hint > self.rate_limit_max_wait
                ):
                    raise RateLimitedError(
                        kind, refused.code, refused.message, hint, refusals
                    ) from None
                delay = rate_limit_delay(refusals, hint, self.rate_limit_max_wait)
                self.rate_limit_waits += 1
                log.info("%s refused (%s): resending in %.1f s", kind, refused.code, delay)
                # Not pending while it waits: a reconnect meanwhile must not resend it early.
                await asyncio.sleep(delay)

    async def _send_and_wait(self, frame: dict[str, Any], timeout: float) -> Any:
        frame_id = frame["id"]
        pending = _Pending(frame)
        self._pending[frame_id] = pending
        await self._send_quietly(frame)
        try:
            return await asyncio.wait_for(asyncio.shield(pending.future), timeout)
        finally:
            self._pending.pop(frame_id, None)

    async def _send_quietly(self, frame: dict[str, Any]) -> None:
        """Send if connected; otherwise the frame waits in ``_pending`` for the reconnect."""
        if self._socket is not None:
            with contextlib.suppress(ConnectionClosed):
                await self._socket.send(json.dumps(frame))

    async def _run(self) -> None:
        backoff = 0.25
        while True:
            try:
                async with connect(
                    self.url,
                    additional_headers={"Authorization": f"Bearer {self.token}"},
                    origin=self.origin,  # type: ignore[arg-type]
                    proxy=None,
                    open_timeout=10,
                ) as socket:
                    self._socket = socket
                    await self._read(socket)
                if self._unreadable is not None:
                    self._fail(RoomClosedError(PROTOCOL_ERROR, "the server broke the protocol"))
                    return
            except ConnectionClosed as closed:
                code = closed.rcvd.code if closed.rcvd else 1006
                if code in FINAL_CLOSE_CODES:
                    self._fail(RoomClosedError(code, FINAL_CLOSE_CODES[code]))
                    return
                log.info("connection dropped (%s); reconnecting", code)
            except (OSError, InvalidHandshake, TimeoutError) as exc:
                if self.welcome is None:
                    raise  # never connected: report it to connect()
                log.info("reconnect failed (%s)", exc)
            finally:
                self._socket = None
            if self._closing or not self.reconnect:
                self._fail(RoomClosedError(1000, "closed"))
                return
            await asyncio.sleep(backoff * (1 + random.random() / 2))  # noqa: S311 (jitter, not crypto)
            backoff = min(backoff * 2, self.max_backoff)
            self.reconnects += 1

    async def _read(self, socket: ClientConnection) -> None:
        async for raw in socket:
            try:
                frame = parse_server_frame(raw)
            except FrameError as refused:
                # Never act on a frame the protocol package cannot read, and never read on
                # past it: acknowledgements are cumulative, so skipping it would lose it for
                # good. A server that sends one is not speaking this protocol; stop.
                log.error("the server sent a frame that is not the protocol: %s", refused)
                self._unreadable = refused.message
                await socket.close(PROTOCOL_ERROR, "unreadable frame")
                return
            if frame is None:
                log.warning("ignoring a frame type this SDK does not know")
                continue
            await self._handle(socket, frame)

    async def _handle(self, socket: ClientConnection, frame: AnyServerFrame) -> None:
        match frame:
            case WelcomeFrame():
                await self._on_welcome(socket, frame.body)
            case MessageFrame():
                if frame.body.seq > self.last_seq:
                    self.last_seq = frame.body.seq
                    self._inbox.put_nowait(frame.body)
            case SentFrame():
                self._resolve(frame.body.ref, frame.body)
            case PongFrame():
                self._resolve(frame.id, frame.body)
            case ErrorFrame():
                body = frame.body
                refused = FrameRefusedError(str(body.code), body.message)
                if not self._resolve(body.ref, refused):
                    log.warning("server error frame: %s", body.model_dump(mode="json"))
            case ActionResultFrame():
                outcome = frame.body
                if not self._resolve(outcome.ref, outcome):  # a later update, after a grant
                    self._action_updates.setdefault(outcome.ref, asyncio.Queue()).put_nowait(
                        outcome
                    )
            case RoomStateFrame():
                self.room_state = frame.body.state
                self._state_changed.set()
            case ContextFrame():
                self._resolve(frame.id, frame.body)
            case WhisperFrame():
                self.whispers.put_nowait(frame.body)
            case NoticeFrame():
                self.notices.put_nowait(frame.body)
            case OffersRevealedFrame():
                # Sent unprompted too (to the agent that sealed first, after every reconnect).
                reveal = SealedReveal(frame.body)
                self.sealed_reveal = reveal
                for ref, pending in list(self._pending.items()):
                    if pending.frame["type"] == "seal_offer":
                        self._resolve(ref, reveal)

    async def _on_welcome(self, socket: ClientConnection, body: WelcomeBody) -> None:
        self.welcome = body
        self.room_state = body.room.state
        self._state_changed.set()
        self._connected.set()
        for pending in list(self._pending.values()):  # resend what was never confirmed
            await socket.send(json.dumps(pending.frame))

    def _resolve(self, ref: str | None, value: Any) -> bool:
        pending = self._pending.get(ref or "")
        if pending is None or pending.future.done():
            return False
        if isinstance(value, BaseException):
            pending.future.set_exception(value)
        else:
            pending.future.set_result(value)
        return True

    def _fail(self, error: RoomClosedError) -> None:
        self._final_error = error
        self._inbox.put_nowait(error)
        for pending in self._pending.values():
            if not pending.future.done():
                pending.future.set_exception(error)
