"""Two reference negotiators against a real Daphne, in the practice room's scenario.

The practice seeding builds the scenario through the real services (demo owners, vaults,
signed slips, tool policy rows, the Berlin catalogue). Osteria Kanal on day+4 at 19:00 is the
best plan; Alice's slip asks her before each booking, so the Gatekeeper pauses the room until
she approves (here with her demo-held key, as `manage.py demo --headless` does); then the
table is booked. In the embedded profile the approval's pushes cannot reach the server's
in-memory channel layer, so the SDK finds the grant's outcome and the resumed room by
re-asking.
"""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from django.utils import timezone

from agents import RoomClient
from agents.negotiator import NegotiationResult, negotiate
from dining import catalogue_default
from ledger.events import Disclosure
from ledger.models import LedgerEvent
from ledger.verification import ledger_verify_room
from practice import scenario
from practice.demo import GRANT_POLL_SECONDS, StandInOwners
from practice.seeding import Practice, practice_seed
from rooms.models import Message
from slips.models import VaultItem

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

ALICE_FIGURES = ("3000", "6000", "30.00", "60.00", "30 EUR", "60 EUR", "30-60", "30 to 60")
BOB_FIGURES = ("4000", "9000", "40.00", "90.00", "40 EUR", "90 EUR", "40-90", "40 to 90")


@pytest.fixture
def stand_in() -> Iterator[Any]:
    """Approves Alice's grants with her demo-held key while a test runs."""
    started: list[StandInOwners] = []

    def start(practice: Practice) -> StandInOwners:
        owners = StandInOwners(practice, say=lambda line: None)
        owners.start()
        started.append(owners)
        return owners

    yield start
    for owners in started:
        owners.finish()
        assert owners.failure is None, owners.failure


def _ws(live_daphne: str, practice: Practice) -> str:
    return live_daphne.replace("http://", "ws://") + f"/ws/rooms/{practice.room_id}/"


def _day4_at_seven() -> str:
    return scenario.agreed_start(timezone.now()).isoformat()


def _texts(practice: Practice) -> list[str]:
    return list(
        Message.objects.filter(room_id=practice.room_id)
        .order_by("seq")
        .values_list("text", flat=True)
    )


def _negotiate_both(
    url: str, practice: Practice, **options: Any
) -> tuple[NegotiationResult, NegotiationResult]:
    async def both() -> tuple[NegotiationResult, NegotiationResult]:
        async with (
            RoomClient(url, practice.host.token) as alice,
            RoomClient(url, practice.guest.token) as bob,
        ):
            # The stand-in answers from this process (as the headless demo's does): the
            # host re-asks as often as the demo's, for the push that cannot reach it embedded.
            settings = {
                "reply_timeout": 60,
                "grant_timeout": 90,
                "grant_poll": GRANT_POLL_SECONDS,
                **options,
            }
            host, guest = await asyncio.gather(
                negotiate(alice, **settings), negotiate(bob, **settings)
            )
            return host, guest

    return asyncio.run(both())


@pytest.mark.parametrize("bob_shares_budget", [True, False], ids=["shared", "withheld"])
def test_the_negotiators_book_osteria_kanal_on_day_4_once_alice_approves(
    live_daphne: str, stand_in: Any, bob_shares_budget: bool
) -> None:
    practice = practice_seed(guest_shares_budget=bob_shares_budget)
    owners = stand_in(practice)
    host, guest = _negotiate_both(_ws(live_daphne, practice), practice)

    assert owners.decisions, "the booking never waited for Alice's approval"
    for result in (host, guest):
        assert result.status == "booked", result
        assert (result.venue, result.start) == ("osteria-kanal", _day4_at_seven())
    assert host.booking_reference and host.booking_reference == guest.booking_reference
    executed = [
        (event.seq, event.data["tool"])
        for event in LedgerEvent.objects.filter(room_id=practice.room_id, kind="action_executed")
    ]
    # Each agent looked the venues up once; one table was booked, after Alice's approval.
    assert sorted(tool for _, tool in executed) == ["book_table", "venues_search", "venues_search"]
    (approved,) = LedgerEvent.objects.filter(room_id=practice.room_id, kind="grant_approved")
    assert approved.seq < next(seq for seq, tool in executed if tool == "book_table")
    first_lines = [text.split("\n")[0] for text in _texts(practice)]
    assert [line.split(" ")[0] for line in first_lines] == ["PROPOSE", "ACCEPT", "BOOKED"]
    assert first_lines[-1].startswith("BOOKED round=1 venue=osteria-kanal")
    assert ledger_verify_room(room_id=practice.room_id).ok


def test_a_withheld_budget_never_reaches_the_peer_nor_the_transcript(
    live_daphne: str, stand_in: Any
) -> None:
    practice = practice_seed(guest_shares_budget=False)
    stand_in(practice)
    host, guest = _negotiate_both(_ws(live_daphne, practice), practice)
    assert (host.status, guest.status) == ("booked", "booked")

    # The server never put Bob's budget into Alice's agent's context...
    bobs_budget = VaultItem.objects.get(owner=practice.guest.owner, kind="budget")
    disclosed = [
        Disclosure.model_validate(event.data)
        for event in LedgerEvent.objects.filter(room_id=practice.room_id, kind="disclosure")
    ]
    to_alice = {d.item_id for d in disclosed if d.recipient_agent_id == str(practice.host.agent_id)}
    to_bob = {d.item_id for d in disclosed if d.recipient_agent_id == str(practice.guest.agent_id)}
    assert str(bobs_budget.id) not in to_alice
    assert str(bobs_budget.id) in to_bob  # his own agent knew it, and kept it to itself
    # ...and neither agent ever stated a budget figure, in any form.
    said = "\n".join(_texts(practice))
    # The booking's reference is the sandbox's opaque hex id: "4000" can turn up in it by chance.
    said = re.sub(r"\bref=\S+", "ref=…", said)
    assert [figure for figure in BOB_FIGURES + ALICE_FIGURES if figure in said] == []


def test_a_negotiator_whose_socket_dies_mid_negotiation_resumes_without_loss_or_repeats(
    live_daphne: str, stand_in: Any
) -> None:
    practice = practice_seed()
    stand_in(practice)
    url = _ws(live_daphne, practice)
    heard: list[int] = []

    async def both() -> tuple[NegotiationResult, NegotiationResult, int]:
        async with (
            RoomClient(url, practice.host.token) as alice,
            RoomClient(url, practice.guest.token, max_backoff=0.5) as bob,
        ):

            def on_bob_step(line: str) -> None:
                if line.startswith("heard #"):
                    heard.append(int(line.split("#")[1].split(":")[0]))
                    if len(heard) == 1 and bob._socket is not None:
                        # Kill Bob's TCP connection without a closing handshake, right after
                        # the proposal arrived and before his answer is said.
                        bob._socket.transport.abort()

            host, guest = await asyncio.gather(
                negotiate(alice, reply_timeout=60, grant_timeout=90, grant_poll=GRANT_POLL_SECONDS),
                negotiate(bob, reply_timeout=60, on_step=on_bob_step),
            )
            return host, guest, bob.reconnects

    host, guest, reconnects = asyncio.run(both())
    assert reconnects >= 1
    assert (host.status, guest.status) == ("booked", "booked")
    seqs = list(
        Message.objects.filter(room_id=practice.room_id)
        .order_by("seq")
        .values_list("seq", flat=True)
    )
    assert seqs == list(range(1, len(seqs) + 1))  # gapless: nothing lost
    texts = _texts(practice)
    assert len(texts) == len(set(texts)) == 3  # PROPOSE, ACCEPT, BOOKED: each once
    alice_said = set(
        Message.objects.filter(
            room_id=practice.room_id, sender_id=practice.host.agent_id
        ).values_list("seq", flat=True)
    )
    assert heard == sorted(alice_said)  # Bob heard each of Alice's messages exactly once


def _cli(url: str, token: str, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "agents.negotiator", "--url", url, *extra],
        env={**os.environ, "SYNAPSIA_AGENT_TOKEN": token},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_the_cli_prints_each_step_and_exits_0_when_booked(live_daphne: str, stand_in: Any) -> None:
    practice = practice_seed()
    stand_in(practice)
    url = _ws(live_daphne, practice)
    poll = ("--grant-poll", str(GRANT_POLL_SECONDS))  # the stand-in decides in this process
    alice, bob = _cli(url, practice.host.token, *poll), _cli(url, practice.guest.token, *poll)
    try:
        alice_out, alice_err = alice.communicate(timeout=120)
        bob_out, _ = bob.communicate(timeout=120)
    finally:
        for process in (alice, bob):
            if process.poll() is None:
                process.kill()
    assert (alice.returncode, bob.returncode) == (0, 0), alice_err
    assert "waiting for my owner's approval" in alice_out
    assert alice_out.splitlines()[-1].startswith("booked: venue=osteria-kanal start=")
    said = [line for line in bob_out.splitlines() if line.startswith("said #")]
    assert len(said) == 1 and "That works for us: Osteria Kanal (Italian, Kreuzberg)" in said[0]
    assert bob_out.splitlines()[-1].startswith("booked: venue=osteria-kanal start=")


def test_the_cli_exits_2_when_the_server_refuses_the_token(live_daphne: str) -> None:
    url = (
        live_daphne.replace("http://", "ws://") + "/ws/rooms/00000000-0000-0000-0000-000000000000/"
    )
    process = _cli(url, "syn_agent_not-a-real-token")
    _, err = process.communicate(timeout=60)
    assert process.returncode == 2
    assert err.startswith("The room ended this agent's session: ") and "4401" not in err


def test_the_scenario_agrees_with_the_shipped_catalogue() -> None:
    """The demo's story depends on these figures agreeing across the scenario and catalogue."""
    kanal = catalogue_default().venue(scenario.AGREED_VENUE)
    assert kanal is not None
    assert kanal.price_per_person.amount_minor == scenario.AGREED_PRICE_PER_PERSON
    for role in ("host", "guest"):
        budget = next(
            i for i in scenario.vault_items(role, timezone.now()) if i["kind"] == "budget"
        )
        assert budget["maximum"] >= scenario.AGREED_PRICE_PER_PERSON  # within both budgets
    booking = next(
        r for r in scenario.slip_capabilities("host") if r["resource"] == "tool:book_table"
    )
    assert booking["approval"] == "per_use"  # so the room pauses for Alice
