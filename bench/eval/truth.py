"""Exhaustive ground truth for a scenario: every venue x day x start against the hard
constraints, with the whole truth about both owners, using the server's catalogue checks.

The ranking is the issue's: liked cuisines first (liked by both, then one), then the shorter
of the two longer trips. Anything that ties on that key is equally good.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta

from bench.eval.scenarios import Owner, Scenario
from dining import Catalogue, Venue, dinner_starts, venue_open_for, venue_table_fits

Rank = tuple[int, int]
CONSTRAINTS = ("time", "venue", "budget", "allergy", "cuisine", "distance")


@dataclass(frozen=True)
class Truth:
    feasible: tuple[tuple[str, datetime], ...]  # (venue id, start) of every plan both accept
    best_rank: Rank | None

    @property
    def exists(self) -> bool:
        return bool(self.feasible)


_TRAVEL: dict[str, dict[tuple[str, str], int]] = {}


def travel(catalogue: Catalogue, a: str, b: str) -> int:
    """``City.travel`` looked up in a table made once per catalogue (it is a linear scan)."""
    table = _TRAVEL.get(catalogue.id)
    if table is None:
        ids = [n.id for n in catalogue.city.neighbourhoods]
        table = {(x, y): catalogue.city.travel(x, y) for x in ids for y in ids}
        _TRAVEL[catalogue.id] = table
    return table[(a, b)]


def owner_breaks(
    owner: Owner, venue: Venue, start: datetime, *, scenario: Scenario, catalogue: Catalogue
) -> str | None:
    """The first constraint the plan breaks for ``owner`` (checked in ``CONSTRAINTS`` order),
    or None."""
    terms = scenario.terms
    s = int(start.timestamp())
    e = int((start + timedelta(minutes=terms.dinner_minutes)).timestamp())
    if any(b < e and s < f for b, f in owner.busy):
        return "time"
    if not venue_open_for(
        venue, start=start, minutes=terms.dinner_minutes, time_zone=catalogue.city.time_zone
    ) or not venue_table_fits(venue, terms.party_size):
        return "venue"
    price = venue.price_per_person
    if price.currency != owner.currency or price.amount_minor > owner.budget_max:
        return "budget"
    if not set(owner.allergies) <= set(venue.safe_for):
        return "allergy"
    if venue.cuisine in owner.dislikes:
        return "cuisine"
    if travel(catalogue, owner.home, venue.neighbourhood) > terms.travel_limit_minutes:
        return "distance"
    return None


def rank(scenario: Scenario, catalogue: Catalogue, venue: Venue) -> Rank:
    likers = sum(1 for o in (scenario.host, scenario.guest) if venue.cuisine in o.likes)
    longest = max(
        travel(catalogue, o.home, venue.neighbourhood) for o in (scenario.host, scenario.guest)
    )
    return (-likers, longest)


def plans(
    scenario: Scenario, catalogue: Catalogue, now: datetime
) -> Iterator[tuple[Venue, datetime]]:
    for start in dinner_starts(scenario.terms, now=now):
        for venue in catalogue.venues:
            yield venue, start


def truth_of(scenario: Scenario, catalogue: Catalogue, *, now: datetime) -> Truth:
    """Every plan both owners accept, and the best rank among them."""
    feasible = []
    best: Rank | None = None
    for venue, start in plans(scenario, catalogue, now):
        kwargs = {"scenario": scenario, "catalogue": catalogue}
        if owner_breaks(scenario.host, venue, start, **kwargs) is None and (
            owner_breaks(scenario.guest, venue, start, **kwargs) is None
        ):
            feasible.append((venue.id, start))
            key = rank(scenario, catalogue, venue)
            best = key if best is None else min(best, key)
    return Truth(feasible=tuple(feasible), best_rank=best)
