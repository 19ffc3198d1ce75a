"""The one place that answers "may this happen?".

``decide(request)`` returns a ``Decision`` (allow / deny / needs-grant, with the rule that
fired) for an action request or a disclosure. It re-reads live state on every call: the tool
policy, the signed slip (signature, key, expiry, uses), the owner's budget. Nothing is cached.

Callers use ``decide_guarded``: any exception, a check slower than the configured timeout, a
wall clock that jumped while deciding, or any answer that is not a well-formed Decision
becomes a denial (SYN-TRUST-001, invariant 4). The caller then records it and pauses the room.

Room and agent facts come from the caller (rooms sits above gatekeeper), read in the same
transaction just before deciding, so they are as live as anything read here.
"""

from __future__ import annotations

import enum
import functools
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple
from uuid import UUID

from django.conf import settings
from django.db import DatabaseError
from django.utils import timezone
from pydantic import BaseModel, ValidationError

from dining import (
    Catalogue,
    CatalogueInvalid,
    CatalogueUnknown,
    DinnerTerms,
    booking_check,
    catalogue_get,
)
from gatekeeper.errors import ToolArgumentsInvalid
from gatekeeper.policy import tool_verdict
from gatekeeper.tools.registry import spec_arguments_validate, tool_get
from slips.capabilities import VAULT_KINDS, Capability
from slips.models import VaultItem
from slips.vault import Budget, vault_open
from slips.verification import (
    CapabilityVerdict,
    RoomSlips,
    UseRecord,
    capability_verdict,
    room_slips_read,
)

logger = logging.getLogger(__name__)


class Outcome(enum.StrEnum):
    ALLOW = "allow"
    DENY = "deny"
    NEEDS_GRANT = "needs_grant"


@dataclass(frozen=True)
class Decision:
    outcome: Outcome
    rule: str
    detail: str = ""
    # Allowed disclosures: the effective capability, whose scope bounds what may be shown.
    capability: Capability | None = None
    # Validated tool arguments (actions only).
    arguments: BaseModel | None = None
    # Disclosures: the signed slip whose record cleared it, which a disclosure grant names.
    slip_id: UUID | None = None
    # Disclosures decided for a turn: the capability record that pays the use.
    record_id: int | None = None

    @property
    def allowed(self) -> bool:
        return self.outcome is Outcome.ALLOW


def deny(rule: str, detail: str = "") -> Decision:
    return Decision(Outcome.DENY, rule, detail)


@dataclass(frozen=True)
class RoomFacts:
    room_id: UUID
    state: str
    # The room's dinner terms in their JSON form (dining.DinnerTerms), None for a room that
    # is not about a dinner: bookings are then not checked against any catalogue.
    terms: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class AgentFacts:
    agent_id: UUID
    owner_id: int
    advisor_only: bool
    declared_tools: tuple[str, ...] | None
    revoked: bool
    # False while its owner has muted or blocked it, or stepped in to speak in person.
    active: bool = True


@dataclass(frozen=True)
class ActionRequest:
    """An agent asks to run ``tool`` with ``arguments`` (typed data; never parsed from text).
    ``grant_ok`` is set only by ``gatekeeper.grants`` after verifying a signed grant for exactly
    this action and these arguments."""

    room: RoomFacts
    agent: AgentFacts
    tool: str
    arguments: Mapping[str, Any]
    grant_ok: bool = False


@dataclass(frozen=True)
class DisclosureRequest:
    """May ``owner_id``'s ``resource`` be placed in ``recipient_agent_id``'s context?

    ``source_agent_id`` is the owner's own agent in this room: the one the slip was signed for.
    """

    room: RoomFacts
    owner_id: int
    source_agent_id: UUID
    recipient_agent_id: UUID
    resource: str
    recipient: Literal["own_agent", "peer_agent"] = field(default="peer_agent")


def owner_budget_limit(*, owner_id: int) -> Budget | None:
    """The owner's budget range from their vault (newest item), or None if they set none."""
    item = (
        VaultItem.objects.filter(owner_id=owner_id, kind="budget").order_by("-updated_at").first()
    )
    if item is None:
        return None
    budget = vault_open(item)
    assert isinstance(budget, Budget)
    return budget


# Tools whose arguments are checked against the room's venue catalogue.
CATALOGUE_TOOLS = frozenset({"venues_search", "book_table"})


def room_catalogue(
    terms_json: Mapping[str, Any] | None,
) -> tuple[Catalogue, DinnerTerms] | Decision:
    """A room's catalogue and terms from its terms' JSON form, or the denial saying why
    there are none usable."""
    if terms_json is None:
        return deny(
            "catalogue.no_terms",
            "This room has no dinner terms, so it has no venue catalogue to check against.",
        )
    try:
        terms = DinnerTerms.model_validate(dict(terms_json))
    except ValidationError:
        return deny("catalogue.terms_invalid", "This room's dinner terms cannot be read.")
    try:
        return catalogue_get(terms.catalogue), terms
    except CatalogueUnknown:
        return deny(
            "catalogue.unavailable",
            f"The room's venue catalogue ({terms.catalogue}) is not offered here any more.",
        )
    except CatalogueInvalid:
        return deny("catalogue.unavailable", "The room's venue catalogue cannot be read right now.")


def _catalogue_price(request: ActionRequest, arguments: BaseModel) -> int | Decision | None:
    """For a catalogue tool: the denial the catalogue gives, or (a booking) the catalogue's
    price per person, which is what the owner's budget is compared with. None when the tool
    is not checked against a catalogue (a booking in a room without dinner terms)."""
    if request.tool not in CATALOGUE_TOOLS:
        return None
    if request.tool == "book_table" and request.room.terms is None:
        return None
    found = room_catalogue(request.room.terms)
    if isinstance(found, Decision):
        return found
    if request.tool != "book_table":
        return None
    catalogue, terms = found
    a: Any = arguments
    problem = booking_check(
        catalogue=catalogue,
        terms=terms,
        venue_id=a.venue_id,
        party_size=a.party_size,
        start=a.start,
        cost_minor=a.cost_cents,
        currency=a.currency,
    )
    if problem is not None:
        # Keeps the arguments, so the refused booking is recorded as an action both owners see.
        return Decision(Outcome.DENY, problem.rule, problem.detail, arguments=arguments)
    venue = catalogue.venue(a.venue_id)
    assert venue is not None  # booking_check refused unknown venues
    return venue.price_per_person.amount_minor


@functools.singledispatch
def decide(request: object) -> Decision:
    """Decide one request; an unknown kind of request is ambiguous, hence denied."""
    return deny("gatekeeper.unknown_request", type(request).__name__)


@decide.register
def _decide_action(request: ActionRequest) -> Decision:
    spec = tool_get(request.tool)
    if spec is None:
        return deny("unknown_tool", f"No tool named {request.tool[:64]!r}.")
    try:
        arguments = spec_arguments_validate(spec=spec, arguments=dict(request.arguments))
    except ToolArgumentsInvalid as invalid:
        return deny("invalid_arguments", str(invalid))
    if request.agent.revoked:
        return deny("agent_revoked")
    if not request.agent.active:
        return deny("agent_withdrawn")
    if request.room.state != "open":
        return deny("room_not_open")
    # Deny-on-execute: the same policy that decides which tools are listed to the agent.
    policy = tool_verdict(
        agent_id=request.agent.agent_id,
        advisor_only=request.agent.advisor_only,
        declared_tools=list(request.agent.declared_tools or ()),
        tool=spec.name,
    )
    if not policy.allowed:
        # The rule travels in its own field; the sentence is for whoever reads the outcome
        # (an agent's owner, the practice demo's report), so it names no rule id.
        return deny(policy.rule, f"This agent may not use {spec.name}.")
    manifest = spec.effective_manifest
    # The catalogue, not the agent, says what a venue costs and whether it can seat the
    # party then; what it refuses no owner's grant can make true, so it is a denial.
    price_per_person = _catalogue_price(request, arguments)
    if isinstance(price_per_person, Decision):
        return price_per_person

    needs_grant: str | None = None
    if manifest.touches_owner_data:
        verdict = capability_verdict(
            room_id=request.room.room_id,
            owner_id=request.agent.owner_id,
            agent_id=request.agent.agent_id,
            resource=f"tool:{spec.name}",
            operation="act",
            recipient="own_agent",
            now=timezone.now(),
        )
        if verdict.rule == "verification_error":
            return deny("slip_verification_error")  # a failed check is never "ask the owner"
        if not verdict.allowed:
            needs_grant = f"beyond_slip.{verdict.rule}"
        elif verdict.approval_required:
            needs_grant = "approval_per_use"
    if manifest.money_argument is not None and needs_grant is None:
        # The server, not the agents' conversation, holds the spending limit. Budgets are
        # per person: a catalogue booking is compared by the catalogue's price per person.
        amount: int = (
            price_per_person
            if price_per_person is not None
            else getattr(arguments, manifest.money_argument)
        )
        currency = getattr(arguments, manifest.currency_argument or "", None)
        limit = owner_budget_limit(owner_id=request.agent.owner_id)
        if limit is None:
            needs_grant = "no_budget_known"
        elif (currency is not None and currency != limit.currency) or amount > limit.maximum:
            needs_grant = "over_budget"
    if needs_grant is None:
        return Decision(Outcome.ALLOW, "cleared", arguments=arguments)
    if request.grant_ok:
        return Decision(Outcome.ALLOW, "granted", detail=needs_grant, arguments=arguments)
    return Decision(Outcome.NEEDS_GRANT, needs_grant, arguments=arguments)


# Into the owner's own agent's context, a ``read`` record clears an item as well as a
# ``disclose`` one towards ``own_agent``/``both`` (docs/slips.md); towards the peer, only
# ``disclose`` does.
_DISCLOSURE_OPERATIONS = {"own_agent": ("read", "disclose"), "peer_agent": ("disclose",)}


def _disclosure_decision(
    verdicts: Sequence[tuple[CapabilityVerdict, UseRecord | None]],
) -> Decision:
    """A disclosure in an open room decided from the verdicts of the slip records that could
    clear it (one per operation of ``_DISCLOSURE_OPERATIONS``, in order, each with the record
    that would pay the use): the rules of ``decide(DisclosureRequest)`` and of a turn alike."""
    failed = next((v for v, _ in verdicts if v.rule == "verification_error"), None)
    if failed is not None:  # a check that failed is a denial, even if another record clears
        return deny(failed.rule)
    cleared = next(((v, r) for v, r in verdicts if v.allowed), None)
    if cleared is None:
        # The most telling refusal: a record that exists but does not clear, before "none".
        refusal = next((v for v, _ in verdicts if v.rule != "not_in_slip"), verdicts[-1][0])
        return deny(refusal.rule)
    verdict, record = cleared
    record_id = record.id if record is not None else None
    if verdict.approval_required:
        # Only a signed disclosure grant for exactly this slip, scope, item kind and recipient
        # clears it (``gatekeeper.grants.disclosure_grant_claim``); the caller asks for one.
        return Decision(
            Outcome.NEEDS_GRANT,
            "approval_per_use",
            capability=verdict.capability,
            slip_id=verdict.slip_id,
            record_id=record_id,
        )
    return Decision(
        Outcome.ALLOW,
        "cleared",
        capability=verdict.capability,
        slip_id=verdict.slip_id,
        record_id=record_id,
    )


@decide.register
def _decide_disclosure(request: DisclosureRequest) -> Decision:
    if request.room.state != "open":
        return deny("room_not_open")
    now = timezone.now()
    verdicts = [
        capability_verdict(
            room_id=request.room.room_id,
            owner_id=request.owner_id,
            agent_id=request.source_agent_id,
            resource=request.resource,
            operation=operation,
            recipient=request.recipient,
            now=now,
        )
        for operation in _DISCLOSURE_OPERATIONS[request.recipient]
    ]
    # One request's verdicts name no record: its use is paid by ``capability_use``.
    return _disclosure_decision([(verdict, None) for verdict in verdicts])


# --- a context turn: every disclosure it may make, decided together -------------------------


@dataclass(frozen=True)
class TurnDisclosures:
    """Which of the room's vault items may go into ``recipient_agent_id``'s context this turn.

    The facts are the caller's, read in the turn's transaction just before deciding (the room
    locked): the room, the recipient's seat (its owner, whether its agent is revoked, whether
    its standing is active), the other seat, and the room's tier (``room_tier_from_ranks``).
    Deciding reads the room's live slips once, locking their capability records, and decides
    each (owner, item kind) a live slip mentions for disclosure to this recipient.
    """

    room: RoomFacts
    recipient_agent_id: UUID
    recipient_owner_id: int
    recipient_revoked: bool
    recipient_active: bool
    peer: tuple[int, UUID] | None  # the other seat's owner and agent
    tier: str


class TurnDecision(NamedTuple):
    request: DisclosureRequest
    decision: Decision


@dataclass(frozen=True)
class TurnDecisions:
    """One decision per (owner, item kind) that may feed the turn, in a stable order; or,
    when a check failed (``error``, the rule that pauses the room), none."""

    items: tuple[TurnDecision, ...] = ()
    error: str | None = None


def _turn_sources(request: TurnDisclosures, slips: RoomSlips) -> list[DisclosureRequest]:
    """The (owner, item kind) pairs the live slips of the room's two agents mention for
    disclosure to the recipient. Only a shortlist: each is decided in full."""
    me = request.recipient_agent_id
    signed_for = {me: request.recipient_owner_id}
    if request.peer is not None:
        signed_for[request.peer[1]] = request.peer[0]
    # By (recipient, kind): a recipient names one seat, so one owner and agent.
    sources: dict[tuple[str, str], tuple[int, UUID]] = {}
    for checked in slips.slips.values():
        slip = checked.slip
        if signed_for.get(slip.agent_id) != slip.owner_id:
            continue  # a slip binds its own owner's seat
        own = slip.agent_id == me
        recipient = "own_agent" if own else "peer_agent"
        for record in checked.records.values():
            if record.resource in VAULT_KINDS and (
                record.operation == "disclose" or (own and record.operation == "read")
            ):  # "read": own agent only
                sources[(recipient, record.resource)] = (slip.owner_id, slip.agent_id)
    return [
        DisclosureRequest(
            room=request.room,
            owner_id=owner_id,
            source_agent_id=agent_id,
            recipient_agent_id=me,
            resource=resource,
            recipient=recipient,  # type: ignore[arg-type]
        )
        for (recipient, resource), (owner_id, agent_id) in sorted(sources.items())
    ]


def _decide_turn(request: TurnDisclosures) -> TurnDecisions:
    # Nothing is read, shown or asked while the room is not open or the recipient may not
    # take part (revoked, or muted, blocked or stepped aside for its owner).
    if request.room.state != "open" or request.recipient_revoked or not request.recipient_active:
        return TurnDecisions()
    slips = room_slips_read(room_id=request.room.room_id, tier=request.tier, lock=True)
    now = timezone.now()
    decided: list[TurnDecision] = []
    for source in _turn_sources(request, slips):
        verdicts = slips.verdicts(
            owner_id=source.owner_id,
            agent_id=source.source_agent_id,
            resource=source.resource,
            operations=_DISCLOSURE_OPERATIONS[source.recipient],
            recipient=source.recipient,
            now=now,
        )
        decided.append(TurnDecision(source, _disclosure_decision(verdicts)))
    return TurnDecisions(tuple(decided))


def decide_turn_guarded(request: TurnDisclosures) -> TurnDecisions:
    """Decide a turn's disclosures, failing closed as ``decide_guarded`` does: an error, a
    turn slower than the timeout, a clock jump or a malformed answer fails the whole turn
    (``error``), so nothing it guarded is shown and the caller pauses the room."""
    timeout: float = settings.SYNAPSIA["GATEKEEPER_TIMEOUT_SECONDS"]
    started_wall, started = time.time(), time.monotonic()
    try:
        decided = _decide_turn(request)
    except DatabaseError:
        raise  # the caller's transaction is broken: it rolls back and pauses the room
    except Exception:
        logger.exception("gatekeeper turn check failed: denying")
        return TurnDecisions(error="gatekeeper.error")
    elapsed = time.monotonic() - started
    if not isinstance(decided, TurnDecisions) or not all(
        isinstance(d.decision, Decision) and isinstance(d.decision.outcome, Outcome)
        for d in decided.items
    ):
        return TurnDecisions(error="gatekeeper.ambiguous")
    if elapsed > timeout:
        return TurnDecisions(error="gatekeeper.timeout")
    if abs((time.time() - started_wall) - elapsed) > settings.SYNAPSIA["CLOCK_JUMP_SECONDS"]:
        return TurnDecisions(error="gatekeeper.clock_jump")
    errors = [
        d.decision.rule
        for d in decided.items
        if d.decision.outcome is Outcome.DENY and _is_check_error(d.decision.rule)
    ]
    if errors:
        return TurnDecisions(decided.items, error=errors[0])
    return decided


# Denials that mean a check failed rather than said no: these pause the room.
_CHECK_ERROR_RULES = frozenset({"slip_verification_error", "verification_error"})


def _is_check_error(rule: str) -> bool:
    return rule.startswith("gatekeeper.") or rule in _CHECK_ERROR_RULES


def ask_refusal_rule(room: RoomFacts) -> str:
    """The denial recorded when an agent asks for a kind of the other owner's items and this
    turn's decisions disclosed none: it does not say whether such an item exists."""
    return "disclosure.not_cleared" if room.state == "open" else "disclosure.room_not_open"


def decide_guarded(request: object) -> Decision:
    """``decide`` that fails closed: errors, slowness, clock jumps and malformed answers deny."""
    timeout: float = settings.SYNAPSIA["GATEKEEPER_TIMEOUT_SECONDS"]
    started_wall, started = time.time(), time.monotonic()
    try:
        decision = decide(request)
    except Exception as exc:  # any failure inside a check is a denial, never a pass
        logger.exception("gatekeeper check failed: denying")
        return deny("gatekeeper.error", type(exc).__name__)
    elapsed = time.monotonic() - started
    if not isinstance(decision, Decision) or not isinstance(decision.outcome, Outcome):
        return deny("gatekeeper.ambiguous")
    if elapsed > timeout:
        return deny("gatekeeper.timeout", f"{elapsed:.3f}s > {timeout}s")
    # Expiry checks read the wall clock; if it moved unlike the monotonic one, they can't be
    # trusted for this decision.
    if abs((time.time() - started_wall) - elapsed) > settings.SYNAPSIA["CLOCK_JUMP_SECONDS"]:
        return deny("gatekeeper.clock_jump")
    return decision
