"""What an adapter returns: data, never an exception.

``Succeeded`` carries the tool's output (JSON-shaped, valid against the tool's output schema,
or a delivery receipt for the webhook adapter). ``Refused`` is a permanent "no" from the other
side (bad arguments, a 4xx, a reused key): retrying the same call will not help.
``Unavailable`` means the effect is not confirmed (outage, timeout, our own error, or a webhook
delivery still being retried): the room must treat it as not done, and may ask again with the
same idempotency key, which never executes twice.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Literal, Protocol
from uuid import UUID

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from gatekeeper.tools.spec import ToolSpec

MAX_MESSAGE_CHARS = 300


class _Outcome(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Succeeded(_Outcome):
    kind: Literal["succeeded"] = "succeeded"
    output: dict[str, Any]


class Refused(_Outcome):
    kind: Literal["refused"] = "refused"
    reason_code: str = Field(max_length=64)
    message: str = Field(max_length=MAX_MESSAGE_CHARS)


class Unavailable(_Outcome):
    kind: Literal["unavailable"] = "unavailable"
    reason_code: str = Field(max_length=64)
    message: str = Field(max_length=MAX_MESSAGE_CHARS)


AdapterOutcome = Annotated[Succeeded | Refused | Unavailable, Field(discriminator="kind")]
outcome_adapter: TypeAdapter[AdapterOutcome] = TypeAdapter(AdapterOutcome)


def outcome_refused(reason_code: str, message: str) -> Refused:
    return Refused(reason_code=reason_code, message=message[:MAX_MESSAGE_CHARS])


def outcome_unavailable(reason_code: str, message: str) -> Unavailable:
    return Unavailable(reason_code=reason_code, message=message[:MAX_MESSAGE_CHARS])


@dataclass(frozen=True)
class ExecutionContext:
    """Who asked, where: enough for an adapter to scope and record a call, nothing more."""

    room_id: UUID
    agent_id: UUID
    owner_id: int


class ToolAdapter(Protocol):
    """Runs an allowed, validated tool call somewhere. Implementations are TOTAL: every
    failure, including their own bugs, comes back as ``Refused``/``Unavailable`` data, and a
    repeated ``idempotency_key`` returns the first outcome without a second effect."""

    name: str

    def execute(
        self,
        *,
        spec: ToolSpec,
        arguments: dict[str, Any],
        idempotency_key: str,
        context: ExecutionContext,
    ) -> AdapterOutcome: ...
