"""The default adapter: a local sandbox with no network. Each executed call becomes one
``SandboxEffect`` row keyed by its idempotency key (unique in the database), so "executed
exactly once" is a query, and a replayed key returns the stored outcome with no second row,
even when two workers race (the unique index decides; the loser reads the winner's row).

``publish_artifact`` is not the sandbox's: it acts only inside the room, so the server runs
it whatever adapter an owner configured (``gatekeeper.adapters.server``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from datetime import timedelta
from types import MappingProxyType
from typing import Any

from django.db import IntegrityError, transaction
from pydantic import BaseModel

from gatekeeper.adapters.calls import PreparedAdapter, PreparedCall, call_replay
from gatekeeper.adapters.outcomes import (
    AdapterOutcome,
    ExecutionContext,
    Succeeded,
    outcome_refused,
)
from gatekeeper.models import SandboxEffect
from gatekeeper.tools import catalogue as c


def _reference(prefix: str, key: str) -> str:
    # Deterministic per key: the same call always yields the same reference.
    return f"{prefix}-{hashlib.sha256(key.encode()).hexdigest()[:20]}"


def _propose_time(a: Any, key: str) -> BaseModel:
    end = a.start + timedelta(minutes=a.duration_minutes)
    return c.ProposeTimeOut(proposal_id=_reference("prop", key), start=a.start, end=end)


def _book_table(a: Any, key: str) -> BaseModel:
    return c.BookTableOut(
        booking_reference=_reference("bk", key),
        venue_id=a.venue_id,
        party_size=a.party_size,
        start=a.start,
        cost_cents=a.cost_cents,
        currency=a.currency,
    )


def _spend(a: Any, key: str) -> BaseModel:
    return c.SpendOut(
        payment_reference=_reference("pay", key),
        amount_cents=a.amount_cents,
        currency=a.currency,
        payee_id=a.payee_id,
    )


def _send_invitation(a: Any, key: str) -> BaseModel:
    return c.SendInvitationOut(invitation_id=_reference("inv", key), recipient=a.recipient)


# What "doing" each tool means in the sandbox. A tool without an entry is refused here.
SANDBOX_EFFECTS: Mapping[str, Callable[[Any, str], BaseModel]] = MappingProxyType(
    {
        "propose_time": _propose_time,
        "book_table": _book_table,
        "spend": _spend,
        "send_invitation": _send_invitation,
    }
)


def _stored(row: SandboxEffect) -> AdapterOutcome:
    return Succeeded(output=row.output)


class SandboxAdapter(PreparedAdapter):
    """Executes tools locally and records each effect exactly once. No network."""

    name = "sandbox"

    def _run(self, prepared: PreparedCall, context: ExecutionContext) -> AdapterOutcome:
        spec = prepared.spec
        existing = SandboxEffect.objects.filter(idempotency_key=prepared.idempotency_key).first()
        if existing is not None:
            return self._replay(prepared, existing)
        effect = SANDBOX_EFFECTS.get(spec.name)
        if effect is None:
            return outcome_refused("sandbox_unsupported", f"The sandbox cannot run {spec.name}.")
        try:
            # A savepoint, so losing the race does not break the caller's transaction.
            with transaction.atomic():
                result = effect(prepared.model, prepared.idempotency_key)
                # Checked against the tool's own output schema: what we return is what we
                # publish.
                output = spec.output_model.model_validate(result.model_dump()).model_dump(
                    mode="json"
                )
                row = SandboxEffect.objects.create(
                    idempotency_key=prepared.idempotency_key,
                    tool=spec.name,
                    schema_version=spec.schema_version,
                    arguments_sha256=prepared.arguments_sha256,
                    arguments=prepared.arguments,
                    output=output,
                    room_id=context.room_id,
                    agent_id=context.agent_id,
                )
        except IntegrityError:
            winner = SandboxEffect.objects.get(idempotency_key=prepared.idempotency_key)
            return self._replay(prepared, winner)
        return _stored(row)

    @staticmethod
    def _replay(prepared: PreparedCall, row: SandboxEffect) -> AdapterOutcome:
        return call_replay(
            prepared=prepared,
            stored_tool=row.tool,
            stored_sha256=row.arguments_sha256,
            stored=_stored(row),
        )
