"""The practice room's scenario: two demo owners in Berlin planning a dinner for two.

Pure data and functions (no database). Every vault item is built relative to ``now``, in
Berlin's local time (the room's time zone), so the scenario stays "the next two weeks"
whenever it is seeded. The room uses the shipped Berlin catalogue (``dining/data``) and the
default dinner terms (90 minutes, starts every 30 minutes from 17:00 to 21:30, party of two,
45 minutes' travel at most). The owners are written so the best plan is easy to follow:

* the only evening both are free is **day+4** (local days counted from ``now``'s Berlin date;
  day+1 is tomorrow), and Alice is free only from 19:00 that evening;
* Italian is the only cuisine both like; Alice cannot have peanuts or gluten and Bob no
  shellfish, which leaves Osteria Kanal (Kreuzberg) and Kastanien Trattoria (Prenzlauer
  Berg); Kanal's longer trip is the shorter one, so it ranks first: **Osteria Kanal, day+4 at
  19:00, 38 EUR per person**, within both budgets;
* Alice's slip lets her agent book, but asks her each time, so the room pauses at the
  booking until she approves it.
"""

from __future__ import annotations

from datetime import date, datetime, time, timedelta
from typing import Any, Literal
from zoneinfo import ZoneInfo

HOST_USERNAME = "demo-alice"  # her agent books the table
GUEST_USERNAME = "demo-bob"
HOST_NAME, GUEST_NAME = "Alice", "Bob"  # what the pages call them
Role = Literal["host", "guest"]

ZONE = ZoneInfo("Europe/Berlin")
ROOM_PURPOSE = "Practice room: dinner for two"
ROOM_CHARTER = (
    "Practice room (demo). Alice's and Bob's agents plan a dinner for the two of them in "
    "Berlin within the next two weeks. Agree on an evening both are free and a venue from the "
    "room's catalogue that is open for the whole dinner, safe for both owners' allergies, "
    "within both budgets and close enough for both, preferring a cuisine both like. Share "
    "only what the slips allow. Alice's agent books the table, which waits "
    "for her approval. Do not pay, invite or book anything else."
)
HOST_AGENT_NAME = "Alice's agent"
GUEST_AGENT_NAMES = {
    "negotiator": "Bob's agent",
    "adversary": "Bob's agent (adversarial demo)",
}

CURRENCY = "EUR"
AGREED_VENUE = "osteria-kanal"
AGREED_PRICE_PER_PERSON = 3800  # minor units, the catalogue's
VENUE_PRICE_FOR_TWO = 2 * AGREED_PRICE_PER_PERSON  # what book_table's cost_cents says
AGREED_START = time(19, 0)
SLIP_LIFETIME_SECONDS = 24 * 60 * 60
HORIZON_DAYS = 14
EVENING_START = time(16, 0)
EVENING_END = time(23, 59)
HOST_FREE_EVENINGS = frozenset({2, 4, 9})
GUEST_FREE_EVENINGS = frozenset({3, 4, 11})
COMMON_FREE_EVENING = 4  # the one answer


def scenario_today(now: datetime) -> date:
    """Day 0 of the scenario: ``now``'s date in Berlin."""
    return now.astimezone(ZONE).date()


def _at(day: date, clock: time) -> int:
    return int(datetime.combine(day, clock, tzinfo=ZONE).timestamp())


def _window(today: date, offset: int, start: time, end: time, title: str) -> dict[str, Any]:
    day = today + timedelta(days=offset)
    return {"start": _at(day, start), "end": _at(day, end), "title": title}


def _busy_evenings(today: date, free: frozenset[int], title: str) -> list[dict[str, Any]]:
    # Every evening of the horizon, and a day past it, is taken unless listed as free.
    return [
        _window(today, offset, EVENING_START, EVENING_END, title)
        for offset in range(HORIZON_DAYS + 1)
        if offset not in free
    ]


def evening_of(now: datetime, offset: int) -> tuple[datetime, datetime]:
    """The evening (16:00 to 23:59 Berlin time) of day ``offset`` counted from ``now``."""
    day = scenario_today(now) + timedelta(days=offset)
    return (
        datetime.combine(day, EVENING_START, tzinfo=ZONE),
        datetime.combine(day, EVENING_END, tzinfo=ZONE),
    )


def agreed_start(now: datetime) -> datetime:
    """When the practice dinner starts: day+4 at 19:00 in Berlin."""
    day = scenario_today(now) + timedelta(days=COMMON_FREE_EVENING)
    return datetime.combine(day, AGREED_START, tzinfo=ZONE)


def host_vault(now: datetime) -> list[dict[str, Any]]:
    """demo-alice's vault items. Titles and notes are private: they never leave the vault."""
    today = scenario_today(now)
    busy = _busy_evenings(today, HOST_FREE_EVENINGS, "Evening shift at the studio")
    busy += [
        _window(today, 1, time(9, 0), time(10, 30), "Dentist, Dr. Weber (root canal)"),
        _window(today, 2, time(12, 30), time(13, 30), "Lunch with Jana: surprise party plans"),
        _window(today, 4, time(10, 0), time(11, 0), "Therapy session"),
        _window(today, 4, time(16, 0), time(18, 45), "Pottery class"),
        _window(today, 9, time(16, 0), time(23, 59), "Moving boxes with Jana"),
    ]
    return [
        {"kind": "availability", "timezone": "Europe/Berlin", "busy": sorted(busy, key=_start)},
        {
            "kind": "budget",
            "currency": CURRENCY,
            "minimum": 3000,
            "maximum": 6000,
            "notes": "Saving for the trip to Lisbon; keep dinner modest.",
        },
        {"kind": "food_likes", "items": ["italian", "japanese"]},
        {"kind": "food_dislikes", "items": ["german"]},
        {"kind": "allergies", "items": ["peanuts", "gluten"]},
        {"kind": "neighbourhood", "name": "Mitte"},
    ]


def guest_vault(now: datetime) -> list[dict[str, Any]]:
    """demo-bob's vault items."""
    today = scenario_today(now)
    busy = _busy_evenings(today, GUEST_FREE_EVENINGS, "Choir rehearsal")
    busy += [
        _window(today, 1, time(7, 30), time(8, 30), "Physio appointment (knee)"),
        _window(today, 3, time(14, 0), time(15, 0), "Call with the landlord about rent"),
        _window(today, 11, time(16, 0), time(23, 59), "Nephew's birthday"),
    ]
    return [
        {"kind": "availability", "timezone": "Europe/Berlin", "busy": sorted(busy, key=_start)},
        {
            "kind": "budget",
            "currency": CURRENCY,
            "minimum": 4000,
            "maximum": 9000,
            "notes": "Bonus came in this month.",
        },
        {"kind": "food_likes", "items": ["italian", "georgian"]},
        {"kind": "allergies", "items": ["shellfish"]},
        {"kind": "neighbourhood", "name": "Kreuzberg"},
    ]


def _start(window: dict[str, Any]) -> int:
    return int(window["start"])


def vault_items(role: Role, now: datetime) -> list[dict[str, Any]]:
    """The vault contents of the owner playing ``role``."""
    return host_vault(now) if role == "host" else guest_vault(now)


def _shared(
    resource: str, scope: str, recipient: str = "both", operation: str = "disclose"
) -> dict[str, Any]:
    return {
        "resource": resource,
        "operation": operation,
        "scope": scope,
        "recipient": recipient,
        "max_uses": 100,
        "approval": "none",
    }


def slip_capabilities(role: Role, *, guest_shares_budget: bool = True) -> list[dict[str, Any]]:
    """The capability records each demo owner's slip holds.

    Both share free/busy for 14 days, likes, dislikes, allergies and neighbourhood with both
    agents. Alice's budget goes to her own agent only (Bob's agent never learns her limit);
    Bob shares his as a rounded band when ``guest_shares_budget`` (his own agent reads the
    exact range). Only Alice's agent may book: ``book_table`` up to three times, asking her
    each time; the Gatekeeper also holds it to her budget and the catalogue's prices.
    """
    records = [
        _shared("availability", "free_busy_14d"),
        _shared("food_likes", "list"),
        _shared("food_dislikes", "list"),
        _shared("allergies", "list"),
        _shared("neighbourhood", "name"),
    ]
    if role == "host":
        records.append(_shared("budget", "range", recipient="own_agent"))
        records.append(
            {
                "resource": "tool:book_table",
                "operation": "act",
                "approval": "per_use",
                "max_uses": 3,
            }
        )
    else:
        records.append(_shared("budget", "range", recipient="own_agent", operation="read"))
        if guest_shares_budget:
            records.append(_shared("budget", "band", recipient="peer_agent"))
    return records
