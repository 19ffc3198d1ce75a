"""The ledger verified from the bytes stored at append: hashing them is the whole cost, and
tampering with the columns, the bytes, or both is still found and named in words."""

from __future__ import annotations

import hashlib
import importlib
import json
import uuid
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any, Literal

import pytest
import rfc8785
from django.apps import apps
from django.core.management import call_command
from django.db import connection, transaction
from pydantic import BaseModel

from ledger import services, verification
from ledger.chain import (
    ENVELOPE_PREFIX,
    envelope_bytes,
    envelopes_for,
    event_canonical_bytes,
    occurred_at_text,
)
from ledger.models import LedgerEvent, LedgerHead
from ledger.services import ledger_append
from ledger.signing import ledger_sign_head
from ledger.verification import ledger_verify_all, ledger_verify_room
from tests.ledger.conftest import sample_events

pytestmark = pytest.mark.django_db


def _envelope(event: LedgerEvent, **changes: Any) -> dict[str, Any]:
    envelope = {
        "room_id": str(event.room_id),
        "seq": event.seq,
        "kind": event.kind,
        "occurred_at": occurred_at_text(event.occurred_at),
        "data": event.data,
        "prev_hash": event.prev_hash,
    }
    return envelope | changes


def _verdict(room_id: uuid.UUID) -> tuple[bool, int | None, str]:
    verdict = ledger_verify_room(room_id=room_id)
    return verdict.ok, verdict.first_bad_seq, verdict.problem


def _no_recanonicalising(monkeypatch) -> None:
    def refuse(**_: Any) -> str:
        raise AssertionError("a consistent row was re-canonicalised")

    monkeypatch.setattr(verification, "stored_bytes_problem", refuse)


@pytest.mark.parametrize(
    "data",
    [
        {},
        {"participant_id": "a-1", "participant_kind": "agent"},
        {"z": None, "a": [1, True, False, "x"], "é": {"nested": 'quote " and \\ and \n\t\u0001'}},
        {"emoji": "\U0001f600", "\U0001f600": 1, "\ue000": 2, "line": "\u2028"},
        {"big": 2**53 - 1, "neg": -(2**53) + 1, "zero": 0},
    ],
)
def test_the_envelope_built_from_its_parts_is_rfc8785_of_the_whole(data) -> None:
    for kind in ("join", 'odd"kind\\', "kind\u00e9"):
        envelope = {
            "room_id": str(uuid.uuid4()), "seq": 12, "kind": kind,
            "occurred_at": "2026-01-02T03:04:05.000001Z", "data": data, "prev_hash": "ab" * 32,
        }  # fmt: skip
        assert event_canonical_bytes(**envelope) == rfc8785.dumps(envelope)


@pytest.mark.parametrize(
    "room_id", [str(uuid.uuid4()), 'room "quoted" \\ \u00e9 \U0001f600', "r\u2028\x01"]
)
def test_a_batch_envelope_is_the_same_bytes_as_one_built_alone(room_id: str) -> None:
    """``envelopes_for`` (a batch append writes the room's and the moment's strings once, each
    kind once) gives exactly ``envelope_bytes``' bytes, so RFC 8785's, for every event of the
    batch, awkward strings included; a count outside RFC 8785's integers is refused alike."""
    moment = "2026-01-02T03:04:05.000001Z"
    envelope = envelopes_for(room_id=room_id, occurred_at=moment)
    for seq, kind in enumerate(("join", 'odd"kind\\', "kind\u00e9", "join", "disclosure"), 1):
        data = rfc8785.dumps({"n": seq, "s": 'x"\\\u00e9'})
        prev = "ab" * 32 if seq % 2 else "0" * 64
        alone = envelope_bytes(
            data_canonical=data, room_id=room_id, seq=seq, kind=kind, occurred_at=moment,
            prev_hash=prev,
        )  # fmt: skip
        assert envelope(data_canonical=data, seq=seq, kind=kind, prev_hash=prev) == alone
        assert alone == rfc8785.dumps(
            {"data": json.loads(data), "room_id": room_id, "seq": seq, "kind": kind,
             "occurred_at": moment, "prev_hash": prev}
        )  # fmt: skip
    for refused in (-1, 2**53, True):
        with pytest.raises(rfc8785.IntegerDomainError):
            envelope(data_canonical=b"{}", seq=refused, kind="join", prev_hash="0" * 64)


def test_append_stores_the_hashed_bytes_and_the_data_column_as_rfc8785(make_chain) -> None:
    room_id = make_chain(8)
    for event in LedgerEvent.objects.filter(room_id=room_id).order_by("seq"):
        stored = bytes(event.canonical)
        assert stored == rfc8785.dumps(_envelope(event))
        assert hashlib.sha256(stored).hexdigest() == event.hash
    if connection.vendor == "sqlite":
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT data, canonical FROM ledger_ledgerevent WHERE room_id = %s",
                [room_id.hex],
            )
            for text, stored in cursor.fetchall():
                assert bytes(stored).startswith(ENVELOPE_PREFIX + text.encode() + b',"kind":')


def test_a_clean_ledger_is_verified_without_re_canonicalising_any_row(
    make_chain, monkeypatch
) -> None:
    rooms = [make_chain(n) for n in (1, 5, 9)]
    ledger_sign_head(room_id=rooms[1])
    _no_recanonicalising(monkeypatch)
    for room_id in rooms:
        assert ledger_verify_room(room_id=room_id).ok
    assert ledger_verify_all() == []


def test_editing_only_the_data_column_is_named(make_chain) -> None:
    room_id = make_chain(6)
    row = LedgerEvent.objects.get(room_id=room_id, seq=3)
    LedgerEvent.objects.filter(pk=row.pk).update(data={**row.data, "resource_id": "other"})
    assert _verdict(room_id) == (
        False, 3, "the event's data column differs from what was hashed (the stored bytes say "
        "otherwise)",
    )  # fmt: skip


def test_editing_kind_or_time_alone_is_named(make_chain) -> None:
    room_id = make_chain(6)
    LedgerEvent.objects.filter(room_id=room_id, seq=5).update(kind="leave")
    ok, seq, problem = _verdict(room_id)
    assert (ok, seq) == (False, 5) and "kind column differs" in problem
    other = make_chain(6)
    row = LedgerEvent.objects.get(room_id=other, seq=2)
    LedgerEvent.objects.filter(pk=row.pk).update(occurred_at=row.occurred_at.replace(year=2020))
    ok, seq, problem = _verdict(other)
    assert (ok, seq) == (False, 2) and "time column differs" in problem


def test_editing_only_the_bytes_is_named(make_chain) -> None:
    room_id = make_chain(6)
    row = LedgerEvent.objects.get(room_id=room_id, seq=4)
    forged = rfc8785.dumps(_envelope(row, data={**row.data, "turn": 99}))
    LedgerEvent.objects.filter(pk=row.pk).update(canonical=forged)
    assert _verdict(room_id) == (
        False, 4, "the stored hash is not the SHA-256 of the event's stored bytes"
    )  # fmt: skip


def test_editing_data_and_bytes_together_breaks_the_hash(make_chain) -> None:
    room_id = make_chain(6)
    row = LedgerEvent.objects.get(room_id=room_id, seq=2)
    data = {**row.data, "participant_id": "mallory"}
    LedgerEvent.objects.filter(pk=row.pk).update(
        data=data, canonical=rfc8785.dumps(_envelope(row, data=data))
    )
    assert _verdict(room_id)[:2] == (False, 2)
    assert "SHA-256 of the event's stored bytes" in _verdict(room_id)[2]


def test_editing_data_bytes_and_hash_together_breaks_the_next_link(make_chain) -> None:
    room_id = make_chain(6)
    row = LedgerEvent.objects.get(room_id=room_id, seq=2)
    data = {**row.data, "participant_id": "mallory"}
    forged = rfc8785.dumps(_envelope(row, data=data))
    LedgerEvent.objects.filter(pk=row.pk).update(
        data=data, canonical=forged, hash=hashlib.sha256(forged).hexdigest()
    )
    assert _verdict(room_id) == (False, 3, "prev_hash does not match the event before it")


def test_rewriting_the_whole_tail_consistently_is_caught_by_the_signed_head(make_chain) -> None:
    room_id = make_chain(5)
    ledger_sign_head(room_id=room_id)
    rows = list(LedgerEvent.objects.filter(room_id=room_id, seq__gte=4).order_by("seq"))
    prev = rows[0].prev_hash
    for row in rows:  # rewrite 4 and 5: columns, bytes, hashes and links all consistent
        data = {**row.data, "note": "rewritten"} if isinstance(row.data, dict) else row.data
        forged = rfc8785.dumps(_envelope(row, data=data, prev_hash=prev))
        digest = hashlib.sha256(forged).hexdigest()
        LedgerEvent.objects.filter(pk=row.pk).update(
            data=data, canonical=forged, prev_hash=prev, hash=digest
        )
        prev = digest
    LedgerHead.objects.filter(room_id=room_id).update(hash=prev)
    ok, _, problem = _verdict(room_id)
    assert not ok and "signed head" in problem


def test_swapping_reordering_deleting_and_truncating_are_named(make_chain) -> None:
    swapped = make_chain(6)
    rows = LedgerEvent.objects.filter(room_id=swapped)
    rows.filter(seq=2).update(seq=1000)
    rows.filter(seq=5).update(seq=2)
    rows.filter(seq=1000).update(seq=5)
    assert _verdict(swapped) == (False, 2, "prev_hash does not match the event before it")

    reordered = make_chain(6)  # 4 moved to the end, 5 and 6 moved up
    rows = LedgerEvent.objects.filter(room_id=reordered)
    rows.filter(seq=4).update(seq=1000)
    rows.filter(seq=5).update(seq=4)
    rows.filter(seq=6).update(seq=5)
    rows.filter(seq=1000).update(seq=6)
    assert _verdict(reordered)[:2] == (False, 4)

    deleted = make_chain(6)
    LedgerEvent.objects.filter(room_id=deleted, seq=3).delete()
    assert _verdict(deleted) == (False, 3, "event 3 is missing")

    truncated = make_chain(6)
    LedgerEvent.objects.filter(room_id=truncated, seq__gte=5).delete()
    assert _verdict(truncated) == (False, 5, "the head row is at 6: the chain is truncated")


def test_a_row_moved_from_another_room_is_named(make_chain) -> None:
    a, b = make_chain(3), make_chain(3)
    LedgerEvent.objects.filter(room_id=a, seq=3).delete()
    LedgerEvent.objects.filter(room_id=b, seq=3).update(room_id=a)
    ok, seq, problem = _verdict(a)
    assert (ok, seq) == (False, 3)
    assert problem in (
        "prev_hash does not match the event before it",
        "the event's stored bytes belong to another room",
    )
    # Even with its link column rewritten to fit, its bytes name the other room.
    LedgerEvent.objects.filter(room_id=a, seq=3).update(
        prev_hash=LedgerEvent.objects.get(room_id=a, seq=2).hash
    )
    assert _verdict(a) == (False, 3, "the event's stored bytes belong to another room")


def test_bytes_that_are_not_json_are_named_not_a_crash(make_chain) -> None:
    # With a matching hash, so the bytes themselves are what the verifier has to judge; on
    # PostgreSQL the database cannot read them as JSON, and the verifier falls back.
    room_id = make_chain(4)
    for seq, garbage in ((2, b"\xff\xfe not utf-8"), (3, b'{"data": not json')):
        LedgerEvent.objects.filter(room_id=room_id, seq=seq).update(
            canonical=garbage, hash=hashlib.sha256(garbage).hexdigest()
        )
    assert _verdict(room_id) == (False, 2, "the event's stored bytes are not JSON")
    failures = ledger_verify_all()
    assert [(f.room_id, f.first_bad_seq) for f in failures] == [(str(room_id), 2)]


def test_verify_ledger_names_each_tampering_in_words(make_chain, capsys) -> None:
    good, data_edit, bytes_edit = make_chain(4), make_chain(4), make_chain(4)
    row = LedgerEvent.objects.get(room_id=data_edit, seq=2)
    LedgerEvent.objects.filter(pk=row.pk).update(data={**row.data, "turn": 41})
    LedgerEvent.objects.filter(room_id=bytes_edit, seq=3).update(canonical=b"{}")
    with pytest.raises(SystemExit) as exited:
        call_command("verify_ledger")
    assert exited.value.code == 1
    out = capsys.readouterr().out
    assert f"room {data_edit}: BROKEN at seq 2: the event's data column differs" in out
    assert f"room {bytes_edit}: BROKEN at seq 3: the stored hash is not the SHA-256" in out
    assert str(good) not in out
    with pytest.raises(SystemExit):
        call_command("verify_ledger", recanonicalise=True)
    out = capsys.readouterr().out
    assert f"room {data_edit}: BROKEN at seq 2" in out and str(good) not in out


def test_a_chain_from_before_the_migration_is_backfilled_and_verifies(
    make_chain, monkeypatch
) -> None:
    rooms = [make_chain(5), make_chain(3)]
    # As 0001 left them: no stored bytes, data written by the default JSON encoder.
    LedgerEvent.objects.update(canonical=b"")
    if connection.vendor == "sqlite":
        with connection.cursor() as cursor:
            cursor.execute("SELECT id, data FROM ledger_ledgerevent")
            for pk, text in cursor.fetchall():
                cursor.execute(
                    "UPDATE ledger_ledgerevent SET data = %s WHERE id = %s",
                    [json.dumps(json.loads(text)), pk],
                )
    assert not ledger_verify_room(room_id=rooms[0]).ok
    migration = importlib.import_module("ledger.migrations.0002_stored_canonical_bytes")
    migration.backfill(apps, SimpleNamespace(connection=connection))
    _no_recanonicalising(monkeypatch)
    assert all(ledger_verify_room(room_id=r).ok for r in rooms)
    assert ledger_verify_all() == []


def test_what_the_ledger_api_serves_hashes_to_the_stored_hash(make_chain) -> None:
    from ledger.selectors import ledger_events

    room_id = make_chain(len(sample_events(8)))
    for served in ledger_events(room_id=room_id):
        envelope = {k: served[k] for k in ("seq", "kind", "occurred_at", "data", "prev_hash")}
        recomputed = hashlib.sha256(rfc8785.dumps(envelope | {"room_id": str(room_id)}))
        assert recomputed.hexdigest() == served["hash"]


class _Note(BaseModel):
    """A record with free text, to put awkward bytes through the real append."""

    kind: Literal["note"] = "note"
    text: str
    count: int = 0


def test_non_ascii_and_escaped_data_verify_without_re_canonicalising(monkeypatch) -> None:
    room_id = uuid.uuid4()
    for text in (
        "Zoë\u2019s café ☕",
        'quote " backslash \\ newline \n tab \t',
        "\U0001f600 \u2028",
    ):
        with transaction.atomic():
            ledger_append(room_id=room_id, event=_Note(text=text, count=len(text)))  # type: ignore[arg-type]
    _no_recanonicalising(monkeypatch)
    assert ledger_verify_room(room_id=room_id).ok
    assert ledger_verify_all() == []


def test_a_time_stored_without_a_fraction_still_verifies(monkeypatch) -> None:
    # Django stores a whole second without ".000000": not the fast comparison's form, so the
    # row takes the exact test, which accepts it.
    room_id = uuid.uuid4()
    whole = datetime(2026, 3, 4, 5, 6, 7, tzinfo=UTC)
    monkeypatch.setattr(services.timezone, "now", lambda: whole)
    for event in sample_events(3):
        with transaction.atomic():
            ledger_append(room_id=room_id, event=event)
    ledger_sign_head(room_id=room_id)  # as the beat would within T (the tail is old)
    monkeypatch.undo()
    assert ledger_verify_room(room_id=room_id).ok
    LedgerEvent.objects.filter(room_id=room_id, seq=2).update(occurred_at=whole.replace(second=8))
    ok, seq, problem = _verdict(room_id)
    assert (ok, seq) == (False, 2) and "time column differs" in problem


def test_verifying_every_room_names_a_missing_head_row_and_a_row_beyond_it(make_chain) -> None:
    good, headless, beyond = make_chain(3), make_chain(3), make_chain(3)
    LedgerHead.objects.filter(room_id=headless).delete()
    tip = LedgerEvent.objects.get(room_id=beyond, seq=3)
    LedgerHead.objects.filter(room_id=beyond).update(seq=2, hash=tip.prev_hash)
    failures = {f.room_id: (f.first_bad_seq, f.problem) for f in ledger_verify_all()}
    assert failures == {
        str(headless): (1, "the room has no head row"),
        str(beyond): (3, "event 3 lies beyond the head row"),
    }
    assert str(good) not in failures


def test_a_randomized_sweep_of_stored_row_tampering_is_all_detected(make_chain) -> None:
    """300 random edits of stored rows (a column, the bytes, the bytes with the hash, both
    with the hash, swapped or renumbered rows), each undone afterwards: every one is found."""
    import random

    random.seed(20261201)
    room_id = make_chain(8)
    ledger_sign_head(room_id=room_id)
    rows = {e.seq: e for e in LedgerEvent.objects.filter(room_id=room_id)}
    assert ledger_verify_room(room_id=room_id).ok
    missed = []
    for trial in range(300):
        seq = random.randint(1, 8)
        row = rows[seq]
        mine = LedgerEvent.objects.filter(pk=row.pk)
        choice = trial % 6
        savepoint = transaction.savepoint()
        if choice == 0:  # one column
            field = random.choice(["data", "kind", "occurred_at", "prev_hash", "hash"])
            if field == "data":
                key = random.choice(list(row.data))
                value = row.data[key]
                changed = value + 1 if isinstance(value, int) else f"{value}x"
                mine.update(data={**row.data, key: changed})
            elif field == "occurred_at":
                mine.update(occurred_at=row.occurred_at.replace(microsecond=(row.seq * 7) % 10**6))
            else:
                mine.update(**{field: "leave" if field == "kind" else "e" * 64})
        elif choice == 1:  # one byte of the stored bytes
            stored = bytearray(row.canonical)
            i = random.randrange(len(stored))
            stored[i] = (stored[i] + random.randint(1, 254)) % 256
            mine.update(canonical=bytes(stored))
        elif choice in (2, 3):  # data and bytes together, with (3) or without (2) the hash
            data = {**row.data, "extra": trial}
            forged = rfc8785.dumps(_envelope(row, data=data))
            extra = {"hash": hashlib.sha256(forged).hexdigest()} if choice == 3 else {}
            mine.update(data=data, canonical=forged, **extra)
        elif choice == 4:  # swap two rows' numbers
            other = rows[seq % 8 + 1]
            mine.update(seq=1000)
            LedgerEvent.objects.filter(pk=other.pk).update(seq=seq)
            mine.update(seq=other.seq)
        else:  # delete one row
            mine.delete()
        if ledger_verify_room(room_id=room_id).ok:
            missed.append((trial, choice, seq))
        transaction.savepoint_rollback(savepoint)
    assert missed == []
    assert ledger_verify_room(room_id=room_id).ok


def test_a_batch_appended_at_once_stores_the_same_bytes_and_verifies_from_them(
    monkeypatch,
) -> None:
    from ledger.services import ledger_append_many

    room_id = uuid.uuid4()
    with transaction.atomic():
        ledger_append_many(room_id=room_id, events=sample_events(5))
    for event in LedgerEvent.objects.filter(room_id=room_id):
        assert bytes(event.canonical) == rfc8785.dumps(_envelope(event))
    _no_recanonicalising(monkeypatch)
    assert ledger_verify_room(room_id=room_id).ok
