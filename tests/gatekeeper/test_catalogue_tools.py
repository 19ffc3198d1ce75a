"""The room's catalogue, enforced by the server: book_table is checked and priced by it,
venues_search and declare_no_plan run in-process with no slip item, and lookups never pause."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from gatekeeper.adapters.sandbox import SandboxEffect
from gatekeeper.decision import ActionRequest, AgentFacts, RoomFacts, decide
from gatekeeper.policy import tool_policy_rule_put
from gatekeeper.records import ActionRecord
from ledger.models import LedgerEvent
from rooms import forks, selectors, services
from rooms.handshake import Participant
from rooms.models import Room, RoomState
from slips import vault
from slips.models import SlipCapability
from tests.bookings import OVER, WITHIN, booking
from tests.gatekeeper.conftest import Negotiation

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _allow_tools_by_default(settings: Any) -> None:
    settings.SYNAPSIA = {**settings.SYNAPSIA, "TOOL_POLICY_DEFAULT": "allow_all"}


def _state(n: Negotiation) -> str:
    return Room.objects.get(id=n.room.id).state


def _kinds(n: Negotiation) -> list[str]:
    return list(
        LedgerEvent.objects.filter(room_id=n.room.id).order_by("seq").values_list("kind", flat=True)
    )


def _act(n: Negotiation, tool: str, arguments: dict[str, Any], ref: str = "act-1") -> Any:
    return forks.action_for_agent(
        room_id=n.room.id,
        agent_id=n.setup.a.agent.id,
        client_id=ref,
        tool=tool,
        arguments=arguments,
    )


# --- book_table against the catalogue ---------------------------------------------------------

MONDAY_8PM_BERLIN = "2026-12-07T19:00:00+00:00"
FRIDAY_10_30PM_BERLIN = "2026-12-04T21:30:00+00:00"


@pytest.mark.parametrize(
    ("what", "arguments", "rule", "words"),
    [
        (
            "a venue the catalogue does not list",
            {**booking(WITHIN), "venue_id": "nopa"},
            "catalogue.unknown_venue",
            "There is no venue called 'nopa' in the catalogue Berlin dining.",
        ),
        (
            "a weekday the venue is closed",
            booking("landwehr-bistro", start=MONDAY_8PM_BERLIN),
            "catalogue.closed",
            "it is closed on Mondays",
        ),
        (
            "a dinner the venue closes in the middle of",
            booking(WITHIN, start=FRIDAY_10_30PM_BERLIN),
            "catalogue.closed",
            "not open for a 90-minute dinner starting 22:30 on Friday 4 December",
        ),
        (
            "a party larger than any table",
            booking(WITHIN, party_size=5),
            "catalogue.no_table",
            "Sora Sushi has no table for 5",
        ),
        (
            "a claimed cost lower than the catalogue's",
            {**booking(OVER), "cost_cents": 5000},
            "catalogue.price_mismatch",
            "Kaiseki Nori costs 90.00 EUR per person: 180.00 EUR for 2",
        ),
        (
            "a cost in another currency",
            {**booking(WITHIN), "currency": "USD"},
            "catalogue.price_mismatch",
            "costs 42.00 EUR per person",
        ),
    ],
)
def test_a_booking_the_catalogue_refuses_is_denied_in_words(
    negotiation: Negotiation, what: str, arguments: dict[str, Any], rule: str, words: str
) -> None:
    result = _act(negotiation, "book_table", arguments)
    assert (result.status, result.rule) == ("denied", rule), what
    assert words in result.detail, result.detail
    # A refused booking is an action both owners see, and it ran nowhere.
    assert ActionRecord.objects.get(id=result.action_id).rule == rule
    assert SandboxEffect.objects.count() == 0
    assert _kinds(negotiation)[-3:-1] == ["action_requested", "denial"]
    assert _state(negotiation) == RoomState.PAUSED


def test_the_right_booking_at_the_catalogue_price_runs(negotiation: Negotiation) -> None:
    result = _act(negotiation, "book_table", booking(WITHIN))
    assert (result.status, result.rule) == ("executed", "cleared")
    assert result.output is not None
    assert result.output["output"]["cost_cents"] == 8400


def test_a_refused_booking_cannot_be_granted_past_the_catalogue(negotiation: Negotiation) -> None:
    # Over budget needs the owner; a wrong price never reaches her as a question.
    assert _act(negotiation, "book_table", booking(OVER), ref="big").status == "awaiting_grant"
    cheap = _act(negotiation, "book_table", {**booking(OVER), "cost_cents": 100}, ref="cheap")
    assert (cheap.status, cheap.grant_id) == ("denied", None)


def _budget_room(make_open_room: Any, prefix: str) -> Any:
    """An open room where Alice's slip clears booking and her budget is 30 to 80 EUR."""
    from tests.slips.conftest import seat_slip_sign

    setup = make_open_room(prefix=prefix)
    seat_slip_sign(
        setup.a,
        setup.room.id,
        [{"resource": "tool:book_table", "operation": "act", "approval": "none", "max_uses": 5}],
    )
    vault.vault_item_create(
        owner=setup.a.owner,
        content={"kind": "budget", "currency": "EUR", "minimum": 3000, "maximum": 8000},
    )
    return setup


def _book(setup: Any, arguments: dict[str, Any]) -> Any:
    return forks.action_for_agent(
        room_id=setup.room.id,
        agent_id=setup.a.agent.id,
        client_id="book-1",
        tool="book_table",
        arguments=arguments,
    )


def test_budgets_are_per_person(make_open_room: Any) -> None:
    """A budget of 30 to 80 EUR allows a 52 EUR dinner for two (104 EUR in total)."""
    dinner = booking("winterfeldt-fischhaus")
    assert dinner["cost_cents"] == 10_400
    result = _book(_budget_room(make_open_room, "one-"), dinner)
    assert (result.status, result.rule) == ("executed", "cleared")
    # 90 EUR per person is over 80, however few people the agent claims to book for.
    over = _book(_budget_room(make_open_room, "two-"), booking(OVER, party_size=1))
    assert (over.status, over.rule) == ("awaiting_grant", "over_budget")


# --- venues_search -------------------------------------------------------------------------------


def test_venues_search_is_listed_and_runs_without_a_slip_item(negotiation: Negotiation) -> None:
    # Alice's slip names book_table only.
    seat = negotiation.setup.a
    listed = selectors.tools_listed(
        participant=Participant("agent", negotiation.room.id, seat.owner.pk, seat.agent.id, 0)
    )
    names = [t["name"] for t in listed]
    assert "venues_search" in names and "declare_no_plan" in names and "spend" not in names
    uses_before = list(SlipCapability.objects.values_list("id", "uses_left"))

    result = _act(
        negotiation,
        "venues_search",
        {"cuisines": ["japanese"], "safe_for": ["shellfish"], "limit": 2},
    )
    assert (result.status, result.rule) == ("executed", "cleared")
    page = result.output["output"]
    assert page["catalogue"] == "berlin-dining"
    assert page["city"]["time_zone"] == "Europe/Berlin"
    assert {"from", "to", "minutes"} == set(page["city"]["travel_minutes"][0])
    assert [v["cuisine"] for v in page["venues"]] == ["japanese", "japanese"]
    assert all("shellfish" in v["safe_for"] for v in page["venues"])
    assert "sora-sushi" not in [v["id"] for v in page["venues"]]
    assert set(page["venues"][0]["hours"]) == {"mon", "tue", "wed", "thu", "fri", "sat", "sun"}
    assert page["total"] >= 3 and page["next_offset"] == 2
    # Recorded like any action, run by the server (not the sandbox), spending no slip use.
    assert _kinds(negotiation)[-2:] == ["action_requested", "action_executed"]
    assert SandboxEffect.objects.count() == 0
    assert list(SlipCapability.objects.values_list("id", "uses_left")) == uses_before
    assert _state(negotiation) == RoomState.OPEN

    rest = _act(negotiation, "venues_search", {"limit": 200}, ref="all")
    assert rest.output["output"]["total"] == 50 and rest.output["output"]["next_offset"] is None


def test_a_policy_that_denies_venues_search_denies_it_and_the_room_goes_on(
    negotiation: Negotiation,
) -> None:
    tool_policy_rule_put(agent_id=negotiation.setup.a.agent.id, tool="venues_search", effect="deny")
    seat = negotiation.setup.a
    listed = selectors.tools_listed(
        participant=Participant("agent", negotiation.room.id, seat.owner.pk, seat.agent.id, 0)
    )
    assert "venues_search" not in [t["name"] for t in listed]
    result = _act(negotiation, "venues_search", {})
    assert result.status == "denied" and result.rule.startswith("policy.deny")
    assert "may not use venues_search" in result.detail
    assert _kinds(negotiation)[-1] == "denial"
    assert _state(negotiation) == RoomState.OPEN  # a refused lookup never pauses the room


def test_a_room_without_terms_has_no_catalogue_to_search(make_owner: Any) -> None:
    alice = make_owner("alice")
    room = services.room_create(owner=alice, purpose="Code review", charter="", dinner=False)
    assert room.terms is None
    decision = decide(
        ActionRequest(
            room=RoomFacts(room_id=room.id, state="open", terms=None),
            agent=AgentFacts(
                agent_id=uuid.uuid4(),
                owner_id=alice.pk,
                advisor_only=False,
                declared_tools=None,
                revoked=False,
            ),
            tool="venues_search",
            arguments={},
        )
    )
    assert (decision.outcome, decision.rule) == ("deny", "catalogue.no_terms")
    assert "no dinner terms" in decision.detail


# --- declare_no_plan -----------------------------------------------------------------------------


def test_declare_no_plan_runs_on_the_server_without_a_slip_item(negotiation: Negotiation) -> None:
    result = _act(negotiation, "declare_no_plan", {"reason": "budget"})
    assert (result.status, result.rule) == ("executed", "cleared")
    assert result.output == {"kind": "succeeded", "output": {"reason": "budget"}}
    assert SandboxEffect.objects.count() == 0
    refused = _act(negotiation, "declare_no_plan", {"reason": "I hate Bob"}, ref="free-text")
    assert (refused.status, refused.rule) == ("denied", "invalid_arguments")
