"""Shared artifacts in an open room: two owners, each with a slip, and a publish helper."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from gatekeeper.actions import ActionResult
from rooms import forks
from tests.conftest import OpenRoom, Seat
from tests.slips.conftest import seat_slip_sign


@pytest.fixture(autouse=True)
def _tools_allowed(settings: Any) -> None:
    # Production's default tool policy denies every tool; these tests are about the slip.
    settings.SYNAPSIA = {**settings.SYNAPSIA, "TOOL_POLICY_DEFAULT": "allow_all"}


def publish_record(recipient: str, **more: Any) -> dict[str, Any]:
    return {
        "resource": "tool:publish_artifact",
        "operation": "act",
        "recipient": recipient,
        "approval": "none",
        "max_uses": 5,
        **more,
    }


def sign_publishing(room: OpenRoom, seat: Seat, recipient: str, **more: Any) -> Any:
    key, _device = seat_slip_sign(seat, room.room.id, [publish_record(recipient, **more)])
    return key


def publish(
    room: OpenRoom,
    seat: Seat,
    *,
    title: str = "Friday plan",
    body: str = "Dinner at 19:30, then a walk.",
    media_format: str = "markdown",
    client_id: str = "publish-0001",
) -> ActionResult:
    return forks.action_for_agent(
        room_id=room.room.id,
        agent_id=seat.agent.id,
        client_id=client_id,
        tool="publish_artifact",
        arguments={"title": title, "body": body, "format": media_format},
    )


@pytest.fixture
def shared_room(make_open_room: Callable[..., OpenRoom]) -> OpenRoom:
    """Alice's slip lets her agent publish and shares what it publishes with Bob's agent;
    Bob's slip lets his agent publish but keeps it with the owners."""
    room = make_open_room()
    sign_publishing(room, room.a, "both")
    sign_publishing(room, room.b, "own_agent")
    return room
