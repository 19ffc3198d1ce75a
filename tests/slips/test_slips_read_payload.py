"""The turn's slips read sends each slip's signed payload once, on its first record's row
(issue 17): a dozen kilobytes less a turn, which on PostgreSQL came in several reads of the
socket. The slips still verify as before, and a slip whose first row came without its
payload clears nothing."""

from __future__ import annotations

from uuid import UUID

import pytest
from django.db import connection

from bench.django_tasks import seed_turn_rooms
from slips import verification
from slips.models import Slip, SlipCapability
from synapsia.db.statements import blob_column, blob_value, rows_fetched

pytestmark = pytest.mark.django_db


def _probe_room() -> UUID:
    return UUID(seed_turn_rooms(0)["probe"]["room_id"])


def _rows(room_id: UUID) -> list[tuple]:
    with connection.cursor() as cursor:
        cursor.execute(
            verification._room_slips_sql(connection.vendor, False),
            {"room": Slip._meta.get_field("room_id").get_db_prep_value(room_id, connection)},
        )
        return [tuple(row) for row in rows_fetched(cursor, connection.vendor)]


def test_each_slip_payload_comes_once_on_its_first_row() -> None:
    room_id = _probe_room()
    rows = _rows(room_id)
    slips = list(Slip.objects.filter(room_id=room_id, superseded_at__isnull=True))
    assert len(slips) == 2
    records = SlipCapability.objects.filter(slip__in=slips).count()
    assert len(rows) == records > len(slips)  # a row per record, several per slip

    first_seen: dict[UUID, tuple] = {}
    for row in rows:
        first_seen.setdefault(UUID(str(row[5])), row)  # SQLite: 32 hex digits
    # The two slips' records interleave by position; each slip's first row in the
    # statement's order carries its payload, exactly as stored, and no other row does.
    assert {slip: blob_value(row[10]) for slip, row in first_seen.items()} == {
        s.id: bytes(s.payload) for s in slips
    }
    assert sum(row[10] is not None for row in rows) == len(slips)


def test_the_read_verifies_both_slips_and_all_their_records() -> None:
    room_id = _probe_room()
    read = verification.room_slips_read(room_id=room_id, tier="collaborative", lock=False)
    assert len(read.slips) == 2
    for checked in read.slips.values():
        assert checked.failure is None
        assert checked.signed is not None
        assert len(checked.records) == len(checked.signed.capabilities)


def test_a_slip_read_without_its_payload_clears_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Adversarial: the statement's order or text broken so that no row carries the payload.
    Every use under each slip is denied as a verification error; nothing raises."""
    room_id = _probe_room()
    written = verification._room_slips_sql(connection.vendor, False)
    payload = blob_column(connection.vendor, "s.payload")
    assert written.count(payload) == 1
    broken = written.replace(payload, "NULL")
    monkeypatch.setattr(verification, "_room_slips_sql", lambda vendor, lock: broken)
    read = verification.room_slips_read(room_id=room_id, tier="collaborative", lock=False)
    assert len(read.slips) == 2
    for checked in read.slips.values():
        assert checked.failure == "verification_error"
        assert checked.signed is None
