"""The registry, manifests, MCP descriptors and schema versions."""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from gatekeeper.tools import FAIL_CLOSED_MANIFEST, CapabilityManifest, ToolSpec, tool_get, tools_all
from gatekeeper.tools import registry as registry_module
from gatekeeper.tools.catalogue import BookTableIn, BookTableOut, ProposeTimeIn, ProposeTimeOut

STARTERS = {
    "propose_time",
    "book_table",
    "spend",
    "send_invitation",
    "publish_artifact",
    "venues_search",
    "declare_no_plan",
}

# Pinned on purpose: a schema version is what a signed grant names. If one of these changes,
# the tool's published contract changed; update the pin only if that was intended (and say
# so in the commit), because grants signed for the old version stop matching.
PINNED_VERSIONS = {
    # Changed on purpose (issue 11): every descriptor now says whether the tool touches owner
    # data and whether the server runs it; book_table's cost_cents is the party's total.
    "book_table": "4bdfede2f5ea9417",
    "declare_no_plan": "09ae019f181119b8",
    "propose_time": "b953be697b6aa424",
    # Changed on purpose (issue 14): the server runs publish_artifact (serverExecuted), so
    # an artifact is stored in the room whatever adapter its owner configured.
    "publish_artifact": "a6c949916841a376",
    "send_invitation": "701b6957ff0a9183",
    "spend": "1a3b00a3b2c200fb",
    "venues_search": "21e4482d913d6cc1",
}


def _schemas_contain_number(node: Any) -> bool:
    if isinstance(node, dict):
        return node.get("type") == "number" or any(
            _schemas_contain_number(v) for v in node.values()
        )
    if isinstance(node, list):
        return any(_schemas_contain_number(v) for v in node)
    return False


def test_the_starter_tools_are_registered_sorted_and_immutable() -> None:
    assert {t.name for t in tools_all()} == STARTERS
    assert [t.name for t in tools_all()] == sorted(STARTERS)
    assert tool_get("book_table") is not None and tool_get("launch_rockets") is None
    with pytest.raises(TypeError):
        registry_module._REGISTRY["evil"] = tool_get("spend")  # type: ignore[index]
    with pytest.raises(ValueError, match="twice"):
        registry_module.registry_build([tool_get("spend"), tool_get("spend")])  # type: ignore[list-item]


@pytest.mark.parametrize("name", sorted(STARTERS))
def test_descriptor_is_an_mcp_tool_definition(name: str) -> None:
    spec = tool_get(name)
    assert spec is not None
    d = spec.descriptor()
    assert {"name", "title", "description", "inputSchema", "outputSchema", "annotations"} <= set(d)
    assert d["name"] == name and d["inputSchema"]["type"] == "object"
    assert d["inputSchema"]["additionalProperties"] is False
    m = spec.effective_manifest
    assert d["annotations"] == {
        "title": spec.title,
        "readOnlyHint": m.read_only,
        "destructiveHint": m.destructive,
        "idempotentHint": m.idempotent,
        "openWorldHint": m.open_world,
    }
    assert d["_meta"]["synapsia.dev/schemaVersion"] == spec.schema_version
    assert d["_meta"]["synapsia.dev/requiredScopes"] == list(m.required_scopes)
    # Integers only, in what we accept and in what we return.
    assert not _schemas_contain_number(d["inputSchema"])
    assert not _schemas_contain_number(d["outputSchema"])


def test_manifests_of_the_starter_tools() -> None:
    propose = tool_get("propose_time")
    book = tool_get("book_table")
    spend = tool_get("spend")
    assert propose and book and spend
    assert propose.read_only and propose.effective_manifest.idempotent
    assert not propose.effective_manifest.open_world
    assert not book.read_only and not book.effective_manifest.idempotent
    assert book.effective_manifest.open_world
    assert book.effective_manifest.money_argument == "cost_cents"
    assert book.effective_manifest.currency_argument == "currency"
    assert spend.effective_manifest.money_argument == "amount_cents"
    assert spend.effective_manifest.destructive
    assert [t.name for t in tools_all() if t.read_only] == ["propose_time", "venues_search"]


def test_catalogue_tools_need_no_slip_item_and_run_on_the_server() -> None:
    search, no_plan = tool_get("venues_search"), tool_get("declare_no_plan")
    assert search and no_plan
    assert search.read_only and not search.effective_manifest.open_world
    assert not no_plan.read_only and no_plan.effective_manifest.idempotent
    assert not no_plan.effective_manifest.open_world
    for spec in (search, no_plan):
        m = spec.effective_manifest
        assert not m.touches_owner_data and m.server_executed
        meta = spec.descriptor()["_meta"]
        assert meta["synapsia.dev/touchesOwnerData"] is False
        assert meta["synapsia.dev/serverExecuted"] is True
    # Every other tool touches owner data, and an unmanifested tool is taken to (fail closed).
    others = [t for t in tools_all() if t.name not in ("venues_search", "declare_no_plan")]
    assert all(t.effective_manifest.touches_owner_data for t in others)
    assert FAIL_CLOSED_MANIFEST.touches_owner_data and not FAIL_CLOSED_MANIFEST.server_executed
    # Publishing acts only inside the room, so the server runs it, but it still needs a slip
    # item (it touches owner data: what the owner's agent writes).
    publish = tool_get("publish_artifact")
    assert publish and publish.effective_manifest.server_executed
    assert publish.effective_manifest.touches_owner_data
    assert publish.descriptor()["_meta"]["synapsia.dev/serverExecuted"] is True
    with pytest.raises(ValidationError, match="touches owner data"):
        CapabilityManifest(
            read_only=False,
            destructive=False,
            idempotent=False,
            open_world=True,
            touches_owner_data=False,
        )


def test_schema_versions_are_pinned_and_rebuilding_gives_the_same() -> None:
    assert {t.name: t.schema_version for t in tools_all()} == PINNED_VERSIONS
    for spec in tools_all():
        assert re.fullmatch(r"[0-9a-f]{16}", spec.schema_version)
        rebuilt = ToolSpec(
            name=spec.name,
            title=spec.title,
            description=spec.description,
            input_model=spec.input_model,
            output_model=spec.output_model,
            manifest=spec.manifest,
        )
        assert rebuilt.schema_version == spec.schema_version


class WiderBookTableIn(BookTableIn):
    party_size: int = Field(ge=1, le=40)


def test_schema_version_changes_with_any_part_of_the_descriptor() -> None:
    base = tool_get("book_table")
    assert base is not None and base.manifest is not None
    variants = [
        replace(base, description=base.description + " Now with dessert."),
        replace(base, title="Reserve a table"),
        replace(base, input_model=WiderBookTableIn),
        replace(base, manifest=base.manifest.model_copy(update={"idempotent": True})),
        replace(
            base, manifest=base.manifest.model_copy(update={"required_scopes": ("budget:range",)})
        ),
        replace(base, manifest=None),
    ]
    versions = {v.schema_version for v in variants}
    assert base.schema_version not in versions
    assert len(versions) == len(variants)


def test_an_unmanifested_tool_is_treated_as_mutating_destructive_open_world() -> None:
    spec = ToolSpec(
        name="mystery",
        title="Mystery",
        description="A tool nobody wrote a manifest for.",
        input_model=ProposeTimeIn,
        output_model=ProposeTimeOut,
        manifest=None,
    )
    assert spec.effective_manifest is FAIL_CLOSED_MANIFEST
    assert not spec.read_only and not spec.manifested
    annotations = spec.descriptor()["annotations"]
    assert annotations["readOnlyHint"] is False
    assert annotations["destructiveHint"] is True
    assert annotations["idempotentHint"] is False
    assert annotations["openWorldHint"] is True
    assert spec.descriptor()["_meta"]["synapsia.dev/manifested"] is False


def test_manifests_are_frozen_and_self_consistent() -> None:
    manifest = CapabilityManifest(
        read_only=True, destructive=False, idempotent=True, open_world=False
    )
    with pytest.raises(ValidationError):
        manifest.read_only = False  # type: ignore[misc]
    with pytest.raises(ValidationError, match="read-only tool cannot be destructive"):
        CapabilityManifest(read_only=True, destructive=True, idempotent=True, open_world=False)
    with pytest.raises(ValidationError, match="come together"):
        CapabilityManifest(
            read_only=False,
            destructive=False,
            idempotent=False,
            open_world=True,
            money_argument="cost_cents",
        )
    with pytest.raises(ValidationError):
        CapabilityManifest(read_only="no", destructive=False, idempotent=False, open_world=True)  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="scope"):
        CapabilityManifest(
            read_only=False,
            destructive=False,
            idempotent=False,
            open_world=True,
            required_scopes=("Budget Range",),
        )


class FloatIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    amount: float


class OpenIn(BaseModel):
    amount: int


def test_tool_specs_refuse_floats_open_models_bad_names_and_bad_money_fields() -> None:
    manifest = tool_get("propose_time").manifest  # type: ignore[union-attr]
    common: dict[str, Any] = {"title": "T", "description": "D", "output_model": ProposeTimeOut}
    with pytest.raises(ValueError, match="float"):
        ToolSpec(name="floaty", input_model=FloatIn, manifest=manifest, **common)
    with pytest.raises(ValueError, match="forbid extra"):
        ToolSpec(name="open_door", input_model=OpenIn, manifest=manifest, **common)
    with pytest.raises(ValueError, match="slug"):
        ToolSpec(name="Book Table", input_model=ProposeTimeIn, manifest=manifest, **common)
    money = CapabilityManifest(
        read_only=False,
        destructive=False,
        idempotent=False,
        open_world=True,
        money_argument="venue_id",
        currency_argument="currency",
    )
    with pytest.raises(ValueError, match="not an int field"):
        ToolSpec(
            name="bad_money",
            input_model=BookTableIn,
            output_model=BookTableOut,
            manifest=money,
            title="T",
            description="D",
        )
