"""Structured logs: one JSON object per line in production, with correlation ids, never content.

Every record carries ``request_id`` (the proxy's ``X-Request-ID`` when it is a plain token,
else a fresh one, echoed in the response), ``room_id`` and ``agent_id`` when the code handling
it knows them. They come from context variables, so a line logged anywhere below a request
(or below :func:`correlation_bound`) is tied to it without passing ids around; a room socket's
lines name their room and agent through :func:`correlated`. Ids are correlation keys, not
content: room text, whispers, vault items and slips are never logged by this module, and
tests/synapsia/test_logging.py checks a whole negotiation's log output for them.
"""

from __future__ import annotations

import asyncio
import atexit
import logging
import re
import threading
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from asgiref.sync import iscoroutinefunction, markcoroutinefunction
from django.http import HttpRequest, HttpResponseBase
from pythonjsonlogger.json import JsonFormatter as _JsonFormatter

request_id: ContextVar[str | None] = ContextVar("synapsia_request_id", default=None)
room_id: ContextVar[str | None] = ContextVar("synapsia_room_id", default=None)
agent_id: ContextVar[str | None] = ContextVar("synapsia_agent_id", default=None)

# A request id from the proxy is kept only if it is a plain token (no log injection).
_REQUEST_ID = re.compile(r"^[A-Za-z0-9._-]{8,64}$")
_FIELDS = ("request_id", "room_id", "agent_id")


class CorrelationFilter(logging.Filter):
    """Puts the current correlation ids on every record (None where unknown); an id the
    record was given (``correlated``) is kept."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.request_id = getattr(record, "request_id", None) or request_id.get()
        record.room_id = getattr(record, "room_id", None) or room_id.get()
        record.agent_id = getattr(record, "agent_id", None) or agent_id.get()
        return True


def correlated(
    logger: logging.Logger, *, room: object = None, agent: object = None
) -> logging.LoggerAdapter[logging.Logger]:
    """``logger``, its lines tied to this room and/or agent (ids only). For code whose lines
    no context variable reaches: a room socket's handlers run in several tasks (one per
    source of events) and in shared desks serving many sockets, so the socket names itself."""
    named = {"room_id": room, "agent_id": agent}
    return logging.LoggerAdapter(
        logger, {k: None if v is None else str(v) for k, v in named.items()}
    )


class CancelledCleanupFilter(logging.Filter):
    """channels_redis's pub/sub layer logs an ERROR with a traceback when a closed socket's
    clean-up, the unsubscribe of its channel from Redis, is itself cancelled: as when the
    server stops while sockets are still closing, one record for each of them. Nothing
    failed that an operator could act on, so that record is kept as INFO, in words, without
    the traceback, and counted rather than repeated: one line at most every ``EVERY_S``
    seconds, saying how many more came since the last, and the count of any left unsaid
    when the process exits (a server stopping with a thousand sockets closing logged a
    line for each). Any other exception in that clean-up is left as the ERROR it is."""

    LOGGER = "channels_redis.pubsub"
    SAID = (
        "A closed socket's channel was not unsubscribed from Redis: its clean-up was cancelled, "
        "as when the server stops. The subscription ends with this process's Redis connection."
    )
    EVERY_S = 60.0
    MORE = " {count} more like it since the last such line."
    UNSAID_AT_EXIT = (
        "{count} more closed sockets' channels were not unsubscribed from Redis before this "
        "process stopped (their clean-ups were cancelled). The subscriptions end with its "
        "Redis connection."
    )

    def __init__(self, name: str = "") -> None:
        super().__init__(name)
        self._lock = threading.Lock()
        self._said_at: float | None = None
        self._unsaid = 0
        atexit.register(self.unsaid_flush)

    def filter(self, record: logging.LogRecord) -> bool:
        failed = record.exc_info[1] if record.exc_info else None
        if record.name != self.LOGGER or not isinstance(failed, asyncio.CancelledError):
            return True
        # Made as an ERROR, it passed the level check already: INFO must pass it too.
        if not logging.getLogger(record.name).isEnabledFor(logging.INFO):
            return False
        now = time.monotonic()
        with self._lock:
            if self._said_at is not None and now - self._said_at < self.EVERY_S:
                self._unsaid += 1
                return False
            unsaid, self._unsaid, self._said_at = self._unsaid, 0, now
        record.levelno, record.levelname = logging.INFO, logging.getLevelName(logging.INFO)
        record.msg = self.SAID + (self.MORE.format(count=unsaid) if unsaid else "")
        record.args = ()
        record.exc_info, record.exc_text = None, None
        return True

    def unsaid_flush(self) -> None:
        """Log how many cancelled clean-ups went unsaid since the last line (at exit)."""
        with self._lock:
            unsaid, self._unsaid = self._unsaid, 0
        if unsaid:
            logging.getLogger(self.LOGGER).info(self.UNSAID_AT_EXIT.format(count=unsaid))


class JsonFormatter(_JsonFormatter):
    """time, level, logger, message, the correlation ids; exceptions as text."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault(
            "rename_fields", {"asctime": "time", "levelname": "level", "name": "logger"}
        )
        super().__init__(
            "%(asctime)s %(levelname)s %(name)s %(message)s "
            + " ".join(f"%({field})s" for field in _FIELDS),
            *args,
            **kwargs,
        )


@contextmanager
def correlation_bound(*, room: object = None, agent: object = None) -> Iterator[None]:
    """Tie every line logged inside to this room and/or agent (ids only)."""
    tokens = []
    if room is not None:
        tokens.append((room_id, room_id.set(str(room))))
    if agent is not None:
        tokens.append((agent_id, agent_id.set(str(agent))))
    try:
        yield
    finally:
        for variable, token in reversed(tokens):
            variable.reset(token)


Response = HttpResponseBase
GetResponse = Callable[[HttpRequest], Any]


class CorrelationMiddleware:
    """Binds a request id (and the room id a URL names) for the request's log lines."""

    sync_capable = True
    async_capable = True

    def __init__(self, get_response: GetResponse) -> None:
        self.get_response = get_response
        if iscoroutinefunction(get_response):
            markcoroutinefunction(self)

    def __call__(self, request: HttpRequest) -> Any:
        if iscoroutinefunction(self):
            return self._acall(request)
        self._bind(request)
        response = self.get_response(request)
        response["X-Request-ID"] = request_id.get()
        return response

    async def _acall(self, request: HttpRequest) -> Response:
        self._bind(request)
        response = await self.get_response(request)
        response["X-Request-ID"] = request_id.get()
        return response

    def process_view(
        self,
        request: HttpRequest,
        view: Callable[..., Awaitable[Any] | Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> None:
        room = kwargs.get("room_id")
        if room is not None:
            room_id.set(str(room))

    @staticmethod
    def _bind(request: HttpRequest) -> None:
        # Not reset when the response leaves: Django logs a 4xx/5xx ("Not Found: ...") after
        # the middleware chain returned, and that line must carry the id too. Each ASGI request
        # runs in a context of its own; a thread serving requests one by one rebinds here.
        given = request.headers.get("X-Request-ID", "")
        request_id.set(given if _REQUEST_ID.match(given) else uuid.uuid4().hex)
        room_id.set(None)
        agent_id.set(None)
