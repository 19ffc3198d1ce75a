"""The dinner domain as the reference negotiator sees it, and its planner (pure, no I/O).

Everything here is built from what the room hands the agent: the room's terms (trusted, from
the welcome and each context), the venue catalogue (trusted, the server's ``venues_search``
tool) and each owner's cleared vault items (the own owner's trusted, the other owner's
untrusted data that is only ever compared, never followed). Nothing is a module constant: a
room with another city, other venues or other hours plans the same way.

The planner keeps the issue's rule: **hard constraints filter, preferences only rank.**

* Hard, as far as each side's cleared items tell: both owners free for the whole dinner, the
  venue open for all of it on that local weekday with a table for the party, the price per
  person within each budget, the kitchen safe for every allergy, no disliked cuisine, travel
  within the limit for both.
* Rank: liked cuisines first (liked by both, then by one), then the shorter of the two longer
  trips. Ties are broken for the conversation's sake (times the peer is known to be free
  first, evenings near a time the peer declined last, then earlier, cheaper, by id), which
  never changes which plans count as best.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, time, timedelta
from typing import Any, Literal, TypeGuard
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

# The coarse reasons a side gives for turning a plan down, in the order it checks them.
Reason = Literal["time", "venue", "budget", "allergy", "cuisine", "distance"]
REASONS: tuple[Reason, ...] = ("time", "venue", "budget", "allergy", "cuisine", "distance")
WEEKDAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
MAX_ITEMS = 200  # per list (likes, allergies, busy windows): more is not a real owner's
MAX_VENUES = 2000
MAX_STRING_CHARS = 100
MAX_AMOUNT = 10_000_000
SLUG = re.compile(r"[a-z0-9][a-z0-9-]{0,62}")
CLOCK = re.compile(r"([01][0-9]|2[0-4]):([0-5][0-9])")
# Near a declined time: the same evening, this close. Calendars are busy in blocks, so the
# next proposal tries another evening first (a tie-break only; nothing is excluded by it).
NEAR_DECLINED = timedelta(hours=3)


def _is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _word(value: object) -> str | None:
    """A short string, normalised for case-insensitive comparison; else ``None``."""
    if not isinstance(value, str) or len(value) > MAX_STRING_CHARS:
        return None
    return value.strip().casefold() or None


def _minutes(clock: object) -> int | None:
    """``"HH:MM"`` as minutes after midnight (``"24:00"`` is 1440); else ``None``."""
    if not isinstance(clock, str) or (match := CLOCK.fullmatch(clock)) is None:
        return None
    value = int(match[1]) * 60 + int(match[2])
    return value if value <= 24 * 60 else None


def _zone(name: object) -> ZoneInfo | None:
    if not isinstance(name, str) or not name or len(name) > 64:
        return None
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return None


# =============================================================================================
# The room's terms
# =============================================================================================


@dataclass(frozen=True)
class Terms:
    """The room's charter parameters (defaults are the product's)."""

    zone: ZoneInfo = field(default_factory=lambda: ZoneInfo("UTC"))
    horizon_days: int = 14
    dinner_minutes: int = 90
    first_start: int = 17 * 60  # minutes after local midnight
    last_start: int = 21 * 60 + 30
    start_step_minutes: int = 30
    party_size: int = 2
    travel_limit_minutes: int = 45

    @property
    def dinner(self) -> timedelta:
        return timedelta(minutes=self.dinner_minutes)

    def starts(self, now: datetime) -> list[datetime]:
        """Every start time on the room's grid after ``now``, over ``horizon_days`` local days
        from today, in the room's time zone (wall-clock times, so daylight saving is kept; a
        time a spring-forward gap skips does not exist and is left out)."""
        today = now.astimezone(self.zone).date()
        starts = []
        for offset in range(self.horizon_days):
            day = today + timedelta(days=offset)
            for minute in range(self.first_start, self.last_start + 1, self.start_step_minutes):
                start = datetime.combine(day, time(minute // 60, minute % 60), tzinfo=self.zone)
                if self.exists(start) and now < start:
                    starts.append(start)
        return starts

    def exists(self, local: datetime) -> bool:
        """Whether a wall-clock time survives a round trip through UTC (not in a DST gap)."""
        back = local.astimezone(UTC).astimezone(self.zone)
        return back.replace(tzinfo=None) == local.replace(tzinfo=None)

    def within_horizon(self, start: datetime, now: datetime) -> bool:
        today = now.astimezone(self.zone).date()
        return now < start and start.astimezone(self.zone).date() < today + timedelta(
            days=self.horizon_days
        )

    def on_grid(self, start: datetime) -> bool:
        local = start.astimezone(self.zone)
        minute = local.hour * 60 + local.minute
        return (
            local.second == 0
            and self.first_start <= minute <= self.last_start
            and (minute - self.first_start) % self.start_step_minutes == 0
        )


def terms_from(raw: object) -> Terms | None:
    """The terms a welcome or context carries; ``None`` if absent or not a dinner room's."""
    if not isinstance(raw, Mapping):
        return None
    zone = _zone(raw.get("time_zone"))
    first, last = _minutes(raw.get("first_start")), _minutes(raw.get("last_start"))
    numbers = {
        name: raw.get(name)
        for name in (
            "horizon_days",
            "dinner_minutes",
            "start_step_minutes",
            "party_size",
            "travel_limit_minutes",
        )
    }
    if zone is None or first is None or last is None or first > last:
        return None
    if not all(_is_int(v) and 0 < v <= 10_000 for v in numbers.values()):
        return None
    return Terms(
        zone=zone,
        horizon_days=numbers["horizon_days"],  # type: ignore[arg-type]
        dinner_minutes=numbers["dinner_minutes"],  # type: ignore[arg-type]
        first_start=first,
        last_start=last,
        start_step_minutes=numbers["start_step_minutes"],  # type: ignore[arg-type]
        party_size=numbers["party_size"],  # type: ignore[arg-type]
        travel_limit_minutes=numbers["travel_limit_minutes"],  # type: ignore[arg-type]
    )


# =============================================================================================
# The catalogue (from the server's venues_search tool)
# =============================================================================================


@dataclass(frozen=True)
class Venue:
    id: str
    name: str
    cuisine: str
    neighbourhood: str
    price_minor: int  # per person
    currency: str
    # Opening intervals per weekday (0 = Monday), minutes after local midnight.
    hours: tuple[tuple[tuple[int, int], ...], ...]
    safe_for: frozenset[str]
    table_sizes: tuple[int, ...]

    def open_for(self, start: datetime, length: timedelta, zone: ZoneInfo) -> bool:
        """Whether one opening interval of the start's local weekday holds the whole dinner."""
        local = start.astimezone(zone)
        begin = local.hour * 60 + local.minute
        end_local = (start + length).astimezone(zone)
        if end_local.date() != local.date() and not (
            end_local.date() == local.date() + timedelta(days=1) and end_local.time() == time(0)
        ):
            return False
        # Wall-clock minutes: a dinner across a daylight-saving change is as long as it says.
        end = begin + int(length.total_seconds() // 60)
        return any(o <= begin and end <= c for o, c in self.hours[local.weekday()])

    def seats(self, party: int) -> bool:
        return any(size >= party for size in self.table_sizes)


def cuisine_words(cuisine: str) -> str:
    """A catalogue's cuisine (a lowercase slug: ``italian``, ``middle-eastern``) as a message
    names it: ``Italian``, ``Middle Eastern`` (most are nationalities, written capitalised)."""
    return " ".join(word.capitalize() for word in cuisine.split("-"))


@dataclass(frozen=True)
class City:
    name: str
    local_minutes: int
    # casefolded id or display name -> neighbourhood id
    aliases: Mapping[str, str]
    names: Mapping[str, str]  # id -> display name
    travel: Mapping[frozenset[str], int]

    def neighbourhood(self, name: str | None) -> str | None:
        return None if name is None else self.aliases.get(name.casefold())

    def minutes(self, a: str, b: str) -> int | None:
        if a == b:
            return self.local_minutes
        return self.travel.get(frozenset((a, b)))


@dataclass(frozen=True)
class Catalogue:
    city: City
    venues: tuple[Venue, ...]

    def venue(self, venue_id: str) -> Venue | None:
        return next((v for v in self.venues if v.id == venue_id), None)


def _merged(intervals: list[tuple[int, int]]) -> tuple[tuple[int, int], ...]:
    """Opening intervals with those that touch or overlap joined (a dinner may span them)."""
    merged: list[tuple[int, int]] = []
    for opens, closes in sorted(intervals):
        if merged and opens <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], closes))
        else:
            merged.append((opens, closes))
    return tuple(merged)


def _venue(raw: object, neighbourhoods: Mapping[str, str]) -> Venue | None:
    if not isinstance(raw, Mapping):
        return None
    price = raw.get("price_per_person")
    hours = raw.get("hours")
    tables = raw.get("table_sizes")
    safe = raw.get("safe_for")
    strings = [raw.get(k) for k in ("id", "name", "cuisine", "neighbourhood")]
    if not all(isinstance(s, str) and 0 < len(s) <= 200 for s in strings):
        return None
    venue_id, name, cuisine, neighbourhood = (str(s) for s in strings)
    if not (SLUG.fullmatch(venue_id) and neighbourhood in neighbourhoods):
        return None
    if not isinstance(price, Mapping) or not isinstance(hours, Mapping):
        return None
    amount, currency = price.get("amount_minor"), price.get("currency")
    if not (_is_int(amount) and 0 <= amount <= MAX_AMOUNT and isinstance(currency, str)):
        return None
    if not isinstance(tables, list) or not all(_is_int(t) and t > 0 for t in tables):
        return None
    if not isinstance(safe, list) or not all(isinstance(a, str) for a in safe):
        return None
    week: list[tuple[tuple[int, int], ...]] = []
    for day in WEEKDAYS:
        intervals = hours.get(day, [])
        if not isinstance(intervals, list):
            return None
        parsed = []
        for interval in intervals:
            if not isinstance(interval, Mapping):
                return None
            o, c = _minutes(interval.get("opens")), _minutes(interval.get("closes"))
            if o is None or c is None or c <= o:
                return None
            parsed.append((o, c))
        week.append(_merged(parsed))
    return Venue(
        id=venue_id,
        name=name,
        cuisine=cuisine.casefold(),
        neighbourhood=neighbourhood,
        price_minor=amount,
        currency=currency,
        hours=tuple(week),
        safe_for=frozenset(a.casefold() for a in safe),
        table_sizes=tuple(tables),
    )


def catalogue_from(outputs: Sequence[Mapping[str, Any]]) -> Catalogue | None:
    """The catalogue from one or more pages of ``venues_search`` output; ``None`` if the city
    is unreadable. A venue entry that is not well-formed is left out, never guessed at."""
    if not outputs:
        return None
    city_raw = outputs[0].get("city")
    if not isinstance(city_raw, Mapping):
        return None
    names: dict[str, str] = {}
    for n in city_raw.get("neighbourhoods") or []:
        if (
            isinstance(n, Mapping)
            and isinstance(n.get("id"), str)
            and isinstance(n.get("name"), str)
        ):
            names[n["id"]] = n["name"]
    travel: dict[frozenset[str], int] = {}
    for t in city_raw.get("travel_minutes") or []:
        if isinstance(t, Mapping) and t.get("from") in names and t.get("to") in names:
            minutes = t.get("minutes")
            if _is_int(minutes) and minutes >= 0:
                travel[frozenset((t["from"], t["to"]))] = minutes
    local = city_raw.get("local_minutes", 0)
    if not names or not _is_int(local):
        return None
    aliases = {key.casefold(): nid for nid, name in names.items() for key in (nid, name)}
    venues: dict[str, Venue] = {}
    for page in outputs:
        for raw in page.get("venues") or []:
            venue = _venue(raw, names)
            if venue is not None and len(venues) < MAX_VENUES:
                venues.setdefault(venue.id, venue)
    city = City(
        name=str(city_raw.get("name", "")),
        local_minutes=local,
        aliases=aliases,
        names=names,
        travel=travel,
    )
    return Catalogue(city=city, venues=tuple(venues.values()))


# =============================================================================================
# What one owner's cleared items say
# =============================================================================================


@dataclass(frozen=True)
class Budget:
    """The most one owner will spend on their own dinner (per person), minor units."""

    currency: str
    maximum: int


@dataclass(frozen=True)
class Availability:
    """Free/busy inside a window (unix seconds): busy windows only, never what they are."""

    start: int
    until: int
    busy: tuple[tuple[int, int], ...]

    def free(self, start: datetime, end: datetime) -> bool:
        s, e = int(start.timestamp()), int(end.timestamp())
        return self.start <= s and e <= self.until and not self.clashes(start, end)

    def clashes(self, start: datetime, end: datetime) -> bool:
        s, e = int(start.timestamp()), int(end.timestamp())
        return any(b_start < e and s < b_end for b_start, b_end in self.busy)


@dataclass(frozen=True)
class OwnerFacts:
    """What one side's cleared items say; ``None`` where nothing was cleared (or it was not in
    the expected shape, which counts the same)."""

    likes: frozenset[str] | None = None
    dislikes: frozenset[str] | None = None
    allergies: frozenset[str] | None = None
    budget: Budget | None = None
    availability: Availability | None = None
    home: str | None = None  # the neighbourhood's name as cleared

    def visible(self) -> str:
        """Which kinds of facts are known (names only, never values), for the progress log."""
        known = {
            "availability": self.availability,
            "budget": self.budget,
            "food likes": self.likes,
            "food dislikes": self.dislikes,
            "allergies": self.allergies,
            "neighbourhood": self.home,
        }
        return ", ".join(name for name, value in known.items() if value is not None) or "nothing"


def _words(contents: Iterable[Mapping[str, Any]]) -> frozenset[str] | None:
    found: set[str] | None = None
    for content in contents:
        items = content.get("items")
        if not isinstance(items, list) or len(items) > MAX_ITEMS:
            continue
        found = found or set()
        found.update(w for w in map(_word, items) if w is not None)
    return None if found is None else frozenset(found)


def _budget(contents: Iterable[Mapping[str, Any]]) -> Budget | None:
    budgets = []
    for content in contents:
        currency, low, high = content.get("currency"), content.get("min"), content.get("max")
        if (
            isinstance(currency, str)
            and re.fullmatch(r"[A-Z]{3}", currency)
            and _is_int(low)
            and _is_int(high)
            and 0 <= low <= high <= 10**12
        ):
            budgets.append(Budget(currency, high))
    # Several budget items: the tightest one holds.
    return min(budgets, key=lambda b: b.maximum, default=None)


def _availability(contents: Iterable[Mapping[str, Any]]) -> Availability | None:
    windows: list[Availability] = []
    for content in contents:
        start, until, busy = content.get("from"), content.get("until"), content.get("busy")
        if not (_is_int(start) and _is_int(until) and start <= until):
            continue
        if not isinstance(busy, list) or len(busy) > 5000:
            continue
        pairs = [
            (pair[0], pair[1])
            for pair in busy
            if isinstance(pair, list | tuple)
            and len(pair) == 2
            and _is_int(pair[0])
            and _is_int(pair[1])
            and pair[0] < pair[1]
        ]
        if len(pairs) != len(busy):
            continue  # a half-readable calendar is not a calendar
        windows.append(Availability(start, until, tuple(pairs)))
    if not windows:
        return None
    # Several calendars: busy in any is busy; the window is what all of them cover.
    return Availability(
        max(w.start for w in windows),
        min(w.until for w in windows),
        tuple(sorted(pair for w in windows for pair in w.busy)),
    )


def _home(contents: Iterable[Mapping[str, Any]]) -> str | None:
    for content in contents:
        name = content.get("name")
        if isinstance(name, str) and 0 < len(name) <= MAX_STRING_CHARS:
            return name.strip()
    return None


def facts_from(items: Mapping[str, Sequence[Mapping[str, Any]]]) -> OwnerFacts:
    """One owner's facts from their cleared items' contents, by resource."""

    def valid(resource: str) -> list[Mapping[str, Any]]:
        return [c for c in items.get(resource, ()) if isinstance(c, Mapping)]

    return OwnerFacts(
        likes=_words(valid("food_likes")),
        dislikes=_words(valid("food_dislikes")),
        allergies=_words(valid("allergies")),
        budget=_budget(valid("budget")),
        availability=_availability(valid("availability")),
        home=_home(valid("neighbourhood")),
    )


# =============================================================================================
# Plans and the checks
# =============================================================================================


@dataclass(frozen=True)
class Plan:
    """One dinner: a venue at a start time (aware, in the room's time zone)."""

    venue: Venue
    start: datetime

    @property
    def key(self) -> tuple[str, datetime]:
        return (self.venue.id, self.start)


def time_reason(
    start: datetime, facts: OwnerFacts, *, terms: Terms, own: bool, now: datetime
) -> Reason | None:
    """``"time"`` if one owner cannot be at a dinner starting at ``start``, as far as
    ``facts`` tell. For the agent's own owner a free slot must be vouched for by the calendar
    it was given (a time outside it is not known to be free); for the other owner only a known
    clash rules a time out (they decline it otherwise)."""
    end = start + terms.dinner
    if not terms.within_horizon(start, now) or not terms.on_grid(start):
        return "time"
    if facts.availability is not None:
        if own and not facts.availability.free(start, end):
            return "time"
        if not own and facts.availability.clashes(start, end):
            return "time"
    return None


def venue_reason(
    venue: Venue, facts: OwnerFacts, *, terms: Terms, catalogue: Catalogue
) -> Reason | None:
    """The first of budget, allergy, cuisine and distance that rules ``venue`` out for one
    owner, as far as ``facts`` tell (the same at every time)."""
    if facts.budget is not None and (
        facts.budget.currency != venue.currency or venue.price_minor > facts.budget.maximum
    ):
        return "budget"
    if facts.allergies is not None and not facts.allergies <= venue.safe_for:
        return "allergy"
    if facts.dislikes is not None and venue.cuisine in facts.dislikes:
        return "cuisine"
    home = catalogue.city.neighbourhood(facts.home)
    if home is not None:
        minutes = catalogue.city.minutes(home, venue.neighbourhood)
        if minutes is None or minutes > terms.travel_limit_minutes:
            return "distance"
    return None


def first_failing(
    plan: Plan,
    facts: OwnerFacts,
    *,
    terms: Terms,
    catalogue: Catalogue,
    own: bool,
    now: datetime,
) -> Reason | None:
    """The first hard constraint ``plan`` breaks for one owner (in the order of ``REASONS``),
    as far as ``facts`` tell; ``None`` if it breaks none."""
    if time_reason(plan.start, facts, terms=terms, own=own, now=now) is not None:
        return "time"
    if not plan.venue.open_for(plan.start, terms.dinner, terms.zone):
        return "venue"
    if not plan.venue.seats(terms.party_size):
        return "venue"
    return venue_reason(plan.venue, facts, terms=terms, catalogue=catalogue)


@dataclass
class Knowledge:
    """What the conversation taught this side about the other owner, without any private
    fact: plans turned down (and why, coarsely), and plans the peer put forward itself."""

    excluded: set[tuple[str, datetime]] = field(default_factory=set)
    busy_starts: set[datetime] = field(default_factory=set)
    too_dear: dict[str, int] = field(default_factory=dict)  # currency -> lowest declined price
    unsafe: list[frozenset[str]] = field(default_factory=list)
    disliked: set[str] = field(default_factory=set)
    too_far: set[str] = field(default_factory=set)
    declined_times: list[datetime] = field(default_factory=list)
    peer_free: set[datetime] = field(default_factory=set)
    venue_refused: set[tuple[str, datetime]] = field(default_factory=set)

    def declined(self, plan: Plan, reason: Reason) -> None:
        """The peer turned ``plan`` down for ``reason``: rule out what that reason covers."""
        self.excluded.add(plan.key)
        venue = plan.venue
        if reason == "time":
            self.busy_starts.add(plan.start)
            self.declined_times.append(plan.start)
        elif reason == "budget":
            lowest = self.too_dear.get(venue.currency)
            self.too_dear[venue.currency] = min(lowest or venue.price_minor, venue.price_minor)
        elif reason == "allergy":
            self.unsafe.append(venue.safe_for)
        elif reason == "cuisine":
            self.disliked.add(venue.cuisine)
        elif reason == "distance":
            self.too_far.add(venue.neighbourhood)
        else:
            self.venue_refused.add(plan.key)

    def put_forward(self, plan: Plan) -> None:
        """The peer proposed ``plan``: its owner is free then, as far as its agent knows."""
        self.peer_free.add(plan.start)

    def venue_reason(self, venue: Venue) -> Reason | None:
        """Which of the peer's declines rules ``venue`` out at every time, if any."""
        limit = self.too_dear.get(venue.currency)
        if limit is not None and venue.price_minor >= limit:
            return "budget"
        if any(venue.safe_for <= unsafe for unsafe in self.unsafe):
            return "allergy"
        if venue.cuisine in self.disliked:
            return "cuisine"
        if venue.neighbourhood in self.too_far:
            return "distance"
        return None

    def rules_out(self, plan: Plan) -> bool:
        return (
            plan.key in self.excluded
            or plan.start in self.busy_starts
            or self.venue_reason(plan.venue) is not None
        )


@dataclass(frozen=True)
class Planner:
    """Plans for one side: its own owner's facts (trusted), what the other owner's slip
    cleared (data), the room's terms and the catalogue."""

    own: OwnerFacts
    peer: OwnerFacts
    terms: Terms
    catalogue: Catalogue

    def own_reason(self, plan: Plan, now: datetime) -> Reason | None:
        """Why this side's own owner could not accept ``plan`` (``None``: they can)."""
        return first_failing(
            plan, self.own, terms=self.terms, catalogue=self.catalogue, own=True, now=now
        )

    @property
    def ranks_for_both(self) -> bool:
        """Whether this side knows everything the ranking asks of both owners."""
        city = self.catalogue.city
        return (
            self.own.likes is not None
            and self.peer.likes is not None
            and all(city.neighbourhood(f.home) is not None for f in (self.own, self.peer))
        )

    def preference(self, plan: Plan) -> tuple[int, int]:
        """The ranking key (smaller is better): liked by both, one, none; then the longer of
        the two trips (as far as the homes are known)."""
        cuisine = plan.venue.cuisine
        likers = sum(1 for f in (self.own, self.peer) if f.likes and cuisine in f.likes)
        city = self.catalogue.city
        trips = [
            city.minutes(home, plan.venue.neighbourhood)
            for home in (city.neighbourhood(self.own.home), city.neighbourhood(self.peer.home))
            if home is not None
        ]
        return (-likers, max((t for t in trips if t is not None), default=0))

    def _stages(self, now: datetime, knowledge: Knowledge) -> list[tuple[int, Plan]]:
        """Every plan on the grid with the index in ``REASONS`` of the first constraint it
        breaks (``len(REASONS)`` when it breaks none), for either owner or the peer's
        declines. Checks are split by what they depend on, so each is made once."""
        none = len(REASONS)
        index = {reason: i for i, reason in enumerate(REASONS)}

        def stage(*reasons: Reason | None) -> int:
            return min((index[r] for r in reasons if r is not None), default=none)

        time_stage = {
            start: stage(
                time_reason(start, self.own, terms=self.terms, own=True, now=now),
                time_reason(start, self.peer, terms=self.terms, own=False, now=now),
                "time" if start in knowledge.busy_starts else None,
            )
            for start in self.terms.starts(now)
        }
        staged = []
        for venue in self.catalogue.venues:
            venue_stage = stage(
                venue_reason(venue, self.own, terms=self.terms, catalogue=self.catalogue),
                venue_reason(venue, self.peer, terms=self.terms, catalogue=self.catalogue),
                knowledge.venue_reason(venue),
                None if venue.seats(self.terms.party_size) else "venue",
            )
            for start, at in time_stage.items():
                plan = Plan(venue, start)
                found = min(at, venue_stage)
                if found > index["venue"] and (
                    plan.key in knowledge.venue_refused
                    or not venue.open_for(start, self.terms.dinner, self.terms.zone)
                ):
                    found = index["venue"]
                if found == none and plan.key in knowledge.excluded:
                    found = index["time"]  # declined as a whole; its time is the safe guess
                staged.append((found, plan))
        return staged

    def candidates(self, now: datetime, knowledge: Knowledge) -> list[Plan]:
        """Every plan this side can put forward, best first: the whole horizon, every start,
        every venue, less what either owner's known facts or the peer's declines rule out."""
        plans = [plan for found, plan in self._stages(now, knowledge) if found == len(REASONS)]
        return sorted(plans, key=lambda p: self._order(p, knowledge))

    def _order(self, plan: Plan, knowledge: Knowledge) -> tuple[Any, ...]:
        near_declined = any(
            abs(plan.start - declined) < NEAR_DECLINED for declined in knowledge.declined_times
        )
        return (
            self.preference(plan),
            plan.start not in knowledge.peer_free,
            near_declined,
            plan.start,
            plan.venue.price_minor,
            plan.venue.id,
        )

    def why_none(self, now: datetime, knowledge: Knowledge) -> Reason:
        """The coarse reason this side has no plan left: applying the constraints in the
        order of ``REASONS``, the one after which nothing remains."""
        stages = [found for found, _ in self._stages(now, knowledge)]
        last = max(stages, default=0)
        return REASONS[min(last, len(REASONS) - 1)]
