"""Capability manifests: what a tool does to the world, in MCP tool-annotation vocabulary.

The four side-effect hints are MCP's (``readOnlyHint``, ``destructiveHint``, ``idempotentHint``,
``openWorldHint``); we add the slip scopes a call needs and which argument carries money. A
manifest is *our* statement about *our* tool, so the server may rely on it; an agent's claims
about tools never are.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict, model_validator

# Scopes use the slips' vocabulary: "<resource>:<scope>" ("tool:book_table:call", "budget:range").
SCOPE = re.compile(r"^[a-z][a-z0-9_.-]{0,62}(:[a-z0-9_.-]{1,62}){1,2}$")
ARGUMENT_NAME = re.compile(r"^[a-z][a-z0-9_]{0,62}$")


class CapabilityManifest(BaseModel):
    """Frozen side-effect class of one tool. Published as MCP ``annotations``."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    read_only: bool
    destructive: bool
    idempotent: bool
    open_world: bool
    required_scopes: tuple[str, ...] = ()
    # Name of the input field holding an integer amount in minor units (cents) that the
    # server limits by the slip's budget scope; None when the tool moves no money.
    money_argument: str | None = None
    currency_argument: str | None = None
    # False only for a tool that reads and changes no owner's data (a public catalogue
    # lookup, a declaration about the negotiation itself): such a tool needs no slip item,
    # though the tool policy still lists and decides it. Unset means it does (fail closed).
    touches_owner_data: bool = True
    # True when the server itself runs the tool in-process (from the room's own data) instead
    # of the owner's adapter (webhook or sandbox): it acts on nothing outside the room.
    server_executed: bool = False

    @model_validator(mode="after")
    def _consistent(self) -> CapabilityManifest:
        if self.read_only and self.destructive:
            raise ValueError("a read-only tool cannot be destructive")
        if self.read_only and self.money_argument is not None:
            raise ValueError("a read-only tool cannot move money")
        if not self.touches_owner_data and (self.money_argument is not None or self.open_world):
            raise ValueError("a tool that moves money or reaches the world touches owner data")
        if (self.money_argument is None) != (self.currency_argument is None):
            raise ValueError("money_argument and currency_argument come together")
        for name in (self.money_argument, self.currency_argument):
            if name is not None and not ARGUMENT_NAME.match(name):
                raise ValueError(f"{name!r} is not an argument name")
        for scope in self.required_scopes:
            if not SCOPE.match(scope):
                raise ValueError(f"{scope!r} is not a scope (resource:scope)")
        if len(set(self.required_scopes)) != len(self.required_scopes):
            raise ValueError("required_scopes lists a scope twice")
        return self

    @property
    def mutating(self) -> bool:
        return not self.read_only

    def annotations(self, *, title: str) -> dict[str, Any]:
        """The MCP ``ToolAnnotations`` object (hints are camelCase there)."""
        return {
            "title": title,
            "readOnlyHint": self.read_only,
            "destructiveHint": self.destructive,
            "idempotentHint": self.idempotent,
            "openWorldHint": self.open_world,
        }


# What a tool without a manifest is taken to be: everything dangerous (MCP's own defaults
# for missing hints point the same way). Fail closed until someone writes the manifest.
FAIL_CLOSED_MANIFEST = CapabilityManifest(
    read_only=False, destructive=True, idempotent=False, open_world=True
)
