"""One-time login links for the demo owners (and nobody else).

A link carries 32 random bytes (urlsafe base64); only their SHA-256 is stored, so a database
reader cannot sign in with it. A link works once, for an hour, and only for a user who is a
seeded demo owner (``PracticeOwner``). Looking at a link (GET, as link previewers do) never
uses it; signing in (POST) uses it with one conditional UPDATE, so two tabs racing on one link
sign in once.
"""

from __future__ import annotations

import hashlib
import re
import secrets
from datetime import datetime, timedelta
from uuid import UUID

from django.contrib.auth.models import User
from django.db import transaction
from django.urls import reverse
from django.utils import timezone

from practice.errors import LoginLinkUnusable, NotADemoOwner
from practice.models import LoginLink, PracticeOwner

LOGIN_LINK_TTL = timedelta(hours=1)
TOKEN_BYTES = 32
# token_urlsafe(32): 43 characters of the urlsafe alphabet, no padding.
_TOKEN = re.compile(r"[A-Za-z0-9_-]{43}")


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def login_link_issue(*, owner: User, room_id: UUID | None, now: datetime | None = None) -> str:
    """A fresh one-time link for a demo owner: the path to print (the token is in it and is
    not stored). Refuses (``NotADemoOwner``) anyone who is not a seeded demo owner."""
    if not PracticeOwner.objects.filter(owner=owner).exists():
        raise NotADemoOwner(f"{owner.get_username()} is not a demo owner; no login link.")
    token = secrets.token_urlsafe(TOKEN_BYTES)
    LoginLink.objects.create(
        owner=owner,
        token_hash=_digest(token),
        room_id=room_id,
        expires_at=(now or timezone.now()) + LOGIN_LINK_TTL,
    )
    return reverse("practice-login", kwargs={"token": token})


def _unusable(link: LoginLink | None, now: datetime) -> LoginLinkUnusable | None:
    if link is None:
        return LoginLinkUnusable("This login link is not valid.", status=404)
    if link.used_at is not None:
        return LoginLinkUnusable(
            "This login link was already used. Seed the practice room again for a new one.",
            status=410,
        )
    if link.expires_at <= now:
        return LoginLinkUnusable(
            "This login link has expired. Seed the practice room again for a new one.", status=410
        )
    owner = link.owner
    if not owner.is_active or not PracticeOwner.objects.filter(owner=owner).exists():
        # Defence in depth: links are only ever issued to demo owners.
        return LoginLinkUnusable("This login link is not valid.", status=404)
    return None


def _lookup(token: str) -> LoginLink | None:
    if not isinstance(token, str) or not _TOKEN.fullmatch(token):
        return None
    return LoginLink.objects.select_related("owner").filter(token_hash=_digest(token)).first()


def login_link_check(*, token: str, now: datetime | None = None) -> LoginLink:
    """The link, if it could sign someone in now; ``LoginLinkUnusable`` otherwise. Uses nothing."""
    link = _lookup(token)
    problem = _unusable(link, now or timezone.now())
    if problem is not None:
        raise problem
    assert link is not None
    return link


@transaction.atomic
def login_link_consume(*, token: str, now: datetime | None = None) -> LoginLink:
    """Use the link: exactly one caller gets it back (marked used); every other, and every
    later use, gets ``LoginLinkUnusable``. The caller then signs ``link.owner`` in."""
    now = now or timezone.now()
    link = login_link_check(token=token, now=now)
    # The conditional UPDATE is the single point of truth: a racing request that read the
    # link as unused above still finds nothing to update here.
    used = LoginLink.objects.filter(id=link.id, used_at__isnull=True, expires_at__gt=now).update(
        used_at=now
    )
    if used != 1:
        raise LoginLinkUnusable("This login link was already used.", status=410)
    link.used_at = now
    return link
