"""The questions the server asks of a catalogue: travel, opening hours, tables, a booking.

Times are checked in the city's local wall-clock time on the local weekday of the start
(``zoneinfo``, so DST changes are exact). A dinner must fit inside one opening interval (two
intervals that touch count as one).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from dining.formats import City, Venue, clock_minutes
from dining.loading import Catalogue
from dining.terms import DinnerTerms

DAY_NAMES = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
# Currencies whose minor unit is the major unit (no cents).
ZERO_DECIMAL = frozenset({"JPY"})


def travel_minutes(city: City, a: str, b: str) -> int:
    """Minutes between neighbourhoods ``a`` and ``b`` (``local_minutes`` when equal).
    Raises ``KeyError`` for a neighbourhood the city does not have."""
    return city.travel(a, b)


def money_words(amount_minor: int, currency: str) -> str:
    """An amount as people write it: "38.00 EUR", "4200 JPY"."""
    if currency in ZERO_DECIMAL:
        return f"{amount_minor} {currency}"
    return f"{amount_minor // 100}.{amount_minor % 100:02d} {currency}"


def _local_span(start: datetime, minutes: int, zone: ZoneInfo) -> tuple[int, int, int] | None:
    """(weekday, start minute, end minute) of [start, start + minutes) on the local day the
    dinner starts, or None when it runs past that day's midnight."""
    local_start = start.astimezone(zone)
    local_end = (start + timedelta(minutes=minutes)).astimezone(zone)
    begin = local_start.hour * 60 + local_start.minute
    day_after = local_start.date() + timedelta(days=1)
    if local_end.date() == local_start.date():
        end = (
            local_end.hour * 60
            + local_end.minute
            + (1 if local_end.second or local_end.microsecond else 0)
        )
    elif local_end.date() == day_after and (local_end.hour, local_end.minute, local_end.second) == (
        0,
        0,
        0,
    ):
        end = 24 * 60
    else:
        return None
    return local_start.weekday(), begin, end


def _merged(venue: Venue, weekday: int) -> list[tuple[int, int]]:
    spans = sorted(
        (clock_minutes(i.opens), clock_minutes(i.closes)) for i in venue.hours.on(weekday)
    )
    merged: list[tuple[int, int]] = []
    for opens, closes in spans:
        if merged and opens <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], closes))
        else:
            merged.append((opens, closes))
    return merged


def venue_open_for(venue: Venue, *, start: datetime, minutes: int, time_zone: str) -> bool:
    """Whether ``venue`` is open for all of [start, start + minutes) in ``time_zone`` (the
    city's) on the local weekday the dinner starts. ``start`` must be timezone-aware."""
    if start.tzinfo is None:
        raise ValueError("start must be timezone-aware")
    span = _local_span(start, minutes, ZoneInfo(time_zone))
    if span is None:
        return False
    weekday, begin, end = span
    return any(opens <= begin and end <= closes for opens, closes in _merged(venue, weekday))


def venue_table_fits(venue: Venue, party_size: int) -> bool:
    """Whether ``venue`` has a table for ``party_size`` people."""
    return any(size >= party_size for size in venue.table_sizes)


def venue_cost_minor(venue: Venue, party_size: int) -> int:
    """What a dinner for the party costs in total: price per person x party size."""
    return venue.price_per_person.amount_minor * party_size


@dataclass(frozen=True)
class BookingProblem:
    """Why a booking cannot stand: a rule id (``catalogue.*``) and a sentence for people."""

    rule: str
    detail: str


def _hours_words(venue: Venue, weekday: int) -> str:
    intervals = venue.hours.on(weekday)
    if not intervals:
        return f"it is closed on {DAY_NAMES[weekday]}s"
    shown = ", ".join(f"{i.opens}-{i.closes}" for i in intervals)
    return f"on {DAY_NAMES[weekday]}s it is open {shown}"


def booking_check(
    *,
    catalogue: Catalogue,
    terms: DinnerTerms,
    venue_id: str,
    party_size: int,
    start: datetime,
    cost_minor: int,
    currency: str,
) -> BookingProblem | None:
    """What is wrong with booking ``venue_id`` for ``party_size`` at ``start`` for a claimed
    total of ``cost_minor`` ``currency``, under ``terms``; None when nothing is.

    In order: the venue exists; it is open for the whole dinner (``terms.dinner_minutes``) on
    that local weekday; it has a table for the party; the claimed total equals the catalogue's
    price per person x party size, in the catalogue's currency.
    """
    venue = catalogue.venue(venue_id)
    if venue is None:
        return BookingProblem(
            "catalogue.unknown_venue",
            f"There is no venue called {venue_id[:64]!r} in the catalogue {catalogue.name}.",
        )
    zone = ZoneInfo(catalogue.city.time_zone)
    local = start.astimezone(zone)
    if not venue_open_for(
        venue, start=start, minutes=terms.dinner_minutes, time_zone=catalogue.city.time_zone
    ):
        return BookingProblem(
            "catalogue.closed",
            f"{venue.name} is not open for a {terms.dinner_minutes}-minute dinner starting "
            f"{local:%H:%M} on {DAY_NAMES[local.weekday()]} {local.day} {local:%B} "
            f"({catalogue.city.name} time): {_hours_words(venue, local.weekday())}.",
        )
    if not venue_table_fits(venue, party_size):
        return BookingProblem(
            "catalogue.no_table",
            f"{venue.name} has no table for {party_size} (its largest seats "
            f"{max(venue.table_sizes)}).",
        )
    price = venue.price_per_person
    expected = venue_cost_minor(venue, party_size)
    if currency != price.currency or cost_minor != expected:
        return BookingProblem(
            "catalogue.price_mismatch",
            f"The booking says {money_words(cost_minor, currency)} for {party_size}, but "
            f"{venue.name} costs {money_words(price.amount_minor, price.currency)} per person: "
            f"{money_words(expected, price.currency)} for {party_size}.",
        )
    return None
