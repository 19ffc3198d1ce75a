"""Adapters run allowed, validated tool calls somewhere. All are total (see ``outcomes``)."""

from __future__ import annotations

from gatekeeper.adapters.outcomes import (
    AdapterOutcome,
    ExecutionContext,
    Refused,
    Succeeded,
    ToolAdapter,
    Unavailable,
    outcome_adapter,
)
from gatekeeper.adapters.sandbox import SandboxAdapter
from gatekeeper.adapters.webhook import WebhookAdapter


def adapter_default() -> ToolAdapter:
    """The adapter a tool runs through unless its owner configured another: the sandbox."""
    return SandboxAdapter()


__all__ = [
    "AdapterOutcome",
    "ExecutionContext",
    "Refused",
    "SandboxAdapter",
    "Succeeded",
    "ToolAdapter",
    "Unavailable",
    "WebhookAdapter",
    "adapter_default",
    "outcome_adapter",
]
