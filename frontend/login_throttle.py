"""Login throttling with lockout (django-axes) and the password-reset request throttle.

Every login that checks a password (the owner's log-in page, the admin's) goes through
``django.contrib.auth.authenticate``, where ``LoginThrottleBackend`` refuses a locked username
or address before any password is compared, and each failure is counted by axes. The limits
are settings (``synapsia/settings.py``, "Throttling"); ``docs/threat-model.md`` says why these.
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import TYPE_CHECKING, Any

import redis.exceptions
from axes.backends import AxesStandaloneBackend
from axes.models import AccessAttempt, AccessFailureLog, AccessLog
from axes.utils import reset as axes_reset
from django.conf import settings
from django.core.cache import cache
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

if TYPE_CHECKING:
    from rooms.retention import Purged

logger = logging.getLogger(__name__)
# What a cache backend raises when its store is unreachable (Redis in production).
THROTTLE_STORE_ERRORS = (redis.exceptions.RedisError, OSError)
LOCKOUT_TEMPLATE = "registration/locked_out.html"
RESET_THROTTLED_TEMPLATE = "registration/password_reset_throttled.html"
SIGNUP_THROTTLED_TEMPLATE = "registration/signup_throttled.html"
_WINDOW_SECONDS = 60 * 60


def login_cooloff_minutes() -> int:
    """How long a lockout lasts, in whole minutes, as the lockout page says it."""
    return max(1, int(settings.AXES_COOLOFF_TIME.total_seconds()) // 60)


def lockout_response(
    request: HttpRequest,
    original_response: HttpResponse | None = None,
    credentials: dict[str, Any] | None = None,
) -> HttpResponse:
    """The page for a login refused because of too many failures (axes' lockout callable).
    It says the same whether the username exists or not, and never which limit was hit."""
    return render(
        request,
        LOCKOUT_TEMPLATE,
        {
            "minutes": login_cooloff_minutes(),
            "reset_by_email": settings.PASSWORD_RESET_BY_EMAIL,
        },
        status=429,
    )


class LoginThrottleBackend(AxesStandaloneBackend):
    """Axes' check, for logins that come with an HTTP request (every login page does).

    Without a request (Django's test client ``login()``, a shell) there is no address to
    count against and nobody to show a lockout page to; axes would raise, so we let the
    other backends decide. A locked request raises ``PermissionDenied`` inside ``authenticate``,
    which Django turns into a failed login, and ``AxesMiddleware`` into the 429 page.
    """

    def authenticate(
        self,
        request: HttpRequest | None,
        username: str | None = None,
        password: str | None = None,
        **kwargs: Any,
    ) -> None:
        if request is None:
            return None
        super().authenticate(request, username=username, password=password, **kwargs)
        return None


def login_lockout_lift(*, username: str) -> None:
    """Forget the failed logins counted against ``username`` (after a completed reset)."""
    axes_reset(username=username)


def login_records_purge_expired(now: datetime) -> Purged:
    """The telemetry row's purge: axes' records of failed (and, if the access log is on, all)
    logins older than the telemetry window. They name a username and an address, so they are
    personal data kept for security only; a lockout needs minutes of them, never 30 days."""
    from rooms.retention import Purged, retention_row

    row = retention_row("telemetry")
    cutoff = row.cutoff(now)
    rows = sum(
        model.objects.filter(attempt_time__lt=cutoff).delete()[0]
        for model in (AccessAttempt, AccessFailureLog, AccessLog)
    )
    return Purged(
        key=row.key,
        rows=rows,
        rooms=0,
        summary=f"login records: deleted {rows} older than {row.period}",
    )


def _client_address(request: HttpRequest) -> str:
    # REMOTE_ADDR only: behind the proxy, Daphne's --proxy-headers has already set it.
    return str(request.META.get("REMOTE_ADDR") or "unknown")


def _window_key(scope: str, request: HttpRequest) -> str:
    return f"throttle-{scope}:{_client_address(request)}"


def _window_spend(scope: str, request: HttpRequest) -> int:
    """Count one event for this address in the current one-hour window; the count so far
    (0 when the cache cannot be reached: these limits then do not apply, and say so in the
    log; the login lockout is in the database and does not depend on them)."""
    key = _window_key(scope, request)
    try:
        cache.add(key, 0, timeout=_WINDOW_SECONDS)
        try:
            return int(cache.incr(key))
        except ValueError:  # the window ended between add and incr: its first event
            cache.set(key, 1, timeout=_WINDOW_SECONDS)
            return 1
    except THROTTLE_STORE_ERRORS:
        logger.warning("%s not counted: the cache is unreachable", scope, exc_info=True)
        return 0


def password_reset_request_allowed(request: HttpRequest) -> bool:
    """Count one reset request from this address in the current hour; False past the limit.

    Each request may send an email, so a stranger cannot use the form to flood a mailbox or
    probe addresses at speed. Fixed one-hour windows in the shared cache (Redis in production).
    """
    limit = int(settings.SYNAPSIA["PASSWORD_RESETS_PER_ADDRESS_PER_HOUR"])
    return _window_spend("password-reset", request) <= limit


def password_reset_throttled_response(request: HttpRequest) -> HttpResponse:
    return render(request, RESET_THROTTLED_TEMPLATE, {}, status=429)


def signup_refusal_count(request: HttpRequest) -> None:
    """Count a signup refused on its username from this address (each one is a probe)."""
    _window_spend("signup-refusals", request)


def signup_refusals_exceeded(request: HttpRequest) -> bool:
    """True once this address has had its hour's share of refused usernames."""
    limit = int(settings.SYNAPSIA["SIGNUP_USERNAME_REFUSALS_PER_ADDRESS_PER_HOUR"])
    try:
        return int(cache.get(_window_key("signup-refusals", request), 0)) >= limit
    except THROTTLE_STORE_ERRORS:
        logger.warning("signup refusals not read: the cache is unreachable", exc_info=True)
        return False


def signup_throttled_response(request: HttpRequest) -> HttpResponse:
    return render(request, SIGNUP_THROTTLED_TEMPLATE, {}, status=429)
