"""The public venue list the reference negotiator plans from.

Public data, the same for both sides: a peer names a venue only by its slug, and a slug that is
not here is never booked. The practice room's scenario (``practice/scenario.py``) is built on
these exact venues and prices.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType


@dataclass(frozen=True)
class Venue:
    """One restaurant: price for two in minor units (cents), allergens its kitchen cannot
    avoid, and the hours (UTC) a table may start and must end within."""

    slug: str
    name: str
    cuisine: str
    neighbourhood: str
    price_for_two_cents: int
    currency: str
    allergens: frozenset[str]
    opens_hour: int = 18
    closes_hour: int = 23


VENUES: tuple[Venue, ...] = (
    Venue(
        "sora-sushi", "Sora Sushi", "japanese", "Kreuzberg", 8400, "EUR", frozenset({"shellfish"})
    ),
    Venue(
        "trattoria-mitte",
        "Trattoria Mitte",
        "italian",
        "Mitte",
        5200,
        "EUR",
        frozenset({"peanuts"}),
    ),
    Venue("osteria-kanal", "Osteria Kanal", "italian", "Kreuzberg", 7600, "EUR", frozenset()),
    Venue(
        "bangkok-garden",
        "Bangkok Garden",
        "thai",
        "Mitte",
        4400,
        "EUR",
        frozenset({"peanuts", "shellfish"}),
    ),
    Venue(
        "tbilisi-house",
        "Tbilisi House",
        "georgian",
        "Kreuzberg",
        4800,
        "EUR",
        frozenset({"walnuts"}),
    ),
    Venue("kaiseki-nori", "Kaiseki Nori", "japanese", "Mitte", 18000, "EUR", frozenset()),
)

VENUES_BY_SLUG: MappingProxyType[str, Venue] = MappingProxyType({v.slug: v for v in VENUES})

# Every cuisine and allergen the list knows: peer strings are only ever compared to these.
KNOWN_CUISINES: frozenset[str] = frozenset(v.cuisine for v in VENUES)
KNOWN_ALLERGENS: frozenset[str] = frozenset(a for v in VENUES for a in v.allergens)


def venue_by_slug(slug: str) -> Venue | None:
    """The venue called ``slug``, or ``None`` if the list has no such venue."""
    return VENUES_BY_SLUG.get(slug)
