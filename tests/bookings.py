"""One valid catalogue booking for tests: rooms made by ``room_create`` are dinners with the
shipped Berlin catalogue, and the server refuses a ``book_table`` for a venue it does not
list, at a time it is closed, or at a price other than its own.

``booking()`` gives ``book_table`` arguments for a real venue at a time it is open, priced as
the catalogue prices it (per person x party size). Budgets are per person, so the venue
chooses which side of an owner's budget a booking falls on.
"""

from __future__ import annotations

from typing import Any

from dining import catalogue_default

# Friday 4 December 2026, 20:00 in Berlin: every practice venue is open 17:00-23:30.
START = "2026-12-04T19:00:00+00:00"
WITHIN = "sora-sushi"  # 42 EUR per person
OTHER_WITHIN = "osteria-kanal"  # 38 EUR per person
OVER = "kaiseki-nori"  # 90 EUR per person
# A budget (per person, minor units) that WITHIN and OTHER_WITHIN fit and OVER exceeds.
BUDGET = {"kind": "budget", "currency": "EUR", "minimum": 2000, "maximum": 6000}


def price_per_person(venue_id: str) -> int:
    """The catalogue's price per person of ``venue_id`` (minor units)."""
    venue = catalogue_default().venue(venue_id)
    assert venue is not None, f"{venue_id} is not in the shipped catalogue"
    return venue.price_per_person.amount_minor


def booking(venue_id: str = WITHIN, *, party_size: int = 2, start: str = START) -> dict[str, Any]:
    """``book_table`` arguments the catalogue accepts: ``venue_id`` for ``party_size`` at
    ``start``, costing exactly its price per person x ``party_size``."""
    return {
        "venue_id": venue_id,
        "party_size": party_size,
        "start": start,
        "cost_cents": price_per_person(venue_id) * party_size,
        "currency": "EUR",
    }
