"""Revoking a device key mid-room: the very next disclosure it cleared is denied, and the
agent sessions it affected are told and, when nothing clears them any more, disconnected."""

from __future__ import annotations

import time
from typing import Any

import pytest
from channels.db import database_sync_to_async

from gatekeeper.decision import DisclosureRequest, RoomFacts, decide_guarded
from rooms.protocol import CloseCode
from slips import services as slip_services
from tests.slips.conftest import canonical_text, enroll, slip_payload
from tests.socket_frames import join

pytestmark = pytest.mark.django_db(transaction=True)

BUDGET_TO_PEER = {
    "resource": "budget",
    "operation": "disclose",
    "recipient": "peer_agent",
    "scope": "range",
    "approval": "none",
}


def sign_slip(setup: Any, seat: Any, capabilities: list[dict[str, Any]], later: int = 0) -> Any:
    """Enroll a new device key for the seat's owner and sign a slip with it (``later`` seconds
    after now, so it can supersede an earlier one)."""
    key, device = enroll(seat.owner)
    text = canonical_text(
        slip_payload(
            issued_at=int(time.time()) + later,
            owner=seat.owner,
            room_id=setup.room.id,
            agent_id=seat.agent.id,
            key=key,
            capabilities=capabilities,
        )
    )
    slip_services.slip_submit(
        owner=seat.owner,
        room_id=setup.room.id,
        seated_agent_id=seat.agent.id,
        payload=text,
        signature=device.sign(text),
    )
    return key


def budget_disclosure(setup: Any) -> Any:
    return decide_guarded(
        DisclosureRequest(
            room=RoomFacts(room_id=setup.room.id, state="open"),
            owner_id=setup.a.owner.pk,
            source_agent_id=setup.a.agent.id,
            recipient_agent_id=setup.b.agent.id,
            resource="budget",
        )
    )


async def test_revoking_the_slip_key_denies_the_next_disclosure_and_disconnects(
    make_open_room,
) -> None:
    setup = await database_sync_to_async(make_open_room)()
    key = await database_sync_to_async(sign_slip)(setup, setup.a, [BUDGET_TO_PEER])
    await database_sync_to_async(sign_slip)(setup, setup.b, [])
    before = await database_sync_to_async(budget_disclosure)(setup)
    assert (before.outcome, before.rule) == ("allow", "cleared")
    assert before.capability is not None and before.capability.scope == "range"

    alice_agent, bob_agent = (
        await join(setup.room.id, setup.a.token),
        await join(setup.room.id, setup.b.token),
    )
    await database_sync_to_async(slip_services.key_revoke)(owner=setup.a.owner, key_id=key.id)

    notice = await alice_agent.receive_json_from(timeout=5)
    assert (notice["type"], notice["body"]["code"]) == ("notice", "slip_key_revoked")
    assert await alice_agent.receive_output(timeout=5) == {
        "type": "websocket.close",
        "code": CloseCode.NO_CLEARANCE,
    }
    after = await database_sync_to_async(budget_disclosure)(setup)
    assert (after.outcome, after.rule) == ("deny", "key_revoked")
    # Bob's agent was not affected: it hears nothing and stays connected.
    assert await bob_agent.receive_nothing(timeout=0.3)
    await bob_agent.send_json_to({"v": 1, "type": "ping", "id": "p", "body": {}})
    assert (await bob_agent.receive_json_from(timeout=5))["type"] == "pong"
    await bob_agent.disconnect()


async def test_a_session_still_cleared_by_a_newer_slip_is_left_alone(make_open_room) -> None:
    setup = await database_sync_to_async(make_open_room)()
    old_key = await database_sync_to_async(sign_slip)(setup, setup.a, [BUDGET_TO_PEER])
    socket = await join(setup.room.id, setup.a.token)
    # A newer slip, signed with a second device key, supersedes the first...
    await database_sync_to_async(sign_slip)(setup, setup.a, [BUDGET_TO_PEER], later=1)
    # ...so revoking the old key leaves the session cleared: nothing to tell it.
    await database_sync_to_async(slip_services.key_revoke)(owner=setup.a.owner, key_id=old_key.id)
    assert await socket.receive_nothing(timeout=0.3)
    assert (await database_sync_to_async(budget_disclosure)(setup)).rule == "cleared"
    await socket.disconnect()
