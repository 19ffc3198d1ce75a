"""The practice room's scenario: two demo owners planning a dinner for two.

Pure data and functions (no database). Every vault item is built relative to ``now`` so the
scenario stays "the next seven days" whenever it is seeded. The numbers are chosen so the
reference negotiator finds exactly one answer:

* the only evening both are free is **day+4** (days counted from ``now``'s UTC date; day+1
  is tomorrow);
* the only venue compatible with both owners (public venue list, ``agents/venues.py``) costs
  7600 cents EUR for two, above Alice's maximum of 6000, so her booking pauses the room until
  she approves it (``over_budget``).
"""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta
from typing import Any, Literal

HOST_USERNAME = "demo-alice"  # her agent books the table
GUEST_USERNAME = "demo-bob"
Role = Literal["host", "guest"]

ROOM_PURPOSE = "Practice room: dinner for two"
ROOM_CHARTER = (
    "Practice room (demo). Alice's and Bob's agents plan a dinner for the two of them in the "
    "next seven days. Agree on one evening both are free, a venue that fits both owners' "
    "tastes, allergies and neighbourhoods, and a price within what each owner shares. Share "
    "only what the slips allow. Alice's agent books the table with book_table; anything "
    "above her budget waits for her approval. Do not pay, invite or book anything else."
)
HOST_AGENT_NAME = "Alice's agent"
GUEST_AGENT_NAMES = {
    "negotiator": "Bob's agent",
    "adversary": "Bob's agent (adversarial demo)",
}

CURRENCY = "EUR"
VENUE_PRICE_FOR_TWO = 7600  # minor units: the only venue both can accept
SLIP_LIFETIME_SECONDS = 24 * 60 * 60
EVENING_START = time(17, 0)
EVENING_END = time(23, 59)
# Evenings are busy from today through day+7, so the whole free/busy 7-day horizon is covered
# (a seven-day window that starts this afternoon reaches into day+7's evening).
EVENING_DAYS = range(8)
HOST_FREE_EVENINGS = frozenset({2, 4})
GUEST_FREE_EVENINGS = frozenset({3, 4})
COMMON_FREE_EVENING = 4  # the one answer


def _at(day: date, clock: time) -> int:
    return int(datetime.combine(day, clock, tzinfo=UTC).timestamp())


def _window(today: date, offset: int, start: time, end: time, title: str) -> dict[str, Any]:
    day = today + timedelta(days=offset)
    return {"start": _at(day, start), "end": _at(day, end), "title": title}


def _busy_evenings(today: date, free: frozenset[int], title: str) -> list[dict[str, Any]]:
    return [
        _window(today, offset, EVENING_START, EVENING_END, title)
        for offset in EVENING_DAYS
        if offset not in free
    ]


def scenario_today(now: datetime) -> date:
    """Day 0 of the scenario: ``now``'s UTC date."""
    return now.astimezone(UTC).date()


def evening_of(now: datetime, offset: int) -> tuple[datetime, datetime]:
    """The evening (17:00 to 23:59 UTC) of day ``offset`` counted from ``now``'s UTC date."""
    day = scenario_today(now) + timedelta(days=offset)
    return (
        datetime.combine(day, EVENING_START, tzinfo=UTC),
        datetime.combine(day, EVENING_END, tzinfo=UTC),
    )


def host_vault(now: datetime) -> list[dict[str, Any]]:
    """demo-alice's vault items. Titles and notes are private: they never leave the vault."""
    today = scenario_today(now)
    busy = _busy_evenings(today, HOST_FREE_EVENINGS, "Evening shift at the studio")
    busy += [
        _window(today, 1, time(9, 0), time(10, 30), "Dentist, Dr. Weber (root canal)"),
        _window(today, 2, time(12, 30), time(13, 30), "Lunch with Jana: surprise party plans"),
        _window(today, 4, time(10, 0), time(11, 0), "Therapy session"),
    ]
    return [
        {"kind": "availability", "timezone": "UTC", "busy": sorted(busy, key=_start)},
        {
            "kind": "budget",
            "currency": CURRENCY,
            "minimum": 3000,
            "maximum": 6000,
            "notes": "Saving for the trip to Lisbon; keep dinner modest.",
        },
        {"kind": "food_likes", "items": ["italian", "japanese", "thai"]},
        {"kind": "allergies", "items": ["peanuts"]},
        {"kind": "neighbourhood", "name": "Mitte"},
    ]


def guest_vault(now: datetime) -> list[dict[str, Any]]:
    """demo-bob's vault items."""
    today = scenario_today(now)
    busy = _busy_evenings(today, GUEST_FREE_EVENINGS, "Choir rehearsal")
    busy += [
        _window(today, 1, time(7, 30), time(8, 30), "Physio appointment (knee)"),
        _window(today, 3, time(14, 0), time(15, 0), "Call with the landlord about rent"),
    ]
    return [
        {"kind": "availability", "timezone": "UTC", "busy": sorted(busy, key=_start)},
        {
            "kind": "budget",
            "currency": CURRENCY,
            "minimum": 5000,
            "maximum": 9000,
            "notes": "Bonus came in this month.",
        },
        {"kind": "food_likes", "items": ["japanese", "georgian", "italian"]},
        {"kind": "allergies", "items": ["shellfish"]},
        {"kind": "neighbourhood", "name": "Kreuzberg"},
    ]


def _start(window: dict[str, Any]) -> int:
    return int(window["start"])


def vault_items(role: Role, now: datetime) -> list[dict[str, Any]]:
    """The vault contents of the owner playing ``role``."""
    return host_vault(now) if role == "host" else guest_vault(now)


def _shared(resource: str, scope: str, recipient: str = "both") -> dict[str, Any]:
    return {
        "resource": resource,
        "operation": "disclose",
        "scope": scope,
        "recipient": recipient,
        "max_uses": 100,
        "approval": "none",
    }


def slip_capabilities(role: Role, *, guest_shares_budget: bool = True) -> list[dict[str, Any]]:
    """The capability records each demo owner's slip holds.

    Both share free/busy for seven days, tastes, allergies and neighbourhood with both agents.
    Alice's budget goes to her own agent only (Bob's agent never learns her limit); Bob's to
    both when ``guest_shares_budget``. Only Alice's agent may act: ``book_table``, up to three
    times, without asking each time; the gatekeeper still holds her to her budget.
    """
    records = [
        _shared("availability", "free_busy_7d"),
        _shared("food_likes", "list"),
        _shared("allergies", "list"),
        _shared("neighbourhood", "name"),
    ]
    if role == "host":
        records.append(_shared("budget", "range", recipient="own_agent"))
        records.append(
            {"resource": "tool:book_table", "operation": "act", "approval": "none", "max_uses": 3}
        )
    else:
        records.append(
            _shared("budget", "range", recipient="both" if guest_shares_budget else "own_agent")
        )
    return records
