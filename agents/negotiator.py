"""The deterministic reference negotiator: plans a dinner for two from what its context holds.

    python -m agents.negotiator --url ws://127.0.0.1:8000/ws/rooms/<room-id>/ --token syn_agent_...

Two copies of it, one per owner, agree on a venue and a start time, and the host (the side
whose welcome lists ``book_table``) books it. It uses only the SDK (no server code) and only
what the room hands it: the room's terms, the venue catalogue from the server's
``venues_search`` tool, its own owner's cleared items (trusted) and the other owner's items
cleared for it (untrusted data: numbers are compared, strings compared case-insensitively,
nothing else). Planning itself is :mod:`agents.dinner`.

The conversation is a strict line grammar (``docs/agents.md``): the first line of every
message is machine-readable, the rest a short sentence for the owners watching. Peer text is
parsed only by the full-match regular expressions below; anything else is ignored. A peer
message can only name a plan; whether this side accepts it is decided from this side's own
facts and the catalogue, and the booking's venue, time and price always come from the
catalogue.

Both sides play the same game: propose the best plan they can see; answer a proposal by
accepting it, or by a counter-proposal that carries the coarse reason the plan does not work
for this side (time, venue, budget, allergy, cuisine, distance) and this side's own best
plan. The proposer prunes its plans by that reason without learning the fact behind it. A
side declares that no plan is possible only when its own candidates, given everything it
knows, are gone, and says the coarse reason.

Exit codes of the CLI: 0 booked or agreed, 1 no agreement or failed, 2 refused by the server.
"""

from __future__ import annotations

import asyncio
import logging
import re
import sys
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any, Literal

from agents.cli import REFUSED, in_room, room_args, room_arguments, seconds
from agents.client import (
    FINAL_CLOSE_CODES,
    ActionOutcome,
    FrameRefusedError,
    RoomClient,
    RoomClosedError,
    Welcome,
)
from agents.context import TurnContext
from agents.dinner import (
    REASONS,
    Catalogue,
    Knowledge,
    OwnerFacts,
    Plan,
    Planner,
    Reason,
    Terms,
    catalogue_from,
    cuisine_words,
    facts_from,
    terms_from,
)

log = logging.getLogger("synapsia.agents.negotiator")

BOOK_TOOL = "book_table"
SEARCH_TOOL = "venues_search"
NO_PLAN_TOOL = "declare_no_plan"
MAX_MESSAGES = 12  # both sides counted: agree within this many, or say why not
MAX_ROUND = 9999  # the grammar's round numbers have at most four digits
MAX_LINE_CHARS = 300  # a longer first line is never in the grammar; don't even scan it
SEARCH_PAGES = 10  # venues_search pages of up to 200 venues
# Exit codes of a refused session (docs/protocol.md "Close codes"; 4412 is final there too).
REFUSED_CLOSE_CODES = frozenset(FINAL_CLOSE_CODES) | {4412}

Status = Literal["booked", "agreed_not_booked", "no_deal", "failed"]
_STATUS_WORDS: Mapping[Status, str] = {
    "booked": "booked",
    "agreed_not_booked": "agreed, not booked",
    "no_deal": "no deal",
    "failed": "failed",
}
# A counter-proposal's reason: a constraint the plan breaks for this side, or "preference"
# (the plan works, but this side's own best is liked by more of the owners or is nearer).
CounterReason = Literal["time", "venue", "budget", "allergy", "cuisine", "distance", "preference"]
COUNTER_REASONS: tuple[CounterReason, ...] = (*REASONS, "preference")
NoPlanReason = Literal[
    "time", "venue", "budget", "allergy", "cuisine", "distance", "rounds", "no_reply"
]
NO_PLAN_REASONS: tuple[NoPlanReason, ...] = (*REASONS, "rounds", "no_reply")
NotBookedReason = Literal["denied", "failed", "timeout"]
NOT_BOOKED_REASONS: tuple[NotBookedReason, ...] = ("denied", "failed", "timeout")


# =============================================================================================
# The grammar: what the peer may say, parsed strictly
# =============================================================================================


@dataclass(frozen=True)
class Offer:
    """A plan as the peer put it: venue id, start, party size and price per person."""

    venue: str
    start: datetime
    party: int
    price: int
    currency: str


@dataclass(frozen=True)
class Proposal:
    round: int
    offer: Offer


@dataclass(frozen=True)
class Counter:
    """Declines the plan of ``round - 1`` for ``reason`` and proposes ``offer`` as ``round``."""

    round: int
    reason: CounterReason
    offer: Offer


@dataclass(frozen=True)
class Acceptance:
    round: int
    venue: str
    start: datetime


@dataclass(frozen=True)
class NoPlan:
    round: int
    reason: NoPlanReason


@dataclass(frozen=True)
class Booked:
    round: int
    venue: str
    start: datetime
    reference: str


@dataclass(frozen=True)
class NotBooked:
    round: int
    reason: NotBookedReason


PeerMove = Proposal | Counter | Acceptance | NoPlan | Booked | NotBooked

# What the progress log says it heard, in words (the move's details are the peer's to word).
_HEARD: Mapping[type[PeerMove], str] = {
    Proposal: "a proposal",
    Counter: "a counter-proposal",
    Acceptance: "an acceptance",
    NoPlan: "no plan is possible",
    Booked: "the table is booked",
    NotBooked: "the booking did not happen",
}

_ROUND = r"round=(?P<round>[1-9][0-9]{0,3})"
_SLUG = r"[a-z0-9][a-z0-9-]{0,62}"
_START = (
    r"start=(?P<start>[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}"
    r"(?:\+|-)[0-9]{2}:[0-9]{2})"
)
_OFFER = (
    rf"venue=(?P<venue>{_SLUG}) {_START} party=(?P<party>[1-9][0-9]?)"
    r" price=(?P<price>0|[1-9][0-9]{0,7}) (?P<currency>[A-Z]{3})"
)


def _choice(names: tuple[str, ...]) -> str:
    return "|".join(names)


_GRAMMAR: dict[str, re.Pattern[str]] = {
    "PROPOSE": re.compile(rf"PROPOSE {_ROUND} {_OFFER}"),
    "COUNTER": re.compile(
        rf"COUNTER {_ROUND} reason=(?P<reason>{_choice(COUNTER_REASONS)}) {_OFFER}"
    ),
    "ACCEPT": re.compile(rf"ACCEPT {_ROUND} venue=(?P<venue>{_SLUG}) {_START}"),
    "NO_PLAN": re.compile(rf"NO_PLAN {_ROUND} reason=(?P<reason>{_choice(NO_PLAN_REASONS)})"),
    "BOOKED": re.compile(
        rf"BOOKED {_ROUND} venue=(?P<venue>{_SLUG}) {_START} ref=(?P<ref>{_SLUG})"
    ),
    "NOT_BOOKED": re.compile(
        rf"NOT_BOOKED {_ROUND} reason=(?P<reason>{_choice(NOT_BOOKED_REASONS)})"
    ),
}
_COUNTER_BY_NAME: Mapping[str, CounterReason] = {r: r for r in COUNTER_REASONS}
_NO_PLAN_BY_NAME: Mapping[str, NoPlanReason] = {r: r for r in NO_PLAN_REASONS}
_NOT_BOOKED_BY_NAME: Mapping[str, NotBookedReason] = {r: r for r in NOT_BOOKED_REASONS}


def _moment(text: str) -> datetime | None:
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
    start = _moment(g["start"]) if g.get("start") else None
    if "start" in g and start is None:
        return None
    if keyword in ("PROPOSE", "COUNTER"):
        assert start is not None
        offer = Offer(g["venue"], start, int(g["party"]), int(g["price"]), g["currency"])
        if keyword == "PROPOSE":
            return Proposal(number, offer)
        return Counter(number, _COUNTER_BY_NAME[g["reason"]], offer)
    if keyword == "ACCEPT":
        assert start is not None
        return Acceptance(number, g["venue"], start)
    if keyword == "NO_PLAN":
        return NoPlan(number, _NO_PLAN_BY_NAME[g["reason"]])
    if keyword == "BOOKED":
        assert start is not None
        return Booked(number, g["venue"], start, g["ref"])
    return NotBooked(number, _NOT_BOOKED_BY_NAME[g["reason"]])


# =============================================================================================
# What this side says (built only from its own plan, the catalogue and fixed codes)
# =============================================================================================


def money(minor: int, currency: str) -> str:
    """An amount in whole units, as a person reads it: ``52 EUR``, ``26.50 EUR``."""
    whole, cents = divmod(minor, 100)
    return f"{whole} {currency}" if cents == 0 else f"{whole}.{cents:02d} {currency}"


def result_words(status: Status, detail: str) -> str:
    """How a negotiation ended, in words: "agreed, not booked (booking denied)"; the detail
    left out where it only repeats the status ("booked")."""
    said = f" ({detail})" if detail and detail != status else ""
    return f"{_STATUS_WORDS[status]}{said}"


def said_in_words(text: str) -> str:
    """A message of ours as the progress log says it: the sentence that follows its line of the
    grammar (the line is for the peer's parser, the sentence for people), or the message's first
    line when it is not a move."""
    line, _, rest = text.partition("\n")
    sentence = " ".join(rest.split())  # one log line
    return sentence if sentence and parse_move(line) is not None else line


def _said(detail: str) -> str:
    """What the room said of an action, in words, for the progress log (its rule is for code;
    an action waiting for its owner may come with no words)."""
    return f": {detail}" if detail else ""


def _described(plan: Plan, terms: Terms, catalogue: Catalogue) -> str:
    venue = plan.venue
    where = catalogue.city.names.get(venue.neighbourhood, venue.neighbourhood)
    at = plan.start.astimezone(terms.zone)
    when = f"{at:%A} {at.day} {at:%B} at {at:%H:%M}"
    return f"{venue.name} ({cuisine_words(venue.cuisine)}, {where}) on {when}"


def _offer_line(plan: Plan, terms: Terms) -> str:
    venue = plan.venue
    return (
        f"venue={venue.id} start={plan.start.isoformat()} party={terms.party_size} "
        f"price={venue.price_minor} {venue.currency}"
    )


def _price_sentence(plan: Plan) -> str:
    return f"{money(plan.venue.price_minor, plan.venue.currency)} per person"


def format_propose(round_no: int, plan: Plan, terms: Terms, catalogue: Catalogue) -> str:
    """``PROPOSE``: the plan and the catalogue's price; never anything of the owner's."""
    return (
        f"PROPOSE round={round_no} {_offer_line(plan, terms)}\n"
        f"How about {_described(plan, terms, catalogue)}, {_price_sentence(plan)}?"
    )


_COUNTER_SENTENCES: Mapping[CounterReason, str] = {
    "time": "My owner is not free then.",
    "venue": "That venue cannot seat us for the whole dinner then.",
    "budget": "That is more than my owner wants to spend.",
    "allergy": "That kitchen cannot cater safely for my owner.",
    "cuisine": "My owner would rather not have that cuisine.",
    "distance": "That is too far for my owner.",
    "preference": "That would work, but this one should suit us both better.",
}


def format_counter(
    round_no: int, reason: CounterReason, plan: Plan, terms: Terms, catalogue: Catalogue
) -> str:
    return (
        f"COUNTER round={round_no} reason={reason} {_offer_line(plan, terms)}\n"
        f"{_COUNTER_SENTENCES[reason]} How about {_described(plan, terms, catalogue)}, "
        f"{_price_sentence(plan)}?"
    )


def format_accept(round_no: int, plan: Plan, terms: Terms, catalogue: Catalogue) -> str:
    return (
        f"ACCEPT round={round_no} venue={plan.venue.id} start={plan.start.isoformat()}\n"
        f"That works for us: {_described(plan, terms, catalogue)}."
    )


_NO_PLAN_SENTENCES: Mapping[NoPlanReason, str] = {
    "time": "There is no time left when both of you are free and a venue is open.",
    "venue": "No venue left can seat us for the whole dinner.",
    "budget": "Nothing left fits what my owner wants to spend.",
    "allergy": "No kitchen left can cater safely for everyone.",
    "cuisine": "Nothing left avoids the cuisines my owner would rather not have.",
    "distance": "Nothing left is close enough for both of you.",
    "rounds": "We ran out of messages without finding a plan.",
    "no_reply": "No reply came in time, so I am stopping here.",
}


def format_no_plan(round_no: int, reason: NoPlanReason) -> str:
    return f"NO_PLAN round={round_no} reason={reason}\n{_NO_PLAN_SENTENCES[reason]}"


def format_booked(
    round_no: int, plan: Plan, reference: str, terms: Terms, catalogue: Catalogue
) -> str:
    return (
        f"BOOKED round={round_no} venue={plan.venue.id} start={plan.start.isoformat()} "
        f"ref={reference}\nBooked: {_described(plan, terms, catalogue)}."
    )


_NOT_BOOKED_SENTENCES: Mapping[NotBookedReason, str] = {
    "denied": "My owner did not approve that booking; let me find the next plan.",
    "failed": "The booking did not go through.",
    "timeout": "My owner has not answered about the booking in time.",
}


def format_not_booked(round_no: int, reason: NotBookedReason) -> str:
    return f"NOT_BOOKED round={round_no} reason={reason}\n{_NOT_BOOKED_SENTENCES[reason]}"


# =============================================================================================
# The conversation
# =============================================================================================


@dataclass(frozen=True)
class NegotiationResult:
    """How a negotiation ended. ``close_code`` is set when the server closed the session;
    ``reason`` is the coarse reason of a ``no_deal`` (``time``, ``budget``, ... ``rounds``)."""

    status: Status
    venue: str | None
    start: str | None
    booking_reference: str | None
    rounds: int
    detail: str
    messages: int = 0
    reason: str | None = None
    close_code: int | None = None


def booking_reference(output: Mapping[str, Any] | None) -> str | None:
    """The booking reference in an ``action_result``'s ``output``."""
    inner = tool_output(output)
    reference = inner.get("booking_reference") if inner is not None else None
    return reference if isinstance(reference, str) else None


def tool_output(output: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    """A tool's own output inside an ``action_result``'s ``output`` (the adapter's outcome,
    ``{"kind": "succeeded", "output": {...}}``, or the output bare)."""
    if not isinstance(output, Mapping):
        return None
    inner = output.get("output")
    if output.get("kind") == "succeeded" and isinstance(inner, Mapping):
        return inner
    return output


def _tool_names(welcome: Welcome | None) -> frozenset[str]:
    if welcome is None:
        return frozenset()
    return frozenset(str(tool.get("name")) for tool in welcome.tools if isinstance(tool, Mapping))


def is_host(welcome: Welcome | None) -> bool:
    """The host is the side that may book: ``book_table`` is among its welcome's tools."""
    return BOOK_TOOL in _tool_names(welcome)


class _Stop(Exception):
    """Ends the conversation with ``result`` (control flow inside it; never escapes)."""

    def __init__(self, result: NegotiationResult) -> None:
        self.result = result


class _Conversation:
    def __init__(
        self,
        room: RoomClient,
        *,
        now: datetime | None,
        max_messages: int,
        reply_timeout: float,
        grant_timeout: float,
        grant_poll: float,
        on_step: Callable[[str], None] | None,
    ) -> None:
        self.room = room
        self.fixed_now = now
        self.max_messages = max_messages
        self.reply_timeout = reply_timeout
        self.grant_timeout = grant_timeout
        self.grant_poll = grant_poll
        self.on_step = on_step
        self.hosting = False
        self.messages = 0  # grammar messages so far, both sides
        self.round = 0  # the newest round either side opened
        self.knowledge = Knowledge()
        self.pending: Plan | None = None  # the plan this side proposed in ``self.round``
        self.agreed: Plan | None = None
        self.last_reason: Reason | None = None  # the reason this side last gave
        self.planner: Planner | None = None
        self.sealed = False  # open with a sealed offer (negotiate(sealed_opening=True))

    # --- plumbing --------------------------------------------------------------------------

    def now(self) -> datetime:
        return self.fixed_now or datetime.now(UTC)

    def step(self, line: str) -> None:
        log.info("%s", line)
        if self.on_step is not None:
            self.on_step(line)

    def result(self, status: Status, detail: str, **fields: Any) -> NegotiationResult:
        self.step(f"result: {result_words(status, detail)}")
        plan = fields.get("plan")
        return NegotiationResult(
            status=status,
            venue=plan.venue.id if plan else None,
            start=plan.start.isoformat() if plan else None,
            booking_reference=fields.get("booking_reference"),
            rounds=self.round,
            detail=detail,
            messages=self.messages,
            reason=fields.get("reason"),
        )

    async def say(self, text: str, *, wait: float | None = None) -> None:
        """Say ``text``, waiting up to ``wait`` seconds (default: the reply timeout) while the
        room is paused."""
        seq = await self.room.say_when_open(text, timeout=wait or self.reply_timeout)
        self.messages += 1
        self.step(f"said #{seq}: {said_in_words(text)}")

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
                # Which rules flagged it is the owners' to read on the room page, in words.
                flagged = " (the room flagged it as a suspected injection)" if message.flags else ""
                self.step(f"ignored #{message.seq}: not a move of the negotiation{flagged}")
                continue
            self.step(f"heard #{message.seq}: {_HEARD[type(move)]}, round {move.round}")
            return move

    @property
    def plan_tools(self) -> Planner:
        assert self.planner is not None
        return self.planner

    # --- setting up -------------------------------------------------------------------------

    async def prepare(self) -> None:
        """Read the room's terms, the catalogue and this turn's cleared items."""
        context = await self.room.context()
        terms = terms_from(context.terms)
        if terms is None:
            raise _Stop(self.result("failed", "this room has no dinner terms"))
        catalogue = await self.catalogue()
        if catalogue is None or not catalogue.venues:
            raise _Stop(self.result("failed", "the room's venue catalogue could not be read"))
        own, peer = _facts(context, "own"), _facts(context, "peer")
        self.planner = Planner(own=own, peer=peer, terms=terms, catalogue=catalogue)
        role = "host" if self.hosting else "guest"
        self.step(
            f"{role}, turn {context.turn}: {len(catalogue.venues)} venues; own "
            f"{own.visible()}; cleared from the peer: {peer.visible()}"
        )

    async def catalogue(self) -> Catalogue | None:
        if SEARCH_TOOL not in _tool_names(self.room.welcome):
            self.step(f"{SEARCH_TOOL} is not among this agent's tools")
            return None
        pages: list[Mapping[str, Any]] = []
        offset: int | None = 0
        while offset is not None and len(pages) < SEARCH_PAGES:
            outcome = await self.room.act(
                SEARCH_TOOL, {"limit": 200, "offset": offset}, ref=f"venues-{uuid.uuid4().hex}"
            )
            page = tool_output(outcome.output) if outcome.status == "executed" else None
            if page is None:
                self.step(f"the venue search was {outcome.status}" + _said(outcome.detail))
                return None
            pages.append(page)
            following = page.get("next_offset")
            offset = following if isinstance(following, int) and following > offset else None
        return catalogue_from(pages)

    def candidates(self) -> list[Plan]:
        return self.plan_tools.candidates(self.now(), self.knowledge)

    # --- moves ------------------------------------------------------------------------------

    async def open_round(self, counter_reason: CounterReason | None) -> None:
        """Put this side's best plan forward (as a counter when ``counter_reason``), or say
        that no plan is possible and why."""
        planner, terms = self.plan_tools, self.plan_tools.terms
        plans = self.candidates()
        if not plans:
            await self.no_plan(planner.why_none(self.now(), self.knowledge))
        if self.messages + 2 > self.max_messages or self.round >= MAX_ROUND:
            await self.no_plan("rounds")
        best = plans[0]
        self.round += 1
        self.pending = best
        self.step(f"{len(plans)} candidate(s); proposing the best")
        if counter_reason is None:
            await self.say(format_propose(self.round, best, terms, planner.catalogue))
        else:
            await self.say(
                format_counter(self.round, counter_reason, best, terms, planner.catalogue)
            )

    async def no_plan(self, reason: NoPlanReason) -> None:
        """Say that no plan is possible, record it as this side's outcome, and stop."""
        await self.say_quietly(format_no_plan(self.round + 1, reason))
        await self.declare_no_plan(reason)
        raise _Stop(self.result("no_deal", f"no plan possible ({reason})", reason=reason))

    async def declare_no_plan(self, reason: NoPlanReason) -> None:
        if NO_PLAN_TOOL not in _tool_names(self.room.welcome):
            return
        try:
            await self.room.act(NO_PLAN_TOOL, {"reason": reason}, ref=f"no-plan-{uuid.uuid4().hex}")
        except (TimeoutError, FrameRefusedError) as exc:
            self.step(f"could not record the outcome: {str(exc) or 'timed out'}")

    def resolve(self, offer: Offer) -> tuple[Plan | None, Reason | None]:
        """The peer's offer as one of the catalogue's plans, and why this side's owner could
        not accept it (``None``: they can). The catalogue decides the venue and the price."""
        planner = self.plan_tools
        venue = planner.catalogue.venue(offer.venue)
        if venue is None:
            return None, "venue"
        plan = Plan(venue, offer.start.astimezone(planner.terms.zone))
        if (offer.party, offer.price, offer.currency) != (
            planner.terms.party_size,
            venue.price_minor,
            venue.currency,
        ):
            return plan, "venue"
        return plan, planner.own_reason(plan, self.now())

    async def answer(self, move: Proposal | Counter, *, heard: bool = True) -> None:
        """Accept the peer's plan, or counter it with this side's reason and best plan.
        ``heard``: the plan came as a message (a revealed sealed offer is not one)."""
        self.messages += int(heard)
        self.round = move.round
        if isinstance(move, Counter) and self.pending is not None:
            if move.reason == "preference":
                self.knowledge.excluded.add(self.pending.key)
            else:
                self.knowledge.declined(self.pending, move.reason)
        self.pending = None
        plan, reason = self.resolve(move.offer)
        if plan is not None and reason is None:
            self.knowledge.put_forward(plan)
            if await self.prefer_own(plan):
                return
            self.agreed = plan
            await self.say(
                format_accept(move.round, plan, self.plan_tools.terms, self.plan_tools.catalogue)
            )
            if self.hosting:
                await self.book()
            return
        if plan is not None:
            self.knowledge.excluded.add(plan.key)
            self.knowledge.put_forward(plan)
        assert reason is not None
        self.last_reason = reason
        await self.open_round(reason)

    async def prefer_own(self, offered: Plan) -> bool:
        """Counter an acceptable plan with this side's own best when that one ranks strictly
        better (liked by more of the owners, or a shorter longest trip). Only a side that
        knows both owners' likes and homes can rank for both, so only such a side does this;
        the other accepts (the peer may well know better)."""
        planner = self.plan_tools
        if not planner.ranks_for_both or self.messages + 3 > self.max_messages:
            return False
        plans = [p for p in self.candidates() if p.key != offered.key]
        if not plans or planner.preference(plans[0]) >= planner.preference(offered):
            return False
        self.knowledge.excluded.add(offered.key)
        await self.open_round("preference")
        return True

    async def book(self) -> None:
        """Book the agreed plan (host). Booked: tell the peer and stop. Denied by the owner:
        tell the peer and put the next plan forward."""
        plan, planner = self.agreed, self.plan_tools
        assert plan is not None
        terms = planner.terms
        arguments: dict[str, Any] = {
            "venue_id": plan.venue.id,
            "party_size": terms.party_size,
            "start": plan.start.isoformat(),
            "cost_cents": plan.venue.price_minor * terms.party_size,
            "currency": plan.venue.currency,
        }
        self.step(f"agreed on {_described(plan, terms, planner.catalogue)}; booking")
        ref = f"book-{uuid.uuid4().hex[:16]}"  # the idempotency key: a retry never books twice
        try:
            outcome = await self.act(arguments, ref)
            if not outcome.settled:
                self.step("waiting for my owner's approval" + _said(outcome.detail))
                outcome = await self.room.settle(
                    outcome, BOOK_TOOL, arguments, timeout=self.grant_timeout, poll=self.grant_poll
                )
        except TimeoutError:
            await self.say_quietly(format_not_booked(self.round, "timeout"))
            raise _Stop(
                self.result("agreed_not_booked", "the booking was not settled in time", plan=plan)
            ) from None
        reference = booking_reference(outcome.output)
        if outcome.status == "executed" and reference is not None:
            token = reference if re.fullmatch(_SLUG, reference) else "unknown"
            await self.say_quietly(format_booked(self.round, plan, token, terms, planner.catalogue))
            raise _Stop(self.result("booked", "booked", plan=plan, booking_reference=reference))
        self.step(f"booking {outcome.status}" + _said(outcome.detail))
        if outcome.status == "denied" and outcome.rule.startswith("grant"):
            # The owner said no to this plan: it is out, and the next one goes forward.
            # The room stays paused until the owner who said no resumes it.
            await self.say(
                format_not_booked(self.round, "denied"),
                wait=self.reply_timeout + self.grant_timeout,
            )
            self.knowledge.excluded.add(plan.key)
            self.agreed = None
            await self.open_round(None)
            return
        await self.say_quietly(format_not_booked(self.round, "failed"))
        raise _Stop(self.result("agreed_not_booked", f"booking {outcome.status}", plan=plan))

    async def act(self, arguments: dict[str, Any], ref: str) -> ActionOutcome:
        try:
            return await self.room.act(BOOK_TOOL, arguments, ref=ref)
        except TimeoutError:
            self.step("no answer to the booking yet; asking again (same key)")
            return await self.room.act(BOOK_TOOL, arguments, ref=ref)

    async def sealed_opening(self) -> bool:
        """Open with a sealed offer: this side's best plan, revealed only once the other's is
        in too, so that neither first offer anchors the other. The host then answers the
        guest's revealed offer as a proposal of round 1; the guest's offer stands as its
        proposal. False when there is nothing to seal or the room took no sealed offer: then
        the conversation opens as usual."""
        plans = self.candidates()
        welcome = self.room.welcome
        if not plans or welcome is None:
            return False
        best, terms = plans[0], self.plan_tools.terms
        offer = {
            "venue_id": best.venue.id,
            "start": best.start.isoformat(),
            "party_size": terms.party_size,
            "price_per_person_minor": best.venue.price_minor,
            "currency": best.venue.currency,
        }
        try:
            reveal = await self.room.seal_offer(offer, timeout=self.reply_timeout)
        except (FrameRefusedError, TimeoutError) as exc:
            self.step(f"no sealed opening ({str(exc) or 'timed out'}); proposing in turn")
            return False
        theirs = [_sealed(o) for agent, o in reveal.offers if agent != str(welcome.agent_id)]
        peer_offer = next((o for o in theirs if o is not None), None)
        self.step(f"sealed offers revealed ({'both' if reveal.complete else 'not all'} in)")
        if not self.hosting:
            self.round, self.pending = 1, best
            plan = self.resolve(peer_offer)[0] if peer_offer is not None else None
            if plan is not None:
                self.knowledge.put_forward(plan)  # the host is free then, as far as it knows
            return True
        if peer_offer is None:
            return False
        await self.answer(Proposal(1, peer_offer), heard=False)
        return True

    # --- the loop ---------------------------------------------------------------------------

    async def run(self) -> NegotiationResult:
        try:
            await self.prepare()
            opened = self.sealed and await self.sealed_opening()
            if self.hosting and not opened:
                await self.open_round(None)
            while True:
                wait = self.reply_timeout + (self.grant_timeout if self.agreed else 0)
                try:
                    move = await self.next_move(self.deadline(wait))
                except TimeoutError:
                    await self.no_reply()
                await self.hear(move)
        except _Stop as stop:
            return stop.result

    async def no_reply(self) -> None:
        if self.agreed is not None and not self.hosting:
            raise _Stop(self.result("agreed_not_booked", "the host went quiet", plan=self.agreed))
        await self.say_quietly(format_no_plan(self.round + 1, "no_reply"))
        await self.declare_no_plan("no_reply")
        raise _Stop(self.result("failed", "no reply in time", reason="no_reply"))

    async def hear(self, move: PeerMove) -> None:
        if isinstance(move, Proposal | Counter):
            if move.round <= self.round or self.agreed is not None:
                return  # stale, or the host is still booking what we agreed: noise
            await self.answer(move)
        elif isinstance(move, Acceptance):
            pending = self.pending
            if (
                pending is not None
                and move.round == self.round
                and (move.venue, move.start) == (pending.venue.id, pending.start)
            ):
                self.messages += 1
                self.agreed, self.pending = pending, None
                if self.hosting:
                    await self.book()
        elif isinstance(move, NoPlan):
            self.messages += 1
            await self.declare_no_plan(self.last_reason or move.reason)
            raise _Stop(
                self.result(
                    "no_deal", f"the peer found no plan ({move.reason})", reason=move.reason
                )
            )
        elif isinstance(move, Booked) and not self.hosting:
            agreed = self.agreed
            if agreed is None or (move.venue, move.start) != (agreed.venue.id, agreed.start):
                # Booked something this side never accepted: stop and ask the owner.
                await self.room.flare("contradiction")
                raise _Stop(self.result("failed", "the host reports a booking we did not accept"))
            raise _Stop(
                self.result(
                    "booked", "booked by the host", plan=agreed, booking_reference=move.reference
                )
            )
        elif isinstance(move, NotBooked) and not self.hosting and self.agreed is not None:
            if move.reason != "denied":
                raise _Stop(
                    self.result(
                        "agreed_not_booked", f"not booked ({move.reason})", plan=self.agreed
                    )
                )
            # The host's owner turned that plan down: it is out; the host proposes the next.
            self.knowledge.excluded.add(self.agreed.key)
            self.agreed = None


def _sealed(offer: Mapping[str, Any]) -> Offer | None:
    """A revealed sealed offer as an ``Offer``, read as strictly as a grammar line."""
    line = (
        f"venue={offer.get('venue_id')} start={offer.get('start')} "
        f"party={offer.get('party_size')} price={offer.get('price_per_person_minor')} "
        f"{offer.get('currency')}"
    )
    move = parse_move(f"PROPOSE round=1 {line}")
    return move.offer if isinstance(move, Proposal) else None


def _facts(context: TurnContext, side: Literal["own", "peer"]) -> OwnerFacts:
    items = context.own_items if side == "own" else context.peer_items
    by_resource: dict[str, list[Mapping[str, Any]]] = {}
    for item in items:
        by_resource.setdefault(item.resource, []).append(item.content)
    return facts_from(by_resource)


async def negotiate(
    room: RoomClient,
    *,
    now: datetime | None = None,
    max_messages: int = MAX_MESSAGES,
    reply_timeout: float = 120,
    grant_timeout: float = 900,
    grant_poll: float = 5.0,
    role: Literal["host", "guest"] | None = None,
    on_step: Callable[[str], None] | None = None,
    sealed_opening: bool = False,
) -> NegotiationResult:
    """Negotiate a dinner in the room ``room`` is connected to, and book it if this side hosts.
    ``sealed_opening``: open with a sealed simultaneous offer (both sides must ask for it).

    The role follows from the welcome (``book_table`` among its tools: host) unless ``role``
    says. ``now`` fixes the clock (for tests); otherwise the current time is used. Each wait
    for the peer lasts at most ``reply_timeout`` seconds, a wait for the owner's grant at most
    ``grant_timeout``, asking the room again every ``grant_poll`` seconds in case the answer's
    push was lost (``RoomClient.settle``). ``on_step`` is called with one line per step (also
    logged). Never raises for the room's or the peer's behaviour: a closed room, a refused
    frame or a timeout ends in a ``failed`` result."""
    if not 2 <= max_messages <= MAX_ROUND:
        raise ValueError(f"max_messages must be between 2 and {MAX_ROUND}")
    conversation = _Conversation(
        room,
        now=now,
        max_messages=max_messages,
        reply_timeout=reply_timeout,
        grant_timeout=grant_timeout,
        grant_poll=grant_poll,
        on_step=on_step,
    )
    conversation.hosting = role == "host" if role is not None else is_host(room.welcome)
    conversation.sealed = sealed_opening
    try:
        return await conversation.run()
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
    parser.add_argument("--max-messages", type=int, default=MAX_MESSAGES)
    parser.add_argument("--reply-timeout", type=seconds, default=120.0)
    parser.add_argument("--grant-timeout", type=seconds, default=900.0)
    parser.add_argument(
        "--grant-poll",
        type=seconds,
        default=5.0,
        help="while your owner decides, ask the room again every this many seconds (default 5)",
    )
    parser.add_argument(
        "--sealed", action="store_true", help="open with a sealed offer (both agents must)"
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log the SDK's details")
    args = room_args(parser, argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING)

    def out(line: str) -> None:
        print(line, flush=True)

    async def run(room: RoomClient) -> int:
        assert room.welcome is not None
        out(f"joined: {room.welcome.room.purpose} ({room.welcome.room.state})")
        result = await negotiate(
            room,
            max_messages=args.max_messages,
            reply_timeout=args.reply_timeout,
            grant_timeout=args.grant_timeout,
            grant_poll=args.grant_poll,
            role=args.role,
            on_step=out,
            sealed_opening=args.sealed,
        )
        out(
            f"{result.status}: venue={result.venue} start={result.start} "
            f"ref={result.booking_reference} messages={result.messages}"
        )
        if result.status in ("booked", "agreed_not_booked"):
            return 0
        return REFUSED if result.close_code in REFUSED_CLOSE_CODES else 1

    return await in_room(args, run)


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
