"""A room ends with a typed outcome both owners read in words: the agreed plan of an executed
booking (venue, local time, price per person, who books), or "no agreement" with each side's
reason. Derived from executed typed actions only; the ledger holds codes, never the plan."""

from __future__ import annotations

import json
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from asgiref.sync import sync_to_async
from django.test import Client
from django.utils import timezone

from gatekeeper.records import Grant
from ledger.models import LedgerEvent
from ledger.receipts import receipt_build
from ledger.verification import ledger_verify_room
from rooms import flares, forks
from rooms.errors import InvalidState, NotFound
from rooms.models import FlareChoice, FlareReason, RoomOutcome
from rooms.outcomes import room_outcome_for_owner
from slips import vault
from tests.slips.conftest import seat_slip_sign
from tests.socket_frames import frame, join, join_as_owner, next_frame_of

pytestmark = pytest.mark.django_db

# Friday 4 December 2026, 19:30 in Berlin (winter time: UTC+1).
START = "2026-12-04T18:30:00+00:00"
# osteria-kanal: 38 EUR per person in the shipped catalogue; a table for 2 costs 76 EUR.
BOOKING = {
    "venue_id": "osteria-kanal",
    "party_size": 2,
    "start": START,
    "cost_cents": 7600,
    "currency": "EUR",
}


@pytest.fixture(autouse=True)
def _tools_allowed(settings: Any) -> None:
    # The production default is deny-all; these tests are about outcomes, not tool policy.
    settings.SYNAPSIA = {**settings.SYNAPSIA, "TOOL_POLICY_DEFAULT": "allow_all"}


@pytest.fixture
def dinner(make_open_room) -> Any:
    """Alice and Bob in an open dinner room (default terms: Berlin); each slip clears booking a
    table, each budget is 30-80 EUR per person."""
    setup = make_open_room()
    assert setup.room.terms["time_zone"] == "Europe/Berlin"
    for seat in (setup.a, setup.b):
        key, device = seat_slip_sign(
            seat,
            setup.room.id,
            [
                {
                    "resource": "tool:book_table",
                    "operation": "act",
                    "approval": "none",
                    "max_uses": 5,
                }
            ],
        )
        seat.key, seat.device = key, device
        vault.vault_item_create(
            owner=seat.owner,
            content={"kind": "budget", "currency": "EUR", "minimum": 3000, "maximum": 8000},
        )
    return setup


def act(setup: Any, seat: Any, tool: str, arguments: dict[str, Any], ref: str) -> Any:
    return forks.action_for_agent(
        room_id=setup.room.id, agent_id=seat.agent.id, client_id=ref, tool=tool, arguments=arguments
    )


def page(owner: Any, room_id: Any) -> str:
    client = Client()
    client.force_login(owner)
    response = client.get(f"/rooms/{room_id}/")
    assert response.status_code == 200
    return response.content.decode()


def outcome_rows(room_id: Any) -> list[dict[str, Any]]:
    return list(
        LedgerEvent.objects.filter(room_id=room_id, kind="outcome_recorded")
        .order_by("seq")
        .values("data", "seq")
    )


def test_an_executed_booking_is_the_agreed_plan_both_owners_read_in_words(dinner) -> None:
    booked = act(dinner, dinner.b, "book_table", BOOKING, "book-1")
    assert booked.status == "executed", booked

    # Read in the room's own zone (an owner in Berlin): the room's time alone.
    with timezone.override(ZoneInfo("Europe/Berlin")):
        bob = room_outcome_for_owner(owner=dinner.b.owner, room_id=dinner.room.id)
        alice = room_outcome_for_owner(owner=dinner.a.owner, room_id=dinner.room.id)
    assert bob is not None and alice is not None
    assert bob.headline == alice.headline == "Agreed plan"
    assert bob.lines == (
        "Osteria Kanal",
        "Friday 4 December 2026 at 19:30, Berlin time",
        "38 EUR per person, table for 2 (76 EUR in all)",
        "You book",
    )
    assert alice.lines[:3] == bob.lines[:3]
    assert alice.lines[3] == "bob's agent books"
    # An owner elsewhere also reads the time in their own zone.
    with timezone.override(ZoneInfo("America/New_York")):
        far = room_outcome_for_owner(owner=dinner.b.owner, room_id=dinner.room.id)
    assert far is not None
    assert far.lines[1] == (
        "Friday 4 December 2026 at 19:30, Berlin time (Fri 4 Dec, 13:30 your time)"
    )

    # The pages: these owners chose no zone, so theirs is UTC, and they read both times.
    for owner, who in ((dinner.a.owner, "bob&#x27;s agent books"), (dinner.b.owner, "You book")):
        html = page(owner, dinner.room.id)
        for words in ("Agreed plan", "Osteria Kanal", "Friday 4 December 2026 at 19:30",
                      "Fri 4 Dec, 18:30 your time", "38 EUR per person", who):  # fmt: skip
            assert words in html
        assert (
            "18:30:00" not in html
            and "osteria-kanal" not in html
            and str(booked.action_id) not in html
        )

    # The ledger records that and which action, whose agent books; never venue, time or price.
    [row] = outcome_rows(dinner.room.id)
    assert row["data"] == {
        "outcome": "agreed",
        "action_id": str(booked.action_id),
        "owner_id": str(dinner.b.owner.pk),
        "reason": None,
    }
    stored = json.dumps(
        list(LedgerEvent.objects.filter(room_id=dinner.room.id).values("data")), default=str
    )
    for content in ("osteria", "Osteria", "Kanal", "19:30", "18:30", "2026-12-04", "3800",
                    "7600", "38 EUR", "EUR"):  # fmt: skip
        assert content not in stored
    assert ledger_verify_room(room_id=dinner.room.id).ok
    receipt = receipt_build(room_id=dinner.room.id)
    assert receipt.outcome is not None and receipt.outcome.outcome == "agreed"

    # Replaying the same request records nothing twice.
    again = act(dinner, dinner.b, "book_table", BOOKING, "book-1")
    assert again.replay and len(outcome_rows(dinner.room.id)) == 1
    assert RoomOutcome.objects.filter(room=dinner.room).count() == 1


def test_the_receipt_page_shows_the_plan_to_owners_and_strangers_see_nothing(
    dinner, make_open_room
) -> None:
    act(dinner, dinner.a, "book_table", BOOKING, "book-1")
    client = Client()
    client.force_login(dinner.b.owner)
    ledger_page = client.get(f"/rooms/{dinner.room.id}/ledger/").content.decode()
    assert "Osteria Kanal" in ledger_page and "alice&#x27;s agent books" in ledger_page
    receipt = client.get(f"/api/rooms/{dinner.room.id}/receipt").json()
    assert any(line.startswith("Outcome: agreed") for line in receipt["summary"])

    # The owner of another room cannot see it: not on the page, not through the selector.
    other = make_open_room(prefix="other-")
    stranger = Client()
    stranger.force_login(other.b.owner)
    for path in (f"/rooms/{dinner.room.id}/", f"/rooms/{dinner.room.id}/?part=outcome",
                 f"/rooms/{dinner.room.id}/ledger/"):  # fmt: skip
        response = stranger.get(path)
        assert response.status_code == 404
        assert "Osteria" not in response.content.decode()
    with pytest.raises(NotFound):
        room_outcome_for_owner(owner=other.b.owner, room_id=dinner.room.id)
    assert "No plan yet" in page(other.b.owner, other.room.id)


def test_a_booking_waiting_for_a_grant_or_denied_records_no_agreement(dinner) -> None:
    # kaiseki-nori costs 90 EUR per person: above Alice's 80, so it waits for her grant.
    dear = {**BOOKING, "venue_id": "kaiseki-nori", "cost_cents": 18000}
    waiting = act(dinner, dinner.a, "book_table", dear, "book-dear")
    assert waiting.status == "awaiting_grant"
    assert room_outcome_for_owner(owner=dinner.a.owner, room_id=dinner.room.id) is None
    forks.grant_decide(
        owner=dinner.a.owner, room_id=dinner.room.id, grant_id=waiting.grant_id, approve=False
    )
    # A claimed price below the catalogue's is refused.
    cheap = act(dinner, dinner.b, "book_table", {**BOOKING, "cost_cents": 2000}, "book-cheap")
    assert cheap.status == "denied"
    assert room_outcome_for_owner(owner=dinner.a.owner, room_id=dinner.room.id) is None
    assert outcome_rows(dinner.room.id) == [] and not RoomOutcome.objects.exists()
    assert "No plan yet" in page(dinner.a.owner, dinner.room.id)


def test_an_approved_grant_that_books_is_the_agreed_plan(dinner) -> None:
    dear = {**BOOKING, "venue_id": "kaiseki-nori", "cost_cents": 18000}
    waiting = act(dinner, dinner.a, "book_table", dear, "book-dear")
    grant = Grant.objects.get(id=waiting.grant_id)
    approved = forks.grant_decide(
        owner=dinner.a.owner,
        room_id=dinner.room.id,
        grant_id=grant.id,
        approve=True,
        key_id=dinner.a.key.id,
        signature=dinner.a.device.sign_grant(grant),
    )
    assert approved.status == "executed"
    words = room_outcome_for_owner(owner=dinner.b.owner, room_id=dinner.room.id)
    assert words is not None
    assert words.lines[0] == "Kaiseki Nori"
    assert words.lines[2] == "90 EUR per person, table for 2 (180 EUR in all)"
    assert words.lines[3] == "alice's agent books"
    assert ledger_verify_room(room_id=dinner.room.id).ok


@pytest.mark.django_db(transaction=True)  # the socket runs its database work in other threads
async def test_a_booking_over_the_room_socket_reaches_the_owners_page(dinner) -> None:
    """Bob's open page is rung to read the plan (an ``outcome_recorded`` notice) though
    nothing is said after the booking; the agent hears only its action's result."""
    socket = await join(dinner.room.id, dinner.a.token)
    page = await join_as_owner(dinner.room.id, dinner.b.owner)
    try:
        await socket.send_json_to(frame("act", {"tool": "book_table", "arguments": BOOKING}, "b1"))
        result = await next_frame_of(socket, "action_result")
        assert result["body"]["status"] == "executed"
        rung = await next_frame_of(page, "notice")
        assert rung["body"]["code"] == "outcome_recorded"
        while not await socket.receive_nothing(timeout=0.5):
            assert (await socket.receive_json_from())["type"] != "notice"
    finally:
        await socket.disconnect()
        await page.disconnect()
    fragment = await sync_to_async(_outcome_fragment)(dinner.b.owner, dinner.room.id)
    assert "Agreed plan" in fragment and "alice&#x27;s agent books" in fragment


def _outcome_fragment(owner: Any, room_id: Any) -> str:
    client = Client()
    client.force_login(owner)
    response = client.get(f"/rooms/{room_id}/?part=outcome")
    assert response.status_code == 200
    return response.content.decode()


def test_no_plan_from_each_side_is_no_agreement_with_each_reason_and_a_booking_replaces_it(
    dinner,
) -> None:
    first = act(dinner, dinner.a, "declare_no_plan", {"reason": "time"}, "no-plan-a")
    assert first.status == "executed", first
    alice = room_outcome_for_owner(owner=dinner.a.owner, room_id=dinner.room.id)
    assert alice is not None
    assert (alice.headline, alice.lines) == (
        "No agreement",
        ("Your agent: No time when both of you are free",),
    )
    act(dinner, dinner.b, "declare_no_plan", {"reason": "budget"}, "no-plan-b")
    for owner, lines in (
        (
            dinner.a.owner,
            (
                "Your agent: No time when both of you are free",
                "bob's agent: No price within both of your budgets",
            ),
        ),
        (
            dinner.b.owner,
            (
                "alice's agent: No time when both of you are free",
                "Your agent: No price within both of your budgets",
            ),
        ),
    ):
        words = room_outcome_for_owner(owner=owner, room_id=dinner.room.id)
        assert words is not None and words.lines == lines
        html = page(owner, dinner.room.id)
        assert "No agreement" in html and "No price within both of your budgets" in html
    assert [r["data"]["reason"] for r in outcome_rows(dinner.room.id)] == ["time", "budget"]
    receipt = receipt_build(room_id=dinner.room.id)
    assert (
        "Outcome: no agreement (No time when both of you are free; "
        "No price within both of your budgets)." in receipt.summary
    )

    # Saying the same again changes nothing; an agreement afterwards replaces "no plan".
    act(dinner, dinner.a, "declare_no_plan", {"reason": "time"}, "no-plan-a2")
    assert len(outcome_rows(dinner.room.id)) == 2
    act(dinner, dinner.a, "book_table", BOOKING, "book-1")
    words = room_outcome_for_owner(owner=dinner.b.owner, room_id=dinner.room.id)
    assert words is not None and words.headline == "Agreed plan"
    # A declaration after the table is booked does not undo the booking.
    act(dinner, dinner.b, "declare_no_plan", {"reason": "rounds"}, "no-plan-b2")
    words = room_outcome_for_owner(owner=dinner.b.owner, room_id=dinner.room.id)
    assert words is not None and words.headline == "Agreed plan"
    assert [r["data"]["outcome"] for r in outcome_rows(dinner.room.id)] == [
        "no_agreement",
        "no_agreement",
        "agreed",
    ]
    assert ledger_verify_room(room_id=dinner.room.id).ok


def test_the_ledger_knows_every_reason_the_tool_accepts() -> None:
    from typing import get_args

    from gatekeeper.tools.catalogue import NoPlanReason as ToolReason
    from ledger.events import NoPlanReason as LedgerReason

    assert set(get_args(ToolReason)) == set(get_args(LedgerReason))


def test_approving_a_fork_does_not_resume_the_room_around_the_other_owners_flare(dinner) -> None:
    """A flaring agent stays paused until its own owner chooses: Alice approving her booking
    (which resumes a paused room to run it) is refused while Bob's agent's flare waits for
    him, and her request still waits; once Bob answers, her approval runs."""
    dear = {**BOOKING, "venue_id": "kaiseki-nori", "cost_cents": 18000}
    waiting = act(dinner, dinner.a, "book_table", dear, "book-dear")
    assert waiting.status == "awaiting_grant"
    flare = flares.flare_raise(
        room_id=dinner.room.id,
        agent_id=dinner.b.agent.id,
        reason=FlareReason.DISTRESS,
        raised_by="agent",
    )
    grant = Grant.objects.get(id=waiting.grant_id)

    def approve() -> Any:
        return forks.grant_decide(
            owner=dinner.a.owner,
            room_id=dinner.room.id,
            grant_id=grant.id,
            approve=True,
            key_id=dinner.a.key.id,
            signature=dinner.a.device.sign_grant(grant),
        )

    with pytest.raises(InvalidState) as refused:
        approve()
    assert refused.value.message == (
        "bob's agent raised a Signal Flare that bob has not answered yet. The room resumes "
        "when bob answers it; until then only bob can resume it. Approve this request again "
        "once the room has resumed."
    )
    grant.refresh_from_db()
    dinner.room.refresh_from_db()
    assert (grant.status, dinner.room.state) == ("pending", "paused")
    assert "room_resumed" not in [r["kind"] for r in ledger_kinds(dinner.room.id)]

    flares.flare_resolve(
        owner=dinner.b.owner,
        room_id=dinner.room.id,
        flare_id=flare.id,
        choice=FlareChoice.RESET_RESUME,
    )
    dinner.room.refresh_from_db()
    assert dinner.room.state == "open"
    assert approve().status == "executed"


def test_answering_ones_own_flare_leaves_the_room_paused_for_the_other_owners(dinner) -> None:
    """Both agents flared: Alice answering hers does not resume the room around Bob's, which
    still waits for him; his answer resumes it."""
    raised = {
        seat.owner.pk: flares.flare_raise(
            room_id=dinner.room.id,
            agent_id=seat.agent.id,
            reason=FlareReason.DISTRESS,
            raised_by="agent",
        )
        for seat in (dinner.a, dinner.b)
    }
    for owner, state in ((dinner.a.owner, "paused"), (dinner.b.owner, "open")):
        flares.flare_resolve(
            owner=owner,
            room_id=dinner.room.id,
            flare_id=raised[owner.pk].id,
            choice=FlareChoice.RESET_RESUME,
        )
        dinner.room.refresh_from_db()
        assert dinner.room.state == state
    assert [r["kind"] for r in ledger_kinds(dinner.room.id)].count("room_resumed") == 1


def ledger_kinds(room_id: Any) -> list[dict[str, Any]]:
    return list(LedgerEvent.objects.filter(room_id=room_id).order_by("seq").values("kind"))
