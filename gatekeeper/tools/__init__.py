"""Typed tools: pydantic schemas, capability manifests (MCP annotations) and the registry."""

from __future__ import annotations

from gatekeeper.errors import ArgumentProblem, ToolArgumentsInvalid, ToolUnknown
from gatekeeper.tools.manifest import FAIL_CLOSED_MANIFEST, CapabilityManifest
from gatekeeper.tools.registry import (
    spec_arguments_validate,
    tool_arguments_validate,
    tool_get,
    tool_names,
    tools_all,
)
from gatekeeper.tools.spec import ToolSpec

__all__ = [
    "FAIL_CLOSED_MANIFEST",
    "ArgumentProblem",
    "CapabilityManifest",
    "ToolArgumentsInvalid",
    "ToolSpec",
    "ToolUnknown",
    "spec_arguments_validate",
    "tool_arguments_validate",
    "tool_get",
    "tool_names",
    "tools_all",
]
