"""The batch append's compare-and-set on the head (issue 17: on PostgreSQL it rides in the
insert's own statement) still detects a concurrent writer: a batch chained on the head it
saw, sent while another transaction holds the head row having moved it, waits for that
writer, finds the head moved, writes nothing on that basis and is chained after the
writer's event instead. Real transactions, two connections, both backends."""

from __future__ import annotations

import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest
from django.db import connection, connections, transaction

from ledger.events import Disclosure, Join
from ledger.models import LedgerEvent
from ledger.services import AppendedEvent, ledger_append, ledger_append_many
from ledger.verification import ledger_verify_room

pytestmark = pytest.mark.django_db(transaction=True)


def _waiting_for_a_lock() -> bool:
    """PostgreSQL: some backend waits for a row lock (the batch, for the head the writer
    holds). SQLite has nothing to show: its batch waits to begin, with a stale head all
    the same."""
    if connection.vendor != "postgresql":
        return True
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_locks WHERE NOT granted")
        return bool(cursor.fetchone()[0])


def _disclosures(n: int) -> list[Disclosure]:
    return [
        Disclosure(owner_id="o-1", item_id=f"i-{i}", recipient_agent_id="a-1", turn=1)
        for i in range(n)
    ]


def test_a_batch_on_a_head_a_concurrent_writer_moved_is_chained_after_it() -> None:
    room_id = uuid.uuid4()
    with transaction.atomic():
        first = ledger_append(
            room_id=room_id, event=Join(participant_id="agent-1", participant_kind="agent")
        )
    seen = (first.seq, first.hash)
    moved, release = threading.Event(), threading.Event()
    written: list[AppendedEvent] = []

    def writer() -> None:
        try:
            with transaction.atomic():
                written.append(
                    ledger_append(
                        room_id=room_id,
                        event=Join(participant_id="agent-2", participant_kind="agent"),
                    )
                )
                moved.set()
                assert release.wait(30)
        finally:
            connections.close_all()

    def batch() -> list[AppendedEvent]:
        try:
            with transaction.atomic():
                return ledger_append_many(
                    room_id=room_id,
                    events=_disclosures(11),
                    head_seen=seen,
                )
        finally:
            connections.close_all()

    with ThreadPoolExecutor(2) as pool:
        wrote = pool.submit(writer)
        assert moved.wait(30)
        batched = pool.submit(batch)
        deadline = time.monotonic() + 30
        while not _waiting_for_a_lock() and time.monotonic() < deadline:
            time.sleep(0.01)
        release.set()
        wrote.result(60)
        appended = batched.result(60)
    assert [a.seq for a in appended] == list(range(3, 14))
    assert appended[0].prev_hash == written[0].hash
    assert list(
        LedgerEvent.objects.filter(room_id=room_id).order_by("seq").values_list("seq", flat=True)
    ) == list(range(1, 14))
    report = ledger_verify_room(room_id=room_id)
    assert report.ok, report
