"""Sealed simultaneous offers: each agent seals one typed plan over the real room socket; nobody
sees either until both are in (or the deadline passes), then both agents get both at once, and
the ledger holds who sealed and when, never a venue, time or price."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import pytest
from channels.db import database_sync_to_async
from django.test import Client
from django.utils import timezone

from agents import FrameRefusedError, RoomClient, SealedReveal
from ledger.models import LedgerEvent
from ledger.verification import ledger_verify_room
from rooms import services
from rooms.models import Agent, RoomMember, RoomState, SealedOffer, SeatStanding
from rooms.sealed import offer_commitment
from tests.e2e.daphne import running_daphne
from tests.socket_frames import frame, join, next_frame_of

pytestmark = pytest.mark.django_db(transaction=True)

OFFER_A = {
    "venue_id": "sora-sushi",
    "start": "2026-12-05T19:00:00+01:00",
    "party_size": 2,
    "price_per_person_minor": 4275,
    "currency": "EUR",
}
OFFER_B = {
    "venue_id": "osteria-kanal",
    "start": "2026-12-06T20:30:00+01:00",
    "party_size": 2,
    "price_per_person_minor": 3850,
    "currency": "EUR",
}
# What must never be in the ledger, nor reach anyone before the reveal. The times and prices are
# matched as whole tokens: a bare "19:00" is in any page's clock when the suite runs at seven, and
# "4275" turns up inside hex digests and ids by chance.
CONTENT = re.compile(
    r"sora-sushi|osteria-kanal|2026-12-05T19:00|2026-12-06T20:30"
    r"|(?<![0-9a-fA-F])(?:4275|3850)(?![0-9a-fA-F])"
)


def leaks(text: str) -> list[str]:
    return CONTENT.findall(text)


def seal(offer: dict[str, Any], frame_id: str) -> dict[str, Any]:
    return frame("seal_offer", {"offer": offer}, frame_id)


def ledger_rows(room_id: object) -> list[tuple[str, str]]:
    return [
        (e.kind, json.dumps(e.data))
        for e in LedgerEvent.objects.filter(room_id=room_id).order_by("seq")
    ]


def owner_views(owner: Any, room_id: object, agent_ids: list[object]) -> str:
    """Everything an owner can read about the room over the API, as one text."""
    client = Client()
    client.force_login(owner)
    seen = []
    turns = [f"/turns/1?agent={agent_id}" for agent_id in agent_ids]
    for path in ["", "/messages", "/ledger", "/receipt", "/flares", "/grants", *turns]:
        answer = client.get(f"/api/rooms/{room_id}{path}")
        assert answer.status_code == 200, (path, answer.status_code)
        seen.append(answer.content.decode())
    return " ".join(seen)


@pytest.fixture
def short_deadline(settings: Any) -> None:
    settings.SYNAPSIA = {**settings.SYNAPSIA, "SEALED_OFFER_SECONDS": 0.3}


async def test_both_seal_then_both_get_both_offers_at_once(make_open_room) -> None:
    setup = await database_sync_to_async(make_open_room)()
    alice, bob = await join(setup.room.id, setup.a.token), await join(setup.room.id, setup.b.token)

    await alice.send_json_to(seal(OFFER_A, "seal-a"))
    # Sealed: neither socket hears anything of it, and no context or owner view holds it.
    assert await alice.receive_nothing(timeout=0.5)
    assert await bob.receive_nothing(timeout=0.1)
    for socket, ref in ((bob, "ctx-b"), (alice, "ctx-a")):
        await socket.send_json_to(frame("context_request", {}, ref))
        answer = await next_frame_of(socket, "context")
        assert not leaks(json.dumps(answer))
    for owner in (setup.a.owner, setup.b.owner):
        seen = await database_sync_to_async(owner_views)(
            owner, setup.room.id, [setup.a.agent.id, setup.b.agent.id]
        )
        assert not leaks(seen)

    await bob.send_json_to(seal(OFFER_B, "seal-b"))
    heard_b = await next_frame_of(bob, "offers_revealed")
    heard_a = await next_frame_of(alice, "offers_revealed")
    assert heard_a == heard_b
    body = heard_a["body"]
    assert body["complete"] is True
    assert [(o["agent_id"], o["offer"]) for o in body["offers"]] == [
        (str(setup.a.agent.id), OFFER_A),
        (str(setup.b.agent.id), OFFER_B),
    ]
    # Once each, per socket.
    assert await alice.receive_nothing(timeout=0.3)
    assert await bob.receive_nothing(timeout=0.1)
    await alice.disconnect()
    await bob.disconnect()

    rows = await database_sync_to_async(ledger_rows)(setup.room.id)
    kinds = [kind for kind, _ in rows]
    assert kinds.count("offer_sealed") == 2 and kinds.count("offers_revealed") == 1
    assert kinds.index("offers_revealed") > max(
        i for i, k in enumerate(kinds) if k == "offer_sealed"
    )
    assert not leaks(" ".join(data for _, data in rows))
    revealed = json.loads(next(d for k, d in rows if k == "offers_revealed"))
    assert revealed == {
        "agent_ids": [str(setup.a.agent.id), str(setup.b.agent.id)],
        "complete": True,
    }
    # The commitments check against the reveal: what was sealed is what was revealed.
    commitments = [json.loads(d)["commitment"] for k, d in rows if k == "offer_sealed"]
    assert commitments == [
        offer_commitment(offer=o["offer"], salt=o["salt"]) for o in body["offers"]
    ]
    verdict = await database_sync_to_async(ledger_verify_room)(room_id=setup.room.id)
    assert verdict.ok


async def test_a_second_seal_is_refused_and_a_resent_one_is_not_a_second(make_open_room) -> None:
    setup = await database_sync_to_async(make_open_room)()
    alice = await join(setup.room.id, setup.a.token)
    await alice.send_json_to(seal(OFFER_A, "seal-a"))
    await alice.send_json_to(seal(OFFER_A, "seal-a"))  # a resend after a reconnect, say
    assert await alice.receive_nothing(timeout=0.5)
    await alice.send_json_to(seal(OFFER_B, "seal-a2"))
    refused = await next_frame_of(alice, "error")
    assert refused["body"]["code"] == "not_allowed" and refused["body"]["ref"] == "seal-a2"
    assert "already sealed" in refused["body"]["message"]
    await alice.disconnect()
    offers = await database_sync_to_async(lambda: list(SealedOffer.objects.all()))()
    assert [o.offer for o in offers] == [OFFER_A]
    rows = await database_sync_to_async(ledger_rows)(setup.room.id)
    assert [k for k, _ in rows].count("offer_sealed") == 1


@pytest.mark.parametrize(
    ("body", "code"),
    [
        ({"offer": {**OFFER_A, "start": "2026-12-05T19:00:00"}}, "invalid_body"),  # no offset
        ({"offer": {**OFFER_A, "start": 1764957600}}, "invalid_body"),
        ({"offer": {**OFFER_A, "party_size": 21}}, "invalid_body"),
        ({"offer": {**OFFER_A, "party_size": "2"}}, "invalid_body"),
        ({"offer": {**OFFER_A, "party_size": True}}, "invalid_body"),
        ({"offer": {**OFFER_A, "price_per_person_minor": 10_000_001}}, "invalid_body"),
        ({"offer": {**OFFER_A, "price_per_person_minor": -1}}, "invalid_body"),
        ({"offer": {**OFFER_A, "currency": "eur"}}, "invalid_body"),
        ({"offer": {**OFFER_A, "venue_id": "Sora Sushi; DROP"}}, "invalid_body"),
        ({"offer": {**OFFER_A, "note": "we pay more if needed"}}, "invalid_body"),
        ({"offer": OFFER_A, "also": 1}, "invalid_body"),
        ({"offer": {k: v for k, v in OFFER_A.items() if k != "currency"}}, "invalid_body"),
        ({"offer": {**OFFER_A, "venue_id": "x" * 70_000}}, "oversized"),
    ],
)
async def test_malformed_oversized_and_extra_field_offers_are_refused(
    make_open_room, body: dict[str, Any], code: str
) -> None:
    setup = await database_sync_to_async(make_open_room)()
    alice = await join(setup.room.id, setup.a.token)
    await alice.send_json_to(frame("seal_offer", body, "seal-bad"))
    refused = await next_frame_of(alice, "error")
    assert refused["body"]["code"] == code
    await alice.disconnect()
    assert not await database_sync_to_async(SealedOffer.objects.exists)()


async def test_a_revoked_agent_cannot_seal(make_open_room) -> None:
    setup = await database_sync_to_async(make_open_room)()
    alice = await join(setup.room.id, setup.a.token)
    # Revoked behind the socket's back (no doorbell): the seal itself re-checks.
    await database_sync_to_async(Agent.objects.filter(id=setup.a.agent.id).update)(
        revoked_at=timezone.now()
    )
    await alice.send_json_to(seal(OFFER_A, "seal-a"))
    closed = await alice.receive_output(timeout=5)
    assert closed == {"type": "websocket.close", "code": 4401}
    assert not await database_sync_to_async(SealedOffer.objects.exists)()
    rows = await database_sync_to_async(ledger_rows)(setup.room.id)
    assert "offer_sealed" not in [k for k, _ in rows]


async def test_only_an_open_room_takes_a_seal(make_open_room) -> None:
    setup = await database_sync_to_async(make_open_room)()
    alice = await join(setup.room.id, setup.a.token)
    await database_sync_to_async(services.room_transition)(
        owner=setup.a.owner, room_id=setup.room.id, to=RoomState.PAUSED
    )
    await next_frame_of(alice, "room_state")
    await alice.send_json_to(seal(OFFER_A, "seal-a"))
    refused = await next_frame_of(alice, "error")
    assert refused["body"]["code"] == "room_not_open"
    await alice.disconnect()
    assert not await database_sync_to_async(SealedOffer.objects.exists)()


async def test_the_deadline_reveals_what_there_is(make_open_room, short_deadline) -> None:
    setup = await database_sync_to_async(make_open_room)()
    alice, bob = await join(setup.room.id, setup.a.token), await join(setup.room.id, setup.b.token)
    await alice.send_json_to(seal(OFFER_A, "seal-a"))
    heard_a = await next_frame_of(alice, "offers_revealed", timeout=5)
    heard_b = await next_frame_of(bob, "offers_revealed", timeout=5)
    assert heard_a == heard_b
    assert heard_a["body"]["complete"] is False
    assert [o["offer"] for o in heard_a["body"]["offers"]] == [OFFER_A]
    # After the reveal, nothing more can be sealed.
    await bob.send_json_to(seal(OFFER_B, "seal-b"))
    refused = await next_frame_of(bob, "error")
    assert refused["body"]["code"] == "not_allowed" and "revealed" in refused["body"]["message"]
    await alice.disconnect()
    await bob.disconnect()
    rows = await database_sync_to_async(ledger_rows)(setup.room.id)
    revealed = [json.loads(d) for k, d in rows if k == "offers_revealed"]
    assert revealed == [{"agent_ids": [str(setup.a.agent.id)], "complete": False}]
    assert not leaks(" ".join(data for _, data in rows))
    assert (await database_sync_to_async(ledger_verify_room)(room_id=setup.room.id)).ok


async def test_a_reconnecting_agent_gets_the_reveal_again(make_open_room) -> None:
    setup = await database_sync_to_async(make_open_room)()
    alice, bob = await join(setup.room.id, setup.a.token), await join(setup.room.id, setup.b.token)
    await alice.send_json_to(seal(OFFER_A, "seal-a"))
    await bob.send_json_to(seal(OFFER_B, "seal-b"))
    first = await next_frame_of(alice, "offers_revealed")
    await alice.disconnect()
    again = await join(setup.room.id, setup.a.token)
    assert await next_frame_of(again, "offers_revealed") == first
    await again.disconnect()
    await bob.disconnect()


async def test_a_deadline_that_passed_while_nobody_was_connected_reveals_at_the_next_join(
    make_open_room, short_deadline
) -> None:
    setup = await database_sync_to_async(make_open_room)()
    alice = await join(setup.room.id, setup.a.token)
    await alice.send_json_to(seal(OFFER_A, "seal-a"))
    await alice.send_json_to(frame("ping", {}, "p1"))
    await next_frame_of(alice, "pong")
    await alice.disconnect()
    await asyncio.sleep(0.5)
    rows = await database_sync_to_async(ledger_rows)(setup.room.id)
    assert "offers_revealed" not in [k for k, _ in rows]
    bob = await join(setup.room.id, setup.b.token)
    heard = await next_frame_of(bob, "offers_revealed")
    assert heard["body"]["complete"] is False
    assert [o["agent_id"] for o in heard["body"]["offers"]] == [str(setup.a.agent.id)]
    await bob.disconnect()


@pytest.mark.e2e
def test_the_sdk_seals_and_both_agents_get_the_reveal(make_open_room, tmp_path: Path) -> None:
    setup = make_open_room()
    with running_daphne(tmp_path / "daphne.log") as host:
        url = f"ws://{host}/ws/rooms/{setup.room.id}/"

        async def negotiate() -> tuple[SealedReveal, SealedReveal, SealedReveal | None, str]:
            async with RoomClient(url, setup.a.token) as a, RoomClient(url, setup.b.token) as b:
                with pytest.raises(FrameRefusedError) as bad:
                    await a.seal_offer({**OFFER_A, "note": "flexible"}, timeout=10)
                first, second = await asyncio.gather(
                    a.seal_offer(OFFER_A, timeout=20), b.seal_offer(OFFER_B, timeout=20)
                )
                # Stored: asking again returns the same reveal at once.
                assert await a.seal_offer(OFFER_B, timeout=0.01) is first
            # A fresh connection is told of the reveal unprompted, right after its welcome.
            async with RoomClient(url, setup.a.token) as again:
                for _ in range(100):
                    if again.sealed_reveal is not None:
                        break
                    await asyncio.sleep(0.05)
                return first, second, again.sealed_reveal, bad.value.code

        first, second, replayed, refused = asyncio.run(negotiate())
    assert refused == "invalid_body"
    assert first == second == replayed
    assert first.complete is True
    # Both seal at once, so either may be first: the reveal lists them in sealing order.
    assert dict(first.offers) == {str(setup.a.agent.id): OFFER_A, str(setup.b.agent.id): OFFER_B}
    assert len(first.offers) == 2
    assert set(first.salts) == {str(setup.a.agent.id), str(setup.b.agent.id)}
    assert ledger_verify_room(room_id=setup.room.id).ok


async def test_a_muted_agent_cannot_seal(make_open_room) -> None:
    setup = await database_sync_to_async(make_open_room)()
    alice = await join(setup.room.id, setup.a.token)
    await database_sync_to_async(
        RoomMember.objects.filter(room_id=setup.room.id, agent_id=setup.a.agent.id).update
    )(standing=SeatStanding.MUTED)
    await alice.send_json_to(seal(OFFER_A, "seal-a"))
    refused = await next_frame_of(alice, "error")
    assert refused["body"]["code"] == "withdrawn"
    await alice.disconnect()
    assert not await database_sync_to_async(SealedOffer.objects.exists)()
