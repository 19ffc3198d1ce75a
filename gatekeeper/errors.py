"""Errors of the tool layer, each with a stable ``code`` (the rule that refused).

The decision code turns them into denials; the ledger records the code, never the content.
"""

from __future__ import annotations

from dataclasses import dataclass


class GatekeeperError(Exception):
    code = "gatekeeper_error"
    status = 400

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


@dataclass(frozen=True)
class ArgumentProblem:
    """One thing wrong with a tool call's arguments: where (``a.b.0``) and what."""

    path: str
    message: str


class ToolArgumentsInvalid(GatekeeperError):
    """A tool call's arguments failed its input schema; nothing ran."""

    code = "tool_arguments_invalid"
    status = 422

    def __init__(self, *, tool: str, problems: tuple[ArgumentProblem, ...]) -> None:
        listed = "; ".join(f"{p.path or '(arguments)'}: {p.message}" for p in problems)
        super().__init__(f"Arguments for {tool!r} are invalid: {listed}")
        self.tool = tool
        self.problems = problems


class ToolUnknown(GatekeeperError):
    code = "tool_unknown"
    status = 404


class ToolPolicyError(GatekeeperError):
    """A tool policy entry, hint list or policy file is invalid or unsafe."""

    code = "tool_policy_invalid"
    status = 422


class WebhookConfigInvalid(GatekeeperError):
    """An owner's webhook endpoint cannot be configured as given (bad or unsafe URL)."""

    code = "webhook_config_invalid"
    status = 422


class WebhookAlreadyAdded(GatekeeperError):
    """The add that carried this one-time key and address has made its webhook already (sent
    again: a reload of the page, a second click, an API client's retry). Nothing new is added,
    and the first one's secret, shown once, is not shown again."""

    code = "webhook_already_added"
    status = 409

    def __init__(self, message: str, *, url: str) -> None:
        super().__init__(message)
        self.url = url  # the webhook that add made
