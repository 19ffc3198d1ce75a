"""Ledger test helpers: build real chains through ``ledger_append``."""

from __future__ import annotations

import base64
import os
import uuid
from collections.abc import Callable, Iterator
from uuid import UUID

import pytest
from django.db import transaction

from ledger import signing
from ledger.events import Denial, Disclosure, Join, LedgerEventRecord, RoomPaused
from ledger.services import AppendedEvent, ledger_append


@pytest.fixture(autouse=True)
def ledger_signing_key(settings, monkeypatch, tmp_path) -> Iterator[str]:
    """A fresh server signing key per test, in both profiles (production requires one), also
    exported to the environment so a Daphne subprocess signs and publishes the same key."""
    seed = base64.b64encode(os.urandom(32)).decode()
    monkeypatch.setenv("SYNAPSIA_LEDGER_SIGNING_KEY", seed)
    settings.SYNAPSIA = {
        **settings.SYNAPSIA,
        "LEDGER_SIGNING_KEY": seed,
        "LEDGER_SIGNING_KEY_PATH": str(tmp_path / "ledger-signing.key"),
    }
    signing._signing_key.cache_clear()
    yield seed
    signing._signing_key.cache_clear()


def sample_events(n: int) -> list[LedgerEventRecord]:
    """``n`` varied, valid event records."""
    kinds: list[Callable[[int], LedgerEventRecord]] = [
        lambda i: Join(participant_id=f"agent-{i}", participant_kind="agent"),
        lambda i: Disclosure(
            owner_id="owner-1", item_id=f"budget-{i}", recipient_agent_id="agent-2", turn=i
        ),
        lambda i: Denial(rule="slip.not_cleared", subject_id="agent-2", resource_id=f"item-{i}"),
        lambda i: RoomPaused(by="owner-1", reason_rule="flare"),
    ]
    return [kinds[i % len(kinds)](i) for i in range(n)]


def append_events(room_id: UUID, n: int) -> list[AppendedEvent]:
    appended = []
    for event in sample_events(n):
        with transaction.atomic():
            appended.append(ledger_append(room_id=room_id, event=event))
    return appended


@pytest.fixture
def make_chain() -> Callable[[int], UUID]:
    """A fresh room id with ``n`` events appended (one transaction each, like real callers)."""

    def make(n: int) -> UUID:
        room_id = uuid.uuid4()
        append_events(room_id, n)
        return room_id

    return make
