"""Event records carry metadata only: content-like values are refused at construction."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from ledger import events
from ledger.events import (
    EVENT_KINDS,
    Denial,
    Disclosure,
    Join,
    KeyEnrolled,
    KeyRevoked,
    KeyRotated,
    SlipRejected,
    SlipSigned,
    event_record_parse,
)

REQUIRED_KINDS = {
    "join", "leave", "slip_signed", "slip_rejected", "key_enrolled", "key_rotated",
    "key_revoked", "disclosure", "denial", "action_requested", "grant_requested",
    "grant_approved", "grant_denied", "grant_expired", "action_executed", "fork_opened",
    "fork_resolved", "flare_raised", "injection_suspected", "room_paused", "room_resumed",
    "room_closed", "room_content_deleted", "retention_purge", "outcome_recorded",
    "offer_sealed", "offers_revealed", "abuse_reported", "abuse_report_resolved",
}  # fmt: skip


def test_every_required_kind_exists_and_defaults() -> None:
    assert set(EVENT_KINDS) == REQUIRED_KINDS
    assert Join(participant_id="a1", participant_kind="agent").kind == "join"


def test_the_contract_other_apps_code_against() -> None:
    assert KeyEnrolled(owner_id="7", key_id="k-1", after_key_loss=True).model_dump() == {
        "kind": "key_enrolled", "owner_id": "7", "key_id": "k-1", "after_key_loss": True,
    }  # fmt: skip
    assert KeyRotated(owner_id="7", old_key_id="k-1", new_key_id="k-2").kind == "key_rotated"
    assert KeyRevoked(owner_id="7", key_id="k-2").kind == "key_revoked"
    signed = SlipSigned(owner_id="7", agent_id="a", slip_id="s", key_id="k", capability_count=2)
    assert signed.capability_count == 2
    assert (
        SlipRejected(owner_id="7", agent_id="a", reason="bad_signature").reason == "bad_signature"
    )


CANARY = "my budget is 4000 EUR and I'm allergic to peanuts"


@pytest.mark.parametrize(
    "build",
    [
        lambda: Join(participant_id=CANARY, participant_kind="agent"),
        lambda: Join(participant_id="a" * 65, participant_kind="agent"),
        lambda: Join(participant_id="a1", participant_kind="operator"),
        lambda: Denial(rule="not cleared", subject_id="a1"),
        lambda: Denial(rule="slip.not_cleared", subject_id="a1", resource_id="line\nbreak"),
        lambda: SlipRejected(owner_id="7", agent_id="a", reason="x" * 49),
        lambda: Disclosure(owner_id="7", item_id="budget", recipient_agent_id="b", turn=-1),
        lambda: Disclosure(owner_id="7", item_id="budget", recipient_agent_id="b", turn="3"),
        lambda: Disclosure(owner_id="7", item_id="budget", recipient_agent_id="b", turn=1.5),
        lambda: Disclosure(owner_id="7", item_id="budget", recipient_agent_id="b", turn=2**53),
        lambda: Disclosure(
            owner_id="7", item_id="budget", recipient_agent_id="b", turn=1, value="4000 EUR"
        ),
        lambda: KeyEnrolled(owner_id="7", key_id="k", after_key_loss="yes"),
        lambda: events.ActionRequested(action_id="a", agent_id="b", tool="t", schema_hash="xyz"),
        # An outcome carries a coarse code only: no sentence, no venue, no other field.
        lambda: events.OutcomeRecorded(
            outcome="no_agreement", action_id="a", owner_id="7", reason="over budget"
        ),
        lambda: events.OutcomeRecorded(outcome="agreed", action_id="a", owner_id="7", venue="x"),
        lambda: events.OutcomeRecorded(outcome="booked", action_id="a", owner_id="7"),
        # A sealed offer is recorded as who and a commitment: never a venue, time or price.
        lambda: events.OfferSealed(agent_id="a1", commitment="sora-sushi 19:00 42 EUR"),
        lambda: events.OfferSealed(agent_id="a1", commitment="0" * 64, venue_id="sora-sushi"),
        lambda: events.OfferSealed(agent_id="a1", commitment="0" * 64, price_per_person_minor=42),
        lambda: events.OffersRevealed(agent_ids=[], complete=True),
        lambda: events.OffersRevealed(agent_ids=["a", "b", "c"], complete=True),
        lambda: events.OffersRevealed(agent_ids=["a"], complete="yes"),
        lambda: events.OffersRevealed(agent_ids=["a"], complete=True, offers=[{"x": 1}]),
    ],
)
def test_content_like_values_are_refused(build) -> None:
    with pytest.raises(ValidationError):
        build()


def test_records_are_frozen_and_round_trip_through_storage_form() -> None:
    record = Disclosure(owner_id="7", item_id="budget", recipient_agent_id="b", turn=3)
    with pytest.raises(ValidationError):
        record.turn = 4  # type: ignore[misc]
    stored = record.model_dump(mode="json", exclude={"kind"})
    assert event_record_parse(kind="disclosure", data=stored) == record


@pytest.mark.parametrize(
    "rule",
    [
        "policy.deny:db:0b9e4a8e-9d1c-4c1e-8f57-1d2f3a4b5c6d",
        "policy.deny:file:*",
        "over_budget",
        "beyond_slip.not_in_slip",
    ],
)
def test_every_decision_rule_can_be_recorded(rule: str) -> None:
    recorded = events.rule_id_from(rule)
    Denial(rule=recorded, subject_id="agent-1")
    events.RoomPaused(by="gatekeeper", reason_rule=recorded)
    if ":" not in rule:
        assert recorded == rule  # rules that already are rule ids stay as they are


def test_old_events_without_key_custody_read_as_device() -> None:
    data = {"owner_id": "7", "agent_id": "a", "slip_id": "s", "key_id": "k", "capability_count": 1}
    record = event_record_parse(kind="slip_signed", data=data)
    assert isinstance(record, SlipSigned) and record.key_custody == "device"
    with pytest.raises(ValidationError):
        SlipSigned(**data, key_custody="browser")  # type: ignore[arg-type]


def test_a_suspected_injection_names_a_message_or_an_artifact_and_old_ones_still_read() -> None:
    # Recorded before artifacts were judged: no artifact_id in data; it reads as a message's.
    old = {"source_agent_id": "agent-b", "message_seq": 7, "rule": "fake_notice"}
    record = event_record_parse(kind="injection_suspected", data=old)
    assert isinstance(record, events.InjectionSuspected)
    assert (record.message_seq, record.artifact_id) == (7, None)
    flagged = events.InjectionSuspected(
        source_agent_id="agent-b", artifact_id="0b9e4a8e-9d1c-4c1e-8f57-1d2f3a4b5c6d", rule="x"
    )
    stored = flagged.model_dump(mode="json", exclude={"kind"})
    assert stored == {
        "source_agent_id": "agent-b", "message_seq": None, "rule": "x",
        "artifact_id": "0b9e4a8e-9d1c-4c1e-8f57-1d2f3a4b5c6d",
    }  # fmt: skip
    assert event_record_parse(kind="injection_suspected", data=stored) == flagged
    # Exactly one of the two: neither, or both, points at nothing clear.
    with pytest.raises(ValidationError):
        events.InjectionSuspected(source_agent_id="agent-b", rule="x")
    with pytest.raises(ValidationError):
        events.InjectionSuspected(
            source_agent_id="agent-b", message_seq=7, artifact_id="art-1", rule="x"
        )
    with pytest.raises(ValidationError):
        events.InjectionSuspected(source_agent_id="agent-b", artifact_id=CANARY, rule="x")


def test_an_outcome_holds_its_kind_action_side_and_reason_code_only() -> None:
    agreed = events.OutcomeRecorded(outcome="agreed", action_id="act-1", owner_id="7")
    assert agreed.model_dump(mode="json", exclude={"kind"}) == {
        "outcome": "agreed", "action_id": "act-1", "owner_id": "7", "reason": None,
    }  # fmt: skip
    declared = events.OutcomeRecorded(
        outcome="no_agreement", action_id="act-2", owner_id="8", reason="time"
    )
    stored = declared.model_dump(mode="json", exclude={"kind"})
    assert event_record_parse(kind="outcome_recorded", data=stored) == declared


def test_sealed_offer_events_hold_who_and_a_commitment_only() -> None:
    sealed = events.OfferSealed(agent_id="agent-1", commitment="ab" * 32)
    assert sealed.model_dump(mode="json", exclude={"kind"}) == {
        "agent_id": "agent-1", "commitment": "ab" * 32,
    }  # fmt: skip
    revealed = events.OffersRevealed(agent_ids=["agent-1", "agent-2"], complete=False)
    stored = revealed.model_dump(mode="json", exclude={"kind"})
    assert stored == {"agent_ids": ["agent-1", "agent-2"], "complete": False}
    assert event_record_parse(kind="offers_revealed", data=stored) == revealed
    assert (
        event_record_parse(
            kind="offer_sealed", data={"agent_id": "agent-1", "commitment": "ab" * 32}
        )
        == sealed
    )
