"""Typed actions through the Gatekeeper: allowed runs once, beyond the slip waits for a signed
grant, denials and failures pause the room, and nothing runs twice."""

from __future__ import annotations

import time
from typing import Any

import pytest
import rfc8785
from django.db import DatabaseError

from gatekeeper import decision as decision_module
from gatekeeper.adapters.sandbox import SandboxEffect
from gatekeeper.grants import grant_payload
from gatekeeper.records import ActionRecord, Grant, GrantStatus
from ledger.models import LedgerEvent
from ledger.services import LedgerAppendError
from ledger.verification import ledger_verify_room
from rooms import forks
from rooms.errors import InvalidState
from rooms.models import Room, RoomState
from slips.canonical import GRANT_TAG
from slips.signatures import b64url_encode
from tests.bookings import OTHER_WITHIN, OVER, WITHIN, booking
from tests.gatekeeper.conftest import BOOK, Negotiation
from tests.slips.conftest import Device, enroll
from tests.socket_frames import join, next_frame_of

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _allow_tools_by_default(settings: Any) -> None:
    # The production default is deny-all; these tests exercise slips and grants, not policy.
    settings.SYNAPSIA = {**settings.SYNAPSIA, "TOOL_POLICY_DEFAULT": "allow_all"}


def room_state(n: Negotiation) -> str:
    return Room.objects.get(id=n.room.id).state


def kinds(n: Negotiation) -> list[str]:
    return list(
        LedgerEvent.objects.filter(room_id=n.room.id).order_by("seq").values_list("kind", flat=True)
    )


def test_within_the_slip_and_budget_runs_once_even_when_replayed(negotiation) -> None:
    first = negotiation.act(WITHIN)
    assert (first.status, first.rule) == ("executed", "cleared")
    assert first.output is not None and first.output["kind"] == "succeeded"
    again = negotiation.act(WITHIN)
    assert again.replay and again.action_id == first.action_id
    assert SandboxEffect.objects.count() == 1
    assert room_state(negotiation) == "open"
    # (An executed booking in a dinner room also records the room's outcome after it.)
    assert [k for k in kinds(negotiation) if k.startswith("action_")][-2:] == [
        "action_requested",
        "action_executed",
    ]


def test_the_same_key_with_other_arguments_is_refused(negotiation) -> None:
    negotiation.act(WITHIN)
    reused = negotiation.act(OTHER_WITHIN)
    assert (reused.status, reused.rule) == ("denied", "idempotency_key_reused")
    assert SandboxEffect.objects.count() == 1


def test_over_budget_pauses_for_a_signed_grant_that_runs_exactly_once(negotiation) -> None:
    result = negotiation.act(OVER)
    assert (result.status, result.rule) == ("awaiting_grant", "over_budget")
    assert room_state(negotiation) == "paused"
    assert SandboxEffect.objects.count() == 0
    grant = Grant.objects.get()
    assert kinds(negotiation)[-4:] == [
        "action_requested",
        "grant_requested",
        "fork_opened",
        "room_paused",
    ]

    done = negotiation.approve(grant)
    assert (done.status, done.rule) == ("executed", "granted")
    assert SandboxEffect.objects.count() == 1
    assert room_state(negotiation) == "open"
    # Replaying the same signed grant is refused; replaying the request is a replay.
    with pytest.raises(InvalidState):
        negotiation.approve(grant)
    assert negotiation.act(OVER).replay
    assert SandboxEffect.objects.count() == 1
    assert ledger_verify_room(room_id=negotiation.room.id).ok


@pytest.mark.parametrize("forgery", ["other_device", "tampered_payload", "garbage"])
def test_forged_grants_are_refused_and_recorded(negotiation, forgery: str) -> None:
    negotiation.act(OVER)
    grant = Grant.objects.get()
    if forgery == "other_device":
        signature = Device().sign_grant(grant)
    elif forgery == "tampered_payload":
        tampered = {**grant_payload(grant), "arguments_sha256": "0" * 64}
        signature = b64url_encode(
            negotiation.device.signing_key.sign(GRANT_TAG + rfc8785.dumps(tampered)).signature
        )
    else:
        signature = "not-base64!"
    result = forks.grant_decide(
        owner=negotiation.setup.a.owner,
        room_id=negotiation.room.id,
        grant_id=grant.id,
        approve=True,
        key_id=negotiation.key.id,
        signature=signature,
    )
    assert result.rule == "grant_bad_signature"
    assert Grant.objects.get().status == GrantStatus.PENDING
    assert room_state(negotiation) == "paused"
    assert SandboxEffect.objects.count() == 0
    assert kinds(negotiation)[-1] == "denial"


def test_a_grant_signed_by_another_owners_key_is_refused(negotiation, make_owner) -> None:
    negotiation.act(OVER)
    grant = Grant.objects.get()
    mallory_key, mallory_device = enroll(make_owner("mallory"))
    result = forks.grant_decide(
        owner=negotiation.setup.a.owner,
        room_id=negotiation.room.id,
        grant_id=grant.id,
        approve=True,
        key_id=mallory_key.id,
        signature=mallory_device.sign_grant(grant),
    )
    assert result.rule == "grant_key_not_usable"
    assert SandboxEffect.objects.count() == 0


def test_an_expired_grant_ends_as_a_denial(negotiation) -> None:
    negotiation.act(OVER)
    grant = Grant.objects.get()
    Grant.objects.update(expires_at=grant.created_at)
    grant.refresh_from_db()
    result = negotiation.approve(grant)
    assert result.rule == "grant_expired"
    assert Grant.objects.get().status == GrantStatus.EXPIRED
    assert ActionRecord.objects.get().status == "denied"
    assert room_state(negotiation) == "paused"
    assert SandboxEffect.objects.count() == 0


def test_the_owner_can_deny_and_the_room_stays_paused(negotiation) -> None:
    negotiation.act(OVER)
    grant = Grant.objects.get()
    result = forks.grant_decide(
        owner=negotiation.setup.a.owner,
        room_id=negotiation.room.id,
        grant_id=grant.id,
        approve=False,
    )
    assert result.status == "denied"
    assert room_state(negotiation) == "paused"
    assert kinds(negotiation)[-2:] == ["grant_denied", "fork_resolved"]


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("approve", [True, False], ids=["approved", "denied"])
async def test_the_agent_is_told_its_owners_answer_without_asking_again(
    negotiation: Negotiation, approve: bool
) -> None:
    """The socket that asked hears the answer once it commits, a denial as an approval: an
    agent is never left to find out by asking again."""
    from channels.db import database_sync_to_async

    agent = await join(negotiation.room.id, negotiation.setup.a.token)
    big = {"tool": "book_table", "arguments": booking(OVER)}
    await agent.send_json_to({"v": 1, "type": "act", "id": "big-booking", "body": big})
    asked = await next_frame_of(agent, "action_result")
    assert asked["body"]["status"] == "awaiting_grant"

    def answer() -> Any:
        grant = Grant.objects.get()
        if approve:
            return negotiation.approve(grant)
        return forks.grant_decide(
            owner=negotiation.setup.a.owner,
            room_id=negotiation.room.id,
            grant_id=grant.id,
            approve=False,
        )

    decided = await database_sync_to_async(answer)()
    told = await next_frame_of(agent, "action_result")  # room_state frames may come between
    assert (told["body"]["ref"], told["body"]["status"]) == ("big-booking", decided.status)
    assert decided.status == ("executed" if approve else "denied")
    await agent.disconnect()


def test_the_peer_owner_cannot_decide_anothers_grant(negotiation) -> None:
    negotiation.act(OVER)
    grant = Grant.objects.get()
    with pytest.raises(Exception, match="No such grant"):
        forks.grant_decide(
            owner=negotiation.setup.b.owner,
            room_id=negotiation.room.id,
            grant_id=grant.id,
            approve=False,
        )


def test_a_tool_outside_the_slip_needs_a_grant(negotiation) -> None:
    result = forks.action_for_agent(
        room_id=negotiation.room.id,
        agent_id=negotiation.setup.a.agent.id,
        client_id="spend-1",
        tool="spend",
        arguments={
            "amount_cents": 100,
            "currency": "EUR",
            "payee_id": "nopa",
            "purpose": "deposit",
        },
    )
    assert (result.status, result.rule) == ("awaiting_grant", "beyond_slip.not_in_slip")
    assert room_state(negotiation) == "paused"


@pytest.mark.parametrize(
    ("tool", "arguments", "rule"),
    [
        ("launch_missiles", {}, "unknown_tool"),
        ("book_table", {**BOOK, "cost_cents": 12.5}, "invalid_arguments"),
        (
            "book_table",
            {**BOOK, "cost_cents": 100, "note": "ignore your budget"},
            "invalid_arguments",
        ),
        ("book_table", {"venue_id": "nopa"}, "invalid_arguments"),
        (
            "publish_artifact",
            {"title": "t", "body": "nul \u0000", "format": "text"},
            "invalid_arguments",
        ),
    ],
)
def test_bad_requests_are_refused_with_the_reason_and_nothing_runs(
    negotiation, tool, arguments, rule
) -> None:
    result = forks.action_for_agent(
        room_id=negotiation.room.id,
        agent_id=negotiation.setup.a.agent.id,
        client_id="bad",
        tool=tool,
        arguments=arguments,
    )
    assert (result.status, result.rule) == ("denied", rule)
    assert result.detail
    assert ActionRecord.objects.count() == 0
    assert SandboxEffect.objects.count() == 0
    assert kinds(negotiation)[-1] == "denial"


# --- fault injection: every failure ends in deny + pause + nothing executed ----------------


def _explode(*_: Any, **__: Any) -> Any:
    raise DatabaseError("injected: connection lost")


@pytest.mark.parametrize(
    ("target", "attribute", "replacement", "rule"),
    [
        ("gatekeeper.decision", "capability_verdict", _explode, "gatekeeper.error"),
        ("gatekeeper.decision", "tool_verdict", _explode, "gatekeeper.error"),
        ("slips.verification", "signature_valid", _explode, "slip_verification_error"),
        ("gatekeeper.decision", "owner_budget_limit", _explode, "gatekeeper.error"),
    ],
)
def test_faults_in_a_check_deny_and_pause(
    negotiation, monkeypatch, target, attribute, replacement, rule
) -> None:
    import importlib

    monkeypatch.setattr(importlib.import_module(target), attribute, replacement)
    result = negotiation.act(WITHIN)
    assert (result.status, result.rule) == ("denied", rule)
    assert room_state(negotiation) == "paused"
    assert SandboxEffect.objects.count() == 0
    assert kinds(negotiation)[-2:] == ["denial", "room_paused"]


def test_a_clock_jump_while_deciding_denies_and_pauses(negotiation, monkeypatch) -> None:
    real_time = time.time
    calls = iter(range(1000))
    # The wall clock leaps an hour between the start and the end of the decision.
    monkeypatch.setattr(
        decision_module.time, "time", lambda: real_time() + 3600 * (next(calls) > 0)
    )
    result = negotiation.act(WITHIN)
    assert (result.status, result.rule) == ("denied", "gatekeeper.clock_jump")
    assert room_state(negotiation) == "paused"
    assert SandboxEffect.objects.count() == 0


def test_a_slow_check_is_a_denial(negotiation, monkeypatch, settings) -> None:
    settings.SYNAPSIA = {**settings.SYNAPSIA, "GATEKEEPER_TIMEOUT_SECONDS": 0.05}
    real = decision_module.capability_verdict

    def slow(**kwargs: Any) -> Any:
        time.sleep(0.1)
        return real(**kwargs)

    monkeypatch.setattr(decision_module, "capability_verdict", slow)
    result = negotiation.act(WITHIN)
    assert (result.status, result.rule) == ("denied", "gatekeeper.timeout")
    assert SandboxEffect.objects.count() == 0


def test_a_ledger_failure_means_nothing_runs_and_the_room_pauses(negotiation, monkeypatch) -> None:
    from gatekeeper import actions

    def ledger_down(**_: Any) -> None:
        raise LedgerAppendError("ledger append failed: injected")

    monkeypatch.setattr(actions, "ledger_append", ledger_down)
    result = negotiation.act(WITHIN)
    assert (result.status, result.rule) == ("denied", "ledger_unavailable")
    assert SandboxEffect.objects.count() == 0
    assert ActionRecord.objects.count() == 0
    assert room_state(negotiation) == RoomState.PAUSED


def test_each_cleared_action_spends_a_slip_use_and_then_needs_a_grant(negotiation) -> None:
    # The slip allows 5 bookings within the budget; the sixth is beyond the slip.
    results = [negotiation.act(WITHIN, ref=f"book-{n}") for n in range(6)]
    assert [r.status for r in results[:5]] == ["executed"] * 5
    assert (results[5].status, results[5].rule) == ("awaiting_grant", "beyond_slip.uses_exhausted")
    assert SandboxEffect.objects.count() == 5


def test_booking_something_else_after_a_booking_is_a_contradiction_flare(negotiation) -> None:
    from rooms.models import Flare

    assert negotiation.act(WITHIN, ref="book-1").status == "executed"
    other = negotiation.act(OTHER_WITHIN, ref="book-2")
    assert (other.status, other.rule) == ("denied", "contradiction")
    assert SandboxEffect.objects.count() == 1
    assert room_state(negotiation) == "paused"
    flare = Flare.objects.get()
    assert (flare.reason, flare.raised_by) == ("contradiction", "server")
    assert "flare_raised" in kinds(negotiation)
