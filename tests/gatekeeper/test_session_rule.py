"""The owner-session rule (``gatekeeper.standing.session_verdict``) as a table, pure: the
session's facts are built here as ``rooms.standing.owner_sessions_read`` would read them, and
the hash is the user model's own (Django's ``get_session_auth_hash``). The reading, the
sockets closing and the events are ``tests/rooms/test_owner_session.py``."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY
from django.contrib.auth.models import User
from django.utils import timezone

from gatekeeper.standing import SessionFacts, session_verdict
from rooms.protocol import CloseCode

ALICE, MALLORY = 7, 8
PASSWORD = "md5$salt$alice-password-hash"
BACKEND = "django.contrib.auth.backends.ModelBackend"
NOW = timezone.now()


def _hash(password: str) -> str:
    return User(pk=ALICE, password=password).get_session_auth_hash()


def _facts(**changes: Any) -> SessionFacts:
    data = {
        SESSION_KEY: str(ALICE),
        BACKEND_SESSION_KEY: BACKEND,
        HASH_SESSION_KEY: _hash(PASSWORD),
    }
    data.update(changes.pop("data", {}))
    fields: dict[str, Any] = {
        "data": {k: v for k, v in data.items() if v is not None},
        "expires_at": NOW + dt.timedelta(days=1),
        "user_password": PASSWORD,
        "user_active": True,
    }
    fields.update(changes)
    return SessionFacts(**fields)


CASES: list[tuple[str, SessionFacts | None, CloseCode | None]] = [
    ("signed in", _facts(), None),
    ("the engine keeps its own expiry", _facts(expires_at=None), None),
    ("the row is gone", None, CloseCode.UNAUTHENTICATED),
    ("expired", _facts(expires_at=NOW), CloseCode.UNAUTHENTICATED),
    (
        "data that did not verify",
        _facts(data={SESSION_KEY: None, BACKEND_SESSION_KEY: None, HASH_SESSION_KEY: None}),
        CloseCode.UNAUTHENTICATED,
    ),
    ("signs in another user", _facts(data={SESSION_KEY: str(MALLORY)}), CloseCode.UNAUTHENTICATED),
    (
        "an unlisted backend",
        _facts(data={BACKEND_SESSION_KEY: "x.Backend"}),
        CloseCode.UNAUTHENTICATED,
    ),
    ("the user is gone", _facts(user_password=None), CloseCode.UNAUTHENTICATED),
    ("deactivated", _facts(user_active=False), CloseCode.UNAUTHENTICATED),
    ("no auth hash", _facts(data={HASH_SESSION_KEY: None}), CloseCode.UNAUTHENTICATED),
    ("the password changed", _facts(user_password="md5$salt$new"), CloseCode.UNAUTHENTICATED),
]


@pytest.mark.parametrize(("case", "facts", "want"), CASES, ids=[c[0] for c in CASES])
def test_every_way_a_session_ends(case: str, facts: SessionFacts | None, want: Any) -> None:
    assert session_verdict(owner_id=ALICE, session=facts, now=NOW) == want


def test_a_hash_made_with_a_fallback_secret_still_signs_in(settings: Any) -> None:
    """As Django's page load: a session from before a ``SECRET_KEY`` rotation still counts
    (the page load then moves it to a new key, and this socket's row goes with the old)."""
    settings.SECRET_KEY_FALLBACKS = ["the-old-secret-key-of-this-deployment-0123456789"]
    [fallback] = User(pk=ALICE, password=PASSWORD).get_session_auth_fallback_hash()
    old = _facts(data={HASH_SESSION_KEY: fallback})
    assert session_verdict(owner_id=ALICE, session=old, now=NOW) is None
    settings.SECRET_KEY_FALLBACKS = []
    assert session_verdict(owner_id=ALICE, session=old, now=NOW) == CloseCode.UNAUTHENTICATED
