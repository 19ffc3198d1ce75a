"""The decision table: every (tool, policy, slip, tier, grant) combination we can enumerate,
decided by ``gatekeeper.decide`` against real rows (signed slips, device keys, policy rows, the
sealed budget) and compared with the rules written out below, independently of decide().

How to read it: ``expected()`` is the specification. It says, in order:

1. The policy gate (deny-on-execute) comes first and no slip or grant can open it: an
   advisor-only agent gets read-only tools only; declared hints that leave the tool out deny;
   then the server-owned policy (deny beats allow; an allow list denies what it leaves out;
   otherwise the profile default).
2. The slip: a tool it does not clear (no slip, expired, signed by a revoked key, uses spent)
   is beyond the slip and needs the owner's grant; a capability with approval ``per_use``, or
   any action in a Sandbox room (Sandbox asks before every action), needs a grant too.
3. Money: only when nothing else needs a grant, the server holds the limit: no budget in the
   vault, an amount above the maximum, or another currency needs a grant.
4. A grant (``grant_ok``, set only after a signed grant for exactly this action verified) turns
   "needs a grant" into "allow (granted)"; it never turns a denial into anything else.

One test per slip state builds its room and slip once; tiers, budgets, policies, tools and
grant states are then varied in place and decided directly with RoomFacts/AgentFacts.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pytest

from gatekeeper.decision import ActionRequest, AgentFacts, Outcome, RoomFacts, decide
from gatekeeper.models import ToolPolicyRule
from gatekeeper.tools import tool_get
from slips import services as slip_services
from slips import vault
from slips.models import Slip, SlipCapability, VaultItem
from slips.verification import capability_use
from tests.slips.conftest import canonical_text, enroll, slip_payload

pytestmark = pytest.mark.django_db

START = "2026-12-04T19:00:00+00:00"
BUDGET_MAX = 12_000  # EUR cents, the owner's vault budget is 40.00-120.00 EUR
TOOLS = ("propose_time", "book_table", "spend", "send_invitation", "publish_artifact")

# --- the axes --------------------------------------------------------------------------------


@dataclass(frozen=True)
class ToolCase:
    """One tool called with one set of arguments, with or without a budget in the vault."""

    name: str
    tool: str
    arguments: dict[str, Any]
    budget_known: bool
    # None: the tool moves no money; else whether the amount is within the owner's budget.
    within_budget: bool | None = None


def _book(cents: int, currency: str = "EUR") -> dict[str, Any]:
    return {
        "venue_id": "nopa",
        "party_size": 2,
        "start": START,
        "cost_cents": cents,
        "currency": currency,
    }


def _spend(cents: int, currency: str = "EUR") -> dict[str, Any]:
    return {"amount_cents": cents, "currency": currency, "payee_id": "nopa", "purpose": "deposit"}


_PLAIN = {
    "propose_time": {"start": START, "duration_minutes": 90},
    "send_invitation": {"recipient": "peer", "event_start": START, "venue_id": "nopa"},
    "publish_artifact": {"title": "Plan", "body": "Dinner at Nopa, 19:00.", "format": "plain"},
}

TOOL_CASES: tuple[ToolCase, ...] = (
    # Tools that move no money, with and without a budget (the budget must not matter).
    *(ToolCase(f"{t}/budget", t, a, True) for t, a in _PLAIN.items()),
    *(ToolCase(f"{t}/no-budget", t, a, False) for t, a in _PLAIN.items()),
    # Money tools: exactly at the maximum is within; one cent more, or another currency, is not.
    ToolCase("book_table/at-max", "book_table", _book(BUDGET_MAX), True, True),
    ToolCase("book_table/over", "book_table", _book(BUDGET_MAX + 1), True, False),
    ToolCase("book_table/other-currency", "book_table", _book(100, "USD"), True, False),
    ToolCase("book_table/no-budget", "book_table", _book(100), False, False),
    ToolCase("spend/at-max", "spend", _spend(BUDGET_MAX), True, True),
    ToolCase("spend/over", "spend", _spend(BUDGET_MAX + 1), True, False),
    ToolCase("spend/other-currency", "spend", _spend(100, "GBP"), True, False),
    ToolCase("spend/no-budget", "spend", _spend(100), False, False),
)

POLICIES = (
    "default_allow_all",  # no entry applies, TOOL_POLICY_DEFAULT=allow_all
    "default_deny_all",  # no entry applies, TOOL_POLICY_DEFAULT=deny_all (production)
    "explicit_allow",  # deny_all default, an allow row for this agent and tool
    "explicit_deny",  # allow_all default, a deny row for this agent and tool
    "deny_beats_allow",  # allow row for this agent and tool, deny row for every agent ("*")
    "allow_list_other",  # allow_all default, an allow row for this agent naming another tool
    "advisor_only",  # allow_all default, the agent is registered advisor-only
    "hints_exclude",  # allow_all default, the agent declared every other tool
    "hints_include",  # allow_all default, the agent declared exactly this tool
)
SLIPS = ("none", "clears", "per_use", "expired", "key_revoked", "uses_exhausted")
TIERS = ("collaborative", "room_only", "sandbox")
GRANTS = (False, True)


@dataclass(frozen=True)
class Row:
    tool: ToolCase
    policy: str
    slip: str
    tier: str
    granted: bool

    def __str__(self) -> str:
        grant = "granted" if self.granted else "no grant"
        return f"{self.tool.name} | {self.policy} | slip {self.slip} | {self.tier} | {grant}"


def rows_for(slip: str) -> list[Row]:
    # Budget outermost, then tier, then policy: the order the test changes database state in.
    cases = sorted(TOOL_CASES, key=lambda c: not c.budget_known)
    return [
        Row(case, policy, slip, tier, granted)
        for case, tier, policy, granted in itertools.product(cases, TIERS, POLICIES, GRANTS)
    ]


# --- the rules, written out ------------------------------------------------------------------

READ_ONLY_TOOLS = frozenset({"propose_time"})
MONEY_TOOLS = frozenset({"book_table", "spend"})
SLIP_DOES_NOT_CLEAR = {
    "none": "no_slip",
    "expired": "slip_expired",
    "key_revoked": "key_revoked",
    "uses_exhausted": "uses_exhausted",
}


def expected(row: Row, *, agent_id: str) -> tuple[Outcome, str]:
    """What must happen, from the product rules alone (never by calling decide())."""
    tool = row.tool.tool
    # 1. Policy gate: deny-on-execute, before slips and grants.
    if row.policy == "advisor_only" and tool not in READ_ONLY_TOOLS:
        return Outcome.DENY, "agent.advisor_only"
    if row.policy == "hints_exclude":
        return Outcome.DENY, "agent.not_declared"
    if row.policy == "default_deny_all":
        return Outcome.DENY, "policy.default.deny_all"
    if row.policy == "explicit_deny":
        return Outcome.DENY, f"policy.deny:db:{agent_id}"
    if row.policy == "deny_beats_allow":
        return Outcome.DENY, "policy.deny:db:*"
    if row.policy == "allow_list_other":
        return Outcome.DENY, "policy.not_allowed"
    # 2. The slip.
    needs: str | None = None
    if row.slip in SLIP_DOES_NOT_CLEAR:
        needs = f"beyond_slip.{SLIP_DOES_NOT_CLEAR[row.slip]}"
    elif row.slip == "per_use" or row.tier == "sandbox":
        needs = "approval_per_use"
    # 3. Money, only when the slip alone would have let it run.
    if needs is None and tool in MONEY_TOOLS:
        if not row.tool.budget_known:
            needs = "no_budget_known"
        elif not row.tool.within_budget:
            needs = "over_budget"
    # 4. The grant.
    if needs is None:
        return Outcome.ALLOW, "cleared"
    if row.granted:
        return Outcome.ALLOW, "granted"
    return Outcome.NEEDS_GRANT, needs


# --- the world each row is decided in --------------------------------------------------------


@dataclass
class World:
    """One open room with Alice's agent, her slip in the state under test, and her budget."""

    room_id: Any
    owner: Any
    agent_id: Any
    settings: Any


def _submit(setup: Any, key: Any, device: Any, *, approval: str, now: datetime | None) -> Slip:
    owner = setup.a.owner
    issued = int((now or datetime.now(UTC)).timestamp())
    payload = slip_payload(
        owner=owner,
        room_id=setup.room.id,
        agent_id=setup.a.agent.id,
        key=key,
        issued_at=issued,
        lifetime=3600,
        capabilities=[
            {"resource": f"tool:{t}", "operation": "act", "approval": approval, "max_uses": 2}
            for t in TOOLS
        ],
    )
    text = canonical_text(payload)
    return slip_services.slip_submit(
        owner=owner,
        room_id=setup.room.id,
        seated_agent_id=setup.a.agent.id,
        payload=text,
        signature=device.sign(text),
        now=now,
    )


def _build_slip(setup: Any, state: str) -> None:
    """Put Alice's slip for her agent into ``state`` through the real services."""
    if state == "none":
        return
    owner = setup.a.owner
    key, device = enroll(owner)
    if state == "expired":
        # Signed and accepted two hours ago with a one-hour lifetime: expired by now.
        past = datetime.fromtimestamp(time.time() - 7200, tz=UTC)
        _submit(setup, key, device, approval="none", now=past)
        return
    _submit(setup, key, device, approval="per_use" if state == "per_use" else "none", now=None)
    if state == "key_revoked":
        slip_services.key_revoke(owner=owner, key_id=key.id)
    elif state == "uses_exhausted":
        for tool in TOOLS:  # spend both uses of each capability, the way a disclosure does
            for _ in range(2):
                assert capability_use(
                    room_id=setup.room.id,
                    owner_id=owner.pk,
                    agent_id=setup.a.agent.id,
                    resource=f"tool:{tool}",
                    operation="act",
                    recipient="own_agent",
                    now=datetime.now(UTC),
                ).allowed
        assert not SlipCapability.objects.filter(uses_left__gt=0).exists()


def _set_budget(world: World, known: bool) -> None:
    VaultItem.objects.filter(owner=world.owner, kind="budget").delete()
    if known:
        vault.vault_item_create(
            owner=world.owner,
            content={"kind": "budget", "currency": "EUR", "minimum": 4000, "maximum": BUDGET_MAX},
        )


def _apply_policy(world: World, policy: str, tool: str) -> AgentFacts:
    """Set the server-owned policy for ``tool`` and return the agent as decide() sees it."""
    ToolPolicyRule.objects.all().delete()
    agent_key = str(world.agent_id)
    default = "deny_all" if policy in ("default_deny_all", "explicit_allow") else "allow_all"
    if world.settings.SYNAPSIA["TOOL_POLICY_DEFAULT"] != default:
        world.settings.SYNAPSIA = {**world.settings.SYNAPSIA, "TOOL_POLICY_DEFAULT": default}
    rules: list[tuple[str, str, str]] = {
        "explicit_allow": [(agent_key, tool, "allow")],
        "explicit_deny": [(agent_key, tool, "deny")],
        "deny_beats_allow": [(agent_key, tool, "allow"), ("*", tool, "deny")],
        "allow_list_other": [(agent_key, next(t for t in TOOLS if t != tool), "allow")],
    }.get(policy, [])
    ToolPolicyRule.objects.bulk_create(
        ToolPolicyRule(agent_key=a, tool=t, effect=e) for a, t, e in rules
    )
    declared: tuple[str, ...] | None = None
    if policy == "hints_exclude":
        declared = tuple(t for t in TOOLS if t != tool)
    elif policy == "hints_include":
        declared = (tool,)
    return AgentFacts(
        agent_id=world.agent_id,
        owner_id=world.owner.pk,
        advisor_only=policy == "advisor_only",
        declared_tools=declared,
        revoked=False,
    )


def run_table(world: World, rows: list[Row], choose_tier: Callable[[str], None]) -> list[str]:
    """Decide every row; return one line per row where decide() and the rules disagree."""
    mismatches: list[str] = []
    room = RoomFacts(room_id=world.room_id, state="open")
    budget: bool | None = None
    tier: str | None = None
    for row in rows:
        if row.tool.budget_known != budget:
            budget = row.tool.budget_known
            _set_budget(world, budget)
        if row.tier != tier:
            tier = row.tier
            choose_tier(tier)
        agent = _apply_policy(world, row.policy, row.tool.tool)
        decision = decide(
            ActionRequest(
                room=room,
                agent=agent,
                tool=row.tool.tool,
                arguments=row.tool.arguments,
                grant_ok=row.granted,
            )
        )
        want = expected(row, agent_id=str(world.agent_id))
        got = (decision.outcome, decision.rule)
        if got != want:
            mismatches.append(f"{row}: expected {want[0]}/{want[1]}, decided {got[0]}/{got[1]}")
        elif decision.outcome is not Outcome.DENY:
            # What is allowed or put to the owner carries the validated arguments (the grant
            # is bound to their hash); a denial carries nothing to execute.
            assert decision.arguments is not None, row
    return mismatches


# --- the tests -------------------------------------------------------------------------------


def test_the_table_enumerates_every_combination() -> None:
    rows = [row for slip in SLIPS for row in rows_for(slip)]
    assert len(rows) == len(TOOL_CASES) * len(POLICIES) * len(SLIPS) * len(TIERS) * len(GRANTS)
    assert len({str(row) for row in rows}) == len(rows) == 4_536
    assert {c.tool for c in TOOL_CASES} == set(TOOLS)
    # Every starter tool is in the table, and the rules' read-only set agrees with the manifests.
    specs = {t: tool_get(t) for t in TOOLS}
    assert all(spec is not None for spec in specs.values())
    assert {t for t, s in specs.items() if s and s.read_only} == READ_ONLY_TOOLS
    assert {t for t, s in specs.items() if s and s.effective_manifest.money_argument} == MONEY_TOOLS
    outcomes = {expected(r, agent_id="a")[0] for r in rows}
    assert outcomes == set(Outcome)  # the table exercises all three answers


@pytest.mark.parametrize("slip", SLIPS)
def test_decision_table(slip: str, make_open_room: Any, settings: Any) -> None:
    setup = make_open_room()
    _build_slip(setup, slip)
    world = World(setup.room.id, setup.a.owner, setup.a.agent.id, settings)

    def choose_tier(tier: str) -> None:
        # Alice is the only owner with a slip or a choice, so the room runs under her tier.
        slip_services.tier_choose(owner=setup.a.owner, room_id=setup.room.id, tier=tier)

    rows = rows_for(slip)
    mismatches = run_table(world, rows, choose_tier)
    assert not mismatches, f"{len(mismatches)} of {len(rows)} rows disagree:\n" + "\n".join(
        mismatches[:40]
    )
