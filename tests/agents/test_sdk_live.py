"""The SDK against a real Daphne: typed context, flares, saying through a pause, and settling
an action that waits for its owner's grant (pushed in the services pass, where the channel
layer is Redis; found by re-asking in the embedded pass, where this test process's announcements
cannot reach the server's in-memory layer, exactly as when a pushed event is lost)."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from agents import RoomClient, TurnContext
from gatekeeper.records import Grant
from ledger.models import LedgerEvent
from rooms import forks, services
from rooms.models import Room, RoomState
from slips import vault
from tests.e2e.daphne import running_daphne
from tests.slips.conftest import seat_slip_sign

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

BOOKING = {
    "venue_id": "osteria-kanal",
    "party_size": 2,
    "start": "2026-12-04T19:00:00+00:00",
    "cost_cents": 7600,
    "currency": "EUR",
}


def _kinds(room_id: Any) -> list[str]:
    return list(
        LedgerEvent.objects.filter(room_id=room_id).order_by("seq").values_list("kind", flat=True)
    )


def test_context_arrives_typed_with_only_what_the_slips_clear(make_open_room, tmp_path: Path):
    setup = make_open_room()
    vault.vault_item_create(
        owner=setup.b.owner, content={"kind": "neighbourhood", "name": "Kreuzberg"}
    )
    vault.vault_item_create(
        owner=setup.b.owner,
        content={"kind": "budget", "currency": "EUR", "minimum": 5000, "maximum": 9000},
    )
    # Bob clears his neighbourhood for Alice's agent, and his budget for his own agent only.
    seat_slip_sign(
        setup.b,
        setup.room.id,
        [
            {"resource": "neighbourhood", "operation": "disclose", "recipient": "both",
             "approval": "none", "max_uses": 5},
            {"resource": "budget", "operation": "disclose", "recipient": "own_agent",
             "approval": "none", "max_uses": 5},
        ],
    )  # fmt: skip
    with running_daphne(tmp_path / "daphne.log") as host:
        url = f"ws://{host}/ws/rooms/{setup.room.id}/"

        async def both_turns() -> tuple[TurnContext, TurnContext, TurnContext]:
            async with RoomClient(url, setup.a.token) as a, RoomClient(url, setup.b.token) as b:
                first = await a.context()
                second = await a.context()
                return first, second, await b.context()

        alice_1, alice_2, bob = asyncio.run(both_turns())
    assert isinstance(alice_1, TurnContext)
    assert (alice_1.turn, alice_2.turn) == (1, 2)
    assert list(alice_1.peer("neighbourhood")) == [{"name": "Kreuzberg"}]
    assert list(alice_1.peer("budget")) == []  # withheld from the peer's agent
    assert alice_1.own_items == []
    assert alice_1.peer_items[0].fenced.startswith("<<untrusted")
    assert "untrusted" in alice_1.preamble
    # No scope named: the band (rounded to 10 whole units), never the exact range by default.
    assert list(bob.own("budget")) == [{"currency": "EUR", "min": 5000, "max": 9000, "band": True}]
    assert _kinds(setup.room.id).count("disclosure") == 4  # 2 for Alice's turns, 2 for Bob's


def test_a_flare_pauses_the_room_and_the_client_hears_it(make_open_room, tmp_path: Path):
    setup = make_open_room()
    with running_daphne(tmp_path / "daphne.log") as host:
        url = f"ws://{host}/ws/rooms/{setup.room.id}/"

        async def raise_flare() -> str | None:
            async with RoomClient(url, setup.a.token) as a:
                await a.flare("distress")
                for _ in range(100):
                    if a.room_state == "paused":
                        break
                    await asyncio.sleep(0.05)
                return a.room_state

        assert asyncio.run(raise_flare()) == "paused"
    assert Room.objects.get(id=setup.room.id).state == RoomState.PAUSED
    assert "flare_raised" in _kinds(setup.room.id)


def _later(delay: float, action: Any) -> threading.Thread:
    def run() -> None:
        time.sleep(delay)
        action()

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def test_say_when_open_waits_out_a_pause(make_open_room, tmp_path: Path):
    setup = make_open_room()
    services.room_transition(owner=setup.a.owner, room_id=setup.room.id, to=RoomState.PAUSED)
    with running_daphne(tmp_path / "daphne.log") as host:
        url = f"ws://{host}/ws/rooms/{setup.room.id}/"

        async def speak() -> int:
            async with RoomClient(url, setup.a.token) as a:
                return await a.say_when_open("once the room opens", timeout=30, poll=0.5)

        resumer = _later(
            1.0,
            lambda: services.room_transition(
                owner=setup.b.owner, room_id=setup.room.id, to=RoomState.OPEN
            ),
        )
        seq = asyncio.run(speak())
        resumer.join()
    assert seq == 1


def test_settle_reports_the_outcome_after_the_owner_approves(
    make_open_room, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, settings: Any
):
    # Production's default policy denies every tool unless listed: allow them here, in the
    # server (which decides the request) and in this process (which decides it again on approval).
    monkeypatch.setenv("SYNAPSIA_TOOL_POLICY_DEFAULT", "allow_all")
    settings.SYNAPSIA = {**settings.SYNAPSIA, "TOOL_POLICY_DEFAULT": "allow_all"}
    setup = make_open_room()
    key, device = seat_slip_sign(
        setup.a,
        setup.room.id,
        [{"resource": "tool:book_table", "operation": "act", "approval": "per_use", "max_uses": 3}],
    )

    def approve_when_asked() -> None:
        deadline = time.monotonic() + 30
        while (grant := Grant.objects.filter(room_id=setup.room.id).first()) is None:
            assert time.monotonic() < deadline, "no grant was requested"
            time.sleep(0.1)
        forks.grant_decide(
            owner=setup.a.owner,
            room_id=setup.room.id,
            grant_id=grant.id,
            approve=True,
            key_id=key.id,
            signature=device.sign_grant(grant),
        )

    with running_daphne(tmp_path / "daphne.log") as host:
        url = f"ws://{host}/ws/rooms/{setup.room.id}/"

        async def book() -> tuple[str, str, dict[str, Any] | None]:
            async with RoomClient(url, setup.a.token) as a:
                first = await a.act("book_table", BOOKING)
                final = await a.settle(first, "book_table", BOOKING, timeout=60, poll=1.0)
                return first.status, final.status, final.output

        approver = _later(0, approve_when_asked)
        first, final, output = asyncio.run(book())
        approver.join()
    assert (first, final) == ("awaiting_grant", "executed")
    assert output is not None and output["kind"] == "succeeded"
    assert output["output"]["venue_id"] == "osteria-kanal"
    kinds = _kinds(setup.room.id)
    assert kinds.count("action_executed") == 1
    assert kinds.index("grant_approved") < kinds.index("action_executed")
