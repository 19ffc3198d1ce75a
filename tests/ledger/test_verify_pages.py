"""Verification reads each room in pages of ``CHUNK_SIZE`` rows (a prepared statement per
page, keyset by seq): rooms longer than a page, or exactly a page long, verify whole, and a
fault on a later page, or a row missing between two pages, is still found at its number."""

from __future__ import annotations

from collections.abc import Callable
from uuid import UUID

import pytest

from ledger import verification
from ledger.models import LedgerEvent
from ledger.signing import ledger_sign_head
from ledger.verification import ledger_verify_all, ledger_verify_room

pytestmark = pytest.mark.django_db


@pytest.fixture
def small_pages(monkeypatch: pytest.MonkeyPatch) -> int:
    monkeypatch.setattr(verification, "CHUNK_SIZE", 3)
    return 3


def test_rooms_of_several_pages_verify_whole(
    make_chain: Callable[[int], UUID], small_pages: int
) -> None:
    rooms = [make_chain(n) for n in (2, small_pages, 2 * small_pages, 8)]
    for room_id in rooms:
        ledger_sign_head(room_id=room_id)
    for room_id in rooms:
        verdict = ledger_verify_room(room_id=room_id)
        assert (
            verdict.ok
            and verdict.events_checked == LedgerEvent.objects.filter(room_id=room_id).count()
        )
    assert ledger_verify_all() == []


def test_a_fault_on_a_later_page_is_found_at_its_number(
    make_chain: Callable[[int], UUID], small_pages: int
) -> None:
    edited, cut, fine = make_chain(8), make_chain(8), make_chain(8)
    for room_id in (edited, cut, fine):
        ledger_sign_head(room_id=room_id)
    row = LedgerEvent.objects.get(room_id=edited, seq=7)
    LedgerEvent.objects.filter(pk=row.pk).update(kind="leave")
    # seq 4 would open the second page: the page boundary must not hide the gap.
    LedgerEvent.objects.filter(room_id=cut, seq=4).delete()
    assert ledger_verify_room(room_id=edited).first_bad_seq == 7
    assert ledger_verify_room(room_id=cut).problem == "event 4 is missing"
    failures = {f.room_id: (f.first_bad_seq, f.problem) for f in ledger_verify_all()}
    assert set(failures) == {str(edited), str(cut)}
    assert failures[str(edited)][0] == 7 and "kind column differs" in failures[str(edited)][1]
    assert failures[str(cut)] == (4, "event 4 is missing")
