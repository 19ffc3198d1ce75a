"""The contract every tool adapter passes (ADR: total adapters, a shared contract suite).

For good input an outcome object comes back; a refusal, an outage and an exception inside the
adapter come back as ``Refused``/``Unavailable`` data, never raised; a replayed idempotency key
returns the same outcome without a second effect; a key reused for a different call is refused.
Each adapter plugs in a ``Harness`` that sets up its real refusal and outage conditions.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from django.db import IntegrityError, transaction
from pydantic import BaseModel, ConfigDict, model_validator

from gatekeeper.adapters import (
    ExecutionContext,
    Refused,
    SandboxAdapter,
    Succeeded,
    ToolAdapter,
    Unavailable,
    WebhookAdapter,
)
from gatekeeper.models import SandboxEffect, WebhookDelivery
from gatekeeper.tools import ToolSpec, tool_get
from gatekeeper.tools.catalogue import ProposeTimeOut
from gatekeeper.webhooks import webhook_endpoint_create
from tests.gatekeeper.conftest import Receiver, idempotency_key, settle

pytestmark = pytest.mark.django_db(transaction=True)

BOOK = {
    "venue_id": "chez-marie",
    "party_size": 2,
    "start": "2026-07-01T19:30:00+02:00",
    "cost_cents": 4_500,
    "currency": "EUR",
}


class ExplodingIn(BaseModel):
    """Arguments whose validation hits a bug (not a validation error) inside the adapter."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)
    start: str

    @model_validator(mode="after")
    def _bug(self) -> ExplodingIn:
        raise RuntimeError("a bug deep inside the adapter's call path")


EXPLODING = ToolSpec(
    name="exploding_tool",
    title="Exploding",
    description="Raises from inside the adapter.",
    input_model=ExplodingIn,
    output_model=ProposeTimeOut,
    manifest=None,
)


@dataclass
class Harness:
    adapter: ToolAdapter
    context: ExecutionContext
    # Sets up the adapter's backend to refuse / to be out, and returns the adapter to call.
    refusing: Callable[[], ToolAdapter]
    outage: Callable[[], contextlib.AbstractContextManager[ToolAdapter]]
    effects: Callable[[str], int]


@contextlib.contextmanager
def _broken_database(adapter: ToolAdapter) -> Iterator[ToolAdapter]:
    """A real database failure: a statement failed inside the caller's transaction, so every
    further query raises until the block ends."""
    taken, room = idempotency_key(), uuid.uuid4()
    SandboxEffect.objects.create(
        idempotency_key=taken,
        tool="x",
        schema_version="x",
        arguments_sha256="x",
        arguments={},
        output={},
        room_id=room,  # a row's arguments are sealed under its room's key
    )
    with transaction.atomic():
        with contextlib.suppress(IntegrityError), transaction.atomic(savepoint=False):
            SandboxEffect.objects.create(
                idempotency_key=taken,
                tool="x",
                schema_version="x",
                arguments_sha256="x",
                arguments={},
                output={},
                room_id=room,
            )
        yield adapter


def _sandbox(context_for: Any, make_user: Any, **_: Any) -> Harness:
    owner = make_user("sandy")
    adapter = SandboxAdapter()
    return Harness(
        adapter=adapter,
        context=context_for(owner),
        refusing=lambda: adapter,  # the sandbox refuses what its schema refuses (below)
        outage=lambda: _broken_database(adapter),
        effects=lambda key: SandboxEffect.objects.filter(idempotency_key=key).count(),
    )


def _webhook(context_for: Any, make_user: Any, receiver: Receiver, **_: Any) -> Harness:
    owner = make_user("hookie")
    ok = webhook_endpoint_create(owner=owner, url=receiver.url("/ok")).endpoint
    refuse = webhook_endpoint_create(owner=owner, url=receiver.url("/refuse")).endpoint
    receiver.script["/refuse"] = [422]

    @contextlib.contextmanager
    def closed_port() -> Iterator[ToolAdapter]:
        # A port nothing listens on: connection refused on every attempt.
        import socket

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        down = webhook_endpoint_create(owner=owner, url=f"http://127.0.0.1:{port}/down").endpoint
        yield WebhookAdapter(endpoint_id=down.id)

    return Harness(
        adapter=WebhookAdapter(endpoint_id=ok.id),
        context=context_for(owner),
        refusing=lambda: WebhookAdapter(endpoint_id=refuse.id),
        outage=closed_port,
        effects=lambda key: WebhookDelivery.objects.filter(idempotency_key=key).count(),
    )


@pytest.fixture(params=["sandbox", "webhook"])
def harness(
    request: pytest.FixtureRequest,
    context_for: Any,
    make_user: Any,
    receiver: Receiver,
    webhook_settings: Any,
    celery_worker: bool,
) -> Harness:
    make = {"sandbox": _sandbox, "webhook": _webhook}[request.param]
    return make(context_for=context_for, make_user=make_user, receiver=receiver)


def _run(adapter: ToolAdapter, harness: Harness, arguments: Any, key: str, spec: Any = None) -> Any:
    spec = spec or tool_get("book_table")
    return settle(
        lambda: adapter.execute(
            spec=spec, arguments=arguments, idempotency_key=key, context=harness.context
        )
    )


def test_good_input_succeeds_with_one_effect(harness: Harness) -> None:
    key = idempotency_key()
    outcome = _run(harness.adapter, harness, BOOK, key)
    assert isinstance(outcome, Succeeded), outcome
    assert harness.effects(key) == 1


def test_a_refusal_is_data(harness: Harness) -> None:
    key = idempotency_key()
    outcome = _run(harness.refusing(), harness, BOOK, key)
    if isinstance(harness.adapter, SandboxAdapter):
        outcome = _run(harness.refusing(), harness, {**BOOK, "cost_cents": 45.5}, key)
    assert isinstance(outcome, Refused), outcome
    assert outcome.reason_code and outcome.message


def test_invalid_arguments_are_refused_and_nothing_runs(harness: Harness) -> None:
    key = idempotency_key()
    outcome = _run(harness.adapter, harness, {**BOOK, "cost_cents": 4500.0}, key)
    assert isinstance(outcome, Refused) and outcome.reason_code == "tool_arguments_invalid"
    assert "cost_cents" in outcome.message
    assert harness.effects(key) == 0


def test_an_outage_is_data(harness: Harness) -> None:
    key = idempotency_key()
    with harness.outage() as adapter:
        outcome = adapter.execute(
            spec=tool_get("book_table"),
            arguments=BOOK,
            idempotency_key=key,
            context=harness.context,
        )
        outcome = (
            outcome
            if isinstance(harness.adapter, SandboxAdapter)
            else settle(
                lambda: adapter.execute(
                    spec=tool_get("book_table"),
                    arguments=BOOK,
                    idempotency_key=key,
                    context=harness.context,
                )
            )
        )
    assert isinstance(outcome, Unavailable), outcome


def test_an_exception_inside_the_adapter_is_data(harness: Harness) -> None:
    outcome = harness.adapter.execute(
        spec=EXPLODING,
        arguments={"start": "x"},
        idempotency_key=idempotency_key(),
        context=harness.context,
    )
    assert isinstance(outcome, Unavailable)
    assert outcome.reason_code == "adapter_error" and "RuntimeError" in outcome.message


def test_a_replayed_key_returns_the_same_outcome_without_a_second_effect(harness: Harness) -> None:
    key = idempotency_key()
    first = _run(harness.adapter, harness, BOOK, key)
    again = _run(harness.adapter, harness, BOOK, key)
    assert isinstance(first, Succeeded) and again == first
    assert harness.effects(key) == 1


def test_a_key_reused_for_another_call_is_refused(harness: Harness) -> None:
    key = idempotency_key()
    assert isinstance(_run(harness.adapter, harness, BOOK, key), Succeeded)
    other = _run(harness.adapter, harness, {**BOOK, "cost_cents": 99_999}, key)
    assert isinstance(other, Refused) and other.reason_code == "idempotency_key_reused"
    assert harness.effects(key) == 1


@pytest.mark.parametrize("key", ["", "short", "x" * 129, "has spaces in it ok?", None])
def test_a_bad_idempotency_key_is_refused(harness: Harness, key: Any) -> None:
    outcome = harness.adapter.execute(
        spec=tool_get("book_table"), arguments=BOOK, idempotency_key=key, context=harness.context
    )
    assert isinstance(outcome, Refused) and outcome.reason_code == "idempotency_key_invalid"
