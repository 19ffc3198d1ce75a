"""Two reference negotiators in rooms written for one behaviour each, against a real Daphne.

Each room is seeded through the real services (``practice.seeding.room_seed``: demo owners
with server-held keys, vaults, signed slips, tool policy) on the shipped Berlin catalogue,
and the outcome is read from the room's records: transcript, executed actions, grants.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from datetime import datetime, time, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.utils import timezone

from agents import RoomClient
from agents.negotiator import NegotiationResult, negotiate
from dining import catalogue_default
from gatekeeper.records import ActionRecord, ActionStatus
from practice.models import AgentRole
from practice.seeding import (
    Practice,
    SeatPlan,
    demo_grant_approve,
    demo_grant_deny,
    demo_pending_grants,
    demo_room_resume,
    room_seed,
)
from rooms.models import Message

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]
BERLIN = ZoneInfo("Europe/Berlin")
KINDS = ("availability", "budget", "food_likes", "food_dislikes", "allergies", "neighbourhood")
SCOPES = {"availability": "free_busy_14d", "budget": "range", "neighbourhood": "name"}


def _records(*, withheld: tuple[str, ...] = (), booking: str | None = None) -> list[dict[str, Any]]:
    records = []
    for kind in KINDS:
        shared = kind not in withheld
        records.append(
            {
                "resource": kind,
                "operation": "disclose" if shared else "read",
                "scope": SCOPES.get(kind, "list"),
                "recipient": "both" if shared else "own_agent",
                "max_uses": 100,
                "approval": "none",
            }
        )
    if booking is not None:
        records.append(
            {"resource": "tool:book_table", "operation": "act", "approval": booking, "max_uses": 5}
        )
    return records


def _day(offset: int) -> datetime:
    today = timezone.now().astimezone(BERLIN).date()
    return datetime.combine(today + timedelta(days=offset), time(0), tzinfo=BERLIN)


def _evenings_busy(except_days: set[int]) -> dict[str, Any]:
    """Busy every evening of the next 15 days except ``except_days`` (counted from today)."""
    busy = [
        {
            "start": int((_day(d) + timedelta(hours=16)).timestamp()),
            "end": int((_day(d) + timedelta(hours=23, minutes=59)).timestamp()),
            "title": "Busy",
        }
        for d in range(16)
        if d not in except_days
    ]
    return {"kind": "availability", "timezone": "Europe/Berlin", "busy": busy}


def _vault(
    *,
    free: set[int],
    home: str,
    likes: list[str],
    dislikes: list[str] = (),  # type: ignore[assignment]
    budget: tuple[int, int] | None = (2000, 9000),
    allergies: list[str] = (),  # type: ignore[assignment]
) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = [
        _evenings_busy(free),
        {"kind": "neighbourhood", "name": home},
        {"kind": "food_likes", "items": likes},
    ]
    if budget is not None:
        items.append(
            {"kind": "budget", "currency": "EUR", "minimum": budget[0], "maximum": budget[1]}
        )
    if dislikes:
        items.append({"kind": "food_dislikes", "items": list(dislikes)})
    if allergies:
        items.append({"kind": "allergies", "items": list(allergies)})
    return items


def _seed(
    host_vault: list[dict[str, Any]],
    guest_vault: list[dict[str, Any]],
    *,
    host_withholds: tuple[str, ...] = (),
    guest_withholds: tuple[str, ...] = (),
    booking: str = "none",
) -> Practice:
    return room_seed(
        host=SeatPlan(
            "test-host",
            host_vault,
            _records(withheld=host_withholds, booking=booking),
            AgentRole.HOST,
        ),
        guest=SeatPlan(
            "test-guest", guest_vault, _records(withheld=guest_withholds), AgentRole.NEGOTIATOR
        ),
        purpose="Dinner",
        charter="Plan a dinner for the two owners.",
        close_earlier=False,
    )


def _negotiate(
    live_daphne: str, practice: Practice, *, sealed: bool = False
) -> tuple[NegotiationResult, ...]:
    url = live_daphne.replace("http://", "ws://") + f"/ws/rooms/{practice.room_id}/"

    async def both() -> tuple[NegotiationResult, ...]:
        async with (
            RoomClient(url, practice.host.token) as host,
            RoomClient(url, practice.guest.token) as guest,
        ):
            options: dict[str, Any] = {
                "reply_timeout": 60,
                "grant_timeout": 60,
                # The owner at the screen answers from this process, not the Daphne's: on the
                # embedded profile (in-memory layer) the answer's push cannot reach the room's
                # sockets, and the SDK's default re-ask every 5 s was most of the test's time.
                "grant_poll": 0.5,
                "sealed_opening": sealed,
            }
            return tuple(
                await asyncio.gather(negotiate(host, **options), negotiate(guest, **options))
            )

    return asyncio.run(both())


def _lines(practice: Practice) -> list[str]:
    texts = Message.objects.filter(room_id=practice.room_id).order_by("seq")
    return [t.split("\n")[0] for t in texts.values_list("text", flat=True)]


def _bookings(practice: Practice) -> list[ActionRecord]:
    return list(
        ActionRecord.objects.filter(
            room_id=practice.room_id, tool="book_table", status=ActionStatus.EXECUTED
        )
    )


class _Owner(threading.Thread):
    """The host's owner at the screen: says no to the first booking (and resumes the room, as
    a person who said no does), yes to every later one."""

    def __init__(self, practice: Practice) -> None:
        super().__init__(daemon=True)
        self.practice, self.decided = practice, []
        self.done = threading.Event()

    def run(self) -> None:
        try:
            while not self.done.wait(0.2):
                for grant in demo_pending_grants(room_id=self.practice.room_id):
                    room_id, grant_id = self.practice.room_id, grant.grant_id
                    if not self.decided:
                        demo_grant_deny(room_id=room_id, grant_id=grant_id)
                        demo_room_resume(room_id=room_id, grant_id=grant_id)
                        self.decided.append(("denied", grant.arguments["venue_id"]))
                    else:
                        demo_grant_approve(room_id=room_id, grant_id=grant_id)
                        self.decided.append(("approved", grant.arguments["venue_id"]))
        finally:
            connection.close()


@pytest.fixture
def owner_at_screen() -> Iterator[Any]:
    started: list[_Owner] = []

    def start(practice: Practice) -> _Owner:
        owner = _Owner(practice)
        owner.start()
        started.append(owner)
        return owner

    yield start
    for owner in started:
        owner.done.set()
        owner.join(timeout=10)


def test_a_budget_entered_as_30_to_80_in_the_vault_form_allows_a_52_dinner(
    live_daphne: str,
) -> None:
    catalogue = catalogue_default()
    fischhaus = catalogue.venue("winterfeldt-fischhaus")
    assert fischhaus is not None and fischhaus.price_per_person.amount_minor == 5200
    others = sorted({v.cuisine for v in catalogue.venues} - {fischhaus.cuisine})
    # An evening the Fischhaus is open: it closes on Sundays, so a fixed "3 days from today"
    # failed one day of every week.
    evening = next(d for d in range(3, 10) if _day(d).weekday() != 6)
    practice = _seed(
        _vault(free={evening}, home="Schöneberg", likes=["italian"], budget=None),
        _vault(free={evening}, home="Kreuzberg", likes=["seafood"], dislikes=others),
    )
    # The host enters her budget as a person would: 30 to 80, whole units per person.
    client = Client()
    client.force_login(User.objects.get(username="test-host"))
    response = client.post(
        "/vault/",
        {
            "kind": "budget",
            "budget-currency": "EUR",
            "budget-minimum": "30",
            "budget-maximum": "80",
        },
    )
    assert response.status_code == 302

    host, guest = _negotiate(live_daphne, practice)
    assert (host.status, guest.status) == ("booked", "booked"), (host, guest)
    (booking,) = _bookings(practice)
    assert booking.arguments["venue_id"] == "winterfeldt-fischhaus"
    assert booking.arguments["cost_cents"] == 2 * 5200  # 52 per person for two
    assert booking.rule == "cleared"  # within her budget: no grant was needed


def test_owners_who_like_different_cuisines_still_agree(live_daphne: str) -> None:
    # The shared evening is a Friday: the catalogue's Korean and Mexican places close on
    # Mondays and Tuesdays, so a fixed offset failed on two days of every week.
    friday = next(d for d in range(3, 10) if _day(d).weekday() == 4)
    practice = _seed(
        _vault(free={friday - 3, friday}, home="Mitte", likes=["korean"]),
        _vault(free={friday, friday + 3}, home="Mitte", likes=["mexican"]),
    )
    host, guest = _negotiate(live_daphne, practice)
    assert (host.status, guest.status) == ("booked", "booked")
    (booking,) = _bookings(practice)
    venue = catalogue_default().venue(booking.arguments["venue_id"])
    assert venue is not None and venue.cuisine in {"korean", "mexican"}  # liked by one: ranks first
    start = datetime.fromisoformat(booking.arguments["start"]).astimezone(BERLIN)
    assert start.date() == _day(friday).date()  # the only evening both are free


def test_a_counter_with_withheld_likes_and_homes_ends_within_twelve_messages(
    live_daphne: str,
) -> None:
    practice = _seed(
        _vault(free={3, 6, 9, 12}, home="Wedding", likes=["vietnamese"], allergies=["gluten"]),
        _vault(free={6, 12}, home="Neukölln", likes=["turkish"], dislikes=["german", "french"]),
        host_withholds=("availability", "food_likes", "neighbourhood"),
        guest_withholds=("availability", "food_likes", "food_dislikes", "neighbourhood"),
    )
    host, guest = _negotiate(live_daphne, practice)
    assert (host.status, guest.status) == ("booked", "booked"), (host, guest)
    lines = _lines(practice)
    accepted = [i for i, line in enumerate(lines, 1) if line.startswith("ACCEPT ")]
    assert accepted and accepted[-1] <= 12, lines
    assert any(line.startswith("COUNTER ") for line in lines)  # the first plan did not fit
    (booking,) = _bookings(practice)
    venue = catalogue_default().venue(booking.arguments["venue_id"])
    assert venue is not None and "gluten" in venue.safe_for
    assert venue.cuisine not in {"german", "french"}
    day = datetime.fromisoformat(booking.arguments["start"]).astimezone(BERLIN).date()
    assert day in {_day(6).date(), _day(12).date()}


def test_a_denied_booking_is_followed_by_the_next_plan(
    live_daphne: str, owner_at_screen: Any
) -> None:
    practice = _seed(
        _vault(free={4}, home="Mitte", likes=["italian"]),
        _vault(free={4}, home="Kreuzberg", likes=["italian"]),
        booking="per_use",
    )
    owner = owner_at_screen(practice)
    host, guest = _negotiate(live_daphne, practice)
    assert (host.status, guest.status) == ("booked", "booked"), (host, guest)
    assert [d for d, _ in owner.decided] == ["denied", "approved"]
    lines = _lines(practice)
    denied_at = next(i for i, line in enumerate(lines) if line.startswith("NOT_BOOKED "))
    assert "reason=denied" in lines[denied_at]
    assert lines[denied_at + 1].startswith("PROPOSE ")  # the next plan, at once
    (booking,) = _bookings(practice)
    first_offer = lines[0].split("venue=")[1].split(" start=")
    second = (booking.arguments["venue_id"], booking.arguments["start"])
    assert (first_offer[0], first_offer[1].split(" ")[0]) != second  # not the one she refused


def test_no_common_evening_ends_with_each_side_saying_why(live_daphne: str) -> None:
    practice = _seed(
        _vault(free={2, 3}, home="Mitte", likes=["italian"]),
        _vault(free={5, 6}, home="Mitte", likes=["italian"]),
        host_withholds=("availability",),
    )
    host, guest = _negotiate(live_daphne, practice)
    assert (host.status, guest.status) == ("no_deal", "no_deal")
    lines = _lines(practice)
    assert any(line.startswith("NO_PLAN ") and "reason=time" in line for line in lines), lines
    assert _bookings(practice) == []
    declared = ActionRecord.objects.filter(
        room_id=practice.room_id, tool="declare_no_plan", status=ActionStatus.EXECUTED
    )
    assert declared.count() == 2  # each side recorded its "no agreement"
    assert len(lines) <= 12


def test_a_sealed_opening_reveals_both_offers_at_once_and_then_agrees(live_daphne: str) -> None:
    from ledger.models import LedgerEvent

    practice = _seed(
        _vault(free={3, 7}, home="Mitte", likes=["japanese"]),
        _vault(free={7}, home="Friedrichshain", likes=["vietnamese"], dislikes=["japanese"]),
        guest_withholds=("food_dislikes",),
    )
    host, guest = _negotiate(live_daphne, practice, sealed=True)
    assert (host.status, guest.status) == ("booked", "booked"), (host, guest)
    kinds = list(
        LedgerEvent.objects.filter(room_id=practice.room_id)
        .order_by("seq")
        .values_list("kind", flat=True)
    )
    assert kinds.count("offer_sealed") == 2 and kinds.count("offers_revealed") == 1
    assert kinds.index("offers_revealed") > max(
        i for i, k in enumerate(kinds) if k == "offer_sealed"
    )
    lines = _lines(practice)
    # No first proposal in the transcript: the host answers the guest's revealed offer.
    assert lines[0].startswith(("ACCEPT round=1 ", "COUNTER round=2 ")), lines
    (booking,) = _bookings(practice)
    venue = catalogue_default().venue(booking.arguments["venue_id"])
    assert venue is not None and venue.cuisine != "japanese"  # the guest's withheld dislike
