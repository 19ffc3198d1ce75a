"""Who is opening this room socket, and may they?

Agents present ``Authorization: Bearer <token>``; browsers present their session cookie and
an ``Origin`` that must be exactly this site's (scheme, host and port). Every refusal is a
``Refusal`` with a documented close code, decided before any room data is sent.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal
from urllib.parse import urlsplit
from uuid import UUID

from django.conf import settings
from django.contrib.auth.models import AnonymousUser, User
from django.db import transaction
from django.http.request import validate_host

from ledger.events import Join
from ledger.services import LedgerAppendError, ledger_append
from rooms import selectors
from rooms.models import Room, RoomMember, RoomState, SeatStanding
from rooms.protocol import CloseCode

_JOINABLE = (RoomState.OPEN, RoomState.PAUSED)
_WATCHABLE = (RoomState.DRAFT, RoomState.OPEN, RoomState.PAUSED)


@dataclass(frozen=True)
class Participant:
    """An admitted socket: an agent bound to the room, or an owner watching it."""

    kind: Literal["agent", "owner"]
    room_id: UUID
    owner_id: int
    agent_id: UUID | None
    acked_seq: int


@dataclass(frozen=True)
class Refusal:
    code: CloseCode
    reason: str


def _header(headers: list[tuple[bytes, bytes]], name: bytes) -> str | None:
    for key, value in headers:
        if key.lower() == name:
            return value.decode("latin-1")
    return None


_DEFAULT_PORTS = {"http": 80, "https": 443}


def _origin_form(scheme: str, host: str, port: int | None) -> str:
    """``scheme://host[:port]`` lowercased, the scheme's default port left out (RFC 6454)."""
    port = None if port == _DEFAULT_PORTS.get(scheme) else port
    return f"{scheme}://{host.lower()}" + (f":{port}" if port is not None else "")


def _site_scheme(headers: list[tuple[bytes, bytes]], scope_scheme: str | None) -> str:
    """The scheme the browser used, as Django's ``request.is_secure()`` decides it: the
    proxy's header where ``SECURE_PROXY_SSL_HEADER`` trusts one, else the socket's own."""
    trusted = getattr(settings, "SECURE_PROXY_SSL_HEADER", None)
    if trusted:
        name, secure_value = trusted
        header = name.removeprefix("HTTP_").lower().replace("_", "-").encode("latin-1")
        value = _header(headers, header)
        if value is not None:
            return "https" if value.split(",")[0].strip() == secure_value else "http"
    return "https" if scope_scheme == "wss" else "http"


def origin_allowed(
    origin: str,
    *,
    headers: Sequence[tuple[bytes, bytes]] = (),
    scope_scheme: str | None = None,
) -> bool:
    """An Origin is allowed when it is exactly this site's (scheme, host and port of the
    request's ``Host``, which must be an allowed host) or exactly a CSRF-trusted origin.

    A request with no ``Host`` header is not a browser's (browsers always send one, and the
    Origin check only guards against cross-site pages in browsers): its Origin's host must be
    an allowed host.
    """
    if origin in settings.CSRF_TRUSTED_ORIGINS:
        return True
    try:
        parts = urlsplit(origin)
        origin_port = parts.port
    except ValueError:
        return False
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return False
    if parts.path or parts.query or parts.fragment or parts.username is not None:
        return False  # an Origin is scheme, host and port, nothing else
    host = _header(list(headers), b"host")
    if host is None:
        return validate_host(parts.hostname, settings.ALLOWED_HOSTS)
    try:
        site = urlsplit(f"//{host}")
        site_host, site_port = site.hostname, site.port
    except ValueError:
        return False
    if not site_host or not validate_host(site_host, settings.ALLOWED_HOSTS):
        return False
    scheme = _site_scheme(list(headers), scope_scheme)
    expected = _origin_form(scheme, site_host, site_port)
    return _origin_form(parts.scheme, parts.hostname, origin_port) == expected


def admit(
    *,
    room_id: str,
    headers: list[tuple[bytes, bytes]],
    user: User | AnonymousUser,
    scope_scheme: str | None = None,
) -> Participant | Refusal:
    """Decide a room socket's handshake. Runs in one database hop."""
    origin = _header(headers, b"origin")
    if origin is not None and not origin_allowed(
        origin, headers=headers, scope_scheme=scope_scheme
    ):
        return Refusal(CloseCode.ORIGIN_NOT_ALLOWED, "Origin not allowed.")
    try:
        room_uuid = UUID(room_id)
    except ValueError:
        return Refusal(CloseCode.FORBIDDEN, "Not a member of this room.")

    authorization = _header(headers, b"authorization")
    if authorization is not None:
        scheme, _, token = authorization.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            return Refusal(CloseCode.UNAUTHENTICATED, "Use: Authorization: Bearer <token>.")
        agent = selectors.agent_by_token(token=token.strip())
        if agent is None:
            return Refusal(CloseCode.UNAUTHENTICATED, "Unknown or revoked token.")
        seat = (
            RoomMember.objects.filter(room_id=room_uuid, agent=agent).select_related("room").first()
        )
        if seat is None:
            return Refusal(CloseCode.FORBIDDEN, "Not a member of this room.")
        if seat.room.state not in _JOINABLE:
            return Refusal(CloseCode.ROOM_NOT_JOINABLE, f"The room is {seat.room.state}.")
        if seat.standing == SeatStanding.BLOCKED:
            return Refusal(CloseCode.FORBIDDEN, "Your owner blocked you in this room.")
        try:
            with transaction.atomic():
                ledger_append(
                    room_id=room_uuid,
                    event=Join(participant_id=str(agent.id), participant_kind="agent"),
                )
        except LedgerAppendError:
            # A join that cannot be recorded does not happen.
            return Refusal(CloseCode.TRY_AGAIN, "The room cannot record your join right now.")
        return Participant("agent", room_uuid, seat.owner_id, agent.id, seat.acked_seq)

    # Browsers: a session, and an Origin (browsers always send one on WebSocket upgrades).
    if origin is None:
        return Refusal(CloseCode.UNAUTHENTICATED, "Browsers must send an Origin header.")
    if not user.is_authenticated:
        return Refusal(CloseCode.UNAUTHENTICATED, "Sign in first.")
    room = Room.objects.filter(id=room_uuid, members__owner_id=user.pk).first()
    if room is None:
        return Refusal(CloseCode.FORBIDDEN, "Not a member of this room.")
    if room.state not in _WATCHABLE:
        return Refusal(CloseCode.ROOM_NOT_JOINABLE, f"The room is {room.state}.")
    return Participant("owner", room_uuid, user.pk, None, 0)
