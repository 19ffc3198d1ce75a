"""Verification on every use: live state, re-verified signatures, uses, tiers, conflicts."""

from __future__ import annotations

import json
import time
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from django.utils import timezone
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from slips import services
from slips.canonical import SLIP_TAG
from slips.capabilities import (
    APPROVALS,
    RECIPIENTS,
    VAULT_SCOPES,
    Capability,
    capability_narrower_or_equal,
    capability_under_tier,
    room_rule_narrower,
)
from slips.models import Slip, SlipCapability, SlipConflict, Tier
from slips.selectors import room_conflicts
from slips.signatures import signature_valid
from slips.verification import capability_use, capability_verdict
from tests.slips.conftest import Device, canonical_text

pytestmark = pytest.mark.django_db

DISCLOSE = {
    "resource": "availability",
    "operation": "disclose",
    "scope": "free_busy_7d",
    "recipient": "peer_agent",
    "max_uses": 3,
    "approval": "none",
    "onward_disclosure": True,
}


def verdict(
    signer, *, resource="availability", operation="disclose", recipient="peer_agent", now=None
):
    return capability_verdict(
        room_id=signer.room_id,
        owner_id=signer.owner.pk,
        agent_id=signer.agent_id,
        resource=resource,
        operation=operation,
        recipient=recipient,
        now=now or timezone.now(),
    )


def use(signer, **kwargs):
    return capability_use(
        room_id=signer.room_id,
        owner_id=signer.owner.pk,
        agent_id=signer.agent_id,
        resource=kwargs.get("resource", "availability"),
        operation=kwargs.get("operation", "disclose"),
        recipient=kwargs.get("recipient", "peer_agent"),
        now=kwargs.get("now") or timezone.now(),
    )


def test_cleared_capability_is_allowed_exactly_as_signed_when_no_tier_is_chosen(
    make_signer,
) -> None:
    # No tier chosen: nothing the owner checked is narrowed without a word (the room runs
    # under Collaborative, and the page says so).
    signer = make_signer()
    signer.submit(capabilities=[DISCLOSE])
    v = verdict(signer)
    assert v.allowed and v.rule == "cleared" and v.uses_left == 3
    assert v.capability.scope == "free_busy_7d"
    assert v.tier == "collaborative" and v.capability.onward_disclosure is True
    assert v.approval_required is False


@pytest.mark.parametrize(
    ("kwargs", "rule"),
    [
        ({"resource": "budget"}, "not_in_slip"),
        ({"operation": "read"}, "not_in_slip"),
        ({"recipient": "own_agent"}, "recipient_not_cleared"),
    ],
)
def test_unchecked_means_unshared(make_signer, kwargs, rule) -> None:
    signer = make_signer()
    signer.submit(capabilities=[DISCLOSE])
    v = verdict(signer, **kwargs)
    assert not v.allowed and v.rule == rule


def test_no_slip_no_access(make_signer) -> None:
    signer = make_signer()
    assert verdict(signer).rule == "no_slip"


def test_other_agent_or_room_or_owner_gets_nothing(make_signer) -> None:
    signer = make_signer()
    signer.submit(capabilities=[DISCLOSE])
    for field in ("room_id", "agent_id"):
        original = getattr(signer, field)
        setattr(signer, field, uuid.uuid4())
        assert verdict(signer).rule == "no_slip"
        setattr(signer, field, original)


def test_revocation_stops_the_very_next_use(make_signer) -> None:
    signer = make_signer()
    signer.submit(capabilities=[DISCLOSE])
    assert verdict(signer).allowed
    services.key_revoke(owner=signer.owner, key_id=signer.key.id)
    assert verdict(signer).rule == "key_revoked"
    assert use(signer).rule == "key_revoked"


def test_rotation_keeps_old_slips_verifying(make_signer) -> None:
    signer = make_signer()
    signer.submit(capabilities=[DISCLOSE])
    new_device = Device()
    challenge = services.key_challenge_issue(owner=signer.owner, purpose="rotate").value
    services.key_rotate(
        owner=signer.owner,
        old_key_id=signer.key.id,
        challenge=challenge,
        public_key=new_device.public_key,
        label="new",
        proof=new_device.proof(
            owner=signer.owner, challenge=challenge, label="new", purpose="rotate"
        ),
    )
    assert verdict(signer).allowed


def test_expiry_is_checked_at_use_time(make_signer) -> None:
    signer = make_signer()
    slip = signer.submit(capabilities=[DISCLOSE])
    at_expiry = datetime.fromtimestamp(slip.expires_at, tz=UTC)
    assert verdict(signer, now=at_expiry - timedelta(seconds=1)).allowed
    assert verdict(signer, now=at_expiry).rule == "slip_expired"


def test_capability_expiry(make_signer) -> None:
    signer = make_signer()
    ends = int(time.time()) + 60
    signer.submit(capabilities=[{**DISCLOSE, "expires_at": ends}])
    assert verdict(signer).allowed
    assert verdict(signer, now=datetime.fromtimestamp(ends, tz=UTC)).rule == "capability_expired"


def test_a_new_version_stops_the_old_one_at_once(make_signer) -> None:
    signer = make_signer()
    signer.submit(capabilities=[DISCLOSE], issued_at=int(time.time()) - 1)
    assert verdict(signer).allowed
    signer.submit(capabilities=[])
    assert verdict(signer).rule == "not_in_slip"


def test_uses_run_out(make_signer) -> None:
    signer = make_signer()
    signer.submit(capabilities=[DISCLOSE])
    assert [use(signer).uses_left for _ in range(3)] == [2, 1, 0]
    assert use(signer).rule == "uses_exhausted"
    assert verdict(signer).rule == "uses_exhausted"


def test_tampered_stored_bytes_are_denied(make_signer) -> None:
    """Someone with database access widens a stored slip: the next verification refuses it."""
    signer = make_signer()
    slip = signer.submit(capabilities=[DISCLOSE])
    widened = bytes(slip.payload).replace(b'"max_uses":3', b'"max_uses":9')
    Slip.objects.filter(id=slip.id).update(payload=widened)
    assert verdict(signer).rule == "bad_signature"


def test_tampered_lookup_columns_are_denied(make_signer) -> None:
    signer = make_signer()
    slip = signer.submit(capabilities=[DISCLOSE])
    other_room = uuid.uuid4()
    Slip.objects.filter(id=slip.id).update(room_id=other_room)
    signer.room_id = other_room
    assert verdict(signer).rule == "binding_mismatch"


def test_error_in_verification_is_a_denial(make_signer) -> None:
    signer = make_signer()
    slip = signer.submit(capabilities=[DISCLOSE])
    Slip.objects.filter(id=slip.id).update(signature=b"short")
    assert verdict(signer).rule == "bad_signature"
    SlipCapability.objects.filter(slip=slip).delete()
    assert not verdict(signer).allowed


def test_sandbox_shares_nothing_from_the_vault(make_signer) -> None:
    signer = make_signer()
    signer.submit(capabilities=[DISCLOSE, {"resource": "tool:book_table", "approval": "none"}])
    services.tier_choose(owner=signer.owner, room_id=signer.room_id, tier="sandbox")
    assert verdict(signer).rule == "tier_forbids"
    tool = verdict(signer, resource="tool:book_table", operation="act", recipient="own_agent")
    assert tool.allowed and tool.approval_required  # sandbox asks before every action


def test_collaborative_only_when_no_owner_chose_narrower(make_signer) -> None:
    alice = make_signer("alice")
    bob = make_signer("bob", room_id=alice.room_id)
    alice.submit(capabilities=[DISCLOSE])
    bob.submit(capabilities=[])
    services.tier_choose(owner=alice.owner, room_id=alice.room_id, tier="collaborative")
    services.tier_choose(owner=bob.owner, room_id=alice.room_id, tier="room_only")
    assert verdict(alice).capability.onward_disclosure is False  # bob's Room Only wins
    conflict = room_conflicts(room_id=alice.room_id).get(field="tier")
    assert conflict.winner == "room_only"
    services.tier_choose(owner=bob.owner, room_id=alice.room_id, tier="collaborative")
    assert verdict(alice).capability.onward_disclosure is True
    assert not room_conflicts(room_id=alice.room_id).filter(field="tier").exists()


def test_conflict_on_a_shared_resource_resolves_to_the_narrower_for_both(make_signer) -> None:
    alice = make_signer("alice")
    bob = make_signer("bob", room_id=alice.room_id)
    wide = {"resource": "tool:share_itinerary", "onward_disclosure": True, "approval": "none"}
    narrow = {"resource": "tool:share_itinerary", "onward_disclosure": False, "approval": "none"}
    for s in (alice, bob):
        services.tier_choose(owner=s.owner, room_id=alice.room_id, tier="collaborative")
    alice.submit(capabilities=[wide])
    bob.submit(capabilities=[narrow])
    v = verdict(alice, resource="tool:share_itinerary", operation="act", recipient="own_agent")
    assert v.allowed and v.capability.onward_disclosure is False
    (conflict,) = SlipConflict.objects.filter(room_id=alice.room_id)
    assert conflict.field == "onward_disclosure" and conflict.winner is False
    assert conflict.values == {str(alice.owner.pk): True, str(bob.owner.pk): False}


# --- properties -----------------------------------------------------------------------------

capabilities = st.builds(
    lambda kind, scope_i, recipient, expires, uses, onward, approval: Capability(
        resource=kind,
        operation="disclose",
        scope=VAULT_SCOPES[kind][scope_i % len(VAULT_SCOPES[kind])],
        recipient=recipient,
        expires_at=expires,
        max_uses=uses,
        onward_disclosure=onward,
        approval=approval,
    ),
    st.sampled_from(sorted(VAULT_SCOPES)),
    st.integers(0, 2),
    st.sampled_from(RECIPIENTS),
    st.integers(1, 2**40),
    st.integers(1, 1000),
    st.booleans(),
    st.sampled_from(APPROVALS),
) | st.builds(
    lambda name, onward, approval: Capability(
        resource=f"tool:{name}",
        operation="act",
        scope="call",
        recipient="own_agent",
        expires_at=10,
        max_uses=1,
        onward_disclosure=onward,
        approval=approval,
    ),
    st.sampled_from(["book", "pay"]),
    st.booleans(),
    st.sampled_from(APPROVALS),
)


@given(capabilities, st.sampled_from(list(Tier)))
def test_tiers_never_widen(capability: Capability, tier: Tier) -> None:
    narrowed = capability_under_tier(capability, tier)
    assert narrowed is None or capability_narrower_or_equal(narrowed, capability)
    if tier != Tier.COLLABORATIVE and narrowed is not None:
        assert narrowed.onward_disclosure is False


@given(st.booleans(), st.booleans(), st.sampled_from(APPROVALS), st.sampled_from(APPROVALS))
def test_conflicts_pick_the_narrower(a: bool, b: bool, x: str, y: str) -> None:
    assert room_rule_narrower("onward_disclosure", a, b) == (a and b)
    winner = room_rule_narrower("approval", x, y)
    assert winner == ("per_use" if "per_use" in (x, y) else "none")
    assert room_rule_narrower("approval", y, x) == winner


SIGNED_FIELDS = ["room_id", "owner_id", "agent_id", "key_id", "nonce", "issued_at", "expires_at"]


@settings(max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    field=st.sampled_from([*SIGNED_FIELDS, "capabilities"]),
    replacement=st.one_of(st.integers(0, 2**53 - 1), st.uuids().map(str), st.text(max_size=8)),
)
def test_any_change_to_a_signed_field_fails_verification(field, replacement) -> None:
    """Pure signature property (no database): re-binding or editing any field breaks it."""
    device = Device()
    payload = {
        "v": 1,
        "room_id": str(uuid.UUID(int=1)),
        "owner_id": "7",
        "agent_id": str(uuid.UUID(int=2)),
        "key_id": str(uuid.UUID(int=3)),
        "nonce": "n" * 24,
        "issued_at": 1_700_000_000,
        "expires_at": 1_700_086_400,
        "capabilities": [DISCLOSE],
    }
    text = canonical_text(payload)
    signature = device.signing_key.sign(SLIP_TAG + text.encode()).signature
    changed = json.loads(text)
    changed[field] = [{**DISCLOSE, "max_uses": 4}] if field == "capabilities" else replacement
    if changed == payload:
        return
    assert not signature_valid(
        public_key=bytes(device.signing_key.verify_key),
        message=SLIP_TAG + canonical_text(changed).encode(),
        signature=signature,
    )
