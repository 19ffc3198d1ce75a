"""Fault injection: Redis unavailable. The channel layer is a doorbell, not the record: with
it pointed at a dead Redis, actions are still decided, recorded and executed at most once, a
request that needs a grant still pauses the room, and a failing announcement after commit
neither breaks nor un-records the decision.

Database transactions really commit here (``transaction=True``), so the after-commit
announcements really run against the dead layer. channels_redis is installed in both profiles,
so this runs in both passes.
"""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer

from gatekeeper.adapters.sandbox import SandboxEffect
from gatekeeper.records import ActionRecord, Grant
from ledger.models import LedgerEvent
from ledger.verification import ledger_verify_room
from rooms.models import Room, RoomState
from tests.bookings import OVER, WITHIN
from tests.gatekeeper.conftest import Negotiation

pytestmark = pytest.mark.django_db(transaction=True)

DEAD_REDIS = "redis://127.0.0.1:1/0"  # nothing listens on port 1


@pytest.fixture(autouse=True)
def _allow_tools_by_default(settings: Any) -> None:
    # The production default is deny-all; these tests are about the layer, not policy.
    settings.SYNAPSIA = {**settings.SYNAPSIA, "TOOL_POLICY_DEFAULT": "allow_all"}


@pytest.fixture
def dead_redis(settings: Any) -> None:
    """Point the channel layer at a Redis that is not there (as production would be configured
    during an outage), and show that sending through it really fails."""
    settings.CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer",
            "CONFIG": {"hosts": [DEAD_REDIS]},
        }
    }
    layer = get_channel_layer()
    with pytest.raises(Exception):  # noqa: B017 (connection errors differ by client version)
        async_to_sync(layer.group_send)("room.probe", {"type": "probe"})


def _state(n: Negotiation) -> str:
    return Room.objects.get(id=n.room.id).state


def _kinds(n: Negotiation) -> list[str]:
    return list(
        LedgerEvent.objects.filter(room_id=n.room.id).order_by("seq").values_list("kind", flat=True)
    )


def test_an_allowed_action_runs_once_with_redis_down(negotiation, dead_redis) -> None:
    first = negotiation.act(WITHIN, ref="ok-1")
    assert (first.status, first.rule) == ("executed", "cleared")
    again = negotiation.act(WITHIN, ref="ok-1")  # the agent retries after its socket dropped
    assert again.replay and again.action_id == first.action_id
    assert SandboxEffect.objects.count() == 1
    assert _state(negotiation) == RoomState.OPEN
    assert ledger_verify_room(room_id=negotiation.room.id).ok


def test_a_request_needing_a_grant_still_pauses_with_redis_down(negotiation, dead_redis) -> None:
    # The pause is announced after commit; the announcement fails; the pause must stand.
    result = negotiation.act(OVER, ref="big-1")
    assert (result.status, result.rule) == ("awaiting_grant", "over_budget")
    assert _state(negotiation) == RoomState.PAUSED
    assert _kinds(negotiation)[-3:] == ["grant_requested", "fork_opened", "room_paused"]
    assert SandboxEffect.objects.count() == 0
    # Nothing turned the failure into an allow: a retry is the same pending request.
    retry = negotiation.act(OVER, ref="big-1")
    assert retry.replay and retry.status == "awaiting_grant"
    assert ActionRecord.objects.count() == 1
    assert SandboxEffect.objects.count() == 0

    # The owner's signed grant runs it exactly once, still with Redis down.
    grant = Grant.objects.select_related("action").get()
    done = negotiation.approve(grant)
    assert (done.status, done.rule) == ("executed", "granted")
    assert _state(negotiation) == RoomState.OPEN
    assert negotiation.act(OVER, ref="big-1").replay
    assert SandboxEffect.objects.count() == 1
    assert ledger_verify_room(room_id=negotiation.room.id).ok


def test_a_denial_still_pauses_with_redis_down(negotiation, dead_redis, settings: Any) -> None:
    settings.SYNAPSIA = {**settings.SYNAPSIA, "TOOL_POLICY_DEFAULT": "deny_all"}
    result = negotiation.act(WITHIN, ref="no-1")
    assert (result.status, result.rule) == ("denied", "policy.default.deny_all")
    assert _state(negotiation) == RoomState.PAUSED
    assert _kinds(negotiation)[-2:] == ["denial", "room_paused"]
    assert SandboxEffect.objects.count() == 0
