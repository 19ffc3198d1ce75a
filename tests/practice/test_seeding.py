"""Seeding the practice room: idempotent owners and keys, a fresh room and tokens each time."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from gatekeeper.policy import tools_effective
from ledger.models import LedgerEvent
from ledger.receipts import receipt_build
from ledger.verification import ledger_verify_room
from practice import scenario
from practice.errors import PracticeError
from practice.models import PracticeOwner, PracticeRoom
from practice.seeding import HOST_TOOLS, practice_seed
from rooms.models import Agent, Room, RoomMember, RoomState
from rooms.selectors import agent_by_token
from slips.capabilities import capability_from_record
from slips.models import DeviceKey, KeyCustody, VaultItem
from slips.services import key_revoke
from slips.vault import vault_open, vault_scoped_view
from slips.verification import capability_verdict

pytestmark = pytest.mark.django_db


def _verdict(
    seat: Any, room_id: Any, resource: str, recipient: str, operation: str = "disclose"
) -> Any:
    return capability_verdict(
        room_id=room_id,
        owner_id=seat.owner.pk,
        agent_id=seat.agent_id,
        resource=resource,
        operation=operation,
        recipient=recipient,
        now=timezone.now(),
    )


def test_seeding_twice_keeps_owners_and_keys_and_opens_a_new_room() -> None:
    first = practice_seed()
    second = practice_seed()

    assert first.host.owner.pk == second.host.owner.pk
    assert first.guest.owner.pk == second.guest.owner.pk
    assert first.host.owner.username == "demo-alice" and first.guest.owner.username == "demo-bob"
    assert not first.host.owner.has_usable_password()
    for role, seat in (("host", second.host), ("guest", second.guest)):
        keys = DeviceKey.objects.filter(owner=seat.owner)
        assert keys.count() == 1, "the demo key is enrolled once, not at every seeding"
        assert keys.get().custody == KeyCustody.DEMO_SEEDING
        assert PracticeOwner.objects.get(owner=seat.owner).device_key_id == keys.get().id
        # The vault is replaced, not added to.
        expected = len(scenario.vault_items(role, timezone.now()))  # type: ignore[arg-type]
        assert VaultItem.objects.filter(owner=seat.owner).count() == expected

    assert first.room_id != second.room_id
    assert Room.objects.get(id=first.room_id).state == RoomState.CLOSED
    assert Room.objects.get(id=second.room_id).state == RoomState.OPEN
    assert PracticeRoom.objects.count() == 2
    assert LedgerEvent.objects.filter(room_id=first.room_id, kind="room_closed").exists()

    # Same agents, fresh tokens: the old ones no longer authenticate.
    assert (first.host.agent_id, first.guest.agent_id) == (
        second.host.agent_id,
        second.guest.agent_id,
    )
    for old, new in ((first.host, second.host), (first.guest, second.guest)):
        assert old.token != new.token
        assert agent_by_token(token=old.token) is None
        authenticated = agent_by_token(token=new.token)
        assert authenticated is not None and authenticated.id == new.agent_id

    for seat in (second.host, second.guest):
        verdict = _verdict(seat, second.room_id, "availability", "peer_agent")
        assert verdict.allowed, verdict.rule
        assert verdict.approval_required is False
    for room_id in (first.room_id, second.room_id):
        assert ledger_verify_room(room_id=room_id).ok
    signed = LedgerEvent.objects.filter(room_id=second.room_id, kind="slip_signed")
    assert signed.count() == 2
    assert {e.data["key_custody"] for e in signed} == {"demo_seeding"}
    receipt = receipt_build(room_id=second.room_id)
    assert receipt.verified and receipt.demo_key_signatures == 2
    assert any("demo key the server holds" in line for line in receipt.summary)


def test_the_demo_owners_are_named_even_when_seeded_before_they_had_names() -> None:
    first = practice_seed()
    assert (first.host.owner.get_full_name(), first.guest.owner.get_full_name()) == ("Alice", "Bob")
    User.objects.filter(pk=first.host.owner.pk).update(first_name="")  # an older practice database
    second = practice_seed()
    assert second.host.owner.get_full_name() == "Alice"
    assert User.objects.get(pk=first.host.owner.pk).first_name == "Alice"


def test_the_room_is_seated_bound_and_joined_through_the_services() -> None:
    practice = practice_seed()
    room = Room.objects.get(id=practice.room_id)
    assert room.purpose == scenario.ROOM_PURPOSE and room.charter == scenario.ROOM_CHARTER
    seats = {m.owner_id: m.agent_id for m in RoomMember.objects.filter(room=room)}
    assert seats == {
        practice.host.owner.pk: practice.host.agent_id,
        practice.guest.owner.pk: practice.guest.agent_id,
    }
    kinds = list(
        LedgerEvent.objects.filter(room_id=room.id).order_by("seq").values_list("kind", flat=True)
    )
    assert kinds == ["join", "join", "slip_signed", "slip_signed"]
    assert Agent.objects.get(id=practice.host.agent_id).declared_tools == list(HOST_TOOLS)


def test_the_only_common_free_evening_is_day_four() -> None:
    now = timezone.now()
    practice = practice_seed(now=now)
    cleared = capability_from_record(
        {"resource": "availability", "scope": "free_busy_14d"}, slip_expires_at=2**40
    )
    busy: list[list[list[int]]] = []
    for seat in (practice.host, practice.guest):
        (view,) = vault_scoped_view(owner_id=seat.owner.pk, capability=cleared, now=now)
        assert set(view) == {"from", "until", "busy"}  # intervals only: no titles
        busy.append(view["busy"])

    horizon = (int(now.timestamp()), int((now + timedelta(days=14)).timestamp()))

    def free(intervals: list[list[int]], offset: int) -> bool:
        start = scenario.evening_of(now, offset)[0] + timedelta(hours=3)  # 19:00 local
        end = start + timedelta(minutes=90)
        s = max(int(start.timestamp()), horizon[0])
        e = min(int(end.timestamp()), horizon[1])
        return s < e and not any(a < e and s < b for a, b in intervals)

    common = [d for d in range(15) if all(free(b, d) for b in busy)]
    assert common == [scenario.COMMON_FREE_EVENING]


def test_private_titles_are_never_stored() -> None:
    """The scenario's calendar names its appointments ("Therapy session"); the vault keeps only
    when Alice is busy, so no slip, view or operator can ever show what for."""
    now = datetime(2026, 3, 1, 8, 0, tzinfo=UTC)
    practice = practice_seed(now=now)
    item = VaultItem.objects.get(owner=practice.host.owner, kind="availability")
    stored = vault_open(item)
    assert stored.busy  # type: ignore[attr-defined]
    assert "Therapy" not in repr(stored)
    cleared = capability_from_record(
        {"resource": "availability", "scope": "free_busy_7d"}, slip_expires_at=2**40
    )
    view = vault_scoped_view(owner_id=practice.host.owner.pk, capability=cleared, now=now)
    assert "Therapy" not in repr(view)
    # Day 0 is now's Berlin date: day+4 is free from 19:00 (18:00 UTC), day+3 is busy.
    day4 = datetime(2026, 3, 5, 18, 0, tzinfo=UTC).timestamp()
    assert not any(s <= day4 < e for s, e in view[0]["busy"])
    assert any(s <= day4 - 86_400 < e for s, e in view[0]["busy"])


def test_budget_alice_keeps_hers_to_her_agent_and_bob_shares_his_by_choice() -> None:
    shared = practice_seed()
    assert _verdict(shared.host, shared.room_id, "budget", "own_agent").allowed
    assert _verdict(shared.host, shared.room_id, "budget", "peer_agent").rule == (
        "recipient_not_cleared"
    )
    assert _verdict(shared.guest, shared.room_id, "budget", "peer_agent").allowed

    assert _verdict(shared.guest, shared.room_id, "budget", "own_agent", "read").allowed

    private = practice_seed(guest_shares_budget=False)
    assert _verdict(private.guest, private.room_id, "budget", "own_agent", "read").allowed
    assert _verdict(private.guest, private.room_id, "budget", "peer_agent").rule == ("not_in_slip")


def test_the_adversarial_agent_takes_bobs_seat_when_asked() -> None:
    negotiating = practice_seed()
    adversarial = practice_seed(guest_agent="adversary")
    assert adversarial.guest.agent_id != negotiating.guest.agent_id
    assert Agent.objects.get(id=adversarial.guest.agent_id).name == "Bob's agent (adversarial demo)"
    seat = RoomMember.objects.get(room_id=adversarial.room_id, owner=adversarial.guest.owner)
    assert seat.agent_id == adversarial.guest.agent_id
    assert agent_by_token(token=negotiating.guest.token) is None
    back = practice_seed()
    assert back.guest.agent_id == negotiating.guest.agent_id
    assert agent_by_token(token=adversarial.guest.token) is None
    assert Agent.objects.filter(owner=back.guest.owner).count() == 2


def test_tool_policy_rows_decide_in_both_profiles(tool_policy_default: str) -> None:
    practice = practice_seed(guest_agent="adversary")
    for seat, expected in ((practice.host, set(HOST_TOOLS)), (practice.guest, set())):
        agent = Agent.objects.get(id=seat.agent_id)
        assert (
            tools_effective(
                agent_id=agent.id,
                advisor_only=agent.advisor_only,
                declared_tools=agent.declared_tools,
                slip_cleared=None,
            )
            == expected
        )


def test_a_revoked_demo_key_is_replaced_by_a_new_enrolment() -> None:
    first = practice_seed()
    old = DeviceKey.objects.get(owner=first.host.owner)
    key_revoke(owner=first.host.owner, key_id=old.id)
    second = practice_seed()
    new = PracticeOwner.objects.get(owner=second.host.owner).device_key
    assert new is not None and new.id != old.id and new.custody == KeyCustody.DEMO_SEEDING
    assert _verdict(second.host, second.room_id, "food_likes", "peer_agent").allowed


def test_a_user_who_is_not_a_demo_owner_is_never_adopted(make_owner: Any) -> None:
    make_owner("demo-alice")
    with pytest.raises(PracticeError, match="not a demo owner"):
        practice_seed()
    # One transaction: nothing was written.
    assert not PracticeOwner.objects.exists()
    assert not User.objects.filter(username="demo-bob").exists()
    assert not Room.objects.exists() and not LedgerEvent.objects.exists()


def test_slips_live_for_a_day() -> None:
    practice = practice_seed()
    verdict = _verdict(practice.host, practice.room_id, "neighbourhood", "peer_agent")
    assert verdict.allowed
    later = timezone.now() + timedelta(hours=24, minutes=1)
    expired = capability_verdict(
        room_id=practice.room_id,
        owner_id=practice.host.owner.pk,
        agent_id=practice.host.agent_id,
        resource="neighbourhood",
        operation="disclose",
        recipient="peer_agent",
        now=later,
    )
    assert expired.rule == "slip_expired"
