"""Appending builds a gapless hash chain; every kind of tampering is found at the right seq."""

from __future__ import annotations

import hashlib
import itertools
import uuid
from typing import Any

import pytest
import rfc8785
from django.core.management import call_command
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from ledger import verification
from ledger.chain import GENESIS_HASH, event_canonical_bytes, occurred_at_text
from ledger.events import Disclosure, Join
from ledger.models import LedgerEvent, LedgerHead
from ledger.services import LedgerAppendError, ledger_append
from ledger.signing import ledger_sign_head
from ledger.verification import ledger_verify_room
from tests.ledger.conftest import append_events

pytestmark = pytest.mark.django_db


def test_chain_is_gapless_linked_and_hashed_as_documented(make_chain) -> None:
    room_id = make_chain(6)
    events = list(LedgerEvent.objects.filter(room_id=room_id).order_by("seq"))
    assert [e.seq for e in events] == [1, 2, 3, 4, 5, 6]
    assert events[0].prev_hash == GENESIS_HASH
    for before, after in itertools.pairwise(events):
        assert after.prev_hash == before.hash
    # The documented encoding, computed here by hand (not through ledger.chain).
    first = events[0]
    envelope = {
        "room_id": str(room_id),
        "seq": 1,
        "kind": "join",
        "occurred_at": first.occurred_at.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
        "data": {"participant_id": "agent-0", "participant_kind": "agent"},
        "prev_hash": GENESIS_HASH,
    }
    assert first.hash == hashlib.sha256(rfc8785.dumps(envelope)).hexdigest()
    head = LedgerHead.objects.get(room_id=room_id)
    assert (head.seq, head.hash) == (6, events[-1].hash)
    assert ledger_verify_room(room_id=room_id).ok


def test_rooms_have_independent_chains(make_chain) -> None:
    a, b = make_chain(3), make_chain(2)
    assert list(LedgerEvent.objects.filter(room_id=b).values_list("seq", flat=True)) == [1, 2]
    assert ledger_verify_room(room_id=a).ok and ledger_verify_room(room_id=b).ok


def test_append_takes_three_queries_once_the_room_has_a_head(make_chain) -> None:
    room_id = make_chain(1)
    with transaction.atomic(), CaptureQueriesContext(connection) as queries:
        ledger_append(room_id=room_id, event=Join(participant_id="x", participant_kind="owner"))
    # lock head, insert event, move head (the atomic block's own BEGIN/COMMIT aside)
    sql = [
        q["sql"]
        for q in queries.captured_queries
        if not q["sql"].startswith(("BEGIN", "SAVEPOINT", "RELEASE"))
    ]
    assert len(sql) == 3, sql


@pytest.mark.django_db(transaction=True)
def test_append_outside_an_atomic_block_is_refused() -> None:
    with pytest.raises(LedgerAppendError, match="atomic"):
        ledger_append(
            room_id=uuid.uuid4(), event=Join(participant_id="x", participant_kind="agent")
        )
    assert LedgerEvent.objects.count() == 0


@pytest.mark.django_db(transaction=True)
def test_a_failed_append_rolls_back_the_effect_it_guarded(make_owner) -> None:
    """Fail closed: the ledger's INSERT raises, so the guarded write does not commit, even
    though the caller catches the error."""
    from django.contrib.auth import get_user_model

    room_id = uuid.uuid4()
    append_events(room_id, 2)
    # Make the next event's number collide: the database itself refuses the INSERT.
    LedgerHead.objects.filter(room_id=room_id).update(seq=1)
    with transaction.atomic():
        make_owner("effect-of-a-disclosure")  # stands for the effect the event guards
        with pytest.raises(LedgerAppendError):
            ledger_append(
                room_id=room_id,
                event=Disclosure(owner_id="o1", item_id="budget", recipient_agent_id="a2", turn=1),
            )
    assert not get_user_model().objects.filter(username="effect-of-a-disclosure").exists()
    assert LedgerEvent.objects.filter(room_id=room_id).count() == 2


def _tampered(room_id: uuid.UUID) -> tuple[bool, int | None]:
    verdict = ledger_verify_room(room_id=room_id)
    return verdict.ok, verdict.first_bad_seq


def test_editing_event_data_is_found_at_that_seq(make_chain) -> None:
    room_id = make_chain(6)
    row = LedgerEvent.objects.get(room_id=room_id, seq=3)
    LedgerEvent.objects.filter(pk=row.pk).update(data={**row.data, "rule": "slip.cleared"})
    assert _tampered(room_id) == (False, 3)


def test_editing_a_stored_hash_is_found_at_that_seq(make_chain) -> None:
    room_id = make_chain(6)
    LedgerEvent.objects.filter(room_id=room_id, seq=4).update(hash="f" * 64)
    assert _tampered(room_id) == (False, 4)


def test_editing_a_timestamp_or_kind_is_found(make_chain) -> None:
    room_id = make_chain(6)
    row = LedgerEvent.objects.get(room_id=room_id, seq=2)
    LedgerEvent.objects.filter(pk=row.pk).update(occurred_at=row.occurred_at.replace(microsecond=1))
    assert _tampered(room_id) == (False, 2)
    other = make_chain(6)
    LedgerEvent.objects.filter(room_id=other, seq=5).update(kind="leave")
    assert _tampered(other) == (False, 5)


def test_deleting_a_middle_event_is_found(make_chain) -> None:
    room_id = make_chain(6)
    LedgerEvent.objects.filter(room_id=room_id, seq=3).delete()
    ok, bad = _tampered(room_id)
    assert (ok, bad) == (False, 3)
    assert "missing" in ledger_verify_room(room_id=room_id).problem


def test_swapping_two_events_is_found(make_chain) -> None:
    room_id = make_chain(6)
    rows = LedgerEvent.objects.filter(room_id=room_id)
    rows.filter(seq=3).update(seq=1000)
    rows.filter(seq=4).update(seq=3)
    rows.filter(seq=1000).update(seq=4)
    assert _tampered(room_id) == (False, 3)


def test_a_forged_event_is_found(make_chain) -> None:
    # Forged with a correct hash at the tail: the head row does not reach it.
    room_id = make_chain(5)
    tip = LedgerEvent.objects.get(room_id=room_id, seq=5)
    when = occurred_at_text(tip.occurred_at)
    data = {"participant_id": "mallory", "participant_kind": "agent"}
    envelope = event_canonical_bytes(
        room_id=room_id, seq=6, kind="join", occurred_at=when, data=data, prev_hash=tip.hash
    )
    forged = hashlib.sha256(envelope).hexdigest()
    LedgerEvent.objects.create(
        room_id=room_id, seq=6, kind="join", occurred_at=tip.occurred_at, data=data,
        prev_hash=tip.hash, hash=forged, canonical=envelope,
    )  # fmt: skip
    assert _tampered(room_id) == (False, 6)
    # Forged in the middle (later events renumbered to make room): the chain breaks after it.
    other = make_chain(5)
    rows = LedgerEvent.objects.filter(room_id=other)
    for seq in (5, 4, 3):
        rows.filter(seq=seq).update(seq=seq + 1)
    two = rows.get(seq=2)
    when = occurred_at_text(two.occurred_at)
    envelope = event_canonical_bytes(
        room_id=other, seq=3, kind="join", occurred_at=when, data=data, prev_hash=two.hash
    )
    forged = hashlib.sha256(envelope).hexdigest()
    LedgerEvent.objects.create(
        room_id=other, seq=3, kind="join", occurred_at=two.occurred_at, data=data,
        prev_hash=two.hash, hash=forged, canonical=envelope,
    )  # fmt: skip
    assert _tampered(other) == (False, 4)


def test_truncating_the_tail_is_found_even_when_the_head_row_is_rewritten(make_chain) -> None:
    room_id = make_chain(6)
    ledger_sign_head(room_id=room_id)
    LedgerEvent.objects.filter(room_id=room_id, seq=6).delete()
    assert _tampered(room_id) == (False, 6)  # the head row still says 6
    five = LedgerEvent.objects.get(room_id=room_id, seq=5)
    LedgerEvent.objects.filter(room_id=room_id, seq=5).delete()
    four = LedgerEvent.objects.get(room_id=room_id, seq=4)
    LedgerHead.objects.filter(room_id=room_id).update(seq=4, hash=four.hash)
    verdict = ledger_verify_room(room_id=room_id)
    assert (verdict.ok, verdict.first_bad_seq) == (False, 5)
    assert "signed head" in verdict.problem and five.seq == 5


def test_verify_ledger_command_exit_codes(make_chain, capsys) -> None:
    good, bad = make_chain(4), make_chain(4)
    call_command("verify_ledger")
    assert "intact" in capsys.readouterr().out
    call_command("verify_ledger", room=str(good))
    assert f"room {good}: intact (4 events" in capsys.readouterr().out
    LedgerEvent.objects.filter(room_id=bad, seq=2).update(prev_hash="0" * 64)
    with pytest.raises(SystemExit) as exited:
        call_command("verify_ledger")
    assert exited.value.code == 1
    out = capsys.readouterr().out
    assert f"room {bad}: BROKEN at seq 2" in out and str(good) not in out
    with pytest.raises(SystemExit) as exited:
        call_command("verify_ledger", room=str(bad))
    assert exited.value.code == 1
    call_command("verify_ledger", room=str(good))


def test_an_append_while_verifying_a_live_room_is_not_a_fault(make_chain, monkeypatch) -> None:
    """The head row is read first, then the events: an event a live room appends in between
    (an agent leaving, say) lies beyond the head that was read, yet nothing is wrong."""
    room_id = make_chain(3)
    read_events = verification._stored_events

    def append_meanwhile(room: Any, *, through_seq: int) -> Any:
        with transaction.atomic():
            ledger_append(room_id=room, event=Join(participant_id="late", participant_kind="agent"))
        return read_events(room, through_seq=through_seq)

    monkeypatch.setattr(verification, "_stored_events", append_meanwhile)
    verdict = ledger_verify_room(room_id=room_id)
    assert verdict.ok, verdict
    assert verdict.last_seq == 3  # what was verified: the chain up to the head that was read
    monkeypatch.undo()
    assert ledger_verify_room(room_id=room_id).last_seq == 4
