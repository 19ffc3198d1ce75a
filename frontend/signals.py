"""Account changes that end an owner's browser sessions, told to their open room tabs.

A room tab's socket outlives the page that opened it. Whether its session still signs its
owner in is read before every delivery and by the record sweep (``rooms.standing``), so
nothing here is needed for safety: these receivers only make an idle tab close at once
rather than at its next delivery or sweep. Each sends one event to the owner's browser
sockets (``rooms.realtime.announce_owner_sessions``), after the change commits.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.signals import user_logged_out
from django.db.models.signals import post_delete, post_save
from django.http import HttpRequest

from rooms.realtime import announce_owner_sessions

# The fields whose change can end a session: the auth hash is made from the password, and an
# inactive owner is signed in nowhere. A save naming other fields only (``last_login`` at
# every sign-in) ends nothing.
SESSION_FIELDS = frozenset({"password", "is_active"})


def owner_signed_out(sender: Any, request: HttpRequest, user: Any, **_: Any) -> None:
    """``user_logged_out``: the session being signed out (its row is deleted just after this
    signal) closes at once; the owner's other tabs re-check theirs (and keep them)."""
    if user is None or user.pk is None:
        return
    session = getattr(request, "session", None)
    announce_owner_sessions(user.pk, ended_session=getattr(session, "session_key", None))


def owner_saved(
    sender: Any, instance: Any, created: bool, update_fields: Any = None, **_: Any
) -> None:
    """``post_save`` of a user: a password change (every other session's auth hash stops
    matching; the session that made it moves to a new key) or a deactivation. Any save that
    may have touched those fields is told: the sockets re-read, so one told needlessly only
    stays open."""
    if created:
        return
    if update_fields is not None and not SESSION_FIELDS & set(update_fields):
        return
    announce_owner_sessions(instance.pk)


def owner_deleted(sender: Any, instance: Any, **_: Any) -> None:
    """``post_delete`` of a user: no session of theirs signs anyone in."""
    announce_owner_sessions(instance.pk)


def connect() -> None:
    """Connect the receivers (``FrontendConfig.ready``)."""
    user_model = get_user_model()
    user_logged_out.connect(owner_signed_out, dispatch_uid="frontend.owner_signed_out")
    post_save.connect(owner_saved, sender=user_model, dispatch_uid="frontend.owner_saved")
    post_delete.connect(owner_deleted, sender=user_model, dispatch_uid="frontend.owner_deleted")
