"""A dinner room's terms: the charter's parameters, each configurable per room.

JSON form (stored on the room, sent to agents)::

    {"catalogue": "berlin-dining", "time_zone": "Europe/Berlin", "horizon_days": 14,
     "dinner_minutes": 90, "first_start": "17:00", "last_start": "21:30",
     "start_step_minutes": 30, "party_size": 2, "travel_limit_minutes": 45}
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, time, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from dining.formats import OpensAt, Slug, clock_minutes, zone_check
from dining.loading import CatalogueInvalid
from dining.registry import CatalogueUnknown, catalogue_default, catalogue_get

FIELD_WORDS = {
    "catalogue": "Venue catalogue",
    "time_zone": "Time zone",
    "horizon_days": "Horizon (days)",
    "dinner_minutes": "Dinner length (minutes)",
    "first_start": "First start time",
    "last_start": "Last start time",
    "start_step_minutes": "Minutes between start times",
    "party_size": "Party size",
    "travel_limit_minutes": "Travel limit (minutes)",
}


class DinnerTerms(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    catalogue: Slug = "berlin-dining"
    time_zone: str = "Europe/Berlin"
    horizon_days: int = Field(default=14, ge=1, le=60)
    dinner_minutes: int = Field(default=90, ge=30, le=300)
    first_start: OpensAt = "17:00"
    last_start: OpensAt = "21:30"
    start_step_minutes: int = Field(default=30, ge=5, le=180)
    party_size: int = Field(default=2, ge=1, le=20)
    travel_limit_minutes: int = Field(default=45, ge=0, le=240)

    @field_validator("time_zone")
    @classmethod
    def _zone(cls, value: str) -> str:
        return zone_check(value)

    @model_validator(mode="after")
    def _window(self) -> DinnerTerms:
        if clock_minutes(self.last_start) < clock_minutes(self.first_start):
            raise ValueError(
                f"the last start time ({self.last_start}) is before the first ({self.first_start})"
            )
        return self

    def as_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


class TermsInvalid(ValueError):
    """Terms that cannot be used; ``problems`` are sentences a person can act on."""

    def __init__(self, problems: tuple[str, ...]) -> None:
        super().__init__(" ".join(problems))
        self.problems = problems


def terms_default(catalogue_id: str | None = None) -> DinnerTerms:
    """The default terms for a catalogue (the deployment's default one when None), in that
    catalogue city's time zone."""
    catalogue = catalogue_default() if catalogue_id is None else catalogue_get(catalogue_id)
    return DinnerTerms(catalogue=catalogue.id, time_zone=catalogue.city.time_zone)


def terms_parse(data: Mapping[str, Any]) -> DinnerTerms:
    """Terms from their JSON form, missing fields taking their defaults (the time zone: the
    catalogue city's). The catalogue must be registered. Raises ``TermsInvalid``."""
    given = dict(data)
    catalogue_id = given.get("catalogue")
    try:
        catalogue = (
            catalogue_default() if catalogue_id is None else catalogue_get(str(catalogue_id))
        )
    except CatalogueUnknown as unknown:
        raise TermsInvalid((str(unknown),)) from None
    except CatalogueInvalid:
        raise TermsInvalid(("That venue catalogue cannot be read right now.",)) from None
    given.setdefault("catalogue", catalogue.id)
    given.setdefault("time_zone", catalogue.city.time_zone)
    try:
        return DinnerTerms.model_validate(given)
    except ValidationError as exc:
        problems = []
        for error in exc.errors(include_url=False):
            name = str(error["loc"][0]) if error["loc"] else ""
            label = FIELD_WORDS.get(name, name or "Terms")
            message = str(error["msg"]).removeprefix("Value error, ")
            kind, limits = error["type"], error.get("ctx", {})
            if kind == "extra_forbidden":
                message = "is not one of the terms"
            elif kind == "string_pattern_mismatch":
                message = 'must be a time "HH:MM" (24-hour clock)'
            elif kind == "greater_than_equal":
                message = f"must be at least {limits.get('ge')}"
            elif kind == "less_than_equal":
                message = f"must be at most {limits.get('le')}"
            elif kind in ("int_type", "int_parsing", "int_from_float"):
                message = "must be a whole number"
            elif kind == "string_type":
                message = "must be text"
            problems.append(
                f"{label}: {message}."
                if label != "Terms"
                else f"{message[:1].upper()}{message[1:]}."
            )
        raise TermsInvalid(tuple(problems)) from None


def dinner_starts(terms: DinnerTerms, *, now: datetime) -> list[datetime]:
    """Every allowed start after ``now``, over ``horizon_days`` local days starting today, in
    the terms' time zone (aware datetimes). Wall-clock starts that a DST change skips do not
    exist and are left out; a repeated hour is taken once (its first occurrence)."""
    zone = ZoneInfo(terms.time_zone)
    today = now.astimezone(zone).date()
    first, last = clock_minutes(terms.first_start), clock_minutes(terms.last_start)
    starts: list[datetime] = []
    for offset in range(terms.horizon_days):
        day = today + timedelta(days=offset)
        for minute in range(first, last + 1, terms.start_step_minutes):
            local = datetime.combine(day, time(minute // 60, minute % 60), tzinfo=zone)
            # A time inside a spring-forward gap does not survive a round trip through UTC.
            if local.astimezone(ZoneInfo("UTC")).astimezone(zone).replace(
                tzinfo=None
            ) != local.replace(tzinfo=None):
                continue
            if local > now:
                starts.append(local)
    return starts
