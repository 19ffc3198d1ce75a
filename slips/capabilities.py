"""Capability records: what one slip item allows, its narrowest defaults, and how tiers and the
other owner's rules narrow it.

A capability record in a signed slip payload is a JSON object::

    {"resource": "availability", "operation": "disclose", "scope": "free_busy_7d",
     "recipient": "peer_agent", "expires_at": 1767225600, "max_uses": 3,
     "onward_disclosure": false, "approval": "none"}

Only ``resource`` is required. Every other field, when left out, takes its narrowest value
(``NARROWEST`` below); unknown fields are refused. "Narrower" is a partial order
(``capability_narrower_or_equal``); tiers and conflict resolution only ever move down it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any

from slips.errors import Malformed
from slips.models import Tier

# Vault item kinds and the scopes each can be shared at, narrowest first. A budget's ``band``
# (the range widened outward to a step of 10 whole units) comes before its exact ``range``, so
# a budget record without a scope shares only the band.
VAULT_SCOPES: dict[str, tuple[str, ...]] = {
    "availability": ("free_busy_24h", "free_busy_7d", "free_busy_14d", "free_busy_30d"),
    "budget": ("band", "range"),
    "food_likes": ("list",),
    "food_dislikes": ("list",),
    "allergies": ("list",),
    "neighbourhood": ("name",),
    "link": ("url",),
    "note": ("text",),
}
VAULT_KINDS = frozenset(VAULT_SCOPES)
# Action tools are named "tool:<name>"; their arguments are limited by the tool's own schema.
TOOL_RESOURCE = re.compile(r"tool:[a-z][a-z0-9_.-]{0,62}")
TOOL_SCOPES = ("call",)

OPERATIONS = ("read", "disclose", "act")
RECIPIENTS = ("own_agent", "peer_agent", "both")
APPROVALS = ("per_use", "none")  # narrowest first
MAX_USES_LIMIT = 1000
FIELDS = frozenset(
    {
        "resource",
        "operation",
        "scope",
        "recipient",
        "expires_at",
        "max_uses",
        "onward_disclosure",
        "approval",
    }
)
NARROWEST: dict[str, Any] = {
    "operation": "read",
    "scope": "<the resource's first scope>",
    "recipient": "own_agent",
    "expires_at": "<the slip's expires_at>",
    "max_uses": 1,
    "onward_disclosure": False,
    "approval": "per_use",
}


@dataclass(frozen=True)
class Capability:
    resource: str
    operation: str
    scope: str
    recipient: str
    expires_at: int
    max_uses: int
    onward_disclosure: bool
    approval: str

    @property
    def is_vault(self) -> bool:
        return self.resource in VAULT_KINDS

    def as_record(self) -> dict[str, Any]:
        return {
            "resource": self.resource,
            "operation": self.operation,
            "scope": self.scope,
            "recipient": self.recipient,
            "expires_at": self.expires_at,
            "max_uses": self.max_uses,
            "onward_disclosure": self.onward_disclosure,
            "approval": self.approval,
        }


def resource_scopes(resource: str) -> tuple[str, ...]:
    """The scopes ``resource`` may be shared at, narrowest first; ``Malformed`` if unknown."""
    if resource in VAULT_SCOPES:
        return VAULT_SCOPES[resource]
    if TOOL_RESOURCE.fullmatch(resource):
        return TOOL_SCOPES
    raise Malformed("unknown_resource", f"Unknown resource {resource[:40]!r}.")


def _field(record: dict[str, Any], name: str, kind: type, default: Any) -> Any:
    if name not in record:
        return default
    value = record[name]
    # bool is an int in Python: never accept one for the other.
    if type(value) is not kind:
        raise Malformed("bad_capability", f"Capability field {name!r} has the wrong type.")
    return value


def capability_from_record(record: Any, *, slip_expires_at: int) -> Capability:
    """Read one capability record, filling each omitted field with its narrowest value."""
    if not isinstance(record, dict):
        raise Malformed("bad_capability", "Each capability must be an object.")
    unknown = set(record) - FIELDS
    if unknown:
        raise Malformed("unknown_field", f"Unknown capability field {sorted(unknown)[0]!r}.")
    if "resource" not in record:
        raise Malformed("bad_capability", "Each capability names its resource.")
    resource = _field(record, "resource", str, None)
    scopes = resource_scopes(resource)
    tool = resource not in VAULT_KINDS
    operation = _field(record, "operation", str, "act" if tool else "read")
    if operation not in OPERATIONS:
        raise Malformed("bad_capability", f"Unknown operation {operation[:20]!r}.")
    if tool != (operation == "act"):
        raise Malformed(
            "bad_capability", "Tools take the operation 'act'; vault items 'read' or 'disclose'."
        )
    scope = _field(record, "scope", str, scopes[0])
    if scope not in scopes:
        raise Malformed("bad_capability", f"Scope {scope[:30]!r} does not apply to {resource}.")
    recipient = _field(record, "recipient", str, "own_agent")
    if recipient not in RECIPIENTS:
        raise Malformed("bad_capability", f"Unknown recipient {recipient[:20]!r}.")
    expires_at = _field(record, "expires_at", int, slip_expires_at)
    if expires_at > slip_expires_at:
        raise Malformed("bad_capability", "A capability cannot outlive its slip.")
    max_uses = _field(record, "max_uses", int, 1)
    if not 1 <= max_uses <= MAX_USES_LIMIT:
        raise Malformed("bad_capability", f"max_uses must be 1 to {MAX_USES_LIMIT}.")
    onward = _field(record, "onward_disclosure", bool, False)
    approval = _field(record, "approval", str, "per_use")
    if approval not in APPROVALS:
        raise Malformed("bad_capability", f"Unknown approval {approval[:20]!r}.")
    return Capability(
        resource=resource,
        operation=operation,
        scope=scope,
        recipient=recipient,
        expires_at=expires_at,
        max_uses=max_uses,
        onward_disclosure=onward,
        approval=approval,
    )


def _recipients(recipient: str) -> frozenset[str]:
    return frozenset({"own_agent", "peer_agent"}) if recipient == "both" else frozenset({recipient})


def recipient_covers(granted: str, asked: str) -> bool:
    """Whether a capability for ``granted`` recipients covers a use for ``asked``."""
    return _recipients(asked) <= _recipients(granted)


def capability_narrower_or_equal(a: Capability, b: Capability) -> bool:
    """Whether ``a`` allows nothing that ``b`` does not (the partial order tiers move down)."""
    scopes = resource_scopes(b.resource)
    return (
        a.resource == b.resource
        and a.operation == b.operation
        and scopes.index(a.scope) <= scopes.index(b.scope)
        and _recipients(a.recipient) <= _recipients(b.recipient)
        and a.expires_at <= b.expires_at
        and a.max_uses <= b.max_uses
        and (not a.onward_disclosure or b.onward_disclosure)
        and APPROVALS.index(a.approval) <= APPROVALS.index(b.approval)
    )


TIER_ORDER = (Tier.SANDBOX, Tier.ROOM_ONLY, Tier.COLLABORATIVE)  # narrowest first
# A room where no owner chose a tier runs under the slips exactly as signed: a tier narrows
# only when someone chose it, so nothing the owner checked is withheld without a word (the
# tier in force and who chose it are shown to both owners).
DEFAULT_TIER = Tier.COLLABORATIVE

# Room Only: the widest scope at which a vault item may reach the *other* agent. A budget
# goes only as its band (never the exact range), free/busy for at most the next 7 days.
# Kinds with a single scope are unchanged.
ROOM_ONLY_PEER_SCOPE: dict[str, str] = {"availability": "free_busy_7d", "budget": "band"}


def tier_narrowest(tiers: list[str]) -> Tier:
    """The narrowest of the tiers the room's owners chose (each unset owner counts as
    ``DEFAULT_TIER``; a room nobody chose a tier for runs under ``DEFAULT_TIER``)."""
    chosen = [Tier(t) for t in tiers] or [DEFAULT_TIER]
    return min(chosen, key=TIER_ORDER.index)


def reaches_peer(capability: Capability) -> bool:
    """Whether ``capability`` can show a vault item to the other agent at all."""
    return (
        capability.is_vault
        and capability.operation == "disclose"
        and recipient_covers(capability.recipient, "peer_agent")
    )


def capability_under_tier(capability: Capability, tier: str) -> Capability | None:
    """``capability`` narrowed by ``tier``; None when the tier clears nothing of it.

    * Collaborative narrows nothing: each agent gets what the slip says.
    * Room Only: nothing may be carried out of the room (no onward disclosure), and a vault
      item shown to the other agent is cut to ``ROOM_ONLY_PEER_SCOPE`` (budget as a band,
      free/busy for at most 7 days). For a record addressed to both agents the cut applies to
      both (one record has one scope); the owner's own agent keeps any ``read`` record as
      signed.
    * Sandbox shares nothing from the vault with any agent, forbids onward disclosure and
      asks the owner before every action.
    """
    tier = Tier(tier)
    if tier == Tier.COLLABORATIVE:
        return capability
    if tier == Tier.ROOM_ONLY:
        narrowed = replace(capability, onward_disclosure=False)
        widest = ROOM_ONLY_PEER_SCOPE.get(capability.resource)
        if widest is not None and reaches_peer(capability):
            scopes = resource_scopes(capability.resource)
            if scopes.index(capability.scope) > scopes.index(widest):
                narrowed = replace(narrowed, scope=widest)
        return narrowed
    if capability.is_vault:
        return None
    return replace(capability, onward_disclosure=False, approval="per_use")


# Fields on which two owners' rules for the same shared resource are resolved to the narrower.
ROOM_RULE_FIELDS = ("onward_disclosure", "approval")


def room_rule_narrower(field: str, left: Any, right: Any) -> Any:
    """The narrower of two owners' values for a shared room rule."""
    if field == "onward_disclosure":
        return bool(left) and bool(right)
    if field == "approval":
        return min(left, right, key=APPROVALS.index)
    raise ValueError(field)


def capability_meet_room_rules(capability: Capability, other: Capability) -> Capability:
    """``capability`` with each room rule narrowed to the other owner's where theirs is narrower."""
    changes = {
        f: room_rule_narrower(f, getattr(capability, f), getattr(other, f))
        for f in ROOM_RULE_FIELDS
    }
    return replace(capability, **changes)
