"""Tool descriptors are built once per tool, not per connect (issue 17), and still hand every
caller a descriptor of its own."""

from __future__ import annotations

import copy

import pytest
from pydantic import BaseModel

from gatekeeper.tools import ToolSpec, tools_all
from gatekeeper.tools.spec import META_PREFIX


def _built_afresh(spec: ToolSpec) -> dict[str, object]:
    described = spec._descriptor_unversioned()
    described["_meta"][f"{META_PREFIX}schemaVersion"] = spec.schema_version
    return described


@pytest.mark.parametrize("spec", tools_all(), ids=lambda s: s.name)
def test_the_descriptor_is_the_one_the_tool_code_builds(spec: ToolSpec) -> None:
    # Equal to what building it from the models now gives (so the memo cannot go stale
    # against the code it was built from, within a process).
    assert spec.descriptor() == _built_afresh(spec)


def test_a_connect_does_not_rebuild_pydantic_schemas(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[type[BaseModel]] = []
    original = BaseModel.model_json_schema.__func__  # type: ignore[attr-defined]

    def counting(cls: type[BaseModel], *args: object, **kwargs: object) -> object:
        calls.append(cls)
        return original(cls, *args, **kwargs)

    monkeypatch.setattr(BaseModel, "model_json_schema", classmethod(counting))
    for _ in range(3):
        for spec in tools_all():
            spec.descriptor()
    assert calls == []  # the per-connect path builds no schema at all


def test_each_caller_gets_a_descriptor_of_its_own() -> None:
    spec = tools_all()[0]
    first = spec.descriptor()
    pristine = copy.deepcopy(first)
    first["name"] = "tampered"
    first["inputSchema"]["properties"] = {}
    first["_meta"][f"{META_PREFIX}schemaVersion"] = "0" * 16
    again = spec.descriptor()
    assert again == pristine and again is not first
    assert again["inputSchema"] is not first["inputSchema"]
