"""Maximum uses hold under concurrency: of 100 simultaneous uses with k left, exactly k pass."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from django.db import connection, connections
from django.utils import timezone

from slips.models import SlipCapability
from slips.verification import capability_use

K = 7
ATTEMPTS = 100


def _race(signer) -> list[bool]:
    barrier = threading.Barrier(ATTEMPTS)

    def attempt(_: int) -> bool:
        try:
            barrier.wait()
            return capability_use(
                room_id=signer.room_id,
                owner_id=signer.owner.pk,
                agent_id=signer.agent_id,
                resource="budget",
                operation="disclose",
                recipient="peer_agent",
                now=timezone.now(),
            ).allowed
        finally:
            connections.close_all()

    with ThreadPoolExecutor(ATTEMPTS) as pool:
        return list(pool.map(attempt, range(ATTEMPTS)))


def _run(make_signer) -> None:
    signer = make_signer()
    signer.submit(
        capabilities=[
            {"resource": "budget", "operation": "disclose", "recipient": "both", "max_uses": K}
        ]
    )
    results = _race(signer)
    assert sum(results) == K
    assert SlipCapability.objects.get().uses_left == 0


@pytest.mark.services
@pytest.mark.django_db(transaction=True)
def test_uses_never_over_consumed_on_postgresql(make_signer) -> None:
    assert connection.vendor == "postgresql"
    _run(make_signer)


@pytest.mark.django_db(transaction=True)
def test_uses_never_over_consumed_on_sqlite(make_signer) -> None:
    if connection.vendor != "sqlite":
        pytest.skip("the PostgreSQL variant runs in the services pass")
    _run(make_signer)
