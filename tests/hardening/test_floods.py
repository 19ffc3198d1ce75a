"""Issue 13, finding 4, at the finding's own counts and the shipped default limits: a room
flooded with 5,000 messages, an agent asking for 600 contexts in a row. Nothing here lowers
a limit; the defaults (docs/protocol.md, "Limits") must hold the flood on their own."""

from __future__ import annotations

from typing import Any

import pytest
from channels.db import database_sync_to_async
from django.conf import settings

from ledger.models import LedgerEvent
from rooms.models import Flare, Message
from rooms.protocol import CloseCode
from slips import vault
from slips.models import SlipCapability
from tests.slips.conftest import seat_slip_sign
from tests.socket_frames import frame, join, say

pytestmark = pytest.mark.django_db(transaction=True)

SAYS = 5_000
CONTEXT_REQUESTS = 600
RATE_REFUSALS = {"say_rate_limited", "context_rate_limited", "context_turn_limited"}


def _default(kind: str) -> int:
    """The burst a default rate allows at once (``"120/m"`` -> 120)."""
    return int(settings.SYNAPSIA["SOCKET_RATES"][kind].split("/")[0])


async def test_five_thousand_messages_at_once_store_only_what_the_default_rate_allows(
    make_open_room: Any,
) -> None:
    setup = await database_sync_to_async(make_open_room)()
    a, b = await join(setup.room.id, setup.a.token), await join(setup.room.id, setup.b.token)
    for n in range(SAYS):  # as fast as the socket takes them, nothing read in between
        await a.send_json_to(say(f"offer {n}", f"a-{n}"))
    sent = refused = 0
    closed: int | None = None
    while sent + refused < SAYS:
        output = await a.receive_output(timeout=30)
        if output["type"] == "websocket.close":
            closed = int(output["code"])  # the inbox bound may close the flood instead
            break
        answer = output["text"]
        if '"type":"sent"' in answer:
            sent += 1
        elif any(f'"{code}"' in answer for code in RATE_REFUSALS):
            refused += 1
    # The other agent hears what was stored, no more. (A say hop may still be storing when
    # the flood's socket closes: read until b has heard every stored message, then compare.)
    heard = 0
    while True:
        stored = await database_sync_to_async(Message.objects.filter(room_id=setup.room.id).count)()
        if heard >= stored and await b.receive_nothing(timeout=0.5):
            break
        if (await b.receive_json_from(timeout=10))["type"] == "message":
            heard += 1
    burst = _default("say")
    assert heard == stored and sent <= stored <= burst, (heard, stored, sent, burst)
    assert closed in (None, CloseCode.INBOX_FULL), closed
    if closed is None:  # every frame answered: stored or refused, in words
        assert (stored, refused) == (sent, SAYS - sent)
    # (Closed for a full inbox: what was stored before the close is kept, its `sent` frames
    # dropped with the socket; the agent reads them back when it reconnects.)
    # Spinning on the limit is a loop: flared by the server, once.
    flares = await database_sync_to_async(
        lambda: list(Flare.objects.filter(room_id=setup.room.id).values_list("reason", flat=True))
    )()
    if closed is None:
        assert flares == ["loop"], flares
    await a.disconnect()
    await b.disconnect()


async def test_six_hundred_context_requests_spend_only_a_turn_s_uses(make_open_room: Any) -> None:
    """Bob's agent asks for a context 600 times, each after the last was answered (the
    review's 600 in 61 s): Alice's budget, cleared for 50 uses, is disclosed only in the few
    contexts the default limits allow, and only those spend uses or write ledger events."""

    def scene() -> Any:
        setup = make_open_room()
        vault.vault_item_create(
            owner=setup.a.owner,
            content={"kind": "budget", "currency": "EUR", "minimum": 3000, "maximum": 6000},
        )
        record = {"resource": "budget", "operation": "disclose", "recipient": "peer_agent",
                  "approval": "none", "max_uses": 50, "scope": "range"}  # fmt: skip
        seat_slip_sign(setup.a, setup.room.id, [record])
        return setup

    setup = await database_sync_to_async(scene)()
    b = await join(setup.room.id, setup.b.token)
    contexts = refused = 0
    closed: int | None = None
    for n in range(CONTEXT_REQUESTS):
        await b.send_json_to(frame("context_request", {}, f"c-{n}"))
        while True:  # this request's answer (room frames such as a pause may come first)
            output = await b.receive_output(timeout=10)
            if output["type"] == "websocket.close":
                closed = int(output["code"])
                break
            text = output["text"]
            if '"type":"context"' in text:
                contexts += 1
                break
            if f'"ref":"c-{n}"' in text and any(f'"{c}"' in text for c in RATE_REFUSALS):
                refused += 1
                break
        if closed is not None:
            break
    # The turn's limit does not refill with time (nothing new is said), so however long the
    # 600 take on a loaded machine, no more than it may be given.
    allowed = min(_default("context_request"), settings.SYNAPSIA["CONTEXT_REQUESTS_PER_TURN"])
    assert closed is None, closed
    assert contexts <= allowed and contexts + refused == CONTEXT_REQUESTS, (contexts, refused)

    def spent() -> tuple[int, int]:
        [uses_left] = SlipCapability.objects.filter(
            slip__room_id=setup.room.id, resource="budget"
        ).values_list("uses_left", flat=True)
        disclosures = LedgerEvent.objects.filter(room_id=setup.room.id, kind="disclosure").count()
        return 50 - uses_left, disclosures

    uses, disclosures = await database_sync_to_async(spent)()
    assert 1 <= uses <= contexts, (uses, contexts)
    assert disclosures <= contexts, (disclosures, contexts)
    loops = await database_sync_to_async(
        lambda: Flare.objects.filter(room_id=setup.room.id, reason="loop").count()
    )()
    assert loops == 1  # 597 refusals in a row: the agent is looping, told to its owner once
    await b.disconnect()
