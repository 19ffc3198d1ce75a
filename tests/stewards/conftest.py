"""Fixtures for the operator's side: a closed room, a staff member and a superuser."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from rooms import services
from rooms.models import RoomState
from tests.conftest import OpenRoom


@pytest.fixture
def closed_room(make_open_room: Callable[..., OpenRoom]) -> Callable[..., OpenRoom]:
    def make(prefix: str = "", purpose: str = "Dinner for two") -> OpenRoom:
        setup = make_open_room(prefix=prefix, purpose=purpose)
        owner: Any = setup.a.owner
        setup.room = services.room_transition(
            owner=owner, room_id=setup.room.id, to=RoomState.CLOSED
        )
        return setup

    return make


@pytest.fixture
def staff(django_user_model: Any) -> Any:
    return django_user_model.objects.create_user(
        username="steward", password="correct horse 42", is_staff=True
    )


@pytest.fixture
def superuser(django_user_model: Any) -> Any:
    return django_user_model.objects.create_superuser(
        username="root", password="correct horse 42", email="root@example.org"
    )
