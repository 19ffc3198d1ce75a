"""What every adapter does before it acts: check the key, re-validate the arguments against the
tool's schema (adapters never trust that the caller did), and fingerprint them so a replayed
key with different arguments is refused instead of answered.
"""

from __future__ import annotations

import abc
import hashlib
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import rfc8785
from pydantic import BaseModel

from gatekeeper.adapters.outcomes import (
    AdapterOutcome,
    ExecutionContext,
    Refused,
    Succeeded,
    Unavailable,
    outcome_refused,
    outcome_unavailable,
)
from gatekeeper.errors import ToolArgumentsInvalid
from gatekeeper.tools.registry import spec_arguments_validate
from gatekeeper.tools.spec import ToolSpec

logger = logging.getLogger(__name__)

IDEMPOTENCY_KEY = re.compile(r"^[A-Za-z0-9._:-]{16,128}$")


@dataclass(frozen=True)
class PreparedCall:
    spec: ToolSpec
    idempotency_key: str
    model: BaseModel  # the validated arguments
    arguments: dict[str, Any]  # validated, in JSON form
    arguments_sha256: str


def call_prepare(*, spec: ToolSpec, arguments: Any, idempotency_key: Any) -> PreparedCall | Refused:
    """Validate a call; a ``Refused`` outcome when it is not runnable as given."""
    if not isinstance(idempotency_key, str) or not IDEMPOTENCY_KEY.match(idempotency_key):
        return outcome_refused(
            "idempotency_key_invalid", "The idempotency key must be 16-128 of [A-Za-z0-9._:-]."
        )
    try:
        model = spec_arguments_validate(spec=spec, arguments=arguments)
    except ToolArgumentsInvalid as exc:
        return outcome_refused(exc.code, exc.message)
    canonical = model.model_dump(mode="json")
    digest = hashlib.sha256(rfc8785.dumps({"tool": spec.name, "arguments": canonical})).hexdigest()
    return PreparedCall(spec, idempotency_key, model, canonical, digest)


def call_replay(
    *, prepared: PreparedCall, stored_tool: str, stored_sha256: str, stored: AdapterOutcome
) -> AdapterOutcome:
    """The answer to a key seen before: the stored outcome if it is the same call, else a
    refusal (a key names one action; it is never reused for another)."""
    if stored_tool != prepared.spec.name or stored_sha256 != prepared.arguments_sha256:
        return outcome_refused(
            "idempotency_key_reused",
            "This idempotency key was already used for a different call; nothing ran.",
        )
    return stored


def outcome_total(adapter_name: str, run: Callable[[], AdapterOutcome]) -> AdapterOutcome:
    """Run ``run`` and turn any exception into ``Unavailable`` data (adapters are total)."""
    try:
        outcome = run()
    except Exception as exc:
        logger.exception("%s adapter failed; reported as unavailable", adapter_name)
        return outcome_unavailable(
            "adapter_error", f"The {adapter_name} adapter failed ({type(exc).__name__})."
        )
    if not isinstance(outcome, Succeeded | Refused | Unavailable):
        return outcome_unavailable("adapter_error", f"The {adapter_name} adapter gave no outcome.")
    return outcome


class PreparedAdapter(abc.ABC):
    """What each adapter's ``execute`` shares: total (an exception is ``Unavailable`` data),
    and nothing runs before the call is prepared (``call_prepare``). Subclasses implement
    ``_run`` for a prepared call only."""

    name: str

    def execute(
        self,
        *,
        spec: ToolSpec,
        arguments: dict[str, Any],
        idempotency_key: str,
        context: ExecutionContext,
    ) -> AdapterOutcome:
        def run() -> AdapterOutcome:
            prepared = call_prepare(spec=spec, arguments=arguments, idempotency_key=idempotency_key)
            if isinstance(prepared, Refused):
                return prepared
            return self._run(prepared, context)

        return outcome_total(self.name, run)

    @abc.abstractmethod
    def _run(self, prepared: PreparedCall, context: ExecutionContext) -> AdapterOutcome:
        """Act on a prepared call (its arguments validated, its key checked)."""
