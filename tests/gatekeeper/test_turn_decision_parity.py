"""A turn decides each item from one read (``RoomSlips``: each slip's records held with its
check, one item's operations judged together) exactly as the one-request path does
(``decide`` of a ``DisclosureRequest``, which re-reads everything), for every rule a slip
can give: towards the owner's own agent, where a ``read`` and a ``disclose`` record both
count, and towards the other agent; and a check that fails for one item denies that item
and pauses the turn, the others decided as ever."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.db import transaction
from django.utils import timezone

import slips.verification as verification
from gatekeeper.decision import (
    Outcome,
    decide,
)
from slips import services as slip_services
from slips.models import RoomTier, Slip, SlipCapability
from tests.gatekeeper.turn_helpers import (
    SOON,
    capability_record,
    slip_column,
    turn_decided,
    turn_rules,
)
from tests.slips.conftest import seat_slip_sign

pytestmark = pytest.mark.django_db


def _setup(make_open_room: Any) -> tuple[Any, Any]:
    """Alice's slip: food likes for Bob's agent, allergies asking her per use, her
    neighbourhood for her own agent only (so not for Bob's), dislikes for both agents and
    only for ``SOON``. Bob's slip: his budget both read and disclosed to his own agent, his
    allergies read only."""
    setup = make_open_room()
    soon = int(time.time()) + SOON
    alice_key, _device = seat_slip_sign(
        setup.a,
        setup.room.id,
        [
            capability_record("food_likes", "disclose", "peer_agent"),
            capability_record("allergies", "disclose", "peer_agent", approval="per_use"),
            capability_record("neighbourhood", "disclose", "own_agent"),
            capability_record("food_dislikes", "disclose", "both", expires_at=soon),
        ],
    )
    seat_slip_sign(
        setup.b,
        setup.room.id,
        [
            capability_record("budget", "read", "own_agent"),
            capability_record("budget", "disclose", "own_agent"),
            capability_record("allergies", "read", "own_agent"),
        ],
    )
    return setup, alice_key


def _live_slip(setup: Any, seat: Any) -> Slip:
    return Slip.objects.get(room_id=setup.room.id, owner=seat.owner, superseded_at=None)


def _record_id(slip: Slip, resource: str, operation: str) -> int:
    return SlipCapability.objects.get(slip=slip, resource=resource, operation=operation).id


CHANGES = [
    "none",
    "own_read_exhausted",
    "own_both_exhausted",
    "peer_exhausted",
    "capability_expired",
    "slip_expired",
    "not_yet_valid",
    "forged",
    "key_revoked",
    "nonce_changed",
    "room_only",
    "sandbox",
]


def _change(change: str, setup: Any, key: Any, monkeypatch: pytest.MonkeyPatch) -> str:
    """Make ``change`` and return the tier the turn runs under."""
    alices, bobs = _live_slip(setup, setup.a), _live_slip(setup, setup.b)
    if change == "own_read_exhausted":
        SlipCapability.objects.filter(slip=bobs, resource="budget", operation="read").update(
            uses_left=0
        )
    elif change == "own_both_exhausted":
        SlipCapability.objects.filter(slip=bobs, resource="budget").update(uses_left=0)
    elif change == "peer_exhausted":
        SlipCapability.objects.filter(slip=alices, resource="food_likes").update(uses_left=0)
    elif change == "capability_expired":
        moment = datetime.now(tz=UTC) + timedelta(seconds=SOON + 5)
        monkeypatch.setattr(timezone, "now", lambda: moment)
    elif change == "slip_expired":
        moment = datetime.fromtimestamp(alices.expires_at, tz=UTC)
        monkeypatch.setattr(timezone, "now", lambda: moment)
    elif change == "not_yet_valid":
        moment = datetime.fromtimestamp(alices.issued_at - 3600, tz=UTC)
        monkeypatch.setattr(timezone, "now", lambda: moment)
    elif change == "forged":
        slip_column(alices, "signature", bytes(64))
    elif change == "nonce_changed":
        slip_column(alices, "nonce", "x" * 24)
    elif change == "key_revoked":
        slip_services.key_revoke(owner=setup.a.owner, key_id=key.id)
    elif change in ("room_only", "sandbox"):
        # Both paths read the same tier: the one-request path from these rows.
        for seat in (setup.a, setup.b):
            RoomTier.objects.create(room_id=setup.room.id, owner=seat.owner, tier=change)
        return change
    return "collaborative"


@pytest.mark.parametrize("change", CHANGES)
def test_each_turn_decision_is_the_one_request_paths_with_the_record_that_pays(
    make_open_room: Any, monkeypatch: pytest.MonkeyPatch, change: str
) -> None:
    setup, key = _setup(make_open_room)
    tier = _change(change, setup, key, monkeypatch)
    decided = turn_decided(setup, tier)
    assert decided.error is None
    assert set(turn_rules(decided)) == {
        ("own_agent", "allergies"),
        ("own_agent", "budget"),
        ("peer_agent", "allergies"),
        ("peer_agent", "food_dislikes"),
        ("peer_agent", "food_likes"),
        ("peer_agent", "neighbourhood"),
    }
    for d in decided.items:
        alone = decide(d.request)
        assert (d.decision.outcome, d.decision.rule, d.decision.detail) == (
            alone.outcome,
            alone.rule,
            alone.detail,
        ), d.request
        assert d.decision.slip_id == alone.slip_id
        assert d.decision.capability == alone.capability
        if d.decision.outcome is Outcome.DENY:
            assert d.decision.record_id is None
        else:  # the record that cleared it pays the use
            assert d.decision.capability is not None
            slip = _live_slip(setup, setup.b if d.request.recipient == "own_agent" else setup.a)
            operation = d.decision.capability.operation
            assert d.decision.record_id == _record_id(slip, d.request.resource, operation)


def test_the_rules_each_change_gives(make_open_room: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The parity above is not parity of two wrong answers: the rules themselves."""
    setup, key = _setup(make_open_room)
    assert turn_rules(turn_decided(setup)) == {
        ("own_agent", "allergies"): "cleared",
        ("own_agent", "budget"): "cleared",
        ("peer_agent", "allergies"): "approval_per_use",
        ("peer_agent", "food_dislikes"): "cleared",
        ("peer_agent", "food_likes"): "cleared",
        ("peer_agent", "neighbourhood"): "recipient_not_cleared",
    }
    bobs = _live_slip(setup, setup.b)
    SlipCapability.objects.filter(slip=bobs, resource="budget", operation="read").update(
        uses_left=0
    )
    own = next(d for d in turn_decided(setup).items if d.request.resource == "budget")
    # The "read" record is spent: the "disclose" one clears, and is the one that pays.
    assert own.decision.rule == "cleared"
    assert own.decision.record_id == _record_id(bobs, "budget", "disclose")
    SlipCapability.objects.filter(slip=bobs, resource="budget").update(uses_left=0)
    assert turn_rules(turn_decided(setup))[("own_agent", "budget")] == "uses_exhausted"
    slip_services.key_revoke(owner=setup.a.owner, key_id=key.id)
    rules = turn_rules(turn_decided(setup))
    assert {r for (recipient, _), r in rules.items() if recipient == "peer_agent"} == {
        "key_revoked"
    }
    assert rules[("own_agent", "allergies")] == "cleared"


def test_a_check_that_fails_for_one_item_denies_it_and_pauses_the_turn(
    make_open_room: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    setup, _key = _setup(make_open_room)
    judge_use = verification._judge_use

    def failing(checked: Any, **kwargs: Any) -> Any:
        if kwargs["resource"] == "budget" and kwargs["operation"] == "disclose":
            raise RuntimeError("check failed")
        return judge_use(checked, **kwargs)

    monkeypatch.setattr(verification, "_judge_use", failing)
    decided = turn_decided(setup)
    # The "read" record of the same item cleared; the failed check still denies the item.
    assert decided.error == "verification_error"
    rules = turn_rules(decided)
    assert rules[("own_agent", "budget")] == "verification_error"
    assert rules[("own_agent", "allergies")] == "cleared"
    assert rules[("peer_agent", "food_likes")] == "cleared"


def test_a_turns_decisions_and_verdicts_cannot_be_changed_after_the_fact(
    make_open_room: Any,
) -> None:
    setup, _key = _setup(make_open_room)
    decided = turn_decided(setup)
    first = decided.items[0]
    with pytest.raises(AttributeError):
        first.decision = first.decision  # type: ignore[misc]
    with pytest.raises(AttributeError):
        first.decision.rule = "cleared"  # type: ignore[misc]
    with transaction.atomic():
        slips = verification.room_slips_read(room_id=setup.room.id, tier="collaborative", lock=True)
        ((verdict, record),) = slips.verdicts(
            owner_id=setup.a.owner.pk,
            agent_id=setup.a.agent.id,
            resource="food_likes",
            operations=("disclose",),
            recipient="peer_agent",
            now=timezone.now(),
        )
    assert verdict.allowed and record is not None
    with pytest.raises(AttributeError):
        verdict.allowed = False  # type: ignore[misc]
    with pytest.raises(AttributeError):
        record.uses_left = 1000  # type: ignore[misc]
