"""The catalogue's questions: travel, whole-dinner opening hours in local time (DST
included), tables, start times over the horizon, and the venues_search filter."""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

from dining import (
    DinnerTerms,
    catalogue_default,
    dinner_starts,
    travel_minutes,
    venue_open_for,
    venue_table_fits,
    venues_search,
)

BERLIN = ZoneInfo("Europe/Berlin")


def test_travel_is_symmetric_and_local_inside_a_neighbourhood() -> None:
    city = catalogue_default().city
    assert travel_minutes(city, "mitte", "kreuzberg") == travel_minutes(city, "kreuzberg", "mitte")
    assert travel_minutes(city, "mitte", "mitte") == city.local_minutes
    assert travel_minutes(city, "charlottenburg", "neukoelln") > 45  # beyond the default limit


def test_a_dinner_must_fit_one_opening_interval_on_its_local_weekday() -> None:
    catalogue = catalogue_default()
    lunch_and_dinner = catalogue.venue("winterfeldt-fischhaus")  # 12-15 and 18-23, Mon-Sat
    assert lunch_and_dinner is not None

    def fits(local: datetime, minutes: int = 90) -> bool:
        return venue_open_for(
            lunch_and_dinner, start=local, minutes=minutes, time_zone="Europe/Berlin"
        )

    assert fits(datetime(2026, 12, 4, 12, 0, tzinfo=BERLIN))
    assert not fits(datetime(2026, 12, 4, 14, 0, tzinfo=BERLIN))  # lunch closes mid-dinner
    assert not fits(datetime(2026, 12, 4, 17, 0, tzinfo=BERLIN))  # not open yet
    assert fits(datetime(2026, 12, 4, 21, 30, tzinfo=BERLIN))  # ends exactly at closing
    assert not fits(datetime(2026, 12, 4, 21, 31, tzinfo=BERLIN))
    assert not fits(datetime(2026, 12, 6, 19, 0, tzinfo=BERLIN))  # closed on Sundays
    # The same instant given in UTC is judged in Berlin's local time.
    assert fits(datetime(2026, 12, 4, 19, 0, tzinfo=UTC))  # 20:00 in Berlin


def test_opening_hours_follow_the_dst_change() -> None:
    venue = catalogue_default().venue("sora-sushi")  # 17:00-23:30 every day
    assert venue is not None
    # 21:00 UTC is 22:00 in Berlin in winter (fits) and 23:00 in summer (closes mid-dinner).
    winter = datetime(2027, 3, 27, 21, 0, tzinfo=UTC)
    summer = datetime(2027, 3, 28, 21, 0, tzinfo=UTC)
    assert venue_open_for(venue, start=winter, minutes=90, time_zone="Europe/Berlin")
    assert not venue_open_for(venue, start=summer, minutes=90, time_zone="Europe/Berlin")


def test_tables() -> None:
    venue = catalogue_default().venue("sora-sushi")
    assert venue is not None
    assert venue_table_fits(venue, 4) and not venue_table_fits(venue, 5)


def test_start_times_cover_the_horizon_in_local_time_across_dst() -> None:
    terms = DinnerTerms(horizon_days=3, first_start="17:00", last_start="21:30")
    starts = dinner_starts(terms, now=datetime(2027, 3, 27, 10, 0, tzinfo=UTC))
    assert len(starts) == 3 * 10
    assert {(s.hour, s.minute) for s in starts} == {(h, m) for h in range(17, 22) for m in (0, 30)}
    # 17:00 local is 16:00 UTC before the change and 15:00 UTC after it.
    assert starts[0].astimezone(UTC).hour == 16 and starts[10].astimezone(UTC).hour == 15
    later = dinner_starts(terms, now=datetime(2027, 3, 27, 19, 10, tzinfo=UTC))
    assert later[0] == datetime(2027, 3, 27, 20, 30, tzinfo=BERLIN)  # only starts still ahead
    # A start inside the spring-forward gap does not exist and is left out.
    night = DinnerTerms(horizon_days=1, first_start="02:00", last_start="03:00")
    gap = dinner_starts(night, now=datetime(2027, 3, 27, 23, 0, tzinfo=UTC))
    assert [(s.hour, s.minute) for s in gap] == [(3, 0)]


def test_venues_search_filters_and_pages() -> None:
    catalogue = catalogue_default()
    cheap_safe = venues_search(
        catalogue, max_price_per_person_minor=2000, safe_for=["peanuts", "gluten"]
    )
    assert cheap_safe.total == len(cheap_safe.venues) > 0
    for venue in cheap_safe.venues:
        assert venue.price_per_person.amount_minor <= 2000
        assert {"peanuts", "gluten"} <= set(venue.safe_for)
    kreuzberg = venues_search(catalogue, neighbourhoods=["kreuzberg"], cuisines=["italian"])
    assert [v.id for v in kreuzberg.venues] == ["osteria-kanal"]
    first = venues_search(catalogue, limit=20)
    second = venues_search(catalogue, limit=20, offset=first.next_offset or 0)
    last = venues_search(catalogue, limit=20, offset=second.next_offset or 0)
    assert (first.total, first.next_offset, second.next_offset, last.next_offset) == (
        50,
        20,
        40,
        None,
    )
    assert len({v.id for v in first.venues + second.venues + last.venues}) == 50
