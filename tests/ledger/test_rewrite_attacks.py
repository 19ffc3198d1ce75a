"""A database writer without the signing key tries to rewrite a room's ledger (issue 13,
findings 2 and 3): every tamper is caught by ``verify_ledger`` and by the offline verifier
with the server key pinned, because the chain cannot do without its signed heads and a purge
must agree with the retention policy and with every head signed before it."""

from __future__ import annotations

import hashlib
import json
import uuid
from datetime import timedelta
from uuid import UUID

import pytest
import rfc8785
from django.core.management import call_command
from django.db import transaction
from django.utils import timezone

from ledger import verify_export
from ledger.chain import (
    GENESIS_HASH,
    ChainMark,
    HeadPolicy,
    SignedClaim,
    envelope_bytes,
    head_rules_problem,
    occurred_at_text,
)
from ledger.events import Join, RoomClosed
from ledger.models import LedgerEvent, LedgerHead, SignedHead
from ledger.receipts import receipt_export
from ledger.retention import ledger_purge_expired
from ledger.services import ledger_append, ledger_append_many
from ledger.signing import ledger_public_key, ledger_sign_head, ledger_sign_stale_heads
from ledger.verification import ledger_verify_room
from tests.ledger.conftest import append_events

pytestmark = pytest.mark.django_db


def _forge(room_id: UUID, events: list[tuple[str, dict]], *, after: tuple[int, str]) -> None:
    """Write events as an attacker with SQL access would: correct hashes, links and stored
    bytes (the chain's encoding is public), then move the head row to the last of them."""
    seq, prev = after
    now = timezone.now()
    for kind, data in events:
        seq += 1
        canonical = envelope_bytes(
            data_canonical=rfc8785.dumps(data), room_id=str(room_id), seq=seq, kind=kind,
            occurred_at=occurred_at_text(now), prev_hash=prev,
        )  # fmt: skip
        digest = hashlib.sha256(canonical).hexdigest()
        LedgerEvent.objects.create(
            room_id=room_id, seq=seq, kind=kind, occurred_at=now, data=data, prev_hash=prev,
            hash=digest, canonical=canonical,
        )  # fmt: skip
        prev = digest
    LedgerHead.objects.filter(room_id=room_id).update(seq=seq, hash=prev)


def _joins(n: int, start: int = 0) -> list[tuple[str, dict]]:
    return [
        ("join", {"participant_id": f"fake-{i}", "participant_kind": "agent"})
        for i in range(start, start + n)
    ]


def _closed_room() -> UUID:
    """A minutes-old room: 10 events (pauses at #4 and #8), closed at #11."""
    room_id = uuid.uuid4()
    append_events(room_id, 10)
    with transaction.atomic():
        ledger_append(room_id=room_id, event=RoomClosed(by="owner-1"))
    ledger_sign_head(room_id=room_id)  # as rooms.services does on close (stores no second)
    return room_id


def _both_verifiers(room_id: UUID) -> tuple[str, str]:
    """The problem each verifier names (``verify_ledger``, offline with the key pinned);
    each must fail."""
    verdict = ledger_verify_room(room_id=room_id)
    assert not verdict.ok, "verify_ledger said intact"
    export = json.loads(json.dumps(receipt_export(room_id)))
    with pytest.raises(verify_export.Broken) as offline:
        verify_export.verify(export, pinned_key=ledger_public_key())
    return verdict.problem, offline.value.problem


def test_honest_rooms_verify_with_the_heads_the_append_path_signs() -> None:
    closed = _closed_room()
    heads = list(SignedHead.objects.filter(room_id=closed).values_list("seq", flat=True))
    assert sorted(heads) == [4, 8, 11]  # the pauses and the close, once each
    long = uuid.uuid4()
    with transaction.atomic():
        for i in range(130):
            ledger_append(
                room_id=long, event=Join(participant_id=f"a{i}", participant_kind="agent")
            )
    assert sorted(SignedHead.objects.filter(room_id=long).values_list("seq", flat=True)) == [
        64,
        128,
    ]
    for room_id in (closed, long):
        assert ledger_verify_room(room_id=room_id).ok
        verify_export.verify(
            json.loads(json.dumps(receipt_export(room_id))), pinned_key=ledger_public_key()
        )
    call_command("verify_ledger")  # exits 0


@pytest.mark.parametrize("delete_heads", [False, True], ids=["heads-kept", "heads-deleted"])
def test_delete_everything_and_fake_a_purge(delete_heads: bool) -> None:
    room_id = _closed_room()
    real_close = LedgerEvent.objects.get(room_id=room_id, seq=11)
    LedgerEvent.objects.filter(room_id=room_id).delete()
    if delete_heads:
        SignedHead.objects.filter(room_id=room_id).delete()
    LedgerHead.objects.filter(room_id=room_id).update(
        checkpoint_seq=11, checkpoint_hash=real_close.hash
    )
    purge = {"through_seq": 11, "through_hash": real_close.hash, "events_purged": 11,
             "window_days": 90}  # fmt: skip
    _forge(room_id, [("retention_purge", purge), *_joins(3)], after=(11, real_close.hash))
    server, offline = _both_verifiers(room_id)
    assert "retention purge" in server and "no signed head covers it" in server
    assert "retention purge" in offline and "no signed head covers it" in offline
    with pytest.raises(SystemExit):
        call_command("verify_ledger", room=str(room_id))


def test_delete_the_signed_heads_of_a_room_that_paused() -> None:
    room_id = _closed_room()
    SignedHead.objects.filter(room_id=room_id).delete()
    server, offline = _both_verifiers(room_id)
    assert "event 4 records a pause" in server and "event 4 records a pause" in offline


def test_delete_the_signed_heads_of_a_long_room() -> None:
    room_id = uuid.uuid4()
    with transaction.atomic():
        for i in range(70):
            ledger_append(
                room_id=room_id, event=Join(participant_id=f"a{i}", participant_kind="agent")
            )
    SignedHead.objects.filter(room_id=room_id).delete()
    server, offline = _both_verifiers(room_id)
    assert "more than 64 events follow event 0 without a signed head" in server
    assert "more than 64 events follow event 0 without a signed head" in offline


def test_cut_below_a_head_and_delete_the_heads() -> None:
    room_id = _closed_room()
    six = LedgerEvent.objects.get(room_id=room_id, seq=6)
    LedgerEvent.objects.filter(room_id=room_id, seq__gt=6).delete()
    SignedHead.objects.filter(room_id=room_id).delete()
    LedgerHead.objects.filter(room_id=room_id).update(seq=6, hash=six.hash)
    server, offline = _both_verifiers(room_id)
    assert "event 4 records a pause" in server and "event 4 records a pause" in offline


def test_rewrite_consistently_from_genesis() -> None:
    room_id = _closed_room()
    LedgerEvent.objects.filter(room_id=room_id).delete()
    SignedHead.objects.filter(room_id=room_id).delete()
    LedgerHead.objects.filter(room_id=room_id).update(seq=0, hash=GENESIS_HASH)
    # A different history that still ends the way rooms end: closed.
    _forge(room_id, [*_joins(5), ("room_closed", {"by": "owner-1"})], after=(0, GENESIS_HASH))
    server, offline = _both_verifiers(room_id)
    assert "event 6 records the room's closing" in server
    assert "event 6 records the room's closing" in offline


# The purge rules on their own (a forged purge already fails for want of a head after it;
# these are what a head after it would still have to agree with).

POLICY = HeadPolicy(every_events=64, retention_days=90, grace_seconds=7200)
NOW = timezone.now()


def _purge(through: int, window: int = 90, through_hash: str = "a" * 64) -> ChainMark:
    data = {"through_seq": through, "through_hash": through_hash, "events_purged": through,
            "window_days": window}  # fmt: skip
    return ChainMark(through + 1, "retention_purge", occurred_at_text(NOW), data)


def _head(seq: int, age: timedelta, digest: str = "a" * 64) -> SignedClaim:
    return SignedClaim(seq, digest, occurred_at_text(NOW - age), f"signed head at {seq}")


def _rules(purge: ChainMark, *heads: SignedClaim) -> tuple[int, str] | None:
    return head_rules_problem(
        marks=[purge], signed=[*heads, _head(purge.seq, timedelta())],
        checkpoint_seq=purge.seq - 1, last_seq=purge.seq, policy=POLICY,
    )  # fmt: skip


def test_a_purge_agrees_with_the_policy_and_earlier_heads() -> None:
    old = timedelta(days=100)
    assert _rules(_purge(5), _head(4, old), _head(5, old)) is None
    # a window shorter than the policy's
    found = _rules(_purge(5, window=1), _head(5, old))
    assert found is not None and "policy keeps events 90 days" in found[1]
    # a head signed minutes ago covers events the purge says were 90 days old
    found = _rules(_purge(5), _head(4, old), _head(5, timedelta(minutes=5)))
    assert found is not None and "the retention policy forbids removing it" in found[1]
    # a head at the purge's checkpoint that attests another event there
    found = _rules(_purge(5), _head(5, old, digest="b" * 64))
    assert found is not None and "attested differently" in found[1]
    # the offline verifier applies the same rules, and a file cannot shorten the window
    export_policy = verify_export._policy({"policy": {"retention_days": 1}}, 90)
    assert export_policy["retention_days"] == 90


def test_a_quiet_room_gets_a_head_from_the_beat_and_its_honest_purge_verifies(settings) -> None:
    settings.SYNAPSIA = {**settings.SYNAPSIA, "LEDGER_HEAD_EVERY_SECONDS": 3600}
    room_id = uuid.uuid4()
    past = timezone.now() - timedelta(days=100)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("django.utils.timezone.now", lambda: past)
        with transaction.atomic():
            for i in range(3):
                ledger_append(
                    room_id=room_id, event=Join(participant_id=f"a{i}", participant_kind="agent")
                )
        assert ledger_sign_stale_heads() == 0  # not an hour old yet
        mp.setattr("django.utils.timezone.now", lambda: past + timedelta(hours=1, minutes=5))
        assert ledger_sign_stale_heads() == 1 and ledger_sign_stale_heads() == 0
    assert list(SignedHead.objects.filter(room_id=room_id).values_list("seq", flat=True)) == [3]
    with transaction.atomic():
        ledger_append(room_id=room_id, event=Join(participant_id="late", participant_kind="owner"))
    assert ledger_purge_expired().events_purged == 3
    assert ledger_verify_room(room_id=room_id).ok
    verify_export.verify(
        json.loads(json.dumps(receipt_export(room_id))), pinned_key=ledger_public_key()
    )


def test_a_batch_across_a_multiple_of_n_signs_the_event_at_it() -> None:
    room_id = uuid.uuid4()
    append_events(room_id, 50)
    with transaction.atomic():
        ledger_append_many(
            room_id=room_id,
            events=[Join(participant_id=f"b{i}", participant_kind="agent") for i in range(21)],
        )
    seqs = set(SignedHead.objects.filter(room_id=room_id).values_list("seq", flat=True))
    assert 64 in seqs and 71 not in seqs
    assert ledger_verify_room(room_id=room_id).ok
