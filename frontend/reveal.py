"""A secret shown once on the page a POST redirects to (an agent's new token, a room's new
invitation link), carried there without being readable on the server.

The POST seals it (AES-GCM) under a fresh key and keeps only the sealed bytes in the session;
the key goes to this browser alone, in a short-lived, HttpOnly cookie limited to the page's
path. The redirected GET opens it and forgets both, so a reload shows it no more and repeats
no POST. Sessions are rows in the database: a backup or a read of that table finds sealed
bytes, never a live token (tokens are otherwise stored only as hashes), even when the GET
never came (a dropped connection) and the session row lived on.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
from dataclasses import dataclass
from typing import Any

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from django.conf import settings
from django.http import HttpRequest, HttpResponse

_AAD = b"synapsia-reveal-v1"
# Long enough for the redirect on a slow connection; a reveal not taken by then is lost.
_COOKIE_SECONDS = 300


@dataclass(frozen=True)
class Taken:
    """What the redirected page found: the secret's fields, or ``lost`` when one was kept
    but this browser no longer holds its key (cookies refused, or it expired)."""

    fields: dict[str, Any] | None
    lost: bool = False


def reveal_cookie(name: str) -> str:
    """The cookie that holds the key of the reveal called ``name`` (one per kind of secret,
    so one page never takes another's)."""
    return f"synapsia_reveal_{name}"


def _session_key(name: str) -> str:
    return f"frontend.reveal.{name}"


def reveal_keep(
    request: HttpRequest,
    response: HttpResponse,
    fields: dict[str, Any],
    *,
    name: str,
    path: str,
) -> None:
    """Keep ``fields`` (JSON-able; one holds the secret) for the next page at ``path``."""
    key = AESGCM.generate_key(bit_length=256)
    nonce = os.urandom(12)
    sealed = nonce + AESGCM(key).encrypt(nonce, json.dumps(fields).encode(), _AAD)
    request.session[_session_key(name)] = base64.b64encode(sealed).decode()
    response.set_cookie(
        reveal_cookie(name),
        base64.urlsafe_b64encode(key).decode(),
        max_age=_COOKIE_SECONDS,
        path=path,
        secure=settings.SESSION_COOKIE_SECURE,
        httponly=True,
        samesite="Strict",
    )


def reveal_take(request: HttpRequest, *, name: str) -> Taken:
    """The kept fields, opened and forgotten in the session (``reveal_forget`` the cookie on
    the answer)."""
    sealed_text = request.session.pop(_session_key(name), None)
    if sealed_text is None:
        return Taken(None)
    try:
        key = base64.urlsafe_b64decode(request.COOKIES[reveal_cookie(name)])
        sealed = base64.b64decode(sealed_text)
        opened = AESGCM(key).decrypt(sealed[:12], sealed[12:], _AAD)
    except (KeyError, ValueError, binascii.Error, InvalidTag):
        return Taken(None, lost=True)
    return Taken(dict(json.loads(opened)))


def reveal_forget(request: HttpRequest, response: HttpResponse, *, name: str, path: str) -> None:
    """Drop the browser's key, if it sent one."""
    if reveal_cookie(name) in request.COOKIES:
        response.delete_cookie(reveal_cookie(name), path=path, samesite="Strict")
