"""The sandbox adapter: every starter tool runs locally, and each call is executed exactly once
per idempotency key, also when workers race for it."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from django.db import connection

from gatekeeper.adapters import SandboxAdapter, Succeeded
from gatekeeper.models import SandboxEffect
from gatekeeper.tools import tool_get
from tests.gatekeeper.conftest import idempotency_key
from tests.gatekeeper.tools.test_arguments import GOOD


@pytest.mark.django_db
# Publishing stores into a real room (tests/artifacts covers it); the context here has none.
@pytest.mark.parametrize("tool", sorted(set(GOOD) - {"publish_artifact"}))
def test_every_starter_tool_runs_in_the_sandbox(
    tool: str, make_user: Any, context_for: Any
) -> None:
    spec = tool_get(tool)
    assert spec is not None
    key = idempotency_key()
    outcome = SandboxAdapter().execute(
        spec=spec, arguments=GOOD[tool], idempotency_key=key, context=context_for(make_user("o"))
    )
    assert isinstance(outcome, Succeeded)
    spec.output_model.model_validate_json(__import__("json").dumps(outcome.output))
    row = SandboxEffect.objects.get(idempotency_key=key)
    assert row.tool == tool and row.schema_version == spec.schema_version
    assert row.output == outcome.output


def _race(threads: int, make_user: Any, context_for: Any) -> None:
    spec = tool_get("spend")
    assert spec is not None
    arguments = {
        "amount_cents": 4_500,
        "currency": "EUR",
        "payee_id": "chez-marie",
        "purpose": "deposit",
    }
    key = idempotency_key()
    context = context_for(make_user(f"racer-{key[-8:]}"))
    barrier = threading.Barrier(threads)
    outcomes: list[Any] = []
    errors: list[BaseException] = []

    def worker() -> None:
        try:
            barrier.wait(timeout=10)
            outcomes.append(
                SandboxAdapter().execute(
                    spec=spec, arguments=arguments, idempotency_key=key, context=context
                )
            )
        except BaseException as exc:  # reported below; a thread must not die silently
            errors.append(exc)
        finally:
            connection.close()

    pool = [threading.Thread(target=worker) for _ in range(threads)]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join(timeout=30)
    assert not errors
    assert len(outcomes) == threads
    assert all(isinstance(o, Succeeded) for o in outcomes), outcomes
    # Every racer gets the one stored outcome (compared as data: key order is storage's).
    assert all(o == outcomes[0] for o in outcomes)
    assert SandboxEffect.objects.filter(idempotency_key=key).count() == 1


@pytest.mark.django_db(transaction=True)
def test_racing_replays_execute_once(make_user: Any, context_for: Any) -> None:
    _race(4, make_user, context_for)


@pytest.mark.services
@pytest.mark.django_db(transaction=True)
def test_racing_replays_execute_once_on_postgresql(make_user: Any, context_for: Any) -> None:
    # Two connections really insert concurrently here: the unique index makes one wait for
    # the other's commit and then fail, and the loser answers from the winner's row.
    assert connection.vendor == "postgresql"
    for _ in range(5):
        _race(2, make_user, context_for)
