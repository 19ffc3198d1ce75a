"""The file formats: a city (neighbourhoods and travel minutes) and a venue catalogue.

Pydantic models, frozen and closed (``extra="forbid"``), validated strictly from JSON: an
integer is never a string or a float. ``docs/schemas/city.schema.json`` and
``docs/schemas/venue-catalogue.schema.json`` are generated from these models. Checks that need
more than one file (a venue's neighbourhood exists in its city) live in ``dining.loading``.
"""

from __future__ import annotations

from collections import Counter
from itertools import combinations, pairwise
from typing import Annotated, Literal, get_args
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    field_validator,
    model_validator,
)

# What a kitchen can be safe for. Owners' allergies (the vault) use the same words.
Allergen = Literal[
    "peanuts",
    "tree-nuts",
    "shellfish",
    "fish",
    "gluten",
    "milk",
    "eggs",
    "soy",
    "sesame",
    "mustard",
    "celery",
    "sulphites",
    "lupin",
]
ALLERGENS: tuple[str, ...] = get_args(Allergen)
WEEKDAYS: tuple[str, ...] = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
Currency = Literal["EUR", "USD", "GBP", "CHF", "CAD", "AUD", "JPY", "SEK", "NOK", "DKK"]
Slug = Annotated[str, StringConstraints(pattern=r"^[a-z0-9][a-z0-9-]{0,62}$")]
DisplayName = Annotated[
    str, StringConstraints(min_length=1, max_length=120, pattern=r"^[^\x00-\x1f]+$")
]
# Local wall-clock time "HH:MM"; "24:00" only as a closing time (the end of the day).
OpensAt = Annotated[str, StringConstraints(pattern=r"^([01][0-9]|2[0-3]):[0-5][0-9]$")]
ClosesAt = Annotated[str, StringConstraints(pattern=r"^(([01][0-9]|2[0-3]):[0-5][0-9]|24:00)$")]
MAX_PRICE_MINOR = 1_000_000  # 10,000.00 per person: far above any dinner, far below 2^53


def clock_minutes(value: str) -> int:
    """Minutes since local midnight of an "HH:MM" time ("24:00" is 1440)."""
    hours, minutes = value.split(":")
    return int(hours) * 60 + int(minutes)


def zone_check(value: str) -> str:
    """``value`` if it names an IANA time zone this machine knows, else ValueError in words."""
    try:
        ZoneInfo(value)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"{value!r} is not an IANA time zone (such as Europe/Berlin)") from None
    return value


class _Format(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, populate_by_name=True)


# --- the city ----------------------------------------------------------------------------------


class Neighbourhood(_Format):
    id: Slug
    name: DisplayName


class TravelEntry(_Format):
    """Minutes between two neighbourhoods, either way (one entry per unordered pair)."""

    from_: Slug = Field(alias="from")
    to: Slug
    minutes: int = Field(ge=1, le=600)

    @model_validator(mode="after")
    def _distinct(self) -> TravelEntry:
        if self.from_ == self.to:
            raise ValueError(f"travel from {self.to!r} to itself is local_minutes, not an entry")
        return self


class City(_Format):
    id: Slug
    name: DisplayName
    time_zone: str = Field(description="IANA time zone of the city, such as Europe/Berlin.")
    local_minutes: int = Field(ge=0, le=120, description="Travel within one neighbourhood.")
    neighbourhoods: list[Neighbourhood] = Field(min_length=1, max_length=200)
    travel_minutes: list[TravelEntry]

    @field_validator("time_zone")
    @classmethod
    def _zone(cls, value: str) -> str:
        return zone_check(value)

    @model_validator(mode="after")
    def _complete(self) -> City:
        ids = [n.id for n in self.neighbourhoods]
        doubled = sorted(i for i, n in Counter(ids).items() if n > 1)
        if doubled:
            raise ValueError(
                f"neighbourhood ids must be unique; listed twice: {', '.join(doubled)}"
            )
        known = set(ids)
        seen: dict[frozenset[str], int] = {}
        for index, entry in enumerate(self.travel_minutes):
            for end in (entry.from_, entry.to):
                if end not in known:
                    raise ValueError(
                        f"travel_minutes[{index}] names {end!r}, which is not one of the "
                        "city's neighbourhoods"
                    )
            pair = frozenset((entry.from_, entry.to))
            if pair in seen:
                raise ValueError(
                    f"travel_minutes[{index}] repeats {entry.from_} - {entry.to} (first given "
                    f"at travel_minutes[{seen[pair]}]); give each pair once"
                )
            seen[pair] = index
        missing = [f"{a} - {b}" for a, b in combinations(ids, 2) if frozenset((a, b)) not in seen]
        if missing:
            shown = ", ".join(missing[:5]) + (
                f" and {len(missing) - 5} more" if len(missing) > 5 else ""
            )
            raise ValueError(f"travel_minutes has no entry for {shown}; every pair needs one")
        return self

    def travel(self, a: str, b: str) -> int:
        """Minutes from neighbourhood ``a`` to ``b`` (KeyError for an unknown one)."""
        if a == b:
            if a not in {n.id for n in self.neighbourhoods}:
                raise KeyError(a)
            return self.local_minutes
        for entry in self.travel_minutes:
            if {entry.from_, entry.to} == {a, b}:
                return entry.minutes
        raise KeyError(f"{a} - {b}")


# --- the venue catalogue -----------------------------------------------------------------------


class Price(_Format):
    amount_minor: int = Field(ge=0, le=MAX_PRICE_MINOR, description="Integer minor units.")
    currency: Currency


class OpeningInterval(_Format):
    opens: OpensAt
    closes: ClosesAt

    @model_validator(mode="after")
    def _ordered(self) -> OpeningInterval:
        if clock_minutes(self.closes) <= clock_minutes(self.opens):
            raise ValueError(
                f"closes ({self.closes}) must be after opens ({self.opens}); a kitchen open past "
                "midnight is two intervals on two days"
            )
        return self


def _day_check(intervals: list[OpeningInterval], day: str) -> list[OpeningInterval]:
    ordered = sorted(intervals, key=lambda i: clock_minutes(i.opens))
    for earlier, later in pairwise(ordered):
        if clock_minutes(later.opens) < clock_minutes(earlier.closes):
            raise ValueError(
                f"{day}: {earlier.opens}-{earlier.closes} and {later.opens}-{later.closes} overlap"
            )
    return intervals


DayHours = Annotated[list[OpeningInterval], Field(max_length=6)]


class WeeklyHours(_Format):
    """Opening intervals per local weekday; ``[]`` is a closed day. All seven are required."""

    mon: DayHours
    tue: DayHours
    wed: DayHours
    thu: DayHours
    fri: DayHours
    sat: DayHours
    sun: DayHours

    @model_validator(mode="after")
    def _no_overlap(self) -> WeeklyHours:
        for day in WEEKDAYS:
            _day_check(getattr(self, day), day)
        return self

    def on(self, weekday: int) -> list[OpeningInterval]:
        """The intervals of ``weekday`` (0 = Monday, as ``datetime.weekday()``)."""
        intervals: list[OpeningInterval] = getattr(self, WEEKDAYS[weekday])
        return intervals


class Venue(_Format):
    id: Slug
    name: DisplayName
    cuisine: Slug
    neighbourhood: Slug
    price_per_person: Price
    hours: WeeklyHours
    safe_for: list[Allergen] = Field(
        description="Allergens the kitchen can serve safely; anything not listed is NOT safe."
    )
    table_sizes: list[int] = Field(min_length=1, max_length=20)

    @field_validator("safe_for")
    @classmethod
    def _no_repeat(cls, value: list[str]) -> list[str]:
        if len(set(value)) != len(value):
            raise ValueError("safe_for lists an allergen twice")
        return value

    @field_validator("table_sizes")
    @classmethod
    def _sizes(cls, value: list[int]) -> list[int]:
        if any(size < 1 or size > 40 for size in value):
            raise ValueError("table sizes are between 1 and 40 seats")
        if len(set(value)) != len(value):
            raise ValueError("table_sizes lists a size twice")
        return value


class VenueCatalogueFile(_Format):
    """A venue catalogue as stored: its city is another file, named relative to this one."""

    id: Slug
    name: DisplayName
    city: str = Field(
        min_length=1, max_length=500, description="Path of the city file, relative to this file."
    )
    venues: list[Venue] = Field(min_length=1, max_length=5_000)

    @model_validator(mode="after")
    def _unique(self) -> VenueCatalogueFile:
        ids = [v.id for v in self.venues]
        doubled = sorted(i for i, n in Counter(ids).items() if n > 1)
        if doubled:
            raise ValueError(f"venue ids must be unique; listed twice: {', '.join(doubled)}")
        return self


def format_schemas() -> dict[str, dict[str, object]]:
    """Published JSON Schemas of the two file formats, keyed by file name in docs/schemas."""
    city = City.model_json_schema(by_alias=True)
    city["title"] = "Synapsia city file"
    catalogue = VenueCatalogueFile.model_json_schema(by_alias=True)
    catalogue["title"] = "Synapsia venue catalogue"
    return {"city.schema.json": city, "venue-catalogue.schema.json": catalogue}
