"""Privacy tiers only narrow, each narrows visibly differently, and the narrowest of the two
owners' tiers is the one the room runs under, said in words to both."""

from __future__ import annotations

import pytest
from django.utils import timezone
from hypothesis import given
from hypothesis import strategies as st

from slips import services
from slips.capabilities import (
    APPROVALS,
    RECIPIENTS,
    TIER_ORDER,
    VAULT_SCOPES,
    Capability,
    capability_narrower_or_equal,
    capability_under_tier,
    tier_narrowest,
)
from slips.models import Tier
from slips.selectors import conflicts_in_words, room_tier_words
from slips.verification import capability_verdict, room_tier

pytestmark = pytest.mark.django_db

vault_capabilities = st.builds(
    lambda kind, scope_i, operation, recipient, expires, uses, onward, approval: Capability(
        resource=kind,
        operation=operation,
        scope=VAULT_SCOPES[kind][scope_i % len(VAULT_SCOPES[kind])],
        recipient=recipient,
        expires_at=expires,
        max_uses=uses,
        onward_disclosure=onward,
        approval=approval,
    ),
    st.sampled_from(sorted(VAULT_SCOPES)),
    st.integers(0, 3),
    st.sampled_from(["read", "disclose"]),
    st.sampled_from(RECIPIENTS),
    st.integers(1, 2**40),
    st.integers(1, 1000),
    st.booleans(),
    st.sampled_from(APPROVALS),
)
tool_capabilities = st.builds(
    lambda name, uses, onward, approval: Capability(
        resource=f"tool:{name}",
        operation="act",
        scope="call",
        recipient="own_agent",
        expires_at=10,
        max_uses=uses,
        onward_disclosure=onward,
        approval=approval,
    ),
    st.sampled_from(["book_table", "share_itinerary", "spend"]),
    st.integers(1, 1000),
    st.booleans(),
    st.sampled_from(APPROVALS),
)
capabilities = vault_capabilities | tool_capabilities


@given(capabilities, st.sampled_from(list(Tier)))
def test_a_tier_never_widens_what_was_signed(capability: Capability, tier: Tier) -> None:
    effective = capability_under_tier(capability, tier)
    assert effective is None or capability_narrower_or_equal(effective, capability)


@given(capabilities, st.sampled_from(list(Tier)), st.sampled_from(list(Tier)))
def test_a_narrower_tier_never_allows_more_than_a_wider_one(
    capability: Capability, a: Tier, b: Tier
) -> None:
    narrow, wide = sorted((a, b), key=TIER_ORDER.index)
    under_narrow, under_wide = (
        capability_under_tier(capability, narrow),
        capability_under_tier(capability, wide),
    )
    if under_narrow is not None:
        assert under_wide is not None and capability_narrower_or_equal(under_narrow, under_wide)


@given(st.lists(st.sampled_from([t.value for t in Tier]), min_size=1, max_size=4))
def test_the_room_runs_under_the_narrowest_tier_chosen(chosen: list[str]) -> None:
    winner = tier_narrowest(chosen)
    assert winner.value in chosen
    assert all(TIER_ORDER.index(winner) <= TIER_ORDER.index(Tier(t)) for t in chosen)


def _cap(resource: str, scope: str, recipient: str = "peer_agent", **extra) -> Capability:
    record = {
        "resource": resource,
        "operation": "read" if recipient == "own_agent" else "disclose",
        "scope": scope,
        "recipient": recipient,
        "expires_at": 10,
        "max_uses": 5,
        "onward_disclosure": True,
        "approval": "none",
        **extra,
    }
    return Capability(**record)


def test_each_tier_has_a_different_effect_on_the_same_slip() -> None:
    slip = [
        _cap("availability", "free_busy_14d"),
        _cap("budget", "range"),
        _cap("budget", "range", recipient="own_agent"),
        _cap("allergies", "list"),
        Capability("tool:book_table", "act", "call", "own_agent", 10, 3, True, "none"),
    ]
    seen = {
        tier: [capability_under_tier(c, tier) for c in slip]
        for tier in (Tier.SANDBOX, Tier.ROOM_ONLY, Tier.COLLABORATIVE)
    }
    # Collaborative: exactly as signed.
    assert seen[Tier.COLLABORATIVE] == slip
    # Room Only: the other agent gets the narrowest of budget and free/busy, nothing leaves
    # the room, the owner's own agent keeps its exact range, the action still needs no asking.
    peer_week, peer_band, own_range, allergies, booking = seen[Tier.ROOM_ONLY]
    assert peer_week is not None and peer_week.scope == "free_busy_7d"
    assert peer_band is not None and peer_band.scope == "band"
    assert own_range is not None and own_range.scope == "range"
    assert allergies is not None and allergies.scope == "list"
    assert booking is not None and booking.approval == "none"
    assert all(c is not None and c.onward_disclosure is False for c in seen[Tier.ROOM_ONLY])
    # Sandbox: nothing from the vault, every action asks.
    assert seen[Tier.SANDBOX][:4] == [None] * 4
    sandbox_booking = seen[Tier.SANDBOX][4]
    assert sandbox_booking is not None and sandbox_booking.approval == "per_use"


def test_room_only_never_widens_a_narrow_choice() -> None:
    day = _cap("availability", "free_busy_24h")
    assert capability_under_tier(day, Tier.ROOM_ONLY).scope == "free_busy_24h"  # type: ignore[union-attr]
    band = _cap("budget", "band", recipient="both")
    assert capability_under_tier(band, Tier.ROOM_ONLY).scope == "band"  # type: ignore[union-attr]


FOURTEEN_DAYS = {
    "resource": "availability",
    "operation": "disclose",
    "scope": "free_busy_14d",
    "recipient": "peer_agent",
    "approval": "none",
    "max_uses": 5,
}


def _peer_verdict(signer):
    return capability_verdict(
        room_id=signer.room_id,
        owner_id=signer.owner.pk,
        agent_id=signer.agent_id,
        resource="availability",
        operation="disclose",
        recipient="peer_agent",
        now=timezone.now(),
    )


def test_the_other_owners_narrower_tier_narrows_my_items(make_signer) -> None:
    alice = make_signer("alice")
    bob = make_signer("bob", room_id=alice.room_id)
    alice.submit(capabilities=[FOURTEEN_DAYS])
    bob.submit(capabilities=[])
    # Nobody chose: the slip as signed.
    assert room_tier(room_id=alice.room_id) == "collaborative"
    assert _peer_verdict(alice).capability.scope == "free_busy_14d"
    assert "No one has chosen a privacy tier" in room_tier_words(alice.room_id)
    # Alice wants Collaborative, Bob Room Only: Room Only runs, for Alice's items too.
    services.tier_choose(owner=alice.owner, room_id=alice.room_id, tier="collaborative")
    services.tier_choose(owner=bob.owner, room_id=alice.room_id, tier="room_only")
    assert room_tier(room_id=alice.room_id) == "room_only"
    assert _peer_verdict(alice).capability.scope == "free_busy_7d"
    for reader, other in ((alice, "Bob"), (bob, "Alice")):
        (sentence,) = conflicts_in_words(room_id=alice.room_id, reader_id=reader.owner.pk)
        assert "so the room runs under Room Only" in sentence
        assert sentence.startswith(other) and "you chose" in sentence
    assert room_tier_words(alice.room_id, reader_id=alice.owner.pk).startswith(
        "The room runs under Room Only, chosen by bob:"
    )
    # Sandbox from either owner: nothing from the vault at all.
    services.tier_choose(owner=alice.owner, room_id=alice.room_id, tier="sandbox")
    assert _peer_verdict(alice).rule == "tier_forbids"
    assert "Sandbox, chosen by you" in room_tier_words(alice.room_id, reader_id=alice.owner.pk)


def test_an_owner_who_chose_no_tier_counts_as_collaborative_and_is_said_so(make_signer) -> None:
    alice = make_signer("alice")
    bob = make_signer("bob", room_id=alice.room_id)
    alice.submit(capabilities=[FOURTEEN_DAYS])
    bob.submit(capabilities=[])
    services.tier_choose(owner=bob.owner, room_id=alice.room_id, tier="room_only")
    (sentence,) = conflicts_in_words(room_id=alice.room_id, reader_id=alice.owner.pk)
    assert sentence.startswith(
        "Bob chose Room Only and you chose no tier, which counts as Collaborative, so the room "
        "runs under Room Only"
    )


def test_a_rule_conflict_on_a_shared_action_is_said_in_words_to_both(make_signer) -> None:
    alice = make_signer("alice")
    bob = make_signer("bob", room_id=alice.room_id)
    alice.submit(capabilities=[{"resource": "tool:book_table", "approval": "none"}])
    bob.submit(capabilities=[{"resource": "tool:book_table", "approval": "per_use"}])
    (for_alice,) = conflicts_in_words(room_id=alice.room_id, reader_id=alice.owner.pk)
    assert for_alice == (
        "For the “book table” action, bob's slip asks before each use and your slip does not "
        "ask, so for both agents it asks before each use (the narrower rule)."
    )
    (for_bob,) = conflicts_in_words(room_id=alice.room_id, reader_id=bob.owner.pk)
    assert for_bob.startswith("For the “book table” action, alice's slip does not ask and your")
