"""A turn's decisions (``decide_turn_guarded``) still run every check, live, from the turn's
one read: each slip's signature and key, the lookup columns, the slip's and each
capability's expiry at the turn's clock, the records and their uses. The slip's own rules
are judged once per slip and second of a turn (``RoomSlips``), never for another second.
(That each turn decision is the one-request path's, under these changes and more, is
tests/gatekeeper/test_turn_decision_parity.py's.)

Each test changes the record the way an attacker with database access, the clock or the
owner would, and asserts the very next decision refuses what the change took away."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.db import transaction
from django.utils import timezone

from gatekeeper.decision import Outcome
from slips import services as slip_services
from slips.models import Slip, SlipCapability
from slips.verification import room_slips_read
from tests.gatekeeper.turn_helpers import (
    SOON,
    capability_record,
    slip_column,
    turn_decided,
    turn_rules,
)
from tests.slips.conftest import seat_slip_sign

pytestmark = pytest.mark.django_db


def _peer(kind: str, **extra: Any) -> dict[str, Any]:
    return capability_record(kind, "disclose", "peer_agent", **extra)


def _setup(make_open_room: Any) -> tuple[Any, Any, Slip]:
    """Alice's slip clears three kinds for Bob's agent (neighbourhood only for ``SOON``);
    Bob's slip lets his own agent read his budget."""
    setup = make_open_room()
    soon = int(time.time()) + SOON
    key, _device = seat_slip_sign(
        setup.a,
        setup.room.id,
        [_peer("food_likes"), _peer("allergies"), _peer("neighbourhood", expires_at=soon)],
    )
    seat_slip_sign(setup.b, setup.room.id, [capability_record("budget", "read", "own_agent")])
    slip = Slip.objects.get(room_id=setup.room.id, owner=setup.a.owner, superseded_at=None)
    return setup, key, slip


def _at(monkeypatch: pytest.MonkeyPatch, moment: datetime) -> None:
    monkeypatch.setattr(timezone, "now", lambda: moment)


ALL_CLEARED = {
    ("own_agent", "budget"): "cleared",
    ("peer_agent", "allergies"): "cleared",
    ("peer_agent", "food_likes"): "cleared",
    ("peer_agent", "neighbourhood"): "cleared",
}


def test_the_positive_control_clears_every_kind(make_open_room: Any) -> None:
    setup, _key, _slip = _setup(make_open_room)
    decided = turn_decided(setup)
    assert decided.error is None
    assert turn_rules(decided) == ALL_CLEARED
    assert all(d.decision.outcome is Outcome.ALLOW for d in decided.items)


def test_a_forged_signature_denies_every_use_under_that_slip_only(make_open_room: Any) -> None:
    setup, _key, slip = _setup(make_open_room)
    assert turn_rules(turn_decided(setup)) == ALL_CLEARED
    slip_column(slip, "signature", bytes(64))
    rules = turn_rules(turn_decided(setup))
    assert rules == {
        ("own_agent", "budget"): "cleared",  # Bob's own slip still verifies
        ("peer_agent", "allergies"): "bad_signature",
        ("peer_agent", "food_likes"): "bad_signature",
        ("peer_agent", "neighbourhood"): "bad_signature",
    }


def test_one_flipped_payload_byte_is_refused_on_the_next_turn(make_open_room: Any) -> None:
    setup, _key, slip = _setup(make_open_room)
    assert turn_rules(turn_decided(setup)) == ALL_CLEARED
    raw = bytes(slip.payload)
    tampered = raw.replace(b'"max_uses":50', b'"max_uses":90', 1)
    assert tampered != raw
    slip_column(slip, "payload", tampered)
    assert {r for k, r in turn_rules(turn_decided(setup)).items() if k[0] == "peer_agent"} == {
        "bad_signature"
    }


def test_a_revoked_key_and_a_disagreeing_column_are_refused(make_open_room: Any) -> None:
    setup, key, slip = _setup(make_open_room)
    slip_column(slip, "nonce", "x" * 24)
    assert turn_rules(turn_decided(setup))[("peer_agent", "food_likes")] == "binding_mismatch"
    slip_column(slip, "nonce", slip.nonce)
    assert turn_rules(turn_decided(setup)) == ALL_CLEARED
    slip_services.key_revoke(owner=setup.a.owner, key_id=key.id)
    assert turn_rules(turn_decided(setup))[("peer_agent", "food_likes")] == "key_revoked"


def test_a_capability_expires_at_its_own_time_and_the_slip_at_its_own(
    make_open_room: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    setup, _key, slip = _setup(make_open_room)
    start = datetime.now(tz=UTC)
    _at(monkeypatch, start + timedelta(seconds=SOON + 5))
    assert turn_rules(turn_decided(setup)) == {
        **ALL_CLEARED,
        ("peer_agent", "neighbourhood"): "capability_expired",
    }
    _at(monkeypatch, datetime.fromtimestamp(slip.expires_at, tz=UTC))
    rules = turn_rules(turn_decided(setup))
    assert rules[("peer_agent", "food_likes")] == "slip_expired"
    assert rules[("peer_agent", "allergies")] == "slip_expired"
    assert rules[("peer_agent", "neighbourhood")] == "slip_expired"


def test_uses_are_read_live_and_the_most_telling_refusal_is_given(make_open_room: Any) -> None:
    setup, _key, slip = _setup(make_open_room)
    assert turn_rules(turn_decided(setup)) == ALL_CLEARED
    SlipCapability.objects.filter(slip=slip, resource="food_likes").update(uses_left=0)
    bobs = Slip.objects.get(room_id=setup.room.id, owner=setup.b.owner, superseded_at=None)
    SlipCapability.objects.filter(slip=bobs, resource="budget").update(uses_left=0)
    rules = turn_rules(turn_decided(setup))
    assert rules[("peer_agent", "food_likes")] == "uses_exhausted"
    assert rules[("peer_agent", "allergies")] == "cleared"
    # Towards his own agent both "read" and "disclose" are asked: the exhausted "read" record
    # is named, not the "disclose" one his slip does not have.
    assert rules[("own_agent", "budget")] == "uses_exhausted"


def test_a_slips_own_rules_are_judged_for_each_second_asked(make_open_room: Any) -> None:
    """Within one turn's read, a use asked at a later second is judged at that second: what
    the slip's own rules said a moment earlier is not reused for it."""
    setup, _key, slip = _setup(make_open_room)
    with transaction.atomic():
        slips = room_slips_read(room_id=setup.room.id, tier="collaborative", lock=True)
        ask = {
            "owner_id": setup.a.owner.pk,
            "agent_id": setup.a.agent.id,
            "resource": "food_likes",
            "operations": ("disclose",),
            "recipient": "peer_agent",
        }
        before = datetime.fromtimestamp(slip.expires_at - 1, tz=UTC)
        after = datetime.fromtimestamp(slip.expires_at, tz=UTC)
        assert slips.verdicts(**ask, now=before)[0][0].rule == "cleared"
        assert slips.verdicts(**ask, now=after)[0][0].rule == "slip_expired"
        assert slips.verdicts(**{**ask, "resource": "allergies"}, now=after)[0][0].rule == (
            "slip_expired"
        )
        assert slips.verdicts(**ask, now=before)[0][0].rule == "cleared"
        # Nor is it reused for another request: the same slip asked for another agent.
        other = {**ask, "agent_id": setup.b.agent.id}
        assert slips.verdicts(**other, now=before)[0][0].rule == "no_slip"
