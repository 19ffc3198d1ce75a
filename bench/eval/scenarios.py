"""Generated dinner scenarios: two realistic owners over a venue catalogue, from a seed.

Each owner gets two weeks of calendar (work days, evening plans, weekends), a per-person
budget in whole units, liked and disliked cuisines, allergies from the catalogue's
vocabulary and a home neighbourhood; and a slip that shares each kind with the other agent
or withholds it (the budget also as a rounded band). The same seed always gives the same
scenario relative to its anchor time, so runs compare.

Nothing here looks at the negotiator: feasibility and the best plan are decided afterwards,
exhaustively, by :mod:`bench.eval.truth` from the server's own catalogue checks.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from typing import Any, Literal
from zoneinfo import ZoneInfo

from dining import ALLERGENS, Catalogue, DinnerTerms, terms_default

Role = Literal["host", "guest"]
Sharing = Literal["shared", "band", "withheld"]
Mode = Literal["ordinary", "crowded", "tight", "fussy"]
MODES: tuple[Mode, ...] = ("ordinary", "crowded", "tight", "fussy")
KINDS = ("availability", "budget", "food_likes", "food_dislikes", "allergies", "neighbourhood")
SCOPES = {
    "availability": "free_busy_14d",
    "budget": "range",
    "food_likes": "list",
    "food_dislikes": "list",
    "allergies": "list",
    "neighbourhood": "name",
}
# Seeds the negotiator was developed and tuned against; figures are reported on other seeds.
TUNING_SEEDS = range(0, 100)
HELD_OUT_SEEDS = range(1000, 1200)


@dataclass(frozen=True)
class Owner:
    """One generated owner: the truth about them, and what their slip shares with the peer."""

    busy: tuple[tuple[int, int], ...]  # unix seconds, sorted
    currency: str
    budget_min: int  # per person, minor units
    budget_max: int
    likes: tuple[str, ...]
    dislikes: tuple[str, ...]
    allergies: tuple[str, ...]
    home: str  # neighbourhood id
    sharing: dict[str, Sharing]  # kind -> shared / band (budget only) / withheld

    def vault(self, catalogue: Catalogue) -> list[dict[str, Any]]:
        """The owner's vault items, in the vault's own formats."""
        names = {n.id: n.name for n in catalogue.city.neighbourhoods}
        items: list[dict[str, Any]] = [
            {
                "kind": "availability",
                "timezone": catalogue.city.time_zone,
                "busy": [{"start": s, "end": e, "title": "Busy"} for s, e in self.busy],
            },
            {
                "kind": "budget",
                "currency": self.currency,
                "minimum": self.budget_min,
                "maximum": self.budget_max,
            },
            {"kind": "neighbourhood", "name": names[self.home]},
        ]
        for kind, words in (
            ("food_likes", self.likes),
            ("food_dislikes", self.dislikes),
            ("allergies", self.allergies),
        ):
            if words:
                items.append({"kind": kind, "items": list(words)})
        return items

    def slip_records(self, *, hosting: bool) -> list[dict[str, Any]]:
        """Capability records: every kind to the own agent, shared kinds to the peer too; the
        host's agent may book (within budget without asking, at most three times)."""
        records = []
        for kind in KINDS:
            sharing = self.sharing[kind]
            scope = SCOPES[kind]
            if sharing == "shared":
                records.append(_record(kind, "disclose", scope, "both"))
                continue
            # One record per resource and operation: the own agent reads, the peer is told.
            records.append(_record(kind, "read", scope, "own_agent"))
            if sharing == "band":
                records.append(_record(kind, "disclose", "band", "peer_agent"))
        if hosting:
            records.append(
                {
                    "resource": "tool:book_table",
                    "operation": "act",
                    "approval": "none",
                    "max_uses": 3,
                }
            )
        return records

    def withheld(self) -> tuple[str, ...]:
        """The kinds whose exact values the other side must never read in a message."""
        return tuple(k for k, s in self.sharing.items() if s != "shared")


def _record(resource: str, operation: str, scope: str, recipient: str) -> dict[str, Any]:
    return {
        "resource": resource,
        "operation": operation,
        "scope": scope,
        "recipient": recipient,
        "max_uses": 200,
        "approval": "none",
    }


@dataclass(frozen=True)
class Scenario:
    seed: int
    anchor: datetime  # "now" the calendars are built around
    terms: DinnerTerms
    host: Owner
    guest: Owner
    mode: Mode

    def owner(self, role: Role) -> Owner:
        return self.host if role == "host" else self.guest


def _at(day: date, clock: time, zone: ZoneInfo) -> int:
    return int(datetime.combine(day, clock, tzinfo=zone).timestamp())


def _minutes(rng: random.Random, low: int, high: int, step: int = 30) -> time:
    value = rng.randrange(low, high + 1, step)
    return time(value // 60, value % 60)


def _calendar(
    rng: random.Random, today: date, days: int, zone: ZoneInfo, *, crowded: bool
) -> list[tuple[int, int]]:
    """Two weeks of a working life: office hours on weekdays, an evening plan on many days,
    something on most weekend days. The first and last day's evenings are taken, so nothing
    depends on the hour the run starts or on the edge of the free/busy window."""
    busy: list[tuple[int, int]] = []
    evening_chance = rng.uniform(0.25, 0.7)
    for offset in range(days + 1):
        day = today + timedelta(days=offset)
        if offset == 0 or offset >= days - 1:
            busy.append((_at(day, time(16, 0), zone), _at(day, time(23, 59), zone)))
            continue
        if day.weekday() < 5:
            busy.append(
                (
                    _at(day, _minutes(rng, 8 * 60, 10 * 60), zone),
                    _at(day, _minutes(rng, 16 * 60, 19 * 60), zone),
                )
            )
        if crowded and rng.random() < 0.8:  # booked out: the whole evening is taken
            busy.append((_at(day, time(16, 0), zone), _at(day, time(23, 59), zone)))
        elif rng.random() < evening_chance:
            start = _minutes(rng, 17 * 60, 21 * 60)
            length = timedelta(minutes=rng.randrange(60, 241, 30))
            begin = datetime.combine(day, start, tzinfo=zone)
            busy.append((int(begin.timestamp()), int((begin + length).timestamp())))
    return sorted(busy)


def _owner(
    rng: random.Random, catalogue: Catalogue, today: date, terms: DinnerTerms, mode: Mode
) -> Owner:
    zone = ZoneInfo(catalogue.city.time_zone)
    cuisines = list(catalogue.cuisines)
    likes = rng.sample(cuisines, rng.randint(1, 3))
    rest = [c for c in cuisines if c not in likes]
    fussy = mode == "fussy"
    dislikes = rng.sample(rest, rng.choice((6, 8, 10) if fussy else (0, 0, 1, 1, 2, 3)))
    allergies = rng.sample(
        sorted(ALLERGENS), rng.choice((4, 5, 6) if fussy else (0, 0, 0, 1, 1, 2))
    )
    if mode == "tight":
        maximum = rng.choice((10, 15, 15, 20))
    elif rng.random() < 0.15:
        maximum = rng.randrange(20, 36, 5)
    else:
        maximum = rng.randrange(30, 121, 5)
    minimum = max(10, maximum - rng.randrange(10, 51, 5))
    currency = catalogue.venues[0].price_per_person.currency
    sharing: dict[str, Sharing] = {}
    for kind in KINDS:
        roll = rng.random()
        if kind == "budget":
            sharing[kind] = "shared" if roll < 0.45 else "band" if roll < 0.75 else "withheld"
        else:
            sharing[kind] = "shared" if roll < 0.75 else "withheld"
    return Owner(
        busy=tuple(_calendar(rng, today, terms.horizon_days, zone, crowded=mode == "crowded")),
        currency=currency,
        budget_min=minimum * 100,
        budget_max=maximum * 100,
        likes=tuple(likes),
        dislikes=tuple(dislikes),
        allergies=tuple(allergies),
        home=rng.choice([n.id for n in catalogue.city.neighbourhoods]),
        sharing=sharing,
    )


def scenario_generate(seed: int, *, catalogue: Catalogue, anchor: datetime) -> Scenario:
    """The scenario of ``seed`` over ``catalogue``, its calendars built around ``anchor``."""
    rng = random.Random(seed)
    terms = terms_default(catalogue.id)
    today = anchor.astimezone(ZoneInfo(terms.time_zone)).date()
    # Most owners are ordinary; some are hard to please in one way, so that a share of the
    # scenarios has no plan at all (which ones is for the ground truth to find out).
    mode: Mode = rng.choices(MODES, weights=(50, 20, 15, 15))[0]
    host = _owner(rng, catalogue, today, terms, mode)
    guest = _owner(rng, catalogue, today, terms, mode)
    return Scenario(seed=seed, anchor=anchor, terms=terms, host=host, guest=guest, mode=mode)
