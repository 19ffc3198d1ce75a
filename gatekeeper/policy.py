"""Per-agent tool policy: which registered tools an agent may be offered and may call.

Server-owned (never the agent's say): entries come from an optional JSON file
(``settings.SYNAPSIA["TOOL_POLICY_FILE"]``) and from ``ToolPolicyRule`` rows edited in the
admin. Both are re-read on every call: no cached trust.

How one (agent, tool) is decided, first match wins:

1. the tool is not registered                          -> deny  ``tool.unknown``
2. a deny entry for the agent or ``*`` names the tool (or ``*``) -> deny  ``policy.deny``
3. an allow entry for the agent or ``*`` names it          -> allow ``policy.allow``
4. some allow entry exists for the agent or ``*`` (allow-list mode) -> deny ``policy.not_allowed``
5. no entry applies                                     -> ``TOOL_POLICY_DEFAULT``
   (``deny_all`` in production, ``allow_all`` in the embedded profile; anything else is
   read as ``deny_all``)

An unreadable or invalid policy file denies everything (``policy.unreadable``).

Effective tools = policy ∩ slip ∩ the agent's declared hints (when it declares any), and an
advisor-only agent never gets a tool that is not read-only, whatever the entries say.
"""

from __future__ import annotations

import functools
import json
import logging
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.apps import apps
from django.conf import settings
from django.db import connection

from gatekeeper.errors import ToolPolicyError
from gatekeeper.models import PolicyEffect, ToolPolicyRule
from gatekeeper.tools import ToolSpec, tool_get, tool_names, tools_all
from synapsia.db.statements import statement_cursor

logger = logging.getLogger(__name__)

ANY = "*"
DEFAULTS = ("deny_all", "allow_all")
MAX_POLICY_FILE_BYTES = 1024 * 1024


# The database's rules for an agent and ``*`` as a caller's statement read them
# (``policy_rules_column``): (agent key, tool, effect), in ``_rules_sql``'s order.
PolicyRules = tuple[tuple[str, str, str], ...]


@dataclass(frozen=True)
class PolicyVerdict:
    """Whether the policy allows a tool, and the rule that decided (for the ledger)."""

    allowed: bool
    rule: str


@dataclass(frozen=True)
class PolicyEntry:
    agent_key: str
    tool: str
    effect: str
    source: str  # "file" or "db"


# --- validation ------------------------------------------------------------------------------


def _agent_key_check(agent_key: str) -> str:
    if agent_key == ANY:
        return ANY
    try:
        return str(uuid.UUID(agent_key))
    except (ValueError, AttributeError, TypeError):
        raise ToolPolicyError(f"{agent_key!r} is neither an agent id (UUID) nor *.") from None


def _agent_advisor_only(agent_key: str) -> bool | None:
    """Whether the agent with this id is advisor-only; None if there is no such agent.

    Looked up by app label rather than imported: rooms depends on gatekeeper, not the other
    way round, and this reads one column of one row at validation time only.
    """
    agent_model = apps.get_model("rooms", "Agent")
    row = agent_model.objects.filter(id=agent_key).values("advisor_only").first()
    return None if row is None else bool(row["advisor_only"])


def tool_policy_entry_validate(*, agent_key: str, tool: str, effect: str) -> None:
    """Refuse an entry that names an unknown tool, is malformed, or would give an advisor-only
    agent a tool that is not read-only. Raises ``ToolPolicyError`` with a clear message."""
    key = _agent_key_check(agent_key)
    if effect not in PolicyEffect.values:
        raise ToolPolicyError(f"Effect must be allow or deny (got {effect!r}).")
    if tool != ANY and tool_get(tool) is None:
        raise ToolPolicyError(f"No tool called {tool[:64]!r} is registered.")
    if effect != PolicyEffect.ALLOW or key == ANY:
        return
    granted = tools_all() if tool == ANY else (tool_get(tool),)
    mutating = sorted(spec.name for spec in granted if spec is not None and not spec.read_only)
    if mutating and _agent_advisor_only(key):
        raise ToolPolicyError(
            f"Agent {key} is advisor-only: it may only be allowed read-only tools, and "
            f"{', '.join(mutating)} {'is' if len(mutating) == 1 else 'are'} not read-only."
        )


def tool_hints_validate(*, advisor_only: bool, declared_tools: list[str] | None) -> None:
    """Check an agent's own tool hints at registration: every name must be a registered tool,
    and an advisor-only agent may declare read-only tools only. Raises ``ToolPolicyError``."""
    if declared_tools is None:
        return
    if not isinstance(declared_tools, list) or not all(isinstance(t, str) for t in declared_tools):
        raise ToolPolicyError("Declared tools must be a list of tool names.")
    unknown = sorted({t for t in declared_tools if tool_get(t) is None})
    if unknown:
        listed = ", ".join(repr(t[:64]) for t in unknown[:10])
        raise ToolPolicyError(f"Unknown tool names: {listed}.")
    if advisor_only:
        mutating = sorted({t for t in declared_tools if not _spec(t).read_only})
        if mutating:
            raise ToolPolicyError(
                "An advisor-only agent may declare read-only tools only; not read-only: "
                + ", ".join(mutating)
                + "."
            )


def _spec(name: str) -> ToolSpec:
    spec = tool_get(name)
    assert spec is not None  # callers check registration first
    return spec


def tool_policy_rule_put(
    *, agent_id: uuid.UUID | str, tool: str, effect: str, note: str = ""
) -> ToolPolicyRule:
    """Store one policy entry as a database row (validated exactly as the admin would), or
    return the existing identical one. Used where the server itself configures agents (the
    practice room's seeding); owners' agents are configured by operators in the admin."""
    agent_key = policy_agent_key(agent_id)
    tool_policy_entry_validate(agent_key=agent_key, tool=tool, effect=effect)
    rule, _ = ToolPolicyRule.objects.get_or_create(
        agent_key=agent_key, tool=tool, effect=effect, defaults={"note": note[:200]}
    )
    return rule


# --- loading ---------------------------------------------------------------------------------


def tool_policy_file_load(*, path: str) -> tuple[PolicyEntry, ...]:
    """Parse and validate a policy file. Raises ``ToolPolicyError`` naming the problem.

    Format::

        {"version": 1,
         "agents": {"*": {"allow": ["propose_time"], "deny": []},
                    "<agent uuid>": {"allow": ["*"], "deny": ["spend"]}}}
    """
    file = Path(path)
    try:
        raw = file.read_bytes()
    except OSError as exc:
        raise ToolPolicyError(f"Tool policy file {path} cannot be read ({exc.strerror}).") from None
    if len(raw) > MAX_POLICY_FILE_BYTES:
        raise ToolPolicyError(f"Tool policy file {path} is larger than 1 MiB.")
    try:
        data = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ToolPolicyError(f"Tool policy file {path} is not JSON ({exc}).") from None
    if not isinstance(data, dict) or set(data) != {"version", "agents"} or data["version"] != 1:
        raise ToolPolicyError(
            f'Tool policy file {path} must be {{"version": 1, "agents": {{...}}}}.'
        )
    agents = data["agents"]
    if not isinstance(agents, dict):
        raise ToolPolicyError(f"Tool policy file {path}: agents must be an object.")
    entries: list[PolicyEntry] = []
    for agent_key, lists in agents.items():
        where = f"Tool policy file {path}, agent {agent_key!r}"
        if not isinstance(lists, dict) or not set(lists) <= {"allow", "deny"}:
            raise ToolPolicyError(f"{where}: expected an object with allow and/or deny lists.")
        for effect, tools in lists.items():
            if not isinstance(tools, list) or not all(isinstance(t, str) for t in tools):
                raise ToolPolicyError(f"{where}: {effect} must be a list of tool names.")
            for tool in tools:
                try:
                    tool_policy_entry_validate(agent_key=agent_key, tool=tool, effect=effect)
                except ToolPolicyError as exc:
                    raise ToolPolicyError(f"{where}: {exc.message}") from None
                entries.append(PolicyEntry(_agent_key_check(agent_key), tool, effect, "file"))
    return tuple(entries)


def _entries_for(agent_key: str, rules: PolicyRules | None = None) -> tuple[PolicyEntry, ...]:
    """Every entry for this agent or ``*``, read now from the file and the database (or, for
    the database's, ``rules`` as the caller's statement read them a moment ago)."""
    keys = {ANY, agent_key}
    entries: list[PolicyEntry] = []
    path = settings.SYNAPSIA.get("TOOL_POLICY_FILE") or ""
    if path:
        entries.extend(e for e in tool_policy_file_load(path=path) if e.agent_key in keys)
    if rules is None:
        # Read live on every call, by one statement written once per process (no ORM
        # compilation on the connect and act paths); the rows come in the model's order.
        with statement_cursor() as cursor:
            cursor.execute(_rules_sql(connection.vendor), [ANY, agent_key])
            rules = tuple(cursor.fetchall())
    elif any(a not in keys for a, _, _ in rules):
        raise ValueError("policy rules read for another agent")
    entries.extend(PolicyEntry(str(a), str(t), str(e), "db") for a, t, e in rules)
    return tuple(entries)


def policy_agent_key(agent_id: uuid.UUID | str) -> str:
    """The key an agent's policy entries name it by (its id's canonical text)."""
    return _agent_key_check(str(agent_id))


def policy_rules_column(vendor: str, agent_key: str) -> str:
    """The database's rules for ``*`` and one agent as a scalar subquery: a column of a
    caller's statement (an agent's connect reads them with its seat, one round trip fewer).
    ``agent_key``: the SQL that gives the agent's key there (a placeholder, or an expression
    of the statement's own columns). One JSON array of ``[agent key, tool, effect]`` in
    ``_rules_sql``'s order (NULL or empty for none), for ``policy_rules_parse``. Only our own
    table name and ``*`` are interpolated."""
    table = connection.ops.quote_name(ToolPolicyRule._meta.db_table)
    if vendor == "postgresql":
        return (
            "(SELECT json_agg(json_build_array(p.agent_key, p.tool, p.effect) "  # noqa: S608
            f"ORDER BY p.agent_key, p.tool, p.effect) FROM {table} p "
            f"WHERE p.agent_key IN ('{ANY}', {agent_key}))"
        )
    # SQLite's json_group_array keeps the order its rows come in.
    return (
        "(SELECT json_group_array(json_array(agent_key, tool, effect)) FROM "  # noqa: S608
        f"(SELECT agent_key, tool, effect FROM {table} WHERE agent_key IN ('{ANY}', "
        f"{agent_key}) ORDER BY agent_key, tool, effect))"
    )


def policy_rules_parse(value: Any) -> PolicyRules:
    """``policy_rules_column``'s value as read: PostgreSQL's driver parses ``json`` itself
    (None for no rows), SQLite gives the text."""
    if value is None:
        return ()
    rows: Sequence[Sequence[Any]] = json.loads(value) if isinstance(value, str | bytes) else value
    return tuple((str(a), str(t), str(e)) for a, t, e in rows)


@functools.cache
def _rules_sql(vendor: str) -> str:
    """The policy rules of two agent keys (``*`` and the agent's); only our own table name
    is interpolated."""
    table = connection.ops.quote_name(ToolPolicyRule._meta.db_table)
    return (
        f"SELECT agent_key, tool, effect FROM {table} "  # noqa: S608
        "WHERE agent_key IN (%s, %s) ORDER BY agent_key, tool, effect"
    )


def _default_allows() -> tuple[bool, str]:
    default = settings.SYNAPSIA.get("TOOL_POLICY_DEFAULT")
    if default not in DEFAULTS:
        # A typo must not open everything up.
        return False, "policy.default_misconfigured"
    return default == "allow_all", f"policy.default.{default}"


def _decide(tool: str, entries: tuple[PolicyEntry, ...]) -> PolicyVerdict:
    if tool_get(tool) is None:
        return PolicyVerdict(False, "tool.unknown")
    matching = [e for e in entries if e.tool in (tool, ANY)]
    for entry in matching:
        if entry.effect == PolicyEffect.DENY:
            return PolicyVerdict(False, f"policy.deny:{entry.source}:{entry.agent_key}")
    for entry in matching:
        if entry.effect == PolicyEffect.ALLOW:
            return PolicyVerdict(True, f"policy.allow:{entry.source}:{entry.agent_key}")
    if any(e.effect == PolicyEffect.ALLOW for e in entries):
        return PolicyVerdict(False, "policy.not_allowed")
    allowed, rule = _default_allows()
    return PolicyVerdict(allowed, rule)


def _policy_read(
    agent_id: uuid.UUID | str, rules: PolicyRules | None = None
) -> tuple[PolicyEntry, ...] | PolicyVerdict:
    try:
        return _entries_for(policy_agent_key(agent_id), rules)
    except ToolPolicyError as exc:
        logger.error("tool policy unreadable, denying every tool: %s", exc.message)
        return PolicyVerdict(False, "policy.unreadable")


# --- questions the decision code asks --------------------------------------------------------


def tool_policy_allows(*, agent_id: uuid.UUID | str, tool: str) -> PolicyVerdict:
    """What the server-owned policy alone says about ``agent_id`` calling ``tool`` (re-read on
    every call). Advisor-only and hints are applied by ``tool_verdict``/``tools_effective``."""
    read = _policy_read(agent_id)
    if isinstance(read, PolicyVerdict):
        return read
    return _decide(tool, read)


def tool_verdict(
    *,
    agent_id: uuid.UUID | str,
    advisor_only: bool,
    declared_tools: list[str] | None,
    tool: str,
) -> PolicyVerdict:
    """Deny-on-execute: may this agent call ``tool`` at all (before slips and grants)?

    Order: unknown tool, advisor-only vs a tool that is not read-only, the agent's own hints
    (when it declares any), then the policy.
    """
    spec = tool_get(tool)
    if spec is None:
        return PolicyVerdict(False, "tool.unknown")
    if advisor_only and not spec.read_only:
        return PolicyVerdict(False, "agent.advisor_only")
    if declared_tools and tool not in declared_tools:
        return PolicyVerdict(False, "agent.not_declared")
    return tool_policy_allows(agent_id=agent_id, tool=tool)


def tools_without_owner_data() -> frozenset[str]:
    """Registered tools whose manifest says they read and change no owner's data."""
    return frozenset(
        spec.name for spec in tools_all() if not spec.effective_manifest.touches_owner_data
    )


def tools_effective(
    *,
    agent_id: uuid.UUID | str,
    advisor_only: bool,
    declared_tools: list[str] | None,
    slip_cleared: frozenset[str] | None,
    rules: PolicyRules | None = None,
) -> frozenset[str]:
    """Names of the tools this agent may use now: policy ∩ (slip, plus tools touching no owner
    data) ∩ declared hints.

    ``slip_cleared=None`` skips the slip intersection (the caller applies slips itself);
    ``declared_tools`` None or empty means the agent declared no hints (policy alone);
    ``rules``: the database's rules as the caller's statement just read them
    (``policy_rules_column``), or None to read them now.
    """
    read = _policy_read(agent_id, rules)
    if isinstance(read, PolicyVerdict):
        return frozenset()
    allowed = {name for name in tool_names() if _decide(name, read).allowed}
    if slip_cleared is not None:
        # A tool that touches no owner data needs no slip item (the policy still decides it).
        allowed &= slip_cleared | tools_without_owner_data()
    if declared_tools:
        allowed &= set(declared_tools)
    if advisor_only:
        allowed = {name for name in allowed if _spec(name).read_only}
    return frozenset(allowed)


def tool_specs_for(
    *,
    agent_id: uuid.UUID | str,
    advisor_only: bool,
    declared_tools: list[str] | None,
    slip_cleared: frozenset[str] | None,
    rules: PolicyRules | None = None,
) -> list[ToolSpec]:
    """Exactly the effective tools, by name (others are not listed): each one's
    ``descriptor()`` is its MCP tool definition."""
    names = tools_effective(
        agent_id=agent_id,
        advisor_only=advisor_only,
        declared_tools=declared_tools,
        slip_cleared=slip_cleared,
        rules=rules,
    )
    return [_spec(name) for name in sorted(names)]
