"""``ToolSpec``: one typed tool, its MCP descriptor and the schema version derived from it.

``schema_version`` is the first 16 hex characters of SHA-256 over the RFC 8785 canonical JSON
of the descriptor (everything but the version itself). Change a field, a bound, a description
or a manifest hint and the version changes, so a grant signed for one version of a tool can be
refused for another.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from typing import Any

import rfc8785
from pydantic import BaseModel

from gatekeeper.tools.manifest import FAIL_CLOSED_MANIFEST, CapabilityManifest

TOOL_NAME = re.compile(r"^[a-z][a-z0-9_]{1,62}$")
SCHEMA_VERSION_HEX = 16
# Keys under MCP's ``_meta`` use a reverse-DNS-style prefix, as the spec asks of extensions.
META_PREFIX = "synapsia.dev/"


def _schema_has_float(node: Any) -> bool:
    """True when a JSON Schema anywhere admits a non-integer number."""
    if isinstance(node, dict):
        kind = node.get("type")
        if kind == "number" or (isinstance(kind, list) and "number" in kind):
            return True
        return any(_schema_has_float(v) for v in node.values())
    if isinstance(node, list):
        return any(_schema_has_float(v) for v in node)
    return False


def _field_is_int(model: type[BaseModel], name: str) -> bool:
    info = model.model_fields.get(name)
    return info is not None and info.annotation is int


@dataclass(frozen=True)
class ToolSpec:
    """A registered tool. ``manifest=None`` means unmanifested: treated as mutating,
    destructive and open-world (``effective_manifest``)."""

    name: str
    title: str
    description: str
    input_model: type[BaseModel]
    output_model: type[BaseModel]
    manifest: CapabilityManifest | None
    schema_version: str = field(init=False)
    _descriptor_json: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not TOOL_NAME.match(self.name):
            raise ValueError(f"tool name {self.name!r} must be a slug (a-z, 0-9, _)")
        if not self.title.strip() or not self.description.strip():
            raise ValueError(f"tool {self.name!r} needs a title and a description")
        for model in (self.input_model, self.output_model):
            if model.model_config.get("extra") != "forbid":
                raise ValueError(f"{model.__name__} must forbid extra fields")
            if _schema_has_float(model.model_json_schema()):
                # Money and counts are integers; floats do not canonicalise portably.
                raise ValueError(f"{model.__name__} admits a float; use integers")
        manifest = self.effective_manifest
        if manifest.money_argument is not None:
            if not _field_is_int(self.input_model, manifest.money_argument):
                raise ValueError(f"money_argument {manifest.money_argument!r} is not an int field")
            if manifest.currency_argument not in self.input_model.model_fields:
                raise ValueError(f"currency_argument {manifest.currency_argument!r} is missing")
        described = self._descriptor_unversioned()
        digest = hashlib.sha256(rfc8785.dumps(described)).hexdigest()
        object.__setattr__(self, "schema_version", digest[:SCHEMA_VERSION_HEX])
        # The descriptor is a pure function of the tool's code (its models, texts and
        # manifest), so it is built once, here, not on every connect: pydantic's
        # ``model_json_schema`` was about half of an agent socket's connect time. Which tools
        # an agent is shown is still decided live per connect (``gatekeeper.policy``).
        described["_meta"][f"{META_PREFIX}schemaVersion"] = self.schema_version
        object.__setattr__(self, "_descriptor_json", json.dumps(described))

    @property
    def manifested(self) -> bool:
        return self.manifest is not None

    @property
    def effective_manifest(self) -> CapabilityManifest:
        """The manifest the server acts on: the tool's own, or the fail-closed one."""
        return self.manifest if self.manifest is not None else FAIL_CLOSED_MANIFEST

    @property
    def read_only(self) -> bool:
        return self.effective_manifest.read_only

    def _descriptor_unversioned(self) -> dict[str, Any]:
        manifest = self.effective_manifest
        return {
            "name": self.name,
            "title": self.title,
            "description": self.description,
            "inputSchema": self.input_model.model_json_schema(),
            "outputSchema": self.output_model.model_json_schema(),
            "annotations": manifest.annotations(title=self.title),
            "_meta": {
                f"{META_PREFIX}manifested": self.manifested,
                f"{META_PREFIX}requiredScopes": list(manifest.required_scopes),
                f"{META_PREFIX}moneyArgument": manifest.money_argument,
                f"{META_PREFIX}currencyArgument": manifest.currency_argument,
                f"{META_PREFIX}touchesOwnerData": manifest.touches_owner_data,
                f"{META_PREFIX}serverExecuted": manifest.server_executed,
            },
        }

    def descriptor(self) -> dict[str, Any]:
        """The tool as an MCP tool definition (a fresh dict each call; callers may keep it
        and change it), from the one built when the tool was registered."""
        described: dict[str, Any] = json.loads(self._descriptor_json)
        return described

    def descriptor_json(self) -> str:
        """The same definition as JSON text (built once, when the tool was registered)."""
        return self._descriptor_json
