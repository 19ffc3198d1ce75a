"""``venues_search``: the catalogue filtered and paged, as the read-only tool returns it."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from dining.formats import Venue
from dining.loading import Catalogue

MAX_PAGE = 200


@dataclass(frozen=True)
class VenuePage:
    venues: tuple[Venue, ...]
    total: int  # venues matching the filters, over all pages
    next_offset: int | None  # where the next page starts; None on the last one


def venues_search(
    catalogue: Catalogue,
    *,
    cuisines: Collection[str] = (),
    neighbourhoods: Collection[str] = (),
    max_price_per_person_minor: int | None = None,
    safe_for: Collection[str] = (),
    limit: int = MAX_PAGE,
    offset: int = 0,
) -> VenuePage:
    """Venues of ``catalogue`` matching every filter given, in catalogue order.

    An empty filter matches everything; ``safe_for`` keeps venues safe for *all* of the listed
    allergens; ``max_price_per_person_minor`` is in the catalogue's minor units.
    """
    if not 1 <= limit <= MAX_PAGE or offset < 0:
        raise ValueError(f"limit must be 1..{MAX_PAGE} and offset >= 0")
    wanted_cuisines, wanted_places, needed = set(cuisines), set(neighbourhoods), set(safe_for)
    matching = [
        venue
        for venue in catalogue.venues
        if (not wanted_cuisines or venue.cuisine in wanted_cuisines)
        and (not wanted_places or venue.neighbourhood in wanted_places)
        and (
            max_price_per_person_minor is None
            or venue.price_per_person.amount_minor <= max_price_per_person_minor
        )
        and needed <= set(venue.safe_for)
    ]
    page = tuple(matching[offset : offset + limit])
    after = offset + len(page)
    return VenuePage(
        venues=page, total=len(matching), next_offset=after if after < len(matching) else None
    )
