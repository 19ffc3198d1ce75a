"""The signed-in owner of a request, typed, for views and API endpoints behind a login check."""

from __future__ import annotations

from django.contrib.auth.models import User
from django.http import HttpRequest


class OwnerRequest(HttpRequest):
    """A request that ``login_required`` has let through: ``user`` is a signed-in owner."""

    user: User


def request_owner(request: HttpRequest) -> User:
    """The owner behind a request that session auth (``django_auth``) has already admitted."""
    assert isinstance(request.user, User)  # anonymous requests were refused before this
    return request.user
