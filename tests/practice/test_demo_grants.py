"""The demo's point: Alice's booking pauses the room until she approves it (her slip asks her
each time), and the headless approval goes through the real grant path with the demo-held
key, for all to see."""

from __future__ import annotations

import io
import re
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.utils import timezone

from gatekeeper.records import ActionStatus, Grant, GrantStatus
from ledger.models import LedgerEvent
from ledger.receipts import receipt_build
from ledger.verification import ledger_verify_room
from practice import scenario
from practice.custody import demo_keys_revoke
from practice.errors import DemoKeyUnavailable, NotADemoOwner, PracticeError
from practice.models import PracticeOwner, PracticeRoom
from practice.seeding import (
    Practice,
    demo_grant_approve,
    demo_grant_deny,
    demo_pending_grants,
    practice_seed,
)
from rooms.forks import action_for_agent
from rooms.models import Room, RoomState

pytestmark = pytest.mark.django_db


def _kanal(cost_cents: int = scenario.VENUE_PRICE_FOR_TWO) -> dict[str, Any]:
    return {
        "venue_id": scenario.AGREED_VENUE,
        "party_size": 2,
        "start": scenario.agreed_start(timezone.now()).isoformat(),
        "cost_cents": cost_cents,
        "currency": "EUR",
    }


def _book(practice: Practice, cost_cents: int, ref: str = "book-1") -> Any:
    return action_for_agent(
        room_id=practice.room_id,
        agent_id=practice.host.agent_id,
        client_id=ref,
        tool="book_table",
        arguments=_kanal(cost_cents),
    )


def _room_state(practice: Practice) -> str:
    return Room.objects.get(id=practice.room_id).state


def test_the_booking_waits_for_alice_and_her_demo_key_approves_it(
    tool_policy_default: str,
) -> None:
    practice = practice_seed()
    result = _book(practice, scenario.VENUE_PRICE_FOR_TWO)
    assert (result.status, result.rule) == (ActionStatus.AWAITING_GRANT, "approval_per_use")
    assert _room_state(practice) == RoomState.PAUSED

    (pending,) = demo_pending_grants(room_id=practice.room_id)
    assert pending.grant_id == result.grant_id and pending.tool == "book_table"
    assert pending.owner_id == practice.host.owner.pk
    assert pending.arguments["cost_cents"] == scenario.VENUE_PRICE_FOR_TWO

    done = demo_grant_approve(room_id=practice.room_id, grant_id=pending.grant_id)
    assert done.status == ActionStatus.EXECUTED, done.rule
    assert done.output is not None
    assert _room_state(practice) == RoomState.OPEN
    assert Grant.objects.get(id=pending.grant_id).status == GrantStatus.CONSUMED
    assert demo_pending_grants(room_id=practice.room_id) == []

    approved = LedgerEvent.objects.get(room_id=practice.room_id, kind="grant_approved")
    key = PracticeOwner.objects.get(owner=practice.host.owner).device_key
    assert key is not None
    assert approved.data["key_custody"] == "demo_seeding"
    assert approved.data["key_id"] == str(key.id)
    kinds = set(LedgerEvent.objects.filter(room_id=practice.room_id).values_list("kind", flat=True))
    assert {"fork_opened", "fork_resolved", "room_resumed", "action_executed"} <= kinds
    assert ledger_verify_room(room_id=practice.room_id).ok
    receipt = receipt_build(room_id=practice.room_id)
    assert receipt.verified and receipt.grants["approved"] == 1
    assert receipt.demo_key_signatures == 3  # two slips and the approval


def test_a_booking_under_the_catalogues_price_is_refused_not_offered_to_alice(
    tool_policy_default: str,
) -> None:
    practice = practice_seed()
    result = _book(practice, 5000)  # Kanal costs 76 for two
    assert (result.status, result.rule) == (ActionStatus.DENIED, "catalogue.price_mismatch")
    assert result.grant_id is None
    assert demo_pending_grants(room_id=practice.room_id) == []


def test_bobs_agents_may_not_book(tool_policy_default: str) -> None:
    practice = practice_seed(guest_agent="adversary")
    result = action_for_agent(
        room_id=practice.room_id,
        agent_id=practice.guest.agent_id,
        client_id="sneaky",
        tool="book_table",
        arguments={
            "venue_id": "anywhere",
            "party_size": 2,
            "start": "2030-01-01T19:00:00+00:00",
            "cost_cents": 100,
            "currency": "EUR",
        },
    )
    assert result.status == ActionStatus.DENIED and result.rule.startswith("policy.deny")
    assert demo_pending_grants(room_id=practice.room_id) == []


def test_a_grant_of_an_owner_who_is_not_a_demo_owner_is_refused(
    make_open_room: Any, settings: Any
) -> None:
    settings.SYNAPSIA = {**settings.SYNAPSIA, "TOOL_POLICY_DEFAULT": "allow_all"}
    practice_seed()  # demo owners exist, but this room is someone else's
    opened = make_open_room()
    result = action_for_agent(
        room_id=opened.room.id,
        agent_id=opened.a.agent.id,
        client_id="book-1",
        tool="book_table",
        arguments=_kanal(),
    )
    assert result.status == ActionStatus.AWAITING_GRANT and result.grant_id is not None
    with pytest.raises(NotADemoOwner):
        demo_grant_approve(room_id=opened.room.id, grant_id=result.grant_id)
    assert Grant.objects.get(id=result.grant_id).status == GrantStatus.PENDING
    assert demo_pending_grants(room_id=opened.room.id) == []
    with pytest.raises(PracticeError, match="No such grant"):
        demo_grant_approve(room_id=PracticeRoom.objects.get().room_id, grant_id=result.grant_id)


def test_a_tampered_sealed_seed_fails_closed() -> None:
    practice = practice_seed()
    result = _book(practice, scenario.VENUE_PRICE_FOR_TWO)
    assert result.grant_id is not None
    demo = PracticeOwner.objects.get(owner=practice.host.owner)
    sealed = bytearray(bytes(demo.signing_seed_sealed))
    sealed[-1] ^= 0x01
    PracticeOwner.objects.filter(id=demo.id).update(signing_seed_sealed=bytes(sealed))

    with pytest.raises(DemoKeyUnavailable, match="does not open") as unusable:
        demo_grant_approve(room_id=practice.room_id, grant_id=result.grant_id)
    # Whose key and what to run, in words: no key id, no function's path.
    said = unusable.value.message
    assert "The demo key the server holds for Alice (demo-alice) does not open" in said
    assert "Nothing was signed" in said and "python manage.py demo --replace-demo-keys" in said
    assert str(demo.device_key_id) not in said and "slips.services" not in said
    assert Grant.objects.get(id=result.grant_id).status == GrantStatus.PENDING
    assert not LedgerEvent.objects.filter(room_id=practice.room_id, kind="grant_approved").exists()
    assert _room_state(practice) == RoomState.PAUSED

    rooms_before = Room.objects.count()
    with pytest.raises(DemoKeyUnavailable):
        practice_seed()  # seeding signs slips with that key: it fails closed too
    assert Room.objects.count() == rooms_before
    assert _room_state(practice) == RoomState.PAUSED  # nothing was closed either


def test_the_demo_command_says_what_is_wrong_and_what_to_run_without_a_traceback() -> None:
    practice_seed()
    bob = PracticeOwner.objects.get(owner__username=scenario.GUEST_USERNAME)
    sealed = bytearray(bytes(bob.signing_seed_sealed))
    sealed[0] ^= 0x01
    PracticeOwner.objects.filter(id=bob.id).update(signing_seed_sealed=bytes(sealed))
    out = io.StringIO()
    with pytest.raises(CommandError) as refused:  # printed as "CommandError: ...", no traceback
        call_command("demo", "--headless", stdout=out)
    said = str(refused.value)
    assert said.startswith("The demo key the server holds for Bob (demo-bob) does not open")
    assert "run `python manage.py demo --replace-demo-keys`" in said
    assert not re.search(r"[0-9a-f]{8}-[0-9a-f]{4}-", said), said
    assert "server up" not in out.getvalue()  # nothing was started


def test_replacing_the_demo_keys_revokes_them_and_seeding_enrolls_new_ones() -> None:
    first = practice_seed()
    old = {p.owner.username: p.device_key_id for p in PracticeOwner.objects.select_related("owner")}
    assert demo_keys_revoke() == ["Alice (demo-alice)", "Bob (demo-bob)"]
    assert demo_keys_revoke() == []  # nothing left to revoke
    events = LedgerEvent.objects.filter(room_id=first.room_id, kind="key_revoked")
    assert {e.data["key_id"] for e in events} == {str(k) for k in old.values()}
    practice_seed()
    for demo in PracticeOwner.objects.select_related("owner", "device_key"):
        assert demo.device_key is not None and demo.device_key.revoked_at is None
        assert demo.device_key_id != old[demo.owner.username]


def test_a_seed_moved_to_the_other_owner_does_not_open() -> None:
    practice = practice_seed()
    alice = PracticeOwner.objects.get(owner=practice.host.owner)
    bob = PracticeOwner.objects.get(owner=practice.guest.owner)
    PracticeOwner.objects.filter(id=bob.id).update(
        signing_seed_sealed=bytes(alice.signing_seed_sealed)
    )
    with pytest.raises(DemoKeyUnavailable):
        practice_seed()


def test_a_denied_booking_never_runs_and_the_room_stays_paused() -> None:
    practice = practice_seed()
    result = _book(practice, scenario.VENUE_PRICE_FOR_TWO)
    assert result.grant_id is not None
    denied = demo_grant_deny(room_id=practice.room_id, grant_id=result.grant_id)
    assert (denied.status, denied.rule) == (ActionStatus.DENIED, "grant_denied")
    assert _room_state(practice) == RoomState.PAUSED
    assert not LedgerEvent.objects.filter(room_id=practice.room_id, kind="action_executed").exists()
    assert ledger_verify_room(room_id=practice.room_id).ok
