"""Issue 16: the full ledger append latency (lock + hash + sign + insert) is a histogram in
the project's registry, one observation per append (per batch for ``ledger_append_many``)."""

from __future__ import annotations

import uuid

import pytest
from django.db import transaction
from prometheus_client import generate_latest

from ledger import signing
from ledger.events import Join
from ledger.models import LedgerHead
from ledger.services import LedgerAppendError, ledger_append, ledger_append_many
from synapsia.metrics import REGISTRY

pytestmark = pytest.mark.django_db


def _sample(name: str, path: str) -> float:
    return (
        REGISTRY.get_sample_value(f"synapsia_ledger_append_seconds_{name}", {"path": path}) or 0.0
    )


def _join(i: int) -> Join:
    return Join(participant_id=f"agent-{i}", participant_kind="agent")


def test_every_append_is_observed_and_the_time_includes_signing(monkeypatch, settings) -> None:
    settings.SYNAPSIA = {**settings.SYNAPSIA, "LEDGER_HEAD_EVERY_EVENTS": 4}
    # A clock that only moves while the server signs a head: whatever the histogram adds up
    # is then exactly the signing time, so it must be inside the timed span.
    now = [1000.0]
    monkeypatch.setattr("ledger.services.time.perf_counter", lambda: now[0])
    real_sign = signing.signed_head_build

    def slow_sign(**kwargs):
        now[0] += 5.0
        return real_sign(**kwargs)

    monkeypatch.setattr(signing, "signed_head_build", slow_sign)
    count, total = _sample("count", "one"), _sample("sum", "one")
    room_id = uuid.uuid4()
    for i in range(5):
        with transaction.atomic():
            ledger_append(room_id=room_id, event=_join(i))
    assert _sample("count", "one") == count + 5
    assert _sample("sum", "one") == pytest.approx(total + 5.0)  # one head, at event 4

    batches, batch_total = _sample("count", "batch"), _sample("sum", "batch")
    with transaction.atomic():
        ledger_append_many(room_id=room_id, events=[_join(i) for i in range(5, 13)])
    assert _sample("count", "batch") == batches + 1
    assert _sample("sum", "batch") == pytest.approx(batch_total + 10.0)  # heads at 8 and 12


def test_a_failed_append_is_not_observed_and_the_series_is_exported() -> None:
    count = _sample("count", "one")
    room_id = uuid.uuid4()
    with transaction.atomic():
        append(room_id, _join(0))
    with pytest.raises(LedgerAppendError), transaction.atomic():
        # A unique (room, seq) violation: the head row claims less than the chain holds.
        LedgerHead.objects.filter(room_id=room_id).update(seq=0)
        append(room_id, _join(1))
    assert _sample("count", "one") == count + 1
    text = generate_latest(REGISTRY).decode()
    assert 'synapsia_ledger_append_seconds_bucket{le="0.005",path="one"}' in text


def append(room_id: uuid.UUID, event: Join) -> None:
    ledger_append(room_id=room_id, event=event)
