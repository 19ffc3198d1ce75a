"""The deterministic reference negotiator: plans a dinner for two from what its context holds.

    python -m agents.negotiator --url ws://127.0.0.1:8000/ws/rooms/<room-id>/ --token syn_agent_...

Two copies of it, one per owner, agree on a venue from the public list (``agents/venues.py``)
and an evening, and the host books it. It uses only the SDK (no server code), and only what
each turn's context actually holds: its own owner's cleared items (trusted) and the other
owner's items cleared for it (untrusted data: numbers are compared, strings are compared
case-insensitively to the venue list's cuisines and allergens, nothing else).

The conversation is a strict line grammar (see ``docs/agents.md``): the first line of every
message is machine-readable, the rest a short sentence for the humans watching. Peer text is
parsed only by the full-match regular expressions below; anything else is ignored. A peer
message can only pick which of *this* side's own validated candidates is discussed: the venue,
slot, price and booking arguments always come from this side's plan and venue list.

Exit codes of the CLI: 0 booked or agreed, 1 no deal or failed, 2 refused by the server.
"""

from __future__ import annotations

import asyncio
import logging
import re
import sys
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime, time, timedelta
from typing import Any, Literal, TypeGuard

from agents.cli import REFUSED, in_room, room_args, room_arguments
from agents.client import (
    FINAL_CLOSE_CODES,
    ActionOutcome,
    FrameRefusedError,
    RoomClient,
    RoomClosedError,
    Welcome,
)
from agents.context import TurnContext
from agents.venues import VENUES, Venue, venue_by_slug

log = logging.getLogger("synapsia.agents.negotiator")

SLOT_HOUR = 19  # every proposal is 19:00 UTC on some evening
SLOT_LENGTH = timedelta(hours=2)
HORIZON = timedelta(days=7)  # the free/busy scope the slips clear
PARTY_SIZE = 2
BOOK_TOOL = "book_table"
MAX_COST_CENTS = 10_000_000  # the book_table tool's own bound
MAX_ITEMS = 200  # per list item (likes, allergies, busy windows): more is not a real owner's
MAX_STRING_CHARS = 100
MAX_ROUND = 9999  # the grammar's round numbers have at most four digits
MAX_LINE_CHARS = 300  # a longer first line is never in the grammar; don't even scan it
# Exit codes of a refused session (docs/protocol.md "Close codes"; 4412 is final there too).
REFUSED_CLOSE_CODES = frozenset(FINAL_CLOSE_CODES) | {4412}

Status = Literal["booked", "agreed_not_booked", "no_deal", "failed"]
DeclineReason = Literal["unknown_venue", "busy", "cuisine", "allergy", "budget", "malformed"]
DECLINE_REASONS: tuple[DeclineReason, ...] = (
    "unknown_venue",
    "busy",
    "cuisine",
    "allergy",
    "budget",
    "malformed",
)
NoDealReason = Literal["no_candidates", "max_rounds", "no_reply"]
NO_DEAL_REASONS: tuple[NoDealReason, ...] = ("no_candidates", "max_rounds", "no_reply")
_DECLINE_BY_NAME: Mapping[str, DeclineReason] = {reason: reason for reason in DECLINE_REASONS}
_NO_DEAL_BY_NAME: Mapping[str, NoDealReason] = {reason: reason for reason in NO_DEAL_REASONS}
SlotStatus = Literal["free", "busy", "unknown"]


# =============================================================================================
# What one owner's cleared items say
# =============================================================================================


@dataclass(frozen=True)
class Budget:
    """A budget range in minor units (cents)."""

    currency: str
    minimum: int
    maximum: int


@dataclass(frozen=True)
class Availability:
    """Free/busy inside a horizon (unix seconds): busy windows only, never what they are."""

    start: int
    until: int
    busy: tuple[tuple[int, int], ...]

    def status(self, start: datetime, end: datetime) -> SlotStatus:
        """``busy`` if the slot overlaps a busy window, ``unknown`` if it reaches outside the
        horizon (nobody said), ``free`` otherwise."""
        s, e = int(start.timestamp()), int(end.timestamp())
        if any(b_start < e and s < b_end for b_start, b_end in self.busy):
            return "busy"
        if s < self.start or e > self.until:
            return "unknown"
        return "free"


@dataclass(frozen=True)
class OwnerFacts:
    """What one side's cleared items say; ``None`` where nothing was cleared (or it was not
    in the expected shape, which counts the same)."""

    likes: frozenset[str] | None = None
    allergies: frozenset[str] | None = None
    budget: Budget | None = None
    availability: Availability | None = None
    neighbourhood: str | None = None

    def visible(self) -> str:
        """Which kinds of facts are known (names only, never values), for the progress log."""
        names = [
            name
            for name, value in (
                ("availability", self.availability),
                ("budget", self.budget),
                ("food_likes", self.likes),
                ("allergies", self.allergies),
                ("neighbourhood", self.neighbourhood),
            )
            if value is not None
        ]
        return ", ".join(names) or "nothing"


def _is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _word(value: object) -> str | None:
    """A short string, normalised for case-insensitive comparison; else ``None``."""
    if not isinstance(value, str) or len(value) > MAX_STRING_CHARS:
        return None
    return value.strip().casefold() or None


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
            and 0 <= low <= high <= MAX_COST_CENTS
        ):
            budgets.append(Budget(currency, low, high))
    # Several budget items: the tightest one holds.
    return min(budgets, key=lambda b: b.maximum, default=None)


def _availability(contents: Iterable[Mapping[str, Any]]) -> Availability | None:
    windows: list[Availability] = []
    for content in contents:
        start, until, busy = content.get("from"), content.get("until"), content.get("busy")
        if not (_is_int(start) and _is_int(until) and start <= until):
            continue
        if not isinstance(busy, list) or len(busy) > MAX_ITEMS:
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
    # Several calendars: busy in any is busy; the horizon is what all of them cover.
    return Availability(
        max(w.start for w in windows),
        min(w.until for w in windows),
        tuple(sorted(pair for w in windows for pair in w.busy)),
    )


def _neighbourhood(contents: Iterable[Mapping[str, Any]]) -> str | None:
    for content in contents:
        if (name := _word(content.get("name"))) is not None:
            return name
    return None


def _facts(items: Callable[[str], Iterable[Mapping[str, Any]]]) -> OwnerFacts:
    def valid(resource: str) -> list[Mapping[str, Any]]:
        return [c for c in items(resource) if isinstance(c, Mapping)]

    return OwnerFacts(
        likes=_words(valid("food_likes")),
        allergies=_words(valid("allergies")),
        budget=_budget(valid("budget")),
        availability=_availability(valid("availability")),
        neighbourhood=_neighbourhood(valid("neighbourhood")),
    )


def own_facts(context: TurnContext) -> OwnerFacts:
    """What this agent's own owner cleared for it this turn (trusted)."""
    return _facts(context.own)


def peer_facts(context: TurnContext) -> OwnerFacts:
    """What the other owner cleared for this agent this turn (untrusted data, read as data)."""
    return _facts(context.peer)


# =============================================================================================
# Planning (pure)
# =============================================================================================


@dataclass(frozen=True)
class Candidate:
    """A (venue, evening) pair both sides' visible facts allow."""

    venue: Venue
    start: datetime
    over_own_budget: bool
    neighbourhood_match: bool

    @property
    def end(self) -> datetime:
        return self.start + SLOT_LENGTH

    @property
    def start_iso(self) -> str:
        return iso(self.start)

    @property
    def cost_cents(self) -> int:
        return self.venue.price_for_two_cents

    @property
    def currency(self) -> str:
        return self.venue.currency

    def rank(self) -> tuple[bool, int, bool, datetime, str]:
        return (
            self.over_own_budget,
            self.cost_cents,
            not self.neighbourhood_match,
            self.start,
            self.venue.slug,
        )


def iso(moment: datetime) -> str:
    """The grammar's timestamp: ISO 8601 in UTC with an explicit ``+00:00``."""
    return moment.astimezone(UTC).isoformat()


def evening_slots(now: datetime) -> list[datetime]:
    """Start of each 19:00 UTC slot after ``now`` whose two hours end within the horizon."""
    now = now.astimezone(UTC)
    first = datetime.combine(now.date(), time(SLOT_HOUR), tzinfo=UTC)
    starts = (first + timedelta(days=day) for day in range(HORIZON.days + 1))
    return [s for s in starts if s > now and s + SLOT_LENGTH <= now + HORIZON]


def venue_is_open(venue: Venue, start: datetime, end: datetime) -> bool:
    """Whether the whole slot falls within the venue's hours on the day it starts (UTC)."""
    start, end = start.astimezone(UTC), end.astimezone(UTC)
    opens = datetime.combine(start.date(), time(venue.opens_hour), tzinfo=UTC)
    closes = datetime.combine(start.date(), time(0), tzinfo=UTC) + timedelta(
        hours=venue.closes_hour
    )
    return opens <= start and end <= closes


def _own_slot_ok(own: OwnerFacts, start: datetime, end: datetime) -> bool:
    # Own calendar known: the owner must be free (a slot beyond what it shows is not vouched
    # for). Unknown: allowed; the owner's own approval or the peer will catch a clash.
    return own.availability is None or own.availability.status(start, end) == "free"


def _peer_slot_ok(peer: OwnerFacts, start: datetime, end: datetime) -> bool:
    # Peer calendar unknown or silent about the slot: allowed, the peer declines if busy.
    return peer.availability is None or peer.availability.status(start, end) != "busy"


def _within(budget: Budget | None, venue: Venue) -> bool:
    if budget is None:
        return True
    return budget.currency == venue.currency and venue.price_for_two_cents <= budget.maximum


def _venue_allowed(venue: Venue, own: OwnerFacts, peer: OwnerFacts) -> bool:
    for side in (own, peer):
        if side.likes is not None and venue.cuisine not in side.likes:
            return False
        if side.allergies is not None and venue.allergens & side.allergies:
            return False
    return peer.budget is None or _within(peer.budget, venue)


def plan(
    own: OwnerFacts, peer: OwnerFacts, now: datetime, venues: Iterable[Venue] = VENUES
) -> list[Candidate]:
    """Every (venue, evening) both sides' visible facts allow, best first.

    Order: within the own owner's budget first (unknown counts as within), then cheaper, then
    in either owner's neighbourhood, then earlier, then by slug: the same inputs always give
    the same list."""
    neighbourhoods = {n for n in (own.neighbourhood, peer.neighbourhood) if n is not None}
    candidates = [
        Candidate(
            venue=venue,
            start=start,
            over_own_budget=not _within(own.budget, venue),
            neighbourhood_match=venue.neighbourhood.casefold() in neighbourhoods,
        )
        for venue in venues
        if _venue_allowed(venue, own, peer)
        for start in evening_slots(now)
        if venue_is_open(venue, start, start + SLOT_LENGTH)
        and _own_slot_ok(own, start, start + SLOT_LENGTH)
        and _peer_slot_ok(peer, start, start + SLOT_LENGTH)
    ]
    return sorted(candidates, key=Candidate.rank)


def plan_from_context(context: TurnContext, now: datetime) -> list[Candidate]:
    """:func:`plan` from what one turn's context holds."""
    return plan(own_facts(context), peer_facts(context), now)


def narrow(
    candidates: Iterable[Candidate], declined: Candidate, reason: DeclineReason
) -> list[Candidate]:
    """The candidates left after the peer declined ``declined`` for ``reason``."""

    def ruled_out(c: Candidate) -> bool:
        if c == declined:
            return True
        if reason == "busy":
            return c.start == declined.start
        if reason == "budget":
            return c.currency == declined.currency and c.cost_cents >= declined.cost_cents
        if reason == "cuisine":
            return c.venue.cuisine == declined.venue.cuisine
        return c.venue.slug == declined.venue.slug  # allergy, unknown_venue, malformed

    return [c for c in candidates if not ruled_out(c)]


# =============================================================================================
# The grammar: what the peer may say, parsed strictly
# =============================================================================================


@dataclass(frozen=True)
class Proposal:
    round: int
    venue: str
    start: datetime
    party: int
    cost_cents: int
    currency: str
    over_budget_note: bool


@dataclass(frozen=True)
class Acceptance:
    round: int
    venue: str
    start: datetime


@dataclass(frozen=True)
class Decline:
    round: int
    reason: DeclineReason


@dataclass(frozen=True)
class BudgetQuestion:
    round: int


@dataclass(frozen=True)
class BudgetAnswer:
    """``private``, or a range the peer chose to state (used only as a number to compare)."""

    round: int
    budget: Budget | None


@dataclass(frozen=True)
class Booked:
    round: int
    venue: str
    start: datetime
    reference: str


@dataclass(frozen=True)
class NotBooked:
    round: int
    reason: str


@dataclass(frozen=True)
class NoDeal:
    round: int
    reason: NoDealReason


PeerMove = (
    Proposal | Acceptance | Decline | BudgetQuestion | BudgetAnswer | Booked | NotBooked | NoDeal
)

_ROUND = r"round=(?P<round>0|[1-9][0-9]{0,3})"
_SLUG = r"[a-z0-9][a-z0-9-]{0,62}"
_START = r"start=(?P<start>[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\+00:00)"
_AMOUNT = r"0|[1-9][0-9]{0,7}"
_RULE = r"[a-z][a-z0-9_.:-]{0,63}"
_GRAMMAR: dict[str, re.Pattern[str]] = {
    "PROPOSE": re.compile(
        rf"PROPOSE {_ROUND} venue=(?P<venue>{_SLUG}) {_START} party=(?P<party>[1-9][0-9]?)"
        rf" cost=(?P<cost>{_AMOUNT}) (?P<currency>[A-Z]{{3}})(?P<note> note=over_my_budget)?"
    ),
    "ACCEPT": re.compile(rf"ACCEPT {_ROUND} venue=(?P<venue>{_SLUG}) {_START}"),
    "DECLINE": re.compile(rf"DECLINE {_ROUND} reason=(?P<reason>{'|'.join(DECLINE_REASONS)})"),
    "ASK": re.compile(rf"ASK {_ROUND} budget"),
    "ANSWER": re.compile(
        rf"ANSWER {_ROUND} budget=(?:private|(?P<min>{_AMOUNT})-(?P<max>{_AMOUNT})"
        r" (?P<currency>[A-Z]{3}))"
    ),
    "BOOKED": re.compile(
        rf"BOOKED {_ROUND} venue=(?P<venue>{_SLUG}) {_START} ref=(?P<ref>{_SLUG})"
    ),
    "NOT_BOOKED": re.compile(rf"NOT_BOOKED {_ROUND} reason=(?P<reason>{_RULE})"),
    "NO_DEAL": re.compile(rf"NO_DEAL {_ROUND} reason=(?P<reason>{'|'.join(NO_DEAL_REASONS)})"),
}


def _utc(text: str) -> datetime | None:
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        return None  # shaped like a timestamp, but no such moment (month 13, hour 25, ...)


def parse_move(text: str) -> PeerMove | None:
    """The move the first line of ``text`` states, or ``None`` if it is not exactly one line of
    the grammar. Never raises: peer text is untrusted and anything off-grammar is ignored."""
    if not isinstance(text, str):
        return None
    line = text.split("\n", 1)[0]
    if len(line) > MAX_LINE_CHARS:
        return None
    keyword = line.split(" ", 1)[0]
    pattern = _GRAMMAR.get(keyword)
    match = pattern.fullmatch(line) if pattern else None
    if match is None:
        return None
    g = match.groupdict()
    number = int(g["round"])
    start = _utc(g["start"]) if g.get("start") else None
    if "start" in g and start is None:
        return None
    if keyword == "PROPOSE":
        assert start is not None
        cost = int(g["cost"])
        if cost > MAX_COST_CENTS:
            return None
        return Proposal(
            number, g["venue"], start, int(g["party"]), cost, g["currency"], bool(g["note"])
        )
    if keyword == "ACCEPT":
        assert start is not None
        return Acceptance(number, g["venue"], start)
    if keyword == "DECLINE":
        return Decline(number, _DECLINE_BY_NAME[g["reason"]])
    if keyword == "ASK":
        return BudgetQuestion(number)
    if keyword == "ANSWER":
        if g["min"] is None:
            return BudgetAnswer(number, None)
        low, high = int(g["min"]), int(g["max"])
        if not low <= high <= MAX_COST_CENTS:
            return None
        return BudgetAnswer(number, Budget(g["currency"], low, high))
    if keyword == "BOOKED":
        assert start is not None
        return Booked(number, g["venue"], start, g["ref"])
    if keyword == "NOT_BOOKED":
        return NotBooked(number, g["reason"])
    return NoDeal(number, _NO_DEAL_BY_NAME[g["reason"]])


# =============================================================================================
# What this side says (built only from its own plan, the venue list and fixed codes)
# =============================================================================================


def _money(cents: int, currency: str) -> str:
    return f"{cents // 100}.{cents % 100:02d} {currency}"


def _when(start: datetime) -> str:
    return start.astimezone(UTC).strftime("%a %d %b at %H:%M UTC")


def _described(venue: Venue, start: datetime) -> str:
    return f"{venue.name} ({venue.cuisine}, {venue.neighbourhood}) on {_when(start)}"


def format_propose(round_no: int, candidate: Candidate) -> str:
    """``PROPOSE``: never states a budget, only that the price is above the owner's."""
    venue = candidate.venue
    note = " note=over_my_budget" if candidate.over_own_budget else ""
    sentence = (
        f"How about {_described(venue, candidate.start)}, "
        f"{_money(venue.price_for_two_cents, venue.currency)} for two?"
    )
    if candidate.over_own_budget:
        sentence += " It is above what my owner set aside, so my owner has to approve it."
    return (
        f"PROPOSE round={round_no} venue={venue.slug} start={candidate.start_iso} "
        f"party={PARTY_SIZE} cost={venue.price_for_two_cents} {venue.currency}{note}\n{sentence}"
    )


def format_accept(round_no: int, venue: Venue, start: datetime) -> str:
    return (
        f"ACCEPT round={round_no} venue={venue.slug} start={iso(start)}\n"
        f"That works on our side: {_described(venue, start)}."
    )


_DECLINE_SENTENCES: Mapping[DeclineReason, str] = {
    "unknown_venue": "I don't know that venue.",
    "busy": "My owner is not free then.",
    "cuisine": "That cuisine is not one my owner likes.",
    "allergy": "That kitchen uses something my owner is allergic to.",
    "budget": "That is more than my owner wants to spend.",
    "malformed": "That proposal does not match the venue list.",
}


def format_decline(round_no: int, reason: DeclineReason) -> str:
    return f"DECLINE round={round_no} reason={reason}\n{_DECLINE_SENTENCES[reason]}"


def format_ask(round_no: int) -> str:
    return f"ASK round={round_no} budget\nMay I know your owner's budget range for dinner?"


def format_answer_private(round_no: int) -> str:
    """The only budget answer this negotiator gives: it cannot tell from the SDK whether its
    owner cleared the budget for the peer, so it never states it."""
    return f"ANSWER round={round_no} budget=private\nMy owner keeps the budget private."


def format_booked(round_no: int, venue: Venue, start: datetime, reference: str) -> str:
    return (
        f"BOOKED round={round_no} venue={venue.slug} start={iso(start)} ref={reference}\n"
        f"Booked: {_described(venue, start)}."
    )


def format_not_booked(round_no: int, rule: str) -> str:
    return f"NOT_BOOKED round={round_no} reason={rule}\nThe booking did not go through."


_NO_DEAL_SENTENCES: Mapping[NoDealReason, str] = {
    "no_candidates": "I have nothing left to propose that fits both sides.",
    "max_rounds": "We ran out of rounds without finding a match.",
    "no_reply": "No reply came in time, so I am stopping here.",
}


def format_no_deal(round_no: int, reason: NoDealReason) -> str:
    return f"NO_DEAL round={round_no} reason={reason}\n{_NO_DEAL_SENTENCES[reason]}"


def _rule_token(rule: str) -> str:
    # The server's rule id goes into the grammar only if it is a plain token.
    return rule if re.fullmatch(_RULE, rule) else "unknown"


# =============================================================================================
# Evaluating the peer's proposal (pure)
# =============================================================================================


def evaluate(proposal: Proposal, own: OwnerFacts, now: datetime) -> DeclineReason | None:
    """``None`` to accept ``proposal``, else the one reason to decline it.

    Checked against the venue list and this side's own owner only; the first failing check
    gives the reason: unknown_venue, malformed (party, price or currency not the venue's),
    cuisine, allergy, busy (also: in the past, beyond the seven-day horizon, or outside the
    venue's hours), budget."""
    venue = venue_by_slug(proposal.venue)
    if venue is None:
        return "unknown_venue"
    if (
        proposal.party != PARTY_SIZE
        or proposal.cost_cents != venue.price_for_two_cents
        or proposal.currency != venue.currency
    ):
        return "malformed"
    if own.likes is not None and venue.cuisine not in own.likes:
        return "cuisine"
    if own.allergies is not None and venue.allergens & own.allergies:
        return "allergy"
    if not now < proposal.start <= now + HORIZON:
        return "busy"  # past, or further out than any calendar the slips show
    end = proposal.start + SLOT_LENGTH
    if not venue_is_open(venue, proposal.start, end) or not _own_slot_ok(own, proposal.start, end):
        return "busy"
    if not _within(own.budget, venue):
        return "budget"
    return None


# =============================================================================================
# The conversation
# =============================================================================================


@dataclass(frozen=True)
class NegotiationResult:
    """How a negotiation ended. ``close_code`` is set when the server closed the session."""

    status: Status
    venue: str | None
    start: str | None
    booking_reference: str | None
    rounds: int
    detail: str
    close_code: int | None = None


def booking_reference(output: Mapping[str, Any] | None) -> str | None:
    """The booking reference in an ``action_result``'s ``output``: the adapter's outcome,
    ``{"kind": "succeeded", "output": {"booking_reference": ...}}`` (or the tool output bare)."""
    if not isinstance(output, Mapping):
        return None
    inner = output.get("output")
    if output.get("kind") == "succeeded" and isinstance(inner, Mapping):
        output = inner
    reference = output.get("booking_reference")
    return reference if isinstance(reference, str) else None


def is_host(welcome: Welcome | None) -> bool:
    """The host is the side that may book: ``book_table`` is among its welcome's tools."""
    return welcome is not None and any(
        isinstance(tool, Mapping) and tool.get("name") == BOOK_TOOL for tool in welcome.tools
    )


class _Conversation:
    def __init__(
        self,
        room: RoomClient,
        *,
        now: datetime | None,
        max_rounds: int,
        reply_timeout: float,
        grant_timeout: float,
        on_step: Callable[[str], None] | None,
    ) -> None:
        self.room = room
        self.fixed_now = now
        self.max_rounds = max_rounds
        self.reply_timeout = reply_timeout
        self.grant_timeout = grant_timeout
        self.on_step = on_step
        self.rounds = 0
        # (venue slug, start) pairs either side has turned down: never proposed again.
        self.turned_down: set[tuple[str, datetime]] = set()

    # --- plumbing --------------------------------------------------------------------------

    def now(self) -> datetime:
        return self.fixed_now or datetime.now(UTC)

    def step(self, line: str) -> None:
        log.info("%s", line)
        if self.on_step is not None:
            self.on_step(line)

    def result(self, status: Status, detail: str, **fields: Any) -> NegotiationResult:
        self.step(f"result: {status} ({detail})")
        return NegotiationResult(
            status=status,
            venue=fields.get("venue"),
            start=fields.get("start"),
            booking_reference=fields.get("booking_reference"),
            rounds=self.rounds,
            detail=detail,
        )

    async def say(self, text: str) -> None:
        seq = await self.room.say_when_open(text, timeout=self.reply_timeout)
        self.step(f"said #{seq}: {text.splitlines()[0]}")

    async def say_quietly(self, text: str) -> None:
        """Say a closing line if the room lets us; the result stands either way."""
        try:
            await self.say(text)
        except (TimeoutError, FrameRefusedError) as exc:
            self.step(f"could not say {text.split(' ', 1)[0]}: {str(exc) or 'timed out'}")

    def deadline(self, seconds: float) -> float:
        return asyncio.get_running_loop().time() + seconds

    async def next_move(self, deadline: float) -> PeerMove:
        """The peer's next message in the grammar; anything else is logged and skipped.
        Raises ``TimeoutError`` at ``deadline``."""
        while True:
            remaining = deadline - asyncio.get_running_loop().time()
            if remaining <= 0:
                raise TimeoutError
            message = await self.room.next_message(timeout=remaining)
            move = parse_move(message.text)
            if move is None:
                flags = f", flags {','.join(message.flags)}" if message.flags else ""
                self.step(f"ignored #{message.seq}: not in the grammar{flags}")
                continue
            self.step(f"heard #{message.seq}: {type(move).__name__} round {move.round}")
            return move

    # --- host ------------------------------------------------------------------------------

    async def host(self) -> NegotiationResult:
        context = await self.room.context()
        own, peer = own_facts(context), peer_facts(context)
        self.step(
            f"host, turn {context.turn}: own {own.visible()}; cleared from the peer: "
            f"{peer.visible()}"
        )
        if peer.budget is None:
            peer = await self.ask_budget(peer)
        candidates = plan(own, peer, self.now())
        self.step(f"{len(candidates)} candidate(s)")
        for round_no in range(1, self.max_rounds + 1):
            if not candidates:
                await self.say_quietly(format_no_deal(round_no, "no_candidates"))
                return self.result("no_deal", "no candidate left that fits both sides")
            candidate = candidates[0]
            self.rounds = round_no
            await self.say(format_propose(round_no, candidate))
            try:
                reply = await self.reply_to(round_no, candidate)
            except TimeoutError:
                await self.say_quietly(format_no_deal(round_no, "no_reply"))
                return self.result("failed", f"no reply within {self.reply_timeout:g}s")
            if isinstance(reply, Decline):
                candidates = narrow(candidates, candidate, reply.reason)
                self.step(f"declined ({reply.reason}); {len(candidates)} candidate(s) left")
                continue
            if isinstance(reply, Proposal):  # the guest countered: ours was not taken
                candidates = [c for c in candidates if c != candidate]
                countered = _matching(candidates, reply)
                if countered is not None:
                    await self.say(format_accept(round_no, countered.venue, countered.start))
                    return await self.book(round_no, countered)
                reason = evaluate(reply, own, self.now()) or "malformed"
                await self.say(format_decline(round_no, reason))
                self.step(f"declined the counter ({reason}); {len(candidates)} candidate(s) left")
                continue
            return await self.book(round_no, candidate)
        await self.say_quietly(format_no_deal(self.rounds, "max_rounds"))
        return self.result("no_deal", f"no agreement in {self.max_rounds} proposals")

    async def ask_budget(self, peer: OwnerFacts) -> OwnerFacts:
        await self.say(format_ask(1))
        try:
            answer = await self.budget_answer(self.deadline(self.reply_timeout))
        except TimeoutError:
            self.step("no answer about the budget; planning without it")
            return peer
        if answer.budget is None:
            self.step("the peer keeps its budget private; planning without it")
            return peer
        # A stated range only ever narrows the plan (compared as a number, never echoed).
        self.step("the peer stated a budget range; using it as a limit")
        return replace(peer, budget=answer.budget)

    async def budget_answer(self, deadline: float) -> BudgetAnswer:
        while True:
            move = await self.next_move(deadline)
            if isinstance(move, BudgetAnswer) and move.round == 1:
                return move

    async def reply_to(
        self, round_no: int, candidate: Candidate
    ) -> Acceptance | Decline | Proposal:
        """The guest's answer to our proposal: accepted, declined, or a counter-proposal."""
        deadline = self.deadline(self.reply_timeout)
        while True:
            move = await self.next_move(deadline)
            if isinstance(move, Decline | Proposal) and move.round == round_no:
                return move
            if (
                isinstance(move, Acceptance)
                and move.round == round_no
                and move.venue == candidate.venue.slug
                and move.start == candidate.start
            ):
                return move
            # Anything else (a stale round, an acceptance of something not proposed) is noise.

    async def book(self, round_no: int, candidate: Candidate) -> NegotiationResult:
        agreed = {"venue": candidate.venue.slug, "start": candidate.start_iso}
        arguments: dict[str, Any] = {
            "venue_id": candidate.venue.slug,
            "party_size": PARTY_SIZE,
            "start": candidate.start_iso,
            "cost_cents": candidate.cost_cents,
            "currency": candidate.currency,
        }
        self.step(f"agreed on {candidate.venue.slug} at {candidate.start_iso}; booking")
        ref = f"book-{uuid.uuid4().hex[:16]}"  # the idempotency key: a retry never books twice
        try:
            outcome = await self.act(arguments, ref)
            if not outcome.settled:
                self.step(f"waiting for my owner's approval ({outcome.status}: {outcome.rule})")
                outcome = await self.room.settle(
                    outcome, BOOK_TOOL, arguments, timeout=self.grant_timeout
                )
        except TimeoutError:
            await self.say_quietly(format_not_booked(round_no, "timeout"))
            return self.result("agreed_not_booked", "the booking was not settled in time", **agreed)
        reference = booking_reference(outcome.output)
        if outcome.status == "executed" and reference is not None:
            token = reference if re.fullmatch(_SLUG, reference) else "unknown"
            await self.say_quietly(format_booked(round_no, candidate.venue, candidate.start, token))
            return self.result(
                "booked", f"executed ({outcome.rule})", booking_reference=reference, **agreed
            )
        self.step(f"booking {outcome.status}: {outcome.rule}")
        await self.say_quietly(format_not_booked(round_no, _rule_token(outcome.rule)))
        return self.result(
            "agreed_not_booked", f"booking {outcome.status} ({outcome.rule})", **agreed
        )

    async def act(self, arguments: dict[str, Any], ref: str) -> ActionOutcome:
        try:
            return await self.room.act(BOOK_TOOL, arguments, ref=ref)
        except TimeoutError:
            self.step("no answer to the booking yet; asking again (same key)")
            return await self.room.act(BOOK_TOOL, arguments, ref=ref)

    # --- guest -----------------------------------------------------------------------------

    async def guest(self) -> NegotiationResult:
        self.step("guest: waiting for proposals")
        answered: set[int] = set()
        last_round = 0
        accepted: tuple[Venue, datetime] | None = None
        countered: Candidate | None = None  # our counter-proposal in ``last_round``
        deadline = self.deadline(self.reply_timeout)
        while True:
            try:
                move = await self.next_move(deadline)
            except TimeoutError:
                return self.result("failed", "the host went quiet")
            if isinstance(move, BudgetQuestion):
                if move.round not in answered:  # once per round: never repeat ourselves
                    answered.add(move.round)
                    await self.say(format_answer_private(move.round))
                    deadline = self.deadline(self.reply_timeout)
            elif isinstance(move, Proposal):
                if move.round <= last_round:
                    continue  # already answered; answering again could look like a loop
                last_round, self.rounds = move.round, self.rounds + 1
                accepted, countered = await self.answer(move)
                wait = self.reply_timeout + (self.grant_timeout if accepted else 0)
                deadline = self.deadline(wait)
            elif isinstance(move, Acceptance):
                if (
                    countered is not None
                    and move.round == last_round
                    and (move.venue, move.start) == (countered.venue.slug, countered.start)
                ):
                    accepted, countered = (countered.venue, countered.start), None
                    deadline = self.deadline(self.reply_timeout + self.grant_timeout)
            elif isinstance(move, Decline):
                if countered is not None and move.round == last_round:
                    self.turned_down.add((countered.venue.slug, countered.start))
                    countered = None
            elif isinstance(move, Booked):
                return await self.booked(move, accepted)
            elif isinstance(move, NotBooked):
                agreed = _agreed(accepted)
                return self.result("agreed_not_booked", f"not booked ({move.reason})", **agreed)
            elif isinstance(move, NoDeal):
                return self.result("no_deal", f"the host gave up ({move.reason})")
            # ANSWER is the host's to hear, and anything stale is noise: ignore them.

    async def answer(
        self, proposal: Proposal
    ) -> tuple[tuple[Venue, datetime] | None, Candidate | None]:
        """Accept ``proposal`` (returns what was accepted), or counter it with our own best
        candidate within our owner's budget (returns the counter), or decline it."""
        context = await self.room.context()  # one turn per proposal: slip uses are spent
        own = own_facts(context)
        reason = evaluate(proposal, own, self.now())
        venue = venue_by_slug(proposal.venue)
        if reason is None and venue is not None:
            await self.say(format_accept(proposal.round, venue, proposal.start))
            return (venue, proposal.start), None
        self.turned_down.add((proposal.venue, proposal.start))  # theirs, now ruled out
        counter = next(
            (
                c
                for c in plan(own, peer_facts(context), self.now())
                if not c.over_own_budget and (c.venue.slug, c.start) not in self.turned_down
            ),
            None,
        )
        if counter is not None:
            self.step(f"countering ({reason or 'malformed'})")
            await self.say(format_propose(proposal.round, counter))
            return None, counter
        await self.say(format_decline(proposal.round, reason or "malformed"))
        return None, None

    async def booked(
        self, move: Booked, accepted: tuple[Venue, datetime] | None
    ) -> NegotiationResult:
        if accepted is None or (move.venue, move.start) != (accepted[0].slug, accepted[1]):
            # Booked something this side never accepted: stop and ask the owner.
            await self.room.flare("contradiction")
            return self.result("failed", "the host reports a booking this side did not accept")
        return self.result(
            "booked", "booked by the host", booking_reference=move.reference, **_agreed(accepted)
        )


def _matching(candidates: Iterable[Candidate], proposal: Proposal) -> Candidate | None:
    """Our own candidate that ``proposal`` names exactly (venue, start, party, price)."""
    return next(
        (
            c
            for c in candidates
            if (c.venue.slug, c.start, c.cost_cents, c.currency)
            == (proposal.venue, proposal.start, proposal.cost_cents, proposal.currency)
            and proposal.party == PARTY_SIZE
        ),
        None,
    )


def _agreed(accepted: tuple[Venue, datetime] | None) -> dict[str, Any]:
    if accepted is None:
        return {}
    return {"venue": accepted[0].slug, "start": iso(accepted[1])}


async def negotiate(
    room: RoomClient,
    *,
    now: datetime | None = None,
    max_rounds: int = 6,
    reply_timeout: float = 120,
    grant_timeout: float = 900,
    role: Literal["host", "guest"] | None = None,
    on_step: Callable[[str], None] | None = None,
) -> NegotiationResult:
    """Negotiate a dinner in the room ``room`` is connected to, and book it if this side hosts.

    The role follows from the welcome (``book_table`` among its tools: host) unless ``role``
    says. ``now`` fixes the clock (for tests); otherwise the current time is used. Each wait
    for the peer lasts at most ``reply_timeout`` seconds, a wait for the owner's grant at most
    ``grant_timeout``. ``on_step`` is called with one line per step (also logged). Never
    raises for the room's or the peer's behaviour: a closed room, a refused frame or a
    timeout ends in a ``failed`` result."""
    conversation = _Conversation(
        room,
        now=now,
        max_rounds=max_rounds,
        reply_timeout=reply_timeout,
        grant_timeout=grant_timeout,
        on_step=on_step,
    )
    if not 1 <= max_rounds <= MAX_ROUND:
        raise ValueError(f"max_rounds must be between 1 and {MAX_ROUND}")
    hosting = role == "host" if role is not None else is_host(room.welcome)
    try:
        return await (conversation.host() if hosting else conversation.guest())
    except RoomClosedError as closed:
        result = conversation.result("failed", str(closed))
        return replace(result, close_code=closed.code)
    except FrameRefusedError as refused:
        return conversation.result("failed", f"the server refused a frame: {refused}")
    except TimeoutError:
        return conversation.result("failed", "the server did not answer in time")


# =============================================================================================
# CLI
# =============================================================================================


async def main(argv: list[str] | None = None) -> int:
    parser = room_arguments(
        "python -m agents.negotiator",
        "Negotiate a dinner for your owner in a Synapsia room (reference agent).",
    )
    parser.add_argument("--role", choices=("host", "guest"), help="default: from the welcome")
    parser.add_argument("--max-rounds", type=int, default=6)
    parser.add_argument("--reply-timeout", type=float, default=120.0)
    parser.add_argument("--grant-timeout", type=float, default=900.0)
    parser.add_argument("-v", "--verbose", action="store_true", help="log the SDK's details")
    args = room_args(parser, argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING)

    def out(line: str) -> None:
        print(line, flush=True)

    async def run(room: RoomClient) -> int:
        assert room.welcome is not None
        out(f"joined: {room.welcome.room['purpose']} ({room.welcome.room['state']})")
        result = await negotiate(
            room,
            max_rounds=args.max_rounds,
            reply_timeout=args.reply_timeout,
            grant_timeout=args.grant_timeout,
            role=args.role,
            on_step=out,
        )
        out(
            f"{result.status}: venue={result.venue} start={result.start} "
            f"ref={result.booking_reference} rounds={result.rounds}"
        )
        if result.status in ("booked", "agreed_not_booked"):
            return 0
        return REFUSED if result.close_code in REFUSED_CLOSE_CODES else 1

    return await in_room(args, run)


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
